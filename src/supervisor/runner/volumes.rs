//! The tenant's volumes (`supervisor/volumes.rs`): made, listed, deleted, and their files
//! written, read, listed and removed over HTTP without a sandbox. The store's disk work runs
//! on blocking threads; an upload is streamed to disk within the room its volume and tenant
//! have left, never held whole in memory; a file read back is scanned by the server's
//! leakage rules as any output is. In a cluster the shared store is the volumes' truth: a
//! volume is made, listed and deleted there, and this node's copy is pulled before each use
//! and pushed after each change (`volumes/replica.rs`).

use std::sync::Arc;

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use tokio::io::AsyncWriteExt as _;

use super::{Runner, withhold_unredactable};
use crate::guest::Lent;
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::volumes::{CreateVolume, VolumeEntry, VolumeInfo};
use crate::supervisor::{SupervisorError, SupervisorResult};
use crate::volumes::{
    Lease, Upload, VolumeError, VolumeMount, VolumeName, VolumePath, VolumeStore,
};

impl Runner {
    /// Runs `f` on the store off the async threads.
    async fn on_volumes<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Arc<VolumeStore>) -> Result<T, VolumeError> + Send + 'static,
    ) -> SupervisorResult<T> {
        let store = self.volumes.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| SupervisorError::Internal(format!("volume operation: {e}")))?
            .map_err(SupervisorError::from)
    }

    /// In a cluster, brings this node's copy of volume `name` up to the shared store's.
    async fn pull(&self, tenant: &str, name: &VolumeName) -> SupervisorResult<()> {
        if let Some(replica) = self.volumes.replica() {
            replica.pull(&self.volumes, tenant, name).await?;
        }
        Ok(())
    }

    /// In a cluster, writes what changed in this node's copy of volume `name` to the shared
    /// store.
    async fn push(&self, tenant: &str, name: &VolumeName) -> SupervisorResult<()> {
        if let Some(replica) = self.volumes.replica() {
            let dir = self.volumes.folder_of(tenant, name);
            replica.push(&self.volumes, &dir).await?;
        }
        Ok(())
    }

    /// In a cluster, after a session's turn: what it changed in the volumes it mounts
    /// writable reaches the shared store before the turn's answer (a failed push is logged
    /// and left for the volume's next one; the node keeps the change).
    pub(super) async fn push_mounted(&self, session: &crate::supervisor::session::Session) {
        if self.volumes.replica().is_none() {
            return;
        }
        for m in session.volumes.iter().filter(|m| !m.read_only) {
            if let Err(e) = self.push(session.tenant.id(), &m.volume).await {
                tracing::warn!(volume = %m.volume, error = %e,
                    "a volume's changes stay on this node until its next push");
            }
        }
    }

    /// Makes a volume for `key`'s tenant.
    #[tracing::instrument(name = "volume.create", skip_all, fields(volume = %req.name))]
    pub async fn create_volume(
        &self,
        key: Option<&str>,
        req: CreateVolume,
    ) -> SupervisorResult<VolumeInfo> {
        let tenant = self.tenant(key).id().to_string();
        let name = VolumeName::parse(&req.name)?;
        if let Some(replica) = self.volumes.replica() {
            return Ok(replica.create(&self.volumes, &tenant, &name).await?);
        }
        self.on_volumes(move |s| s.create(&tenant, &name)).await
    }

    /// `key`'s tenant's volumes.
    #[tracing::instrument(name = "volume.list", skip_all)]
    pub async fn volumes(&self, key: Option<&str>) -> SupervisorResult<Vec<VolumeInfo>> {
        let tenant = self.tenant(key).id().to_string();
        if let Some(replica) = self.volumes.replica() {
            return Ok(replica.list(&self.volumes, &tenant).await?);
        }
        self.on_volumes(move |s| s.list(&tenant)).await
    }

    /// Volume `name` of `key`'s tenant (another tenant's is not found).
    #[tracing::instrument(name = "volume.info", skip_all, fields(volume = name))]
    pub async fn volume(&self, key: Option<&str>, name: &str) -> SupervisorResult<VolumeInfo> {
        let tenant = self.tenant(key).id().to_string();
        let name = VolumeName::parse(name)?;
        if let Some(replica) = self.volumes.replica() {
            return Ok(replica.info(&self.volumes, &tenant, &name).await?);
        }
        self.on_volumes(move |s| s.info(&tenant, &name)).await
    }

    /// Deletes volume `name` of `key`'s tenant, with its files.
    #[tracing::instrument(name = "volume.delete", skip_all, fields(volume = name))]
    pub async fn delete_volume(&self, key: Option<&str>, name: &str) -> SupervisorResult<()> {
        let tenant = self.tenant(key).id().to_string();
        let name = VolumeName::parse(name)?;
        if let Some(replica) = self.volumes.replica() {
            return Ok(replica.delete(&self.volumes, &tenant, &name).await?);
        }
        self.on_volumes(move |s| s.delete(&tenant, &name)).await
    }

    /// Writes `body` as file `path` of volume `name`: streamed to disk, refused with the
    /// volume unchanged (`volume_full`) as soon as it passes the room the volume and its
    /// tenant have, and put in place whole when complete (a reader sees the old file or the
    /// new one, never a part). Returns its size.
    #[tracing::instrument(name = "volume.write", skip_all, fields(volume = name, bytes))]
    pub async fn put_volume_file<E: std::fmt::Display>(
        &self,
        key: Option<&str>,
        name: &str,
        path: &str,
        body: impl Stream<Item = Result<Bytes, E>> + Unpin,
    ) -> SupervisorResult<u64> {
        let At { tenant, name, path } = self.at(key, name, path)?;
        if path.is_top() {
            return Err(VolumeError::InvalidPath {
                path: "/".into(),
                why: "a file needs a name",
            }
            .into());
        }
        self.pull(&tenant, &name).await?;
        let store = self.volumes.clone();
        let (t, n, p) = (tenant.clone(), name.clone(), path.clone());
        let mut upload = self
            .on_volumes(move |_| store.begin_upload(&t, &n, &p))
            .await?;
        receive(body, &mut upload).await?;
        let (t, n) = (tenant.clone(), name.clone());
        let size = self
            .on_volumes(move |s| s.commit(&t, &n, &path, upload))
            .await?;
        self.push(&tenant, &name).await?;
        tracing::Span::current().record("bytes", size);
        Ok(size)
    }

    /// Opens file `path` of volume `name` to be streamed back, after the server's leakage
    /// rules scanned it (under `deny`, and under `redact` for text that holds a secret, as
    /// for a session's large file: a 422 `output_leak` naming the rules).
    #[tracing::instrument(name = "volume.read", skip_all, fields(volume = name, bytes))]
    pub async fn read_volume_file(
        &self,
        key: Option<&str>,
        name: &str,
        path: &str,
        record: &mut AuditRecord,
    ) -> SupervisorResult<(Arc<std::fs::File>, u64)> {
        let At { tenant, name, path } = self.at(key, name, path)?;
        let shown = format!("/{}", path.as_str());
        self.pull(&tenant, &name).await?;
        let (file, size) = self
            .on_volumes(move |s| s.open_file(&tenant, &name, &path))
            .await?;
        tracing::Span::current().record("bytes", size);
        let file = Arc::new(file);
        let guard = self.leak_guard(self.leakage.default, &[], &[]);
        let policy = guard.policy();
        let scanned = file.clone();
        let scan = tokio::task::spawn_blocking(move || {
            crate::worker::held::scan_file(&guard, &shown, &scanned, size)
        })
        .await
        .map_err(|e| SupervisorError::Internal(format!("scanning the file: {e}")))?
        .map_err(|e| SupervisorError::Internal(format!("scanning the file: {e}")))?;
        withhold_unredactable(policy, scan.leaks, scan.text, record)?;
        Ok((file, size))
    }

    /// The entries under folder `path` of volume `name`, `depth` levels down.
    #[tracing::instrument(name = "volume.list_files", skip_all, fields(volume = name))]
    pub async fn volume_files(
        &self,
        key: Option<&str>,
        name: &str,
        path: &str,
        depth: u32,
    ) -> SupervisorResult<Vec<VolumeEntry>> {
        self.on_path(key, name, path, move |s, at| {
            s.list_files(&at.tenant, &at.name, &at.path, depth)
        })
        .await
    }

    /// What is at `path` in volume `name`.
    #[tracing::instrument(name = "volume.stat", skip_all, fields(volume = name))]
    pub async fn volume_entry(
        &self,
        key: Option<&str>,
        name: &str,
        path: &str,
    ) -> SupervisorResult<VolumeEntry> {
        self.on_path(key, name, path, |s, at| {
            s.stat(&at.tenant, &at.name, &at.path)
        })
        .await
    }

    /// Makes folder `path` (and those above it) in volume `name`.
    #[tracing::instrument(name = "volume.mkdir", skip_all, fields(volume = name))]
    pub async fn make_volume_dir(
        &self,
        key: Option<&str>,
        name: &str,
        path: &str,
    ) -> SupervisorResult<VolumeEntry> {
        self.changing(key, name, path, |s, at| {
            s.make_dir(&at.tenant, &at.name, &at.path)
        })
        .await
    }

    /// Removes `path` (a file, or a folder with everything in it) from volume `name`.
    #[tracing::instrument(name = "volume.remove", skip_all, fields(volume = name))]
    pub async fn remove_volume_path(
        &self,
        key: Option<&str>,
        name: &str,
        path: &str,
    ) -> SupervisorResult<()> {
        self.changing(key, name, path, |s, at| {
            s.remove(&at.tenant, &at.name, &at.path)
        })
        .await
    }

    /// `f` on `path` of volume `name` of `key`'s tenant (both checked first), off the async
    /// threads.
    async fn on_path<T: Send + 'static>(
        &self,
        key: Option<&str>,
        name: &str,
        path: &str,
        f: impl FnOnce(&VolumeStore, &At) -> Result<T, VolumeError> + Send + 'static,
    ) -> SupervisorResult<T> {
        self.at_path(self.at(key, name, path)?, false, f).await
    }

    /// [`Runner::on_path`] for a change: pushed to the shared store after it (a cluster).
    async fn changing<T: Send + 'static>(
        &self,
        key: Option<&str>,
        name: &str,
        path: &str,
        f: impl FnOnce(&VolumeStore, &At) -> Result<T, VolumeError> + Send + 'static,
    ) -> SupervisorResult<T> {
        self.at_path(self.at(key, name, path)?, true, f).await
    }

    /// `f` at `at`, after this node's copy is pulled and, for a `change`, pushed after it.
    async fn at_path<T: Send + 'static>(
        &self,
        at: At,
        change: bool,
        f: impl FnOnce(&VolumeStore, &At) -> Result<T, VolumeError> + Send + 'static,
    ) -> SupervisorResult<T> {
        let (tenant, name) = (at.tenant.clone(), at.name.clone());
        self.pull(&tenant, &name).await?;
        let done = self.on_volumes(move |s| f(s, &at)).await?;
        if change {
            self.push(&tenant, &name).await?;
        }
        Ok(done)
    }

    /// Lends `mounts` (volumes of `tenant`) to one sandbox, each writable one with room for
    /// up to `want` bytes more (the sandbox's own disk limit): the leases to hold while it
    /// runs, and what its worker mounts. A missing volume is `volume_not_found`.
    pub(super) async fn lend_volumes(
        &self,
        tenant: &str,
        mounts: &[VolumeMount],
        want: u64,
    ) -> SupervisorResult<(Vec<Lease>, Vec<Lent>)> {
        if mounts.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        for m in mounts {
            self.pull(tenant, &m.volume).await?;
        }
        // A loan of measured volumes is a stat and a few lookups: made here, not worth a hop
        // to a blocking thread (measured on several runs at two connections: the hop was
        // most of a mount's cost). One that must measure a volume first goes there.
        let here: Option<Vec<_>> = mounts
            .iter()
            .map(|m| self.volumes.lend_measured(tenant, m, want).transpose())
            .collect::<Option<Result<Vec<_>, _>>>()
            .transpose()?;
        if let Some(pairs) = here {
            return Ok(pairs.into_iter().unzip());
        }
        let (tenant, mounts) = (tenant.to_string(), mounts.to_vec());
        self.on_volumes(move |s| {
            mounts
                .iter()
                .map(|m| s.lend(&tenant, m, want))
                .collect::<Result<Vec<_>, _>>()
                .map(|pairs| pairs.into_iter().unzip())
        })
        .await
    }

    /// Whose volume, which, and where in it: checked.
    fn at(&self, key: Option<&str>, name: &str, path: &str) -> SupervisorResult<At> {
        Ok(At {
            tenant: self.tenant(key).id().to_string(),
            name: VolumeName::parse(name)?,
            path: VolumePath::parse(path)?,
        })
    }
}

/// A path in a tenant's volume, checked.
struct At {
    tenant: String,
    name: VolumeName,
    path: VolumePath,
}

/// Writes `body` into the upload's file, each chunk admitted by the room its volume and
/// tenant have left first.
async fn receive<E: std::fmt::Display>(
    mut body: impl Stream<Item = Result<Bytes, E>> + Unpin,
    upload: &mut Upload,
) -> SupervisorResult<()> {
    let mut file = tokio::fs::File::from_std(upload.file());
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| SupervisorError::InvalidRequest(format!("the body: {e}")))?;
        upload.take(chunk.len() as u64)?;
        file.write_all(&chunk)
            .await
            .map_err(|e| SupervisorError::Internal(format!("writing the upload: {e}")))?;
    }
    file.flush()
        .await
        .map_err(|e| SupervisorError::Internal(format!("writing the upload: {e}")))?;
    Ok(())
}
