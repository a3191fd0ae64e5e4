//! Unpacking a wheel into an environment: the archive is hostile data. Only regular files
//! under relative, normal paths are written (no `..`, no absolute paths, no symlinks, no
//! device files), every byte counts against the environment's cap as it is written (a zip
//! bomb stops at the cap, not at the disk), the entry count is bounded, and a wheel that is
//! not pure Python (`Root-Is-Purelib: false`, or a shared library inside) is refused.
//! Bytecode a wheel ships (`*.pyc`, `*.pyo`, anything under `__pycache__/`) is dropped: it
//! would run in place of the source beside it (an unchecked hash-based `.pyc` is never
//! compared with its source), or as a module of its own with no source at all. The only
//! `.pyc` in an environment are those the host's compile sandbox makes from its sources.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};
use zip::ZipArchive;

use super::{PackageError, PackageErrorKind};

/// The most entries a wheel may hold.
const MAX_ENTRIES: usize = 100_000;

/// Suffixes of native code the guest cannot load.
const NATIVE_SUFFIXES: [&str; 4] = [".so", ".pyd", ".dylib", ".dll"];

/// SHA-256 of the file at `path`, hex.
pub(super) fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex::encode(h.finalize()))
}

/// Unpacks the wheel at `wheel` (of distribution `name`) into `site`, adding what it writes
/// to `*written`, which may not pass `cap`.
pub(super) fn unpack(
    name: &str,
    wheel: &Path,
    site: &Path,
    written: &mut u64,
    cap: u64,
) -> Result<(), PackageError> {
    let bad = |why: String| PackageError::new(PackageErrorKind::BadWheel, Some(name), why);
    let file = File::open(wheel).map_err(PackageError::host)?;
    let mut zip = ZipArchive::new(file).map_err(|e| bad(format!("{name}: not a wheel: {e}")))?;
    if zip.len() > MAX_ENTRIES {
        return Err(bad(format!("{name}: more than {MAX_ENTRIES} entries")));
    }
    check_purelib(name, &mut zip)?;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| bad(format!("{name}: {e}")))?;
        let raw = entry.name().to_string();
        let Some(rel) = entry.enclosed_name() else {
            return Err(bad(format!("{name}: unsafe entry {raw:?}")));
        };
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(bad(format!("{name}: unsafe entry {raw:?}")));
        }
        if NATIVE_SUFFIXES.iter().any(|s| raw.ends_with(s)) || raw.contains(".so.") {
            return Err(PackageError::new(
                PackageErrorKind::NativeCode,
                Some(name),
                format!("{name} holds native code ({raw}), which the guest cannot load"),
            ));
        }
        let Some(rel) = placed(&rel) else { continue };
        if is_bytecode(&rel) {
            continue;
        }
        let target = site.join(&rel);
        if entry.is_dir() {
            std::fs::create_dir_all(&target).map_err(PackageError::host)?;
            continue;
        }
        if entry.is_symlink() || !entry.is_file() {
            return Err(bad(format!("{name}: {raw:?} is not a regular file")));
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(PackageError::host)?;
        }
        // create_new: two wheels of one set that ship the same file is a conflict, and a
        // name that already exists (a link planted earlier) is never followed.
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| bad(format!("{name}: writing {raw:?}: {e}")))?;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = entry
                .read(&mut buf)
                .map_err(|e| bad(format!("{name}: reading {raw:?}: {e}")))?;
            if n == 0 {
                break;
            }
            *written += n as u64;
            if *written > cap {
                return Err(PackageError::new(
                    PackageErrorKind::TooLarge,
                    Some(name),
                    format!(
                        "the packages unpack to more than the {cap} bytes an environment may hold"
                    ),
                ));
            }
            out.write_all(&buf[..n]).map_err(PackageError::host)?;
        }
    }
    Ok(())
}

/// Where an entry goes in the environment: the root of the wheel as it is, and a
/// `*.data/purelib` or `*.data/platlib` folder's contents at the root; scripts, headers and
/// data files are left out (`None`), as nothing in the guest runs them.
fn placed(rel: &Path) -> Option<PathBuf> {
    let mut parts = rel.components();
    let first = parts.next()?.as_os_str().to_string_lossy().into_owned();
    if first.ends_with(".data") {
        let kind = parts.next()?.as_os_str().to_string_lossy().into_owned();
        return matches!(kind.as_str(), "purelib" | "platlib")
            .then(|| parts.as_path().to_path_buf());
    }
    Some(rel.to_path_buf())
}

/// Whether an entry is bytecode: a `.pyc`/`.pyo` file, or anything in a `__pycache__` folder.
fn is_bytecode(rel: &Path) -> bool {
    rel.components()
        .any(|c| c.as_os_str().eq_ignore_ascii_case("__pycache__"))
        || rel
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("pyc") || e.eq_ignore_ascii_case("pyo"))
}

