//! The real clients the tests drive (Python venvs, npm packages), as `tests/clients.txt` names
//! them: made on first use and reused after, or made ahead by `tests/prepare_clients.py`.
//! Without python3, node or the registries: `None` and a SKIPPED line, except under CI
//! (`CI=true`), where the test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::in_ci;

/// One line of `tests/clients.txt`.
struct Client {
    kind: String,
    where_: String,
    probe: String,
    what: Vec<String>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The line of `tests/clients.txt` for `where_` (its venv's folder, or its npm prefix).
fn client(where_: &str) -> Client {
    let list = std::fs::read_to_string(root().join("tests/clients.txt")).unwrap();
    list.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('|').map(str::trim).collect();
            assert_eq!(
                f.len(),
                4,
                "tests/clients.txt: {l:?} is not `kind | where | probe | what`"
            );
            Client {
                kind: f[0].into(),
                where_: f[1].into(),
                probe: f[2].into(),
                what: f[3].split_whitespace().map(String::from).collect(),
            }
        })
        .find(|c| c.where_ == where_)
        .unwrap_or_else(|| panic!("tests/clients.txt names no client {where_:?}"))
}

fn unavailable(where_: &str, why: String) -> Option<PathBuf> {
    if in_ci() {
        panic!("{where_}: {why} (required in CI)");
    }
    eprintln!("SKIPPED ({where_}): {why}");
    None
}

/// Runs `cmd` in the repository: `Err` with what it said when it fails.
fn run(mut cmd: Command) -> Result<(), String> {
    match cmd.current_dir(root()).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).into_owned()),
        Err(e) => Err(format!("{cmd:?} could not run: {e}")),
    }
}

/// Tests of one binary run at once: one makes a client while the others that need it wait.
fn making() -> std::sync::MutexGuard<'static, ()> {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    MAKING.lock().unwrap_or_else(|e| e.into_inner())
}

/// The Selenium venv's python for a test in headless Chromium: `None` (the test says
/// SKIPPED) without Debian's `chromium` and `chromium-driver`, except under CI, where that
/// fails the test.
pub fn browser_python() -> Option<PathBuf> {
    const CHROMIUM: &str = "/usr/bin/chromium";
    const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
    if !std::path::Path::new(CHROMIUM).exists() || !std::path::Path::new(CHROMEDRIVER).exists() {
        let why = format!(
            "{CHROMIUM} or {CHROMEDRIVER} is missing (apt install chromium chromium-driver)"
        );
        if super::in_ci() {
            panic!("{why} (required in CI)");
        }
        eprintln!("SKIPPED: {why}");
        return None;
    }
    venv_python("jupyterlab_venv")
}

/// The python of the venv `target/<dir>` that `tests/clients.txt` names, ready.
pub fn venv_python(dir: &str) -> Option<PathBuf> {
    let c = client(dir);
    assert_eq!(c.kind, "venv", "tests/clients.txt: {dir} is not a venv");
    let _making = making();
    let venv = root().join("target").join(dir);
    let python = venv.join("bin/python");
    let importable = || {
        Command::new(&python)
            .args(["-c", &format!("import {}", c.probe)])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if importable() {
        return Some(python);
    }
    if !python.exists() {
        let mut venv_cmd = Command::new("python3");
        venv_cmd.args(["-m", "venv"]).arg(&venv);
        if let Err(why) = run(venv_cmd) {
            return unavailable(dir, format!("python3 -m venv failed: {why}"));
        }
    }
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "install", "--quiet"]).args(&c.what);
    match run(pip) {
        Ok(()) if importable() => Some(python),
        Ok(()) => unavailable(
            dir,
            format!(
                "pip installed {:?}, yet {} does not import",
                c.what, c.probe
            ),
        ),
        Err(why) => unavailable(dir, format!("pip install {:?} failed: {why}", c.what)),
    }
}

/// The npm prefix `tests/clients.txt` names (`tests/...`), its packages installed.
pub fn npm_prefix(prefix: &str) -> Option<PathBuf> {
    let c = client(prefix);
    assert_eq!(
        c.kind, "npm",
        "tests/clients.txt: {prefix} is not an npm prefix"
    );
    let _making = making();
    let dir = root().join(prefix);
    if dir.join(&c.probe).exists() {
        return Some(dir);
    }
    if Command::new("node").arg("--version").output().is_err() {
        return unavailable(prefix, "node is not installed".into());
    }
    let mut npm = Command::new("npm");
    npm.args(["install", "--no-audit", "--no-fund", "--prefix", prefix])
        .args(&c.what);
    match run(npm) {
        Ok(()) if dir.join(&c.probe).exists() => Some(dir),
        Ok(()) => unavailable(prefix, format!("npm installed, yet {} is missing", c.probe)),
        Err(why) => unavailable(prefix, format!("npm install failed: {why}")),
    }
}
