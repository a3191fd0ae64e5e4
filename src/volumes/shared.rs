//! Volumes in the cluster's shared store (`--cluster`): the same object store the nodes keep
//! snapshots and leases in (a shared directory, or S3-compatible storage), so any node mounts
//! any volume and a node's loss loses no committed write. Objects, under the store's prefix:
//!
//! - `volumes/<tenant>/<name>/volume.json`: the volume's record; the volume exists while it
//!   is there (made by a create-only write, so two nodes making one name: one wins);
//! - `volumes/<tenant>/<name>/files/<path>`: each of its files, whole (a file is written with
//!   one PUT, or a multipart upload completed at once: a reader sees the old object or the
//!   new one).
//!
//! `<tenant>` is the folder name a node's disk uses (a hash of the tenant's id). Folders are
//! not objects: a folder exists in the store when a file below it does. A file name that is
//! not UTF-8 is not carried (the node keeps it; docs/guides/volumes.md says so).

use std::path::Path as FsPath;
use std::sync::Arc;

use ::object_store::path::{Path, PathPart};
use ::object_store::{
    Error as ObjectError, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    WriteMultipart,
};
use futures_util::{StreamExt, TryStreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{VolumeError, VolumePath};

/// The parts of an upload sent as one request each (a file at most this big is one PUT).
const PART_BYTES: usize = 8 << 20;
/// The longest volume record read back: anything larger is not ours.
const MAX_RECORD_BYTES: u64 = 4096;

/// One object of a volume's files, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// Below the volume's top, `/`-separated.
    pub path: String,
    pub size: u64,
    /// What changes whenever the object is written (its ETag, else its time and size).
    pub version: String,
}

/// The volumes in a shared object store.
pub struct SharedVolumes {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    describe: String,
    /// The most files a volume's listing may hold (its limit of entries): a store that
    /// lists more is refused, not held in memory.
    max_files: u64,
}

