//! Piston v2 compatibility, tested with the published Piston client `piston-client` (npm),
//! driven by `tests/front_piston_client/run.mjs` against the real server on 127.0.0.1.
//!
//! The client package is installed on first use as `tests/clients.txt` says. Without node/npm
//! or the registry the test skips with a message; under CI (`CI=true`) it fails instead.

use std::process::Command;

use crate::http_support::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piston_client_runs_python_unchanged() {
    let Some(dir) = npm_prefix("tests/front_piston_client") else {
        return;
    };
    let s = shared().await;
    let base = s.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(dir.join("run.mjs"))
            .arg(base)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));

    let rt = &v["runtimes"][0];
    assert_eq!(rt["language"], "python", "{v}");
    assert_eq!(rt["version"], "3.15.0");
    assert!(rt["aliases"].as_array().unwrap().contains(&json!("py")));

    let hello = &v["hello"];
    assert_eq!(hello["language"], "python", "{hello}");
    assert_eq!(hello["version"], "3.15.0");
    assert_eq!(hello["run"]["stdout"], "hello from piston\n");
    assert_eq!(hello["run"]["output"], "hello from piston\n");
    assert_eq!(hello["run"]["code"], 0);
    assert_eq!(hello["run"]["signal"], Value::Null);
    assert_eq!(hello["run"]["status"], Value::Null);
    for k in ["cpu_time", "wall_time", "memory"] {
        assert!(hello["run"][k].is_u64(), "{k} in {hello}");
    }

    let files = &v["files"]["run"];
    assert_eq!(
        files["stdout"], "DATA ['main.py', 'a', 'b'] typed line\n",
        "{files}"
    );
    assert_eq!(files["stderr"], "warn\n");
    assert_eq!(
        files["output"],
        "DATA ['main.py', 'a', 'b'] typed line\nwarn\n"
    );

    let error = &v["error"]["run"];
    assert_eq!(error["code"], 1, "{error}");
    assert_eq!(error["status"], "RE");
    let stderr = error["stderr"].as_str().unwrap();
    assert!(stderr.contains("ZeroDivisionError"), "{stderr}");
    // The traceback shows the program's own file, not our launcher.
    assert!(stderr.contains("File \"main.py\", line 2"), "{stderr}");
    assert!(!stderr.contains("<turn"), "{stderr}");

    let timeout = &v["timeout"]["run"];
    assert_eq!(timeout["status"], "TO", "{timeout}");
    assert_eq!(timeout["signal"], "SIGKILL");
    assert_eq!(timeout["code"], Value::Null);

    assert_eq!(
        v["unknown"]["message"], "cobol-1.0.0 runtime is unknown",
        "{v}"
    );

    // Piston's error shape for malformed requests, straight over HTTP.
    let c = client();
    let (st, e) = post(
        &c,
        &s.url("/api/v2/execute"),
        &json!({"language": "python"}),
    )
    .await;
    assert_eq!(st, 400);
    assert!(e["message"].is_string(), "{e}");
    let (st, e) = post(
        &c,
        &s.url("/api/v2/execute"),
        &json!({"language": "python", "version": "*", "files": []}),
    )
    .await;
    assert_eq!(st, 400, "{e}");
    // Base64 files and a memory limit.
    let (st, r) = post(
        &c,
        &s.url("/api/v2/execute"),
        &json!({"language": "py", "version": "3.x", "run_memory_limit": 100_000_000,
                "files": [{"name": "p.py", "content": b64(b"print(2**10)"), "encoding": "base64"}]}),
    )
    .await;
    assert_eq!(st, 200, "{r}");
    assert_eq!(r["run"]["stdout"], "1024\n");
}
