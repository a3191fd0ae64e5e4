//! The server's snapshots: a [`SnapshotStore`] (a directory by default), who may see each
//! snapshot (the API key that made it), and how what a store returns is judged before any of
//! it is used (`snapshot::decode`; here the binding and the owner).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use utoipa::ToSchema;

use super::error::{SupervisorError, SupervisorResult};
use super::tenants::{Quota, Tenant};
use super::time::rfc3339;
use crate::limits::Limits;
use crate::snapshot::{
    Binding, FormatError, SessionImage, SessionRecord, SnapshotHeader, SnapshotId, SnapshotStore,
    StoreError, decode, header_span, peek_header,
};
use crate::template::Template;

/// What `POST /v1/sessions/{id}/snapshot` and `GET /v1/snapshots/{id}` say of a snapshot.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SnapshotInfo {
    /// Its id (`snap-` and 24 hex digits).
    #[schema(example = "snap-0a1b2c3d4e5f60718293a4b5")]
    pub snapshot_id: String,
    /// Its size in the store: the memory that differs from the template's, the files, the
    /// header, compressed.
    pub size_bytes: u64,
    /// When it was taken.
    pub created_at: String,
    /// The template it restores on.
    pub template: Template,
    /// The session's turns when it was taken.
    pub turns: u64,
}

/// The snapshot store, as the server uses it.
#[derive(Clone)]
pub struct Snapshots {
    store: Arc<dyn SnapshotStore>,
    /// How long a snapshot is kept.
    retention: Duration,
    /// What each stored object counts against its tenant's `snapshot_bytes` quota: every
    /// snapshot, hibernated session and durable session's own this node wrote or found at
    /// start. Reserved before a write (so concurrent writes cannot pass the quota
    /// together), given back when the object goes.
    ledger: Arc<std::sync::Mutex<Ledger>>,
    /// Decodes running at once: each holds a whole session's state in host memory before
    /// admission has charged it, so they are few.
    decoding: Arc<tokio::sync::Semaphore>,
}

/// The tenant of a snapshot's owner (a key id; `None`: keys off).
pub type TenantOf<'a> = dyn Fn(Option<&str>) -> Arc<Tenant> + Sync + 'a;

/// Each stored object's tenant and bytes (see `Snapshots::ledger`).
type Ledger = std::collections::HashMap<SnapshotId, (Arc<Tenant>, u64)>;

/// Snapshots decoded at once (see `Snapshots::decoding`).
const MAX_DECODES: usize = 2;

impl From<StoreError> for SupervisorError {
    /// The store's own words (paths, endpoints, its client's errors) go to the log, not to
    /// the caller.
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, "snapshot store failed");
        SupervisorError::SnapshotStore(
            "the snapshot store is unavailable; nothing was lost, try again".into(),
        )
    }
}

impl From<FormatError> for SupervisorError {
    fn from(e: FormatError) -> Self {
        match e {
            FormatError::Foreign => SupervisorError::SnapshotIncompatible(e.to_string()),
            other => SupervisorError::SnapshotInvalid(other.to_string()),
        }
    }
}

/// The snapshot's info, from its header (its size is the header's sum of parts).
fn info(id: &SnapshotId, h: &SnapshotHeader, header_len: usize) -> SupervisorResult<SnapshotInfo> {
    Ok(SnapshotInfo {
        snapshot_id: id.to_string(),
        size_bytes: header_len as u64 + h.body_bytes + 32,
        created_at: rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(h.created_at)),
        template: template_of(h)?,
        turns: h.turns,
    })
}

fn template_of(h: &SnapshotHeader) -> SupervisorResult<Template> {
    h.binding.template.parse().map_err(|_| {
        SupervisorError::SnapshotIncompatible(format!(
            "the snapshot's template {:?} is not one this server has",
            h.binding.template
        ))
    })
}

/// An id from a request: anything that is not one is simply not found.
fn parse_id(id: &str) -> SupervisorResult<SnapshotId> {
    SnapshotId::parse(id)
        .ok_or_else(|| SupervisorError::SnapshotNotFound(id.chars().take(64).collect()))
}

impl Snapshots {
    /// Snapshots kept in `store` for `retention`.
    pub fn new(store: Arc<dyn SnapshotStore>, retention: Duration) -> Self {
        Snapshots {
            store,
            retention,
            ledger: Default::default(),
            decoding: Arc::new(tokio::sync::Semaphore::new(MAX_DECODES)),
        }
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        crate::sync::lock(&self.ledger)
    }

    /// Counts object `id` (its header `header`, `span` long), found in the store, against
    /// `tenant`, whatever the quota (it is there); once.
    fn count_found(
        &self,
        id: SnapshotId,
        header: &SnapshotHeader,
        span: usize,
        tenant: Arc<Tenant>,
    ) {
        let size = span as u64 + header.body_bytes + 32;
        let mut ledger = self.ledger();
        if ledger.contains_key(&id) {
            return;
        }
        tenant.add_anyway(Quota::SnapshotBytes, size);
        ledger.insert(id, (tenant, size));
    }

