//! JupyterLab, unchanged, in headless Chromium on a Vivarium kernel: JupyterLab (from PyPI,
//! in a venv under `target/jupyterlab_venv`) starts with `--gateway-url` pointing at a real
//! Vivarium server on 127.0.0.1, and `tests/fixtures/jupyterlab_browser.py` drives the page
//! with Selenium: a cell that prints and lists its files with `!ls`, one that plots after
//! `%matplotlib inline` (the image is in the page), a
//! `while True:` cell interrupted from the toolbar, and a cell after it that sees the state
//! of the last completed cell. Screenshots land in `target/test-artifacts/jupyterlab/`.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them); elsewhere the
//! test says SKIPPED, except under CI, where it fails.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::json;

/// Stops JupyterLab however the test ends.
struct Lab(Child);

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The notebook the browser runs: `x` is set by the first cell, so the last one can show
/// that the interrupted third cell left the state of the cells before it.
fn notebook() -> serde_json::Value {
    let cell = |src: &str| {
        json!({"cell_type": "code", "metadata": {}, "execution_count": null, "outputs": [],
               "source": src, "id": format!("{:08x}", src.len())})
    };
    json!({
        "cells": [
            cell("x = 42\nprint(\"hello from a Vivarium kernel\")\nopen(\"written_in_lab.txt\", \"w\").write(\"x\")\n!ls"),
            cell("%matplotlib inline\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"),
            cell("while True:\n    pass"),
            cell("print(\"after the interrupt:\", x)"),
        ],
        "metadata": {"kernelspec": {"name": "vivarium-python", "display_name": "Python 3.15 (Vivarium)", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jupyterlab_in_chromium_prints_plots_and_interrupts_on_a_vivarium_kernel() {
    let Some(python) = browser_python() else {
        return;
    };
    let s = start("jupyterlab-browser", |_| {}).await;
    // JupyterLab's own directories, so nothing of the machine's Jupyter set-up takes part.
    let root = s.scratch.with_extension("lab");
    let home = s.scratch.with_extension("lab-home");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        root.join("vivarium.ipynb"),
        serde_json::to_vec(&notebook()).unwrap(),
    )
    .unwrap();
    let artifacts: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts/jupyterlab");
    let _ = std::fs::remove_dir_all(&artifacts);
    let port = free_port();
    let token = "vivarium-browser-test";
    let log = std::fs::File::create(s.scratch.with_extension("lab.log")).unwrap();
    let lab_process = Lab(Command::new(&python)
        .args(["-m", "jupyterlab", "--no-browser", "--allow-root"])
        .arg(format!("--port={port}"))
        .arg("--ServerApp.ip=127.0.0.1")
        .arg(format!("--ServerApp.token={token}"))
        .arg(format!("--ServerApp.root_dir={}", root.display()))
        .arg(format!("--gateway-url={}", s.base))
        .env("HOME", &home)
        .env("JUPYTER_CONFIG_DIR", home.join("config"))
        .env("JUPYTER_DATA_DIR", home.join("data"))
        .env("JUPYTER_RUNTIME_DIR", home.join("runtime"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("JupyterLab starts"));
    let lab = format!("http://127.0.0.1:{port}");
    let c = reqwest::Client::new();
    let since = Instant::now();
    loop {
        let up = c
            .get(format!("{lab}/api/status?token={token}"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if up {
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(90),
            "JupyterLab did not come up; its log: {}",
            std::fs::read_to_string(s.scratch.with_extension("lab.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jupyterlab_browser.py");
    let a = artifacts.clone();
    let ran = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(lab)
            .arg(token)
            .arg(a)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr),
    );
    eprintln!("{stderr}");
    assert!(
        ran.status.success() && stdout.lines().last() == Some("ok"),
        "the browser run failed (screenshots in {}): {stdout}\n{stderr}\nJupyterLab's log: {}",
        artifacts.display(),
        std::fs::read_to_string(s.scratch.with_extension("lab.log")).unwrap_or_default()
    );
    for shot in ["print-and-plot", "interrupted", "notebook"] {
        let png = std::fs::read(artifacts.join(format!("{shot}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "{shot} is not a PNG");
    }
    drop(lab_process);
    let _ = std::fs::remove_dir_all(artifacts.join("profile"));
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&home);
    s.stop().await;
}
