//! Runs `resolve.py` (pip's resolver and the downloads) with the host's python3, bounded in
//! time, its whole process group killed when the time is up. What it says is read as the
//! index's words: file names checked ([`wheel_file_name`]), paths chosen here, messages and
//! log lines scrubbed of the index's credentials ([`super::redact`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::redact::scrub;
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
#[derive(Debug, Clone)]
pub(super) struct Downloaded {
    pub name: String,
    pub version: String,
    pub filename: String,
    pub sha256: String,
    /// Where it is: a path chosen here, never one the index named.
    pub path: PathBuf,
}

/// What the helper says of a download.
#[derive(Deserialize)]
struct Fetched {
    filename: String,
    sha256: String,
}

/// Whether `name` is a wheel's file name as PEP 427 spells it (`name-version(-build)?-
/// python-abi-platform.whl`), of plain characters only: no separator, no `%`, nothing a
/// path could be made of. The index chooses it; it is shown, never used as a path.
pub(super) fn wheel_file_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".whl") else {
        return false;
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '+' | '!');
    let parts: Vec<&str> = stem.split('-').collect();
    (5..=6).contains(&parts.len())
        && parts.iter().all(|p| !p.is_empty() && p.chars().all(plain))
        && stem.starts_with(|c: char| c.is_ascii_alphanumeric())
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
    let (index_url, no_index) = (index_url(opts), opts.source == PackageSource::Off);
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
    let chosen: Vec<Chosen> = run(opts, &input)?;
    if let Some(c) = chosen
        .iter()
        .find(|c| !(c.url.starts_with("http://") || c.url.starts_with("https://")))
    {
        return Err(PackageError::new(
            PackageErrorKind::BadWheel,
            Some(&c.name),
            format!(
                "the package index linked a wheel of {} by a URL that is not http or https",
                c.name
            ),
        ));
    }
    if let Some(c) = chosen.iter().find(|c| !wheel_file_name(&c.filename)) {
        return Err(PackageError::new(
            PackageErrorKind::BadWheel,
            Some(&c.name),
            format!(
                "the package index named a wheel of {} {:?}, which is not a wheel's file name",
                c.name,
                c.filename.chars().take(200).collect::<String>()
            ),
        ));
    }
    Ok(chosen)
}

/// Downloads `wheels` into `work` (to `wheels/<n>.whl`, names chosen here; each written under
/// a name of its own first and renamed only once its hash matched), each at most
/// `max_wheel_bytes`, checked against the index's hashes.
pub(super) fn download(
    opts: &PackageOptions,
    wheels: &[Chosen],
    work: &Path,
) -> Result<Vec<Downloaded>, PackageError> {
    let folder = work.join("wheels");
    std::fs::create_dir_all(&folder).map_err(PackageError::host)?;
    let dest = |i: usize| folder.join(format!("{i}.whl"));
    let listed: Vec<serde_json::Value> = wheels
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let mut v = serde_json::to_value(w).expect("a wheel serialises");
            v["dest"] = serde_json::json!(dest(i));
            v
        })
        .collect();
    let input = serde_json::json!({
        "mode": "download",
        "wheels": listed,
        "index_url": index_url(opts),
        "max_wheel_bytes": opts.max_wheel_bytes,
        "timeout_secs": opts.timeout.as_secs().max(1),
    });
    let fetched: Vec<Fetched> = run(opts, &input)?;
    if fetched.len() != wheels.len() {
        return Err(PackageError::host(
            "the package downloader lost count of its wheels",
        ));
    }
    Ok(wheels
        .iter()
        .zip(fetched)
        .enumerate()
        .map(|(i, (w, f))| {
            debug_assert_eq!(w.filename, f.filename);
            Downloaded {
                name: w.name.clone(),
                version: w.version.clone(),
                filename: w.filename.clone(),
                sha256: f.sha256,
                path: dest(i),
            }
        })
        .collect())
}

fn index_url(opts: &PackageOptions) -> Option<&str> {
    match &opts.source {
        PackageSource::Index(url) => Some(url),
        PackageSource::PipDefault | PackageSource::Off => None,
    }
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
    // pip's lines become the log's progress, without the index's credentials.
    let source = opts.source.clone();
    let err = std::thread::spawn(move || {
        let mut tail = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let line = scrub(&line, &source);
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
        message: scrub(&answer.message.unwrap_or(code), &opts.source),
    })
}

#[cfg(test)]
mod tests {
    use super::wheel_file_name;

    #[test]
    fn only_plain_wheel_file_names_pass() {
        for ok in [
            "vivtest_greet-1.0-py3-none-any.whl",
            "pkg-1.0+local.1-1build-py2.py3-none-any.whl",
        ] {
            assert!(wheel_file_name(ok), "{ok}");
        }
        for bad in [
            "../../../x-1.0-py3-none-any.whl",
            "..%2F..%2Fx-1.0-py3-none-any.whl",
            "a/b-1.0-py3-none-any.whl",
            ".x-1.0-py3-none-any.whl",
            "x-1.0-py3-none-any.tar.gz",
            "x-1.0-py3--any.whl",
            "x\\y-1.0-py3-none-any.whl",
            "x-1.0-py3-none-any.whl\0",
        ] {
            assert!(!wheel_file_name(bad), "{bad}");
        }
    }
}