/// Refuses a wheel whose `*.dist-info/WHEEL` does not say `Root-Is-Purelib: true`.
fn check_purelib<R: Read + std::io::Seek>(
    name: &str,
    zip: &mut ZipArchive<R>,
) -> Result<(), PackageError> {
    let wheel_file = zip
        .file_names()
        .find(|n| n.ends_with(".dist-info/WHEEL") && n.matches('/').count() == 1)
        .map(str::to_string)
        .ok_or_else(|| {
            PackageError::new(
                PackageErrorKind::BadWheel,
                Some(name),
                format!("{name}: the wheel has no .dist-info/WHEEL"),
            )
        })?;
    let mut text = String::new();
    zip.by_name(&wheel_file)
        .map_err(PackageError::host)?
        .take(64 << 10)
        .read_to_string(&mut text)
        .map_err(PackageError::host)?;
    let purelib = text.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("Root-Is-Purelib") && v.trim() == "true"
        })
    });
    if !purelib {
        return Err(PackageError::new(
            PackageErrorKind::NativeCode,
            Some(name),
            format!("{name} is not a pure-Python wheel (Root-Is-Purelib is not true)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use zip::write::SimpleFileOptions;

    fn wheel(entries: &[(&str, &[u8])], purelib: bool) -> tempfile_path::Tmp {
        let mut buf = Cursor::new(Vec::new());
        {
            let mut z = zip::ZipWriter::new(&mut buf);
            let o = SimpleFileOptions::default();
            z.start_file("w-1.dist-info/WHEEL", o).unwrap();
            write!(
                z,
                "Wheel-Version: 1.0\nRoot-Is-Purelib: {purelib}\nTag: py3-none-any\n"
            )
            .unwrap();
            for (n, c) in entries {
                z.start_file(*n, o).unwrap();
                z.write_all(c).unwrap();
            }
            z.finish().unwrap();
        }
        tempfile_path::Tmp::with(buf.into_inner())
    }

    /// A temporary directory with the wheel written in it, removed on drop.
    mod tempfile_path {
        pub struct Tmp(pub std::path::PathBuf);
        impl Tmp {
            pub fn with(bytes: Vec<u8>) -> Tmp {
                let dir = std::env::temp_dir().join(format!(
                    "vivarium-wheel-test-{}-{}",
                    std::process::id(),
                    rand::random::<u64>()
                ));
                std::fs::create_dir_all(dir.join("site")).unwrap();
                std::fs::write(dir.join("w.whl"), bytes).unwrap();
                Tmp(dir)
            }
        }
        impl Drop for Tmp {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn unpack_it(t: &tempfile_path::Tmp, cap: u64) -> Result<u64, PackageError> {
        let mut n = 0;
        unpack("w", &t.0.join("w.whl"), &t.0.join("site"), &mut n, cap).map(|()| n)
    }

    #[test]
    fn pure_wheels_unpack_with_purelib_data_at_the_root() {
        let t = wheel(
            &[
                ("w/__init__.py", b"x = 1\n"),
                ("w-1.data/purelib/extra.py", b"y = 2\n"),
                ("w-1.data/scripts/tool", b"#!/bin/sh\n"),
            ],
            true,
        );
        assert!(unpack_it(&t, 1 << 20).unwrap() > 12);
        assert!(t.0.join("site/w/__init__.py").is_file());
        assert!(t.0.join("site/extra.py").is_file());
        assert!(!t.0.join("site/tool").exists());
    }

    #[test]
    fn bytecode_in_a_wheel_is_dropped() {
        let t = wheel(
            &[
                ("w/__init__.py", b"x = 1\n"),
                ("w/__pycache__/__init__.cpython-315.pyc", b"\0\0\r\n"),
                ("w/__PYCACHE__/other.txt", b"x"),
                ("sourceless.pyc", b"\0\0\r\n"),
                ("w/old.PYO", b""),
            ],
            true,
        );
        unpack_it(&t, 1 << 20).unwrap();
        assert!(t.0.join("site/w/__init__.py").is_file());
        for gone in [
            "w/__pycache__",
            "w/__PYCACHE__",
            "sourceless.pyc",
            "w/old.PYO",
        ] {
            assert!(!t.0.join("site").join(gone).exists(), "{gone}");
        }
    }

    #[test]
    fn escapes_native_code_and_bombs_are_refused() {
        let slip = wheel(&[("../evil.py", b"")], true);
        assert_eq!(
            unpack_it(&slip, 1 << 20).unwrap_err().kind,
            PackageErrorKind::BadWheel
        );
        assert!(!slip.0.join("evil.py").exists());
        let native = wheel(&[("w/_speed.cpython-315-wasm32-wasi.so", b"\0asm")], true);
        assert_eq!(
            unpack_it(&native, 1 << 20).unwrap_err().kind,
            PackageErrorKind::NativeCode
        );
        let platlib = wheel(&[("w/__init__.py", b"")], false);
        assert_eq!(
            unpack_it(&platlib, 1 << 20).unwrap_err().kind,
            PackageErrorKind::NativeCode
        );
        let big = vec![b'a'; 1 << 20];
        let bomb = wheel(&[("w/big.py", &big)], true);
        assert_eq!(
            unpack_it(&bomb, 1000).unwrap_err().kind,
            PackageErrorKind::TooLarge
        );
    }
}
