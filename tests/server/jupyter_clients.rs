//! Standard Jupyter clients, unchanged, against Vivarium's kernel gateway on 127.0.0.1:
//! nbclient runs a notebook of the seed's use cases (CSV with pandas, a matplotlib plot, a
//! linear regression, a `ZeroDivisionError` cell with `allow_errors`) through
//! jupyter_server's own gateway client (`GatewayKernelManager`, what JupyterLab's server
//! runs with `--gateway-url`), and the outputs are in the saved notebook; the same client
//! drives execute, streams, display, error, complete, inspect, is_complete, input, interrupt
//! and restart, checking every message against the protocol's fields
//! (`tests/fixtures/gateway_protocol.py`). The clients go into a venv under
//! `target/jupyter_venv` (made on first use).

use std::path::Path;

use crate::http_support::*;
use serde_json::Value;

/// A notebook's multiline string: nbformat saves it as a list of lines.
fn text(v: &Value) -> String {
    match v {
        Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
        v => v.as_str().unwrap_or_default().to_string(),
    }
}

/// The venv's python with jupyter_server and nbclient, or `None` (SKIPPED) without PyPI.
fn jupyter_python() -> Option<std::path::PathBuf> {
    venv_python("jupyter_venv")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jupyter_servers_gateway_client_gets_every_message_in_the_protocols_shape() {
    let Some(python) = jupyter_python() else {
        return;
    };
    let s = shared().await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gateway_protocol.py");
    let base = s.base.clone();
    let ran = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .arg(base)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(
        ran.status.success() && stdout.lines().last() == Some("ok"),
        "the gateway client failed: {stdout}\n{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    // Every type the protocol test meant to see, it saw (and checked).
    let checked: Vec<&str> = stdout.lines().rev().nth(1).unwrap().split(' ').collect();
    for t in [
        "kernel_info_reply",
        "status",
        "execute_input",
        "stream",
        "execute_result",
        "display_data",
        "error",
        "execute_reply",
        "complete_reply",
        "inspect_reply",
        "is_complete_reply",
        "input_request",
    ] {
        assert!(checked.contains(&t), "{t} was not seen: {checked:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nbclient_runs_a_notebook_through_jupyter_servers_gateway_client() {
    let Some(python) = jupyter_python() else {
        return;
    };
    let s = start("jupyter-nbclient", |_| {}).await;
    let out = s.scratch.with_extension("ipynb");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nbclient_gateway.py");
    let (base, o) = (s.base.clone(), out.clone());
    let ran = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .arg(script)
            .arg(base)
            .arg(o)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        ran.status.success(),
        "nbclient failed: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let cells = nb["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 5);
    let outputs = |i: usize| cells[i]["outputs"].as_array().unwrap().clone();
    // Each cell numbered in order.
    for (i, c) in cells.iter().enumerate() {
        assert_eq!(c["execution_count"], i as u64 + 1, "{c}");
    }
    // CSV + groupby: the final value.
    let o = outputs(0);
    assert_eq!(o[0]["output_type"], "execute_result", "{o:?}");
    let t = text(&o[0]["data"]["text/plain"]);
    assert!(
        t.contains("Oslo") && t.contains("4.0") && t.contains("18.0"),
        "{t}"
    );
    // The plot: a PNG.
    let o = outputs(1);
    assert_eq!(o[0]["output_type"], "display_data", "{o:?}");
    let png = text(&o[0]["data"]["image/png"]);
    assert!(unb64(png.trim()).starts_with(b"\x89PNG"), "not a PNG");
    // The regression: printed.
    assert_eq!(text(&outputs(2)[0]["text"]), "2.0 1.0\n");
    // The error, allowed; the cell after it ran.
    let o = outputs(3);
    assert_eq!(o[0]["output_type"], "error");
    assert_eq!(o[0]["ename"], "ZeroDivisionError");
    assert_eq!(text(&outputs(4)[0]["text"]), "after the error\n");
    let _ = std::fs::remove_file(&out);
    s.stop().await;
}
