//! Sessions as data at the runner: snapshot a session into the store, fork it into a new
//! live session, restore a session from a snapshot; and the snapshots' listing and deletion.
//!
//! Capturing holds the session busy (409 while a turn runs) on a guest thread; encoding and
//! decoding (hashing, zstd) run there or on a blocking thread, never on the executor. A
//! restored or forked session is admitted like a new one (the session cap, its memory).

use std::sync::Arc;
use std::time::SystemTime;

use super::Runner;
use crate::leakage::LeakPolicy;
use crate::sandbox::CaptureError;
use crate::server::audit::AuditRecord;
use crate::server::error::{ApiError, ApiResult};
use crate::server::sessions::{Session, SessionSettings};
use crate::server::snapshots::SnapshotInfo;
use crate::snapshot::{Provenance, encode};

impl From<CaptureError> for ApiError {
    fn from(e: CaptureError) -> Self {
        match e {
            CaptureError::OpenFiles { .. } | CaptureError::TooManyEntries | CaptureError::Ended => {
                ApiError::SnapshotRefused(e.to_string())
            }
            other => ApiError::Internal(format!("capturing the session: {other}")),
        }
    }
}

impl Runner {
    /// Snapshots session `id` into the store, owned by `owner` (the API key's id).
    pub async fn snapshot_session(
        &self,
        id: &str,
        owner: Option<String>,
        record: &mut AuditRecord,
    ) -> ApiResult<SnapshotInfo> {
        let host = self.host()?;
        let session = self.sessions.get(id)?;
        let template = session.template;
        let binding = host
            .binding(template)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let turns = session.info().turns;
        let bytes = self
            .with_interpreter(id, move |interp| {
                let image = host.capture(interp, template)?;
                let created_at = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                Ok(encode(
                    &image,
                    &Provenance {
                        binding,
                        created_at,
                        owner,
                        turns,
                    },
                ))
            })
            .await?;
        let info = self.snapshots.put(bytes).await?;
        record.snapshot_id = Some(info.snapshot_id.clone());
        Ok(info)
    }

    /// A new live session with session `id`'s state, without going through the store; the
    /// two diverge from here.
    pub async fn fork_session(
        &self,
        id: &str,
        record: &mut AuditRecord,
    ) -> ApiResult<Arc<Session>> {
        let host = self.host()?;
        let session = self.sessions.get(id)?;
        let template = session.template;
        let image = self
            .with_interpreter(id, move |interp| Ok(host.capture(interp, template)?))
            .await?;
        let settings = SessionSettings {
            limits: session.limits,
            template,
            leakage: session.leakage,
            turns: session.info().turns,
        };
        self.admit_session(settings, record, move |host, cancel| {
            host.restore_interpreter(template, image, cancel)
                .map_err(|e| ApiError::Internal(format!("restoring the fork: {e}")))
        })
        .await
    }

    /// A new session from snapshot `snapshot`, which `owner` must own; `leakage` as for
    /// opening one (the snapshot keeps its limits and template).
    pub async fn restore_session(
        &self,
        snapshot: &str,
        owner: Option<&str>,
        leakage: Option<LeakPolicy>,
        record: &mut AuditRecord,
    ) -> ApiResult<Arc<Session>> {
        let host = self.host()?;
        let leakage = self.leak_policy(leakage)?;
        let (template, header, image) = self
            .snapshots
            .load(snapshot, owner, self.maximum, |t| {
                host.binding(t)
                    .map_err(|e| ApiError::Internal(e.to_string()))
            })
            .await?;
        record.snapshot_id = Some(snapshot.to_string());
        record.limits = Some(image.limits);
        let settings = SessionSettings {
            limits: image.limits,
            template,
            leakage,
            turns: header.turns,
        };
        self.admit_session(settings, record, move |host, cancel| {
            // The image was checked against this server's bounds, not against the template's
            // shape: a mismatch here is the snapshot's fault.
            host.restore_interpreter(template, image, cancel)
                .map_err(|e| ApiError::SnapshotIncompatible(e.to_string()))
        })
        .await
    }

    /// What the store says of snapshot `id`, if `owner` may see it.
    pub async fn snapshot_info(&self, id: &str, owner: Option<&str>) -> ApiResult<SnapshotInfo> {
        self.snapshots.info(id, owner).await
    }

    /// Every snapshot `owner` may see.
    pub async fn list_snapshots(&self, owner: Option<&str>) -> ApiResult<Vec<SnapshotInfo>> {
        self.snapshots.list(owner).await
    }

    /// Deletes snapshot `id`, if `owner` may see it.
    pub async fn delete_snapshot(&self, id: &str, owner: Option<&str>) -> ApiResult<()> {
        self.snapshots.delete(id, owner).await
    }
}
