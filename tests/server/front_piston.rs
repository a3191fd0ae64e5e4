//! Piston v2 compatibility, tested with the published Piston client `piston-client` (npm),
//! driven by `tests/front_piston_client/run.mjs` against the real server on 127.0.0.1.
//!
//! The client package is installed on first use with `npm install --prefix
//! tests/front_piston_client`. Without node/npm or the registry the test skips with a message;
//! under CI (`CI=true`) it fails instead.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::http_support::*;
use serde_json::{Value, json};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Skips (or, in CI, fails) with a reason.
fn unavailable(why: &str) -> Option<PathBuf> {
    if in_ci() {
        panic!("the Piston client is required in CI: {why}");
    }
    eprintln!("SKIPPED front_piston: {why}");
    None
}

/// The client directory with `piston-client` installed, or None when it cannot be had.
fn client_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/front_piston_client");
    if dir.join("node_modules/piston-client/index.js").exists() {
        return Some(dir);
    }
    if Command::new("node").arg("--version").output().is_err() {
        return unavailable("node is not installed");
    }
    let installed = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg("piston-client@1.0.2")
        .output();
    match installed {
        Ok(o) if o.status.success() && dir.join("node_modules/piston-client").exists() => Some(dir),
        Ok(o) => unavailable(&format!(
            "`npm install piston-client` failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => unavailable(&format!("npm could not run: {e}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piston_client_runs_python_unchanged() {
    let Some(dir) = client_dir() else { return };
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