impl SharedVolumes {
    /// Volumes in `store` below `prefix` (`describe` names it in errors), each listing at
    /// most `max_files` files.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: Path,
        describe: String,
        max_files: u64,
    ) -> Self {
        SharedVolumes {
            store,
            prefix: prefix.clone().join("volumes"),
            describe,
            max_files,
        }
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> VolumeError {
        VolumeError::Shared(format!("{} ({what}): {e}", self.describe))
    }

    fn volume(&self, tenant: &str, name: &str) -> Path {
        self.prefix.clone().join(tenant).join(name)
    }

    fn record(&self, tenant: &str, name: &str) -> Path {
        self.volume(tenant, name).join("volume.json")
    }

    fn files(&self, tenant: &str, name: &str) -> Path {
        self.volume(tenant, name).join("files")
    }

    fn file(&self, tenant: &str, name: &str, path: &str) -> Path {
        let mut key = self.files(tenant, name);
        for part in path.split('/') {
            key = key.join(PathPart::from(part));
        }
        key
    }

    /// Writes volume `name`'s record, unless one is there: `false` when it was.
    pub async fn create(
        &self,
        tenant: &str,
        name: &str,
        record: Vec<u8>,
    ) -> Result<bool, VolumeError> {
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .store
            .put_opts(&self.record(tenant, name), PutPayload::from(record), opts)
            .await
        {
            Ok(_) => Ok(true),
            Err(ObjectError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(self.err("making the volume", e)),
        }
    }

    /// Volume `name`'s record, or `None` when it does not exist.
    pub async fn record_of(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>, VolumeError> {
        let got = match self.store.get(&self.record(tenant, name)).await {
            Ok(got) => got,
            Err(ObjectError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.err("reading the volume", e)),
        };
        if got.meta.size > MAX_RECORD_BYTES {
            return Err(self.err("reading the volume", "its record is too large"));
        }
        let bytes = got
            .bytes()
            .await
            .map_err(|e| self.err("reading the volume", e))?;
        Ok(Some(bytes.to_vec()))
    }

    /// The names of `tenant`'s volumes (each with its record), unsorted.
    pub async fn names(&self, tenant: &str) -> Result<Vec<String>, VolumeError> {
        let listed = self
            .store
            .list_with_delimiter(Some(&self.prefix.clone().join(tenant)))
            .await
            .map_err(|e| self.err("listing volumes", e))?;
        let mut names = Vec::new();
        for folder in listed.common_prefixes {
            // A folder not named as a volume may be is not one (the store is fetched data).
            let Some(name) = folder
                .filename()
                .filter(|n| super::VolumeName::parse(n).is_ok())
            else {
                continue;
            };
            match self.store.head(&self.record(tenant, name)).await {
                Ok(_) => names.push(name.to_string()),
                Err(ObjectError::NotFound { .. }) => {}
                Err(e) => return Err(self.err("listing volumes", e)),
            }
        }
        Ok(names)
    }

    /// Deletes volume `name`: its record first (it is gone for every node at once), then
    /// its files. `false` when it did not exist.
    pub async fn delete(&self, tenant: &str, name: &str) -> Result<bool, VolumeError> {
        match self.store.delete(&self.record(tenant, name)).await {
            Ok(()) => {}
            Err(ObjectError::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(self.err("deleting the volume", e)),
        }
        let files: Vec<Path> = self
            .store
            .list(Some(&self.files(tenant, name)))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(|e| self.err("deleting the volume's files", e))?;
        for key in files {
            match self.store.delete(&key).await {
                Ok(()) | Err(ObjectError::NotFound { .. }) => {}
                Err(e) => return Err(self.err("deleting the volume's files", e)),
            }
        }
        Ok(true)
    }

    /// Every file of volume `name`.
    pub async fn listing(&self, tenant: &str, name: &str) -> Result<Vec<Remote>, VolumeError> {
        let top = self.files(tenant, name);
        let metas: Vec<_> = self
            .store
            .list(Some(&top))
            .take(
                usize::try_from(self.max_files)
                    .unwrap_or(usize::MAX)
                    .saturating_add(1),
            )
            .try_collect()
            .await
            .map_err(|e| self.err("listing the volume", e))?;
        if metas.len() as u64 > self.max_files {
            return Err(self.err(
                "listing the volume",
                format!("more than {} files (the volume's limit)", self.max_files),
            ));
        }
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let parts: Vec<String> = m
                    .location
                    .prefix_match(&top)?
                    .map(|p| {
                        percent_encoding::percent_decode_str(p.as_ref())
                            .decode_utf8()
                            .map(|s| s.into_owned())
                    })
                    .collect::<Result<_, _>>()
                    .ok()?;
                let version = m.e_tag.clone().unwrap_or_else(|| {
                    format!("{}-{}", m.last_modified.timestamp_micros(), m.size)
                });
                // The store is fetched data: a key whose parts decode to a separator, `..`
                // or anything else a volume path may not hold is never a path here.
                if parts.iter().any(|p| p.contains('/')) {
                    return None;
                }
                let path = VolumePath::parse(&parts.join("/")).ok()?;
                if path.is_top() {
                    return None;
                }
                Some(Remote {
                    path: path.as_str().to_string(),
                    size: m.size,
                    version,
                })
            })
            .collect())
    }

    /// Writes the local file `from` as `path` of volume `name`, streamed from disk. (Its new
    /// version is what the next listing says: stores do not all give the same version in a
    /// write's answer as in a listing.)
    pub async fn upload(
        &self,
        tenant: &str,
        name: &str,
        path: &str,
        from: &FsPath,
    ) -> Result<(), VolumeError> {
        let key = self.file(tenant, name, path);
        let err = |e: &dyn std::fmt::Display| self.err(&format!("writing /{path}"), e);
        let mut file = tokio::fs::File::open(from).await.map_err(|e| err(&e))?;
        let size = file.metadata().await.map_err(|e| err(&e))?.len();
        if size <= PART_BYTES as u64 {
            let mut body = Vec::with_capacity(size as usize);
            file.read_to_end(&mut body).await.map_err(|e| err(&e))?;
            self.store
                .put(&key, PutPayload::from(body))
                .await
                .map_err(|e| err(&e))?;
        } else {
            let upload = self.store.put_multipart(&key).await.map_err(|e| err(&e))?;
            let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
            let mut buf = vec![0u8; 1 << 20];
            loop {
                // At most two parts in flight: an upload holds ~3 parts of memory, whatever
                // the file's size.
                parts.wait_for_capacity(2).await.map_err(|e| err(&e))?;
                let n = file.read(&mut buf).await.map_err(|e| err(&e))?;
                if n == 0 {
                    break;
                }
                parts.write(&buf[..n]);
            }
            parts.finish().await.map_err(|e| err(&e))?;
        }
        Ok(())
    }

    /// Reads `path` of volume `name` into the new local file `to`, streamed; `false` when it
    /// is gone.
    pub async fn download(
        &self,
        tenant: &str,
        name: &str,
        path: &str,
        to: &FsPath,
    ) -> Result<bool, VolumeError> {
        let err = |e: &dyn std::fmt::Display| self.err(&format!("reading /{path}"), e);
        let got = match self.store.get(&self.file(tenant, name, path)).await {
            Ok(got) => got,
            Err(ObjectError::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(err(&e)),
        };
        let mut out = tokio::fs::File::create(to).await.map_err(|e| err(&e))?;
        let mut body = got.into_stream();
        while let Some(chunk) = body.next().await {
            out.write_all(&chunk.map_err(|e| err(&e))?)
                .await
                .map_err(|e| err(&e))?;
        }
        out.flush().await.map_err(|e| err(&e))?;
        Ok(true)
    }

    /// Removes `path` of volume `name` (nothing when it is not there).
    pub async fn remove(&self, tenant: &str, name: &str, path: &str) -> Result<(), VolumeError> {
        match self.store.delete(&self.file(tenant, name, path)).await {
            Ok(()) | Err(ObjectError::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(&format!("removing /{path}"), e)),
        }
    }
}
