//! Runs `resolve.py` (pip's resolver and the downloads) with the host's python3, bounded in
//! time, its whole process group killed when the time is up.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{PackageError, PackageErrorKind, PackageOptions, PackageSource, PackageSpecs};
use crate::runtime::BuiltinPackage;

/// The helper, run as `python3 -I -c`.
const HELPER: &str = include_str!("resolve.py");

/// A wheel the resolver chose.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub(super) struct Chosen {
    pub name: String,
    pub version: String,
    pub url: String,
    pub filename: String,
    /// The index's SHA-256; `None` when the index gave none.
    pub sha256: Option<String>,
}

/// A wheel downloaded, with the hash computed over what arrived.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Downloaded {
    pub name: String,
    pub version: String,
    pub filename: String,
    pub sha256: String,
    pub path: std::path::PathBuf,
}

#[derive(Deserialize)]
struct Answer<T> {
    ok: bool,
    #[serde(default = "Vec::new")]
    wheels: Vec<T>,
    code: Option<String>,
    package: Option<String>,
    message: Option<String>,
}

/// Resolves `specs` to the wheels to install (built-ins left out), in `work`.
pub(super) fn resolve(
    opts: &PackageOptions,
    specs: &PackageSpecs,
    builtins: &[BuiltinPackage],
    placeholder_dir: &Path,
    work: &Path,
) -> Result<Vec<Chosen>, PackageError> {
    let builtins: Vec<_> = builtins
        .iter()
        .map(|b| serde_json::json!({"name": b.name, "version": b.version}))
        .collect();
    let (index_url, no_index) = match &opts.source {
        PackageSource::Index(url) => (Some(url.clone()), false),
        PackageSource::PipDefault => (None, false),
        PackageSource::Off => (None, true),
    };
    let input = serde_json::json!({
        "mode": "resolve",
        "requirements": specs.specs,
        "builtins": builtins,
        "placeholder_dir": placeholder_dir,
        "work_dir": work,
        "index_url": index_url,
        "no_index": no_index,
        "timeout_secs": opts.timeout.as_secs().max(1),
    });
    run(opts, &input)
}

/// Downloads `wheels` into `work`, each at most `max_wheel_bytes`, checked against the
/// index's hashes.
pub(super) fn download(
    opts: &PackageOptions,
    wheels: &[Chosen],
    work: &Path,
) -> Result<Vec<Downloaded>, PackageError> {
    let input = serde_json::json!({
        "mode": "download",
        "wheels": wheels,
        "work_dir": work,
        "max_wheel_bytes": opts.max_wheel_bytes,
        "timeout_secs": opts.timeout.as_secs().max(1),
    });
    run(opts, &input)
}

fn run<T: serde::de::DeserializeOwned>(
    opts: &PackageOptions,
    input: &serde_json::Value,
) -> Result<Vec<T>, PackageError> {
    let mut child = Command::new(&opts.python)
        .args(["-I", "-c", HELPER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that pip's processes die with it at the deadline.
        .process_group(0)
        .spawn()
        .map_err(|e| {
            PackageError::host(format!(
                "cannot run {} for package resolution: {e}",
                opts.python.display()
            ))
        })?;
    let pgid = child.id() as i32;
    let mut stdin = child.stdin.take().expect("piped");
    stdin
        .write_all(input.to_string().as_bytes())
        .map_err(PackageError::host)?;
    drop(stdin);
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.take(4 << 20).read_to_end(&mut buf);
        buf
    });
    // pip's lines become the log's progress.
    let err = std::thread::spawn(move || {
        let mut tail = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            tracing::info!(target: "vivarium::packages", "{line}");
            tail.push(line);
            if tail.len() > 20 {
                tail.remove(0);
            }
        }
        tail
    });
    let deadline = Instant::now() + opts.timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                // SAFETY: kill(2) on the helper's own process group; no memory is involved.
                unsafe { libc::kill(-pgid, libc::SIGKILL) };
                let _ = child.wait();
                return Err(PackageError::new(
                    PackageErrorKind::Timeout,
                    None,
                    format!(
                        "resolving and downloading packages took longer than {} s",
                        opts.timeout.as_secs()
                    ),
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(PackageError::host(e)),
        }
    };
    let out = out.join().unwrap_or_default();
    let tail = err.join().unwrap_or_default();
    let answer: Answer<T> = serde_json::from_slice(&out).map_err(|e| {
        PackageError::host(format!(
            "the package resolver failed ({status}, {e}): {}",
            tail.join(" | ")
        ))
    })?;
    if answer.ok {
        return Ok(answer.wheels);
    }
    let code = answer.code.unwrap_or_default();
    Err(PackageError {
        kind: PackageErrorKind::from_helper(&code),
        package: answer.package,
        message: answer.message.unwrap_or(code),
    })
}