    /// Reserves `bytes` of `tenant`'s quota for object `id` (replacing what `id` holds now,
    /// so a rewrite of a session's own snapshot asks only for its growth); what to call
    /// [`Snapshots::settle`] or [`Snapshots::unreserve`] with.
    fn reserve(&self, id: &SnapshotId, tenant: &Arc<Tenant>, bytes: u64) -> SupervisorResult<u64> {
        let ledger = self.ledger();
        let before = match ledger.get(id) {
            Some((t, b)) if Arc::ptr_eq(t, tenant) => *b,
            _ => 0,
        };
        if bytes > before {
            tenant
                .add(Quota::SnapshotBytes, bytes - before)
                .map_err(SupervisorError::from)?;
        }
        Ok(before)
    }

    /// After the write of `bytes` for `id` that [`Snapshots::reserve`] made room for.
    fn settle(&self, id: &SnapshotId, tenant: &Arc<Tenant>, bytes: u64, before: u64) {
        let mut ledger = self.ledger();
        if before > bytes {
            tenant.give_back(Quota::SnapshotBytes, before - bytes);
        }
        if let Some((old, b)) = ledger.insert(id.clone(), (tenant.clone(), bytes))
            && !Arc::ptr_eq(&old, tenant)
        {
            old.give_back(Quota::SnapshotBytes, b);
        }
    }

    /// After a failed write: gives back what [`Snapshots::reserve`] took.
    fn unreserve(&self, tenant: &Arc<Tenant>, bytes: u64, before: u64) {
        if bytes > before {
            tenant.give_back(Quota::SnapshotBytes, bytes - before);
        }
    }

    /// Object `id` is gone from the store: its bytes come back to its tenant.
    fn forget(&self, id: &SnapshotId) {
        if let Some((tenant, b)) = self.ledger().remove(id) {
            tenant.give_back(Quota::SnapshotBytes, b);
        }
    }

    /// Stores `bytes` under `id` for `tenant`, within its quota (reserved before the write).
    async fn put_counted(
        &self,
        id: &SnapshotId,
        bytes: Vec<u8>,
        tenant: &Arc<Tenant>,
    ) -> SupervisorResult<()> {
        let len = bytes.len() as u64;
        let before = self.reserve(id, tenant, len)?;
        match self.store.put(id, bytes).await {
            Ok(()) => {
                self.settle(id, tenant, len, before);
                Ok(())
            }
            Err(e) => {
                self.unreserve(tenant, len, before);
                Err(e.into())
            }
        }
    }

    /// Stores an encoded snapshot under a new id, within its tenant's quota (everything the
    /// tenant keeps in the store, plus this one, reserved before the write).
    pub async fn put(
        &self,
        bytes: Vec<u8>,
        tenant: &Arc<Tenant>,
    ) -> SupervisorResult<SnapshotInfo> {
        let id = SnapshotId::random();
        let span = header_span(&bytes)?;
        let header = peek_header(&bytes)?;
        let info = info(&id, &header, span)?;
        self.put_counted(&id, bytes, tenant).await?;
        Ok(info)
    }

    /// Deletes every snapshot older than the retention (sessions' own ones too: a session
    /// that is still live writes its own again at its next turn or at shutdown). With
    /// `count` (once, at start), counts each one that stays against its owner's tenant
    /// (`count` of the owner), in the same pass over the headers. Returns how many went, and
    /// the ids whose first bytes are no snapshot's (code mode's journals among them: the
    /// executions' sweep reads those, and the store is listed once).
    pub async fn sweep(
        &self,
        count: Option<&TenantOf<'_>>,
    ) -> SupervisorResult<(usize, Vec<SnapshotId>)> {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut gone = 0;
        let mut others = Vec::new();
        for id in self.store.list().await? {
            let (header, span) = match self.peek(&id).await {
                Ok(Some(found)) => found,
                Ok(None) | Err(SupervisorError::SnapshotStore(_)) => continue,
                Err(_) => {
                    others.push(id);
                    continue;
                }
            };
            if now.saturating_sub(header.created_at) > self.retention.as_secs() {
                if self.store.delete(&id).await? {
                    self.forget(&id);
                    gone += 1;
                }
            } else if let Some(tenant_of) = count {
                self.count_found(id, &header, span, tenant_of(header.owner.as_deref()));
            }
        }
        Ok((gone, others))
    }

