//! The operator console in headless Chromium (Selenium, in the venv the JupyterLab test
//! uses): a real server with API keys and an operator key, some runs, and the page shows
//! them live (runs, a tenant's quotas, an audit line, the charts drawn); its screenshot lands
//! in `target/test-artifacts/console/console.png` and is checked here (a PNG of the window's
//! size that is not one colour). A key that is not the operator's is refused in the page.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them); elsewhere the
//! test says SKIPPED, except under CI, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::http_support::*;
use serde_json::json;

const OPERATOR: &str = "console-browser-key-0123456789";

/// Width and height of a PNG, from its header.
fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
    (w, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_live_server_in_chromium() {
    let Some(python) = browser_python() else {
        return;
    };
    let keys = scratch_dir("console-browser").join("keys.txt");
    std::fs::write(&keys, format!("tenant acme\nalice@acme:{OPERATOR}\n")).unwrap();
    let s = start("console-browser", move |a| {
        a.api_keys_file = Some(keys);
        a.console_keys = vec!["alice".into()];
    })
    .await;
    let c = client_with_key(OPERATOR);
    for i in 0..5 {
        let (st, v) = post(
            &c,
            &s.url("/v1/execute"),
            &json!({"code": format!("print({i})"), "template": "python"}),
        )
        .await;
        assert_eq!(st, 200, "{v}");
    }
    let id = open_session(&c, &s.base, &json!({"template": "python"})).await;
    session_turn(&c, &s.base, &id, "x = 1").await;
    let artifacts: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts/console");
    let _ = std::fs::remove_dir_all(&artifacts);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/console_browser.py");
    // Runs go on while the page watches, so its charts move.
    let load = {
        let (c, url) = (c.clone(), s.url("/v1/execute"));
        tokio::spawn(async move {
            loop {
                let _ = post(
                    &c,
                    &url,
                    &json!({"code": "sum(range(10**5))", "template": "python"}),
                )
                .await;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        })
    };
    let (base, a) = (s.base.clone(), artifacts.clone());
    let ran = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(base)
            .arg(OPERATOR)
            .arg("6")
            .arg(a)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    load.abort();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr),
    );
    assert!(
        ran.status.success() && stdout.lines().last() == Some("ok"),
        "the console in the browser failed (artifacts in {}): {stdout}\n{stderr}",
        artifacts.display()
    );
    let png = std::fs::read(artifacts.join("console.png")).unwrap();
    let (w, h) = png_size(&png);
    assert!(w >= 1000 && h >= 700, "a screenshot of {w}x{h}");
    // A page of one colour compresses to almost nothing; the console's text and charts do not.
    assert!(
        png.len() > 40_000,
        "the screenshot is {} bytes: blank?",
        png.len()
    );
    let _ = std::fs::remove_dir_all(artifacts.join("profile"));
    s.stop().await;
}
