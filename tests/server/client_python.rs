//! The Python client (`clients/python`, `vivarium_client`): its own pytest suite and its
//! framework adapters' end-to-end tests, each against real servers started by its
//! `conftest.py` from this build's `vivarium` binary. The package is installed editable into
//! a venv under `target/` (`client_venv`; `adapters_venv` with the frameworks from PyPI at
//! the versions `pyproject.toml` pins). Without Python's venv or the registry the tests skip
//! with a message; under CI they fail instead.

use std::path::Path;
use std::process::Command;

use crate::http_support::*;

fn package() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("clients/python")
        .display()
        .to_string()
}

/// Runs pytest on `tests` (paths under the package) with `python`; panics with its output
/// when it fails.
fn pytest(python: &Path, args: &[&str]) {
    let out = Command::new(python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .args(args)
        .current_dir(package())
        .env("VIVARIUM_BIN", env!("CARGO_BIN_EXE_vivarium"))
        .env_remove("VIVARIUM_URL")
        .output()
        .expect("pytest runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pytest {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains("skipped"),
        "pytest skipped tests:\n{stdout}"
    );
    eprintln!("{}", stdout.lines().last().unwrap_or_default());
}

#[test]
fn the_client_passes_its_own_suite_against_a_real_server() {
    let Some(python) = venv_python("client_venv") else {
        return;
    };
    pytest(
        &python,
        &[
            "tests/test_client.py",
            "tests/test_async.py",
            "tests/test_sse.py",
            "tests/test_tools.py",
            "tests/test_results_schema.py",
        ],
    );
}

#[test]
fn each_adapter_drives_its_frameworks_real_package_through_vivarium() {
    let Some(python) = venv_python("adapters_venv") else {
        return;
    };
    let adapters: Vec<String> = ["fastmcp", "smolagents", "ag2", "langchain", "pydantic_ai"]
        .iter()
        .map(|a| format!("tests/test_adapter_{a}.py"))
        .collect();
    let args: Vec<&str> = adapters.iter().map(String::as_str).collect();
    pytest(&python, &args);
}
