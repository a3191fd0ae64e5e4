//! Packages on demand: requirement specifiers resolved on the host to pure-Python wheels,
//! unpacked once into a read-only, content-addressed environment that sandboxes see on their
//! `sys.path` ([`crate::guest::PACKAGES_DIR`]).
//!
//! The host downloads and unpacks wheels; it never runs a package's code. Resolution is
//! pip's own resolver (`resolve.py`, run with the host's python3 and `--only-binary=:all:`),
//! with the guest's built-in distributions pinned as installed. Everything a wheel holds is
//! treated as hostile data when it is unpacked (`wheel.rs`).
//!
//! ```text
//! <home>/packages/envs/<key>/site/      one resolved set, read-only, keyed by its wheels' SHA-256
//! <home>/packages/envs/<key>/env.json   what it holds (names, versions, hashes, bytes)
//! <home>/packages/envs/.lock            flock serialising builds and evictions across processes
//! <home>/packages/empty/                what a sandbox without packages sees
//! <home>/packages/builtins-<digest>/    the empty wheels that stand for the built-in set
//! ```

mod cache;
mod compile;
mod redact;
mod resolve;
mod spec;
mod wheel;

use std::path::PathBuf;
use std::time::Duration;

pub use cache::{PackageEnv, Packages};
pub use compile::PackageHold;
pub use redact::shown_url;
pub use spec::PackageSpecs;

/// Where extra packages come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackageSource {
    /// No extra packages: a request that names any is refused (`packages_disabled`).
    Off,
    /// The index pip is configured with on this host.
    PipDefault,
    /// This index (a PEP 503 simple index URL).
    Index(String),
}

/// How packages are resolved, cached and bounded.
#[derive(Debug, Clone)]
pub struct PackageOptions {
    /// Where wheels come from.
    pub source: PackageSource,
    /// When set, only these distributions (normalised names) may be installed, dependencies
    /// included.
    pub allowlist: Option<std::collections::BTreeSet<String>>,
    /// The host's python3, which runs pip.
    pub python: PathBuf,
    /// `<home>/packages`.
    pub dir: PathBuf,
    /// The most requirements one request may name.
    pub max_requested: usize,
    /// The largest wheel downloaded, in bytes.
    pub max_wheel_bytes: u64,
    /// The largest unpacked environment, in bytes.
    pub max_env_bytes: u64,
    /// The cache's size cap: least recently used environments are removed past it.
    pub cache_bytes: u64,
    /// How long one resolution (and, separately, one download) may take.
    pub timeout: Duration,
}

impl PackageOptions {
    /// The defaults, with the cache under `home`.
    pub fn new(home: &std::path::Path) -> Self {
        PackageOptions {
            source: PackageSource::PipDefault,
            allowlist: None,
            python: "python3".into(),
            dir: home.join("packages"),
            max_requested: 20,
            max_wheel_bytes: 64 << 20,
            max_env_bytes: 256 << 20,
            cache_bytes: 2 << 30,
            timeout: Duration::from_secs(60),
        }
    }
}

/// One wheel of a resolved set.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PackagePin {
    /// Its distribution name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// SHA-256 of the wheel file, hex.
    pub sha256: String,
}

/// Why a set of packages cannot be had: each a 4xx or 5xx with its own code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{message}")]
pub struct PackageError {
    /// What kind of refusal.
    pub kind: PackageErrorKind,
    /// The package it is about, when one is.
    pub package: Option<String>,
    /// Says why, for the caller.
    pub message: String,
}

/// The closed set of package refusals; `as_str` is the wire's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PackageErrorKind {
    /// The server allows no extra packages.
    Disabled,
    /// A specifier is not a plain `name[extras]<op>version` requirement.
    InvalidSpec,
    /// More requirements than allowed.
    TooMany,
    /// Not in the operator's allowlist.
    NotAllowed,
    /// No such package, or no version matches.
    NotFound,
    /// Only platform wheels: native code.
    NativeCode,
    /// Only source distributions, never built here.
    NoWheel,
    /// Needs another version of a built-in distribution.
    ConflictsWithBuiltin,
    /// The requirements conflict with each other.
    Conflict,
    /// A wheel, or the unpacked set, exceeds its cap.
    TooLarge,
    /// The index cannot be reached (or answered an error).
    IndexUnreachable,
    /// Resolution or download took longer than allowed.
    Timeout,
    /// A downloaded wheel's hash is not the index's, or its archive is unsafe or broken.
    BadWheel,
    /// The host failed (pip missing, a disk error).
    Host,
}

impl PackageErrorKind {
    /// The error code on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "packages_disabled",
            Self::InvalidSpec => "invalid_package_spec",
            Self::TooMany => "too_many_packages",
            Self::NotAllowed => "package_not_allowed",
            Self::NotFound => "package_not_found",
            Self::NativeCode => "package_has_native_code",
            Self::NoWheel => "package_has_no_wheel",
            Self::ConflictsWithBuiltin => "package_conflicts_with_builtin",
            Self::Conflict => "package_conflict",
            Self::TooLarge => "package_too_large",
            Self::IndexUnreachable => "package_index_unreachable",
            Self::Timeout => "package_resolution_timeout",
            Self::BadWheel => "package_invalid",
            Self::Host => "package_install_failed",
        }
    }

    /// The code `resolve.py` reports, back to its kind.
    fn from_helper(code: &str) -> Self {
        match code {
            "package_not_found" => Self::NotFound,
            "package_has_native_code" => Self::NativeCode,
            "package_has_no_wheel" => Self::NoWheel,
            "package_conflicts_with_builtin" => Self::ConflictsWithBuiltin,
            "package_conflict" => Self::Conflict,
            "package_too_large" => Self::TooLarge,
            "package_index_unreachable" => Self::IndexUnreachable,
            "invalid_package_spec" => Self::InvalidSpec,
            "package_hash_mismatch" | "package_invalid" => Self::BadWheel,
            _ => Self::Host,
        }
    }
}

impl PackageError {
    pub(crate) fn new(
        kind: PackageErrorKind,
        package: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        PackageError {
            kind,
            package: package.map(str::to_string),
            message: message.into(),
        }
    }

    pub(crate) fn host(message: impl std::fmt::Display) -> Self {
        Self::new(PackageErrorKind::Host, None, message.to_string())
    }
}

/// PEP 503 normalisation of a distribution name.
pub fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut dash = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            dash = true;
        } else {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalise_as_pep_503_says() {
        assert_eq!(normalize("Friendly-Bard"), "friendly-bard");
        assert_eq!(normalize("FRIENDLY_BARD"), "friendly-bard");
        assert_eq!(normalize("friendly.._-bard"), "friendly-bard");
        assert_eq!(normalize("zope.interface"), "zope-interface");
    }
}
