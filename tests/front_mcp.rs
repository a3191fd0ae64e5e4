//! The MCP front door end to end: the official MCP Python SDK (`mcp` on PyPI) as the client,
//! `tests/front_mcp_client.py`, against `/mcp` of the real server on 127.0.0.1; and
//! `vivarium mcp` over stdio with raw JSON-RPC lines.
//!
//! The SDK goes into a venv under `target/front_mcp_venv` (made on first use, reused after).
//! Without python3/pip or the registry the HTTP test skips with a message; under CI
//! (`CI=true`) it fails instead.

mod http_support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use http_support::*;
use serde_json::{Value, json};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn unavailable(why: &str) -> Option<PathBuf> {
    if in_ci() {
        panic!("the MCP Python SDK is required in CI: {why}");
    }
    eprintln!("SKIPPED front_mcp: {why}");
    None
}

/// The venv's python with `mcp` importable, or None when it cannot be had.
fn sdk_python() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join("target/front_mcp_venv");
    let python = venv.join("bin/python");
    let has_sdk = |p: &Path| {
        Command::new(p)
            .args(["-c", "import mcp.client.streamable_http"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has_sdk(&python) {
        return Some(python);
    }
    if !python.exists() {
        match Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
        {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                return unavailable(&format!(
                    "python3 -m venv failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
            Err(e) => return unavailable(&format!("python3 is not available: {e}")),
        }
    }
    let pip = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "mcp"])
        .output();
    match pip {
        Ok(o) if o.status.success() && has_sdk(&python) => Some(python),
        Ok(o) => unavailable(&format!(
            "pip install mcp failed: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => unavailable(&format!("pip could not run: {e}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_python_sdk_gets_text_and_the_plot() {
    let Some(python) = sdk_python() else { return };
    let s = start("mcp", |_| {}).await;
    let url = s.url("/mcp");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/front_mcp_client.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python).arg(script).arg(url).output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "the MCP client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));

    assert_eq!(v["server"], "vivarium", "{v}");
    assert_eq!(
        v["tools"],
        json!([
            "check_python",
            "close_session",
            "execute_python",
            "open_session",
            "run_in_session"
        ])
    );
    assert_eq!(v["execute_schema"]["required"], json!(["code"]), "{v}");

    let plot = &v["plot"];
    assert_eq!(plot["is_error"], false, "{plot}");
    assert!(
        plot["texts"][0].as_str().unwrap().contains("plotted"),
        "{plot}"
    );
    let images = plot["images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "{plot}");
    assert_eq!(images[0]["mime"], "image/png");
    assert_eq!(images[0]["png"], true);
    assert!(images[0]["size"].as_u64().unwrap() > 1000);

    let files = &v["files"];
    assert_eq!(files["is_error"], true, "{files}");
    let text = files["texts"][0].as_str().unwrap();
    assert!(text.contains("FROM THE CLIENT"), "{text}");
    assert!(
        text.contains("error: ZeroDivisionError: division by zero at line 2"),
        "{text}"
    );

    let check = &v["check"];
    assert_eq!(check["is_error"], true, "{check}");
    let verdict: Value = serde_json::from_str(check["texts"][0].as_str().unwrap()).unwrap();
    assert_eq!(verdict["findings"][0]["rule"], "os_system");

    assert_eq!(v["denied"]["is_error"], true);
    assert!(
        v["denied"]["texts"][0]
            .as_str()
            .unwrap()
            .contains("nothing ran")
    );

    // Templates by name: pandas is already imported in `scientific`; a wrong name is an error.
    let sci = v["scientific"]["texts"][0].as_str().unwrap();
    assert!(sci.contains("True"), "{sci}");
    assert_eq!(v["bad_template"]["is_error"], true, "{}", v["bad_template"]);
    let bad = v["bad_template"]["texts"][0].as_str().unwrap();
    assert!(bad.contains("nope"), "{bad}");

    let turn = v["turn"]["texts"][0].as_str().unwrap();
    assert!(turn.contains("result: 42"), "{turn}");
    assert_eq!(v["closed"]["is_error"], false);
    assert_eq!(v["after_close"]["is_error"], true);
    assert!(
        v["after_close"]["texts"][0]
            .as_str()
            .unwrap()
            .contains("session_not_found")
    );
    s.stop().await;
}

/// `vivarium mcp` speaks the same tools over stdio (newline-delimited JSON-RPC).
#[test]
fn mcp_over_stdio() {
    let scratch = scratch_dir("mcp-stdio");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vivarium"))
        .arg("mcp")
        .env("VIVARIUM_SCRATCH", &scratch)
        .env("VIVARIUM_AUDIT_LOG", scratch.with_extension("audit.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut recv = || -> Value {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line ({e}): {line:?}"))
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}),
    );
    let init = recv();
    assert_eq!(init["result"]["serverInfo"]["name"], "vivarium", "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "execute_python", "arguments": {"code": "print(6 * 7)"}}}),
    );
    let r = recv();
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("status: ok") && text.contains("42"), "{r}");
    // End of input: the server stops.
    stdin.flush().unwrap();
    std::mem::drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let left: Vec<_> = std::fs::read_dir(&scratch)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(scratch.with_extension("audit.jsonl"));
    assert!(
        left.iter()
            .all(|p| p.file_name().unwrap() == ".create.lock"),
        "left behind: {left:?}"
    );
}
