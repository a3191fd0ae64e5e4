//! Templates in a cluster's shared store (`--cluster`): the object store the nodes keep
//! snapshots, leases and volumes in, so every node serves every template. Objects, under
//! the store's prefix:
//!
//! - `templates/<tenant>/<name>.json`: a template's record (what the API shows, its
//!   variables and packages), written by the node that builds, rebuilds or deletes it;
//! - `templates/layers/<id>.layer`: its layer, written once its build is done (before its
//!   record says `ready`), fetched once by a node that lacks it.
//!
//! `<tenant>` is a hash of the tenant's id, as the node's own record files are named. The
//! store is fetched data: a record is bounded and parsed, its name and id checked, a layer is
//! checked when it is read as any layer is (`snapshot::decode`, by the worker).

use std::path::Path as FsPath;
use std::sync::Arc;

use ::object_store::path::Path;
use ::object_store::{Error as ObjectError, ObjectStore, ObjectStoreExt, PutPayload};
use futures_util::TryStreamExt;
use tokio::io::AsyncWriteExt;

use super::{Kept, UserTemplateError, check_name, tenant_file};

/// The largest record read back (a build's log is at most 64 steps of 32 KiB).
const MAX_RECORD_BYTES: u64 = 8 << 20;
/// The most records one tenant's listing may hold before it is refused.
const MAX_LISTED: usize = 4096;

/// The templates in a shared object store.
pub struct SharedTemplates {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
}

impl SharedTemplates {
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Path) -> Self {
        SharedTemplates { store, prefix }
    }

    fn tenant_dir(&self, tenant: &str) -> Path {
        self.prefix
            .clone()
            .join("templates")
            .join(tenant_file(tenant))
    }

    fn record(&self, tenant: &str, name: &str) -> Path {
        self.tenant_dir(tenant).join(format!("{name}.json"))
    }

    fn layer(&self, id: &str) -> Path {
        self.prefix
            .clone()
            .join("templates")
            .join("layers")
            .join(format!("{id}.layer"))
    }

    fn err(what: &str, e: impl std::fmt::Display) -> UserTemplateError {
        UserTemplateError::Store(format!("{what}: {e}"))
    }

    /// Writes `kept` as `tenant`'s record of its name.
    pub async fn put_record(&self, tenant: &str, kept: &Kept) -> Result<(), UserTemplateError> {
        let bytes = serde_json::to_vec(kept).map_err(|e| Self::err("a record", e))?;
        self.store
            .put(
                &self.record(tenant, &kept.info.name),
                PutPayload::from(bytes),
            )
            .await
            .map(|_| ())
            .map_err(|e| Self::err("writing a record", e))
    }

    /// Removes `tenant`'s record of `name` (gone already is no fault).
    pub async fn delete_record(&self, tenant: &str, name: &str) -> Result<(), UserTemplateError> {
        match self.store.delete(&self.record(tenant, name)).await {
            Ok(()) | Err(ObjectError::NotFound { .. }) => Ok(()),
            Err(e) => Err(Self::err("deleting a record", e)),
        }
    }

    /// `tenant`'s records as the store has them: each bounded, parsed, its name the one it
    /// is filed under and checked, its id a SHA-256's hex; others are skipped.
    pub async fn records(&self, tenant: &str) -> Result<Vec<Kept>, UserTemplateError> {
        let metas: Vec<_> = self
            .store
            .list(Some(&self.tenant_dir(tenant)))
            .try_collect()
            .await
            .map_err(|e| Self::err("listing templates", e))?;
        if metas.len() > MAX_LISTED {
            return Err(Self::err("listing templates", "too many records"));
        }
        let mut out = Vec::new();
        for meta in metas {
            let Some(name) = meta
                .location
                .filename()
                .and_then(|f| f.strip_suffix(".json"))
                .map(str::to_string)
            else {
                continue;
            };
            if check_name(&name).is_err() || meta.size > MAX_RECORD_BYTES {
                continue;
            }
            let got = match self.store.get(&meta.location).await {
                Ok(got) => got,
                Err(ObjectError::NotFound { .. }) => continue,
                Err(e) => return Err(Self::err("reading a record", e)),
            };
            let bytes = got
                .bytes()
                .await
                .map_err(|e| Self::err("reading a record", e))?;
            let Ok(kept) = serde_json::from_slice::<Kept>(&bytes) else {
                continue;
            };
            let id_ok =
                kept.info.id.len() == 64 && kept.info.id.bytes().all(|b| b.is_ascii_hexdigit());
            if kept.info.name == name && id_ok && !kept.info.builtin {
                out.push(kept);
            }
        }
        Ok(out)
    }

    /// Uploads the layer of id `id` from `file`.
    pub async fn put_layer(&self, id: &str, file: &FsPath) -> Result<(), UserTemplateError> {
        let bytes = tokio::fs::read(file)
            .await
            .map_err(|e| Self::err("reading the layer to upload", e))?;
        self.store
            .put(&self.layer(id), PutPayload::from(bytes))
            .await
            .map(|_| ())
            .map_err(|e| Self::err("writing a layer", e))
    }

    /// Fetches the layer of id `id` to `file` (through a temporary file renamed into place),
    /// at most `max_bytes` of it.
    pub async fn fetch_layer(
        &self,
        id: &str,
        file: &FsPath,
        max_bytes: u64,
    ) -> Result<(), UserTemplateError> {
        let got = self
            .store
            .get(&self.layer(id))
            .await
            .map_err(|e| Self::err("reading a layer", e))?;
        if got.meta.size > max_bytes {
            return Err(Self::err(
                "reading a layer",
                "it is larger than any template may be",
            ));
        }
        // Streamed to disk, a part at a time: a layer is never whole in this process.
        let tmp = file.with_extension(format!("fetch-{:08x}", rand::random::<u32>()));
        let written = async {
            let mut out = tokio::fs::File::create(&tmp).await?;
            let mut parts = got.into_stream();
            let mut total = 0u64;
            while let Some(part) = parts.try_next().await.map_err(std::io::Error::other)? {
                total += part.len() as u64;
                if total > max_bytes {
                    return Err(std::io::Error::other("the layer grew past its size"));
                }
                out.write_all(&part).await?;
            }
            out.sync_all().await?;
            tokio::fs::rename(&tmp, file).await
        }
        .await;
        if written.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        written.map_err(|e| Self::err("fetching a layer", e))
    }

    /// Removes the layer of id `id` (gone already is no fault).
    pub async fn delete_layer(&self, id: &str) {
        let _ = self.store.delete(&self.layer(id)).await;
    }
}
