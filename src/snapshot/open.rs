//! Opening the store a server was configured with: a directory, or S3-compatible object
//! storage for `s3://` URLs.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;

use super::object_store::S3Store;
use super::store::{DirStore, SnapshotStore};

/// The store for `--snapshot-url` when given, else the directory `dir`.
pub fn open_store(dir: &Path, url: Option<&str>) -> anyhow::Result<Arc<dyn SnapshotStore>> {
    if let Some(url) = url {
        let Some((scheme, _)) = url.split_once("://") else {
            anyhow::bail!(
                "--snapshot-url {url:?}: not a URL; expected s3://bucket/optional/prefix"
            );
        };
        anyhow::ensure!(
            scheme == "s3",
            "--snapshot-url {url:?}: the {scheme}:// scheme is not supported; expected \
             s3://bucket/optional/prefix (S3-compatible object storage)"
        );
        let store = S3Store::from_env(url).with_context(|| format!("--snapshot-url {url:?}"))?;
        return Ok(store);
    }
    let store = DirStore::open(dir).with_context(|| {
        format!(
            "opening the snapshot directory {} (--snapshot-dir)",
            dir.display()
        )
    })?;
    Ok(store)
}

/// The object store of `--snapshot-url` when given, else of the directory `dir`, with the
/// prefix under which a cluster keeps what it shares besides snapshots (its volumes), and
/// the store's name for errors.
pub fn open_objects(
    dir: &Path,
    url: Option<&str>,
) -> anyhow::Result<(
    Arc<dyn ::object_store::ObjectStore>,
    ::object_store::path::Path,
    String,
)> {
    if let Some(url) = url {
        let store = S3Store::from_env(url).with_context(|| format!("--snapshot-url {url:?}"))?;
        let (objects, prefix) = store.objects();
        return Ok((objects, prefix, store.describe()));
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("making the snapshot directory {}", dir.display()))?;
    let objects = ::object_store::local::LocalFileSystem::new_with_prefix(dir)
        .with_context(|| format!("opening the snapshot directory {}", dir.display()))?;
    Ok((
        Arc::new(objects),
        ::object_store::path::Path::default(),
        format!("directory {}", dir.display()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_snapshot_url_is_a_clear_error() {
        let dir = Path::new("/nonexistent");
        for (url, says) in [
            ("https://bucket/x", "the https:// scheme is not supported"),
            ("file:///tmp/snaps", "the file:// scheme is not supported"),
            ("bucket/x", "not a URL"),
            ("s3://", "not a bucket name"),
            ("s3://snaps/a//c", "not an object prefix"),
        ] {
            let e = format!("{:#}", open_store(dir, Some(url)).err().unwrap());
            assert!(
                e.contains("--snapshot-url") && e.contains(says),
                "{url}: {e}"
            );
        }
        let store = open_store(dir, Some("s3://snaps/p")).unwrap();
        assert!(store.describe().contains("s3://snaps/p"));
    }
}
