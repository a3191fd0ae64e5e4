//! Opening the store a server was configured with: a directory, or S3-compatible object
//! storage for `s3://` URLs.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

use super::store::{DirStore, SnapshotStore};

/// The store for `--snapshot-url` when given, else the directory `dir`.
pub fn open_store(dir: &Path, url: Option<&str>) -> anyhow::Result<Arc<dyn SnapshotStore>> {
    if let Some(url) = url {
        anyhow::bail!("--snapshot-url {url}: object storage is not supported yet");
    }
    let store = DirStore::open(dir).with_context(|| {
        format!(
            "opening the snapshot directory {} (--snapshot-dir)",
            dir.display()
        )
    })?;
    Ok(store)
}