    /// The header of snapshot `id` if `owner` may see it, else 404 (another key's snapshot
    /// is not there, as far as this caller can tell). The header is read unverified: it
    /// serves listing and the owner check only; [`Snapshots::load`] verifies everything.
    async fn header(
        &self,
        id: &SnapshotId,
        owner: Option<&str>,
    ) -> SupervisorResult<(SnapshotHeader, usize)> {
        let not_found = || SupervisorError::SnapshotNotFound(id.to_string());
        let (header, span) = self.peek(id).await?.ok_or_else(not_found)?;
        // A session's own snapshot is not the caller's to see by id.
        if header.owner.as_deref() != owner || header.session.is_some() {
            return Err(not_found());
        }
        Ok((header, span))
    }

    /// Snapshot `id`'s header, unverified, and its length; `None` when there is none.
    async fn peek(&self, id: &SnapshotId) -> SupervisorResult<Option<(SnapshotHeader, usize)>> {
        let Some(prefix) = self.store.get_prefix(id, 12).await? else {
            return Ok(None);
        };
        let span = header_span(&prefix)?;
        let Some(prefix) = self.store.get_prefix(id, span).await? else {
            return Ok(None);
        };
        Ok(Some((peek_header(&prefix)?, span)))
    }

    /// The owner a session's own snapshot `id` names (read from its header, unverified:
    /// [`Snapshots::load_own`] checks it again); `None` when there is no such snapshot, or
    /// none this server can read (loading it says why).
    pub async fn own_owner(&self, id: &SnapshotId) -> SupervisorResult<Option<Option<String>>> {
        match self.peek(id).await {
            Ok(Some((header, _))) if header.session.is_some() => Ok(Some(header.owner)),
            Ok(_) => Ok(None),
            Err(SupervisorError::SnapshotStore(m)) => Err(SupervisorError::SnapshotStore(m)),
            Err(_) => Ok(None),
        }
    }

    /// The session record of a session's own snapshot `id` (read from its header,
    /// unverified, its labels within their bounds); `None` when there is none to read.
    pub async fn own_record(&self, id: &SnapshotId) -> Option<SessionRecord> {
        let (header, _) = self.peek(id).await.ok()??;
        header.session.filter(|r| r.labels.check().is_ok())
    }

    /// What `GET /v1/snapshots/{id}` says.
    pub async fn info(&self, id: &str, owner: Option<&str>) -> SupervisorResult<SnapshotInfo> {
        let id = parse_id(id)?;
        let (header, span) = self.header(&id, owner).await?;
        info(&id, &header, span)
    }

    /// Every snapshot `owner` may see, oldest first. Snapshots this server cannot read
    /// (damaged, another format) are left out of the list.
    pub async fn list(&self, owner: Option<&str>) -> SupervisorResult<Vec<SnapshotInfo>> {
        let mut out = Vec::new();
        for id in self.store.list().await? {
            match self.header(&id, owner).await {
                Ok((header, span)) => {
                    if let Ok(i) = info(&id, &header, span) {
                        out.push(i);
                    }
                }
                Err(SupervisorError::SnapshotStore(m)) => {
                    return Err(SupervisorError::SnapshotStore(m));
                }
                Err(_) => {}
            }
        }
        out.sort_by(|a, b| (&a.created_at, &a.snapshot_id).cmp(&(&b.created_at, &b.snapshot_id)));
        Ok(out)
    }

    /// The headers of the sessions' own snapshots `owner` has in the store (the newest of
    /// each session, read unverified: they serve listing only; bringing one back verifies
    /// it), with the template each is of. Those this server cannot read, or whose labels
    /// are out of bounds, are left out.
    pub async fn own_sessions(
        &self,
        owner: Option<&str>,
    ) -> SupervisorResult<Vec<(SnapshotHeader, SessionRecord, Template)>> {
        let mut newest: HashMap<String, (SnapshotHeader, SessionRecord, Template)> = HashMap::new();
        for id in self.store.list().await? {
            let header = match self.peek(&id).await {
                Ok(Some((header, _))) => header,
                Err(SupervisorError::SnapshotStore(m)) => {
                    return Err(SupervisorError::SnapshotStore(m));
                }
                Ok(None) | Err(_) => continue,
            };
            if header.owner.as_deref() != owner {
                continue;
            }
            let Some(record) = header.session.clone() else {
                continue;
            };
            let Ok(template) = template_of(&header) else {
                continue;
            };
            if record.labels.check().is_err() {
                continue;
            }
            let older = newest
                .get(&record.id)
                .is_some_and(|(h, _, _)| h.created_at > header.created_at);
            if !older {
                newest.insert(record.id.clone(), (header, record, template));
            }
        }
        Ok(newest.into_values().collect())
    }

    /// Deletes snapshot `id` if `owner` may see it.
    pub async fn delete(&self, id: &str, owner: Option<&str>) -> SupervisorResult<()> {
        let id = parse_id(id)?;
        self.header(&id, owner).await?;
        if !self.store.delete(&id).await? {
            return Err(SupervisorError::SnapshotNotFound(id.to_string()));
        }
        self.forget(&id);
        Ok(())
    }

