//! An I/O failure on a named path: what was being done, on which path, and the system's error.
//! The floors that touch the host's files (the engine's compiled-module cache, a template's
//! build, a sandbox's working directory) each wrap it as their error's `Io` variant.

use std::path::{Path, PathBuf};

/// `"{what} {path}: {source}"`, e.g. `reading /tmp/x/a.csv: No such file or directory`.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {source}")]
pub struct PathIoError {
    /// What was being done (`reading`, `creating`, …).
    pub what: &'static str,
    /// On which path.
    pub path: PathBuf,
    /// The system's error.
    #[source]
    pub source: std::io::Error,
}

impl PathIoError {
    /// A `map_err` argument: the error of doing `what` on `path`, as any error that wraps it.
    pub fn at<E: From<Self>>(
        what: &'static str,
        path: &Path,
    ) -> impl FnOnce(std::io::Error) -> E + use<E> {
        let path = path.to_path_buf();
        move |source| Self { what, path, source }.into()
    }
}