    /// Loads snapshot `id` for `owner` and checks all of it: the hash, every header field and
    /// size within `max`, the owner, and the binding (`binding_of` gives this server's for
    /// the snapshot's template). Decoding runs off the executor.
    pub async fn load(
        &self,
        id: &str,
        owner: Option<&str>,
        max: Limits,
        binding_of: impl FnOnce(Template) -> SupervisorResult<Binding>,
    ) -> SupervisorResult<(Template, SnapshotHeader, SessionImage)> {
        let id = parse_id(id)?;
        let not_found = || SupervisorError::SnapshotNotFound(id.to_string());
        let (header, image) = self.fetch(&id, max).await?;
        if header.owner.as_deref() != owner || header.session.is_some() {
            return Err(not_found());
        }
        check_binding(&id, &header, binding_of)?;
        let template = template_of(&header)?;
        Ok((template, header, image))
    }

    /// Loads session `session_id`'s own snapshot `id` and checks all of it, as
    /// [`Snapshots::load`] does, and that it is that session's.
    pub async fn load_own(
        &self,
        id: &SnapshotId,
        session_id: &str,
        max: Limits,
        binding_of: impl FnOnce(Template) -> SupervisorResult<Binding>,
    ) -> SupervisorResult<(Template, SnapshotHeader, SessionImage)> {
        let not_found = || SupervisorError::SnapshotNotFound(id.to_string());
        let (header, image) = self.fetch(id, max).await?;
        if header.session.as_ref().map(|r| r.id.as_str()) != Some(session_id) {
            return Err(not_found());
        }
        check_binding(id, &header, binding_of)?;
        let template = template_of(&header)?;
        Ok((template, header, image))
    }

    /// Reads snapshot `id` and decodes it within `max` (off the executor): every check of
    /// `snapshot::decode`, nothing of ours yet.
    async fn fetch(
        &self,
        id: &SnapshotId,
        max: Limits,
    ) -> SupervisorResult<(SnapshotHeader, SessionImage)> {
        let _decoding = self
            .decoding
            .acquire()
            .await
            .map_err(|e| SupervisorError::Internal(e.to_string()))?;
        let bytes = self
            .store
            .get(id)
            .await?
            .ok_or_else(|| SupervisorError::SnapshotNotFound(id.to_string()))?;
        Ok(tokio::task::spawn_blocking(move || decode(&bytes, &max))
            .await
            .map_err(|e| SupervisorError::Internal(format!("decoding a snapshot: {e}")))??)
    }

    /// Stores a session's own snapshot (or a code-mode journal) under its id, replacing the
    /// previous one, within `tenant`'s quota (only its growth is asked for).
    pub async fn put_at(
        &self,
        id: &SnapshotId,
        bytes: Vec<u8>,
        tenant: &Arc<Tenant>,
    ) -> SupervisorResult<()> {
        self.put_counted(id, bytes, tenant).await
    }

    /// Removes a session's own snapshot (or a code-mode journal), if there is one; its bytes
    /// come back to its tenant.
    pub async fn delete_own(&self, id: &SnapshotId) -> SupervisorResult<bool> {
        let gone = self.store.delete(id).await?;
        self.forget(id);
        Ok(gone)
    }

    /// The store itself, to read what is no snapshot (code mode's journals); writes and
    /// deletions go through [`Snapshots::put_at`] and [`Snapshots::delete_own`], which count.
    pub(in crate::supervisor) fn store(&self) -> &Arc<dyn SnapshotStore> {
        &self.store
    }

    /// Whether the store holds anything under `id`.
    pub async fn exists(&self, id: &SnapshotId) -> SupervisorResult<bool> {
        Ok(self.store.get_prefix(id, 1).await?.is_some())
    }
}

/// The first characters of a key, for a message (the snapshot's may be anything).
fn short(key: &str) -> String {
    key.chars().take(12).collect()
}

/// The snapshot's binding against this server's for its template: 409 when another template
/// build or runtime took it.
fn check_binding(
    id: &SnapshotId,
    header: &SnapshotHeader,
    binding_of: impl FnOnce(Template) -> SupervisorResult<Binding>,
) -> SupervisorResult<()> {
    let template = template_of(header)?;
    let ours = binding_of(template)?;
    {
        if header.binding != ours {
            let what = if header.binding.runtime_sha256 != ours.runtime_sha256 {
                "another guest runtime"
            } else {
                "another build of the template"
            };
            return Err(SupervisorError::SnapshotIncompatible(format!(
                "snapshot {id} was taken on {what} ({} template key {}…, this server has {}…); \
                 it cannot be restored here",
                header.binding.template,
                short(&header.binding.template_key),
                short(&ours.template_key),
            )));
        }
        Ok(())
    }
}
