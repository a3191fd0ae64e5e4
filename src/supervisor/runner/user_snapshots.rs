//! A session as data the caller keeps: snapshot a session into the store, fork it into a
//! new live session, restore a session from a snapshot, and the snapshots' listing and
//! deletion. A restored or forked session is admitted like a new one (the session cap, its
//! memory).

use std::sync::Arc;

use super::Runner;
use super::capture::{binding, capture, encode_now, starting_bytes};
use super::turns::Placing;
use crate::leakage::LeakPolicy;
use crate::snapshot::SessionImage;
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::metrics::SessionEvent;
use crate::supervisor::session::{PutBack, Session, SessionSettings};
use crate::supervisor::snapshots::SnapshotInfo;
use crate::worker::{Job, PackageRef};

impl Runner {
    /// Snapshots session `id` into the store, owned by `owner` (the API key's id, which
    /// must own the session).
    #[tracing::instrument(name = "snapshot.write", skip_all, fields(session = id))]
    pub async fn snapshot_session(
        &self,
        id: &str,
        owner: Option<String>,
        record: &mut AuditRecord,
    ) -> SupervisorResult<SnapshotInfo> {
        let host = self.host()?;
        let session = self.session(id, owner.as_deref()).await?;
        let template = session.template;
        let binding = binding(&host, template)?;
        let turns = session.turns();
        let image = self.session_image(&session).await?;
        let bytes = encode_now(image, binding, owner, turns, None).await?;
        let info = self.snapshots.put(bytes, &session.tenant).await?;
        record.snapshot_id = Some(info.snapshot_id.clone());
        self.metrics.session_event(SessionEvent::Snapshot);
        Ok(info)
    }

    /// A new live session with session `id`'s state (for `key`, its owner, who owns the
    /// fork too), without going through the store; the two diverge from here.
    pub async fn fork_session(
        &self,
        id: &str,
        key: Option<&str>,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Arc<Session>> {
        let session = self.session(id, key).await?;
        self.fork_one(&session, None, record).await
    }

    /// One fork of `session`: of its state now (`turn: None`) or of its kept state `turn`.
    pub(super) async fn fork_one(
        &self,
        session: &Arc<Session>,
        turn: Option<u64>,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Arc<Session>> {
        let settings = SessionSettings {
            limits: session.limits,
            template: session.template,
            leakage: session.leakage,
            turns: turn.unwrap_or_else(|| session.turns()),
            durable: session.durable,
            resumed: None,
            owner: session.owner.clone(),
            // A fork is its source's owner's, with the same network.
            network: session.network.clone(),
            // And its labels, but not its contexts: those stay the source's.
            labels: crate::snapshot::Labels {
                contexts: Vec::new(),
                ..session.labels()
            },
            volumes: session.volumes.clone(),
            history: session.history,
        };
        let forked = if session.durable && turn.is_none() {
            // Its first own snapshot needs the image here anyway.
            let image = self.session_image(session).await?;
            self.admit_restored(settings, image, record).await?
        } else {
            // Made in the source's worker: the image does not cross the channel twice.
            let busy = self.begin(session).await?;
            let source = busy.session().clone();
            let packages = busy.placed().packages.clone();
            let job = Job::Fork {
                handle: busy.placed().handle,
                packages: PackageRef::of(&packages),
                volumes: Vec::new(),
                turn,
                current: source.turns(),
            };
            let forked = self
                .admit_session(
                    settings,
                    record,
                    Some(source.footprint()),
                    Placing::Beside(busy, job),
                    packages,
                )
                .await?
                .0;
            if forked.durable {
                // Its first own snapshot, of the state it was made from.
                let image = self.session_image(&forked).await?;
                self.keep_own_snapshot(&forked, image).await?;
            }
            forked
        };
        self.metrics.session_event(SessionEvent::Fork);
        Ok(forked)
    }

    /// A new session from snapshot `snapshot`, which `owner` must own (and owns the
    /// session); `leakage`, `durable` and `history` as for opening one (the snapshot keeps
    /// its limits and template).
    #[tracing::instrument(name = "snapshot.restore", skip_all, fields(snapshot = snapshot))]
    pub async fn restore_session(
        &self,
        snapshot: &str,
        owner: Option<&str>,
        leakage: Option<LeakPolicy>,
        durable: bool,
        history: crate::vocabulary::TurnHistory,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Arc<Session>> {
        let host = self.host()?;
        let leakage = self.leak_policy(leakage)?;
        let (template, header, image) = self
            .snapshots
            .load(snapshot, owner, self.maximum, |t| binding(&host, t))
            .await?;
        record.snapshot_id = Some(snapshot.to_string());
        record.limits = Some(image.limits);
        let settings = SessionSettings {
            limits: image.limits,
            template,
            leakage,
            turns: header.turns,
            durable,
            resumed: None,
            owner: owner.map(str::to_string),
            // A snapshot carries no network: a restored session has none; nor labels.
            network: None,
            labels: Default::default(),
            // Its image says what it mounts (`admit_image`).
            volumes: Vec::new(),
            history,
        };
        let restored = self.admit_restored(settings, image, record).await?;
        self.metrics.session_event(SessionEvent::Restore);
        Ok(restored)
    }

    /// Session `session`'s state now, read in its worker (409 while a turn runs).
    pub(super) async fn session_image(
        &self,
        session: &Arc<Session>,
    ) -> SupervisorResult<SessionImage> {
        let busy = self.begin(session).await?;
        let (busy, image) = capture(self, busy).await?;
        busy.finish(PutBack::Same);
        image
    }

    /// Admits a session made from `image`; a durable one gets its first own snapshot.
    async fn admit_restored(
        &self,
        settings: SessionSettings,
        image: SessionImage,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Arc<Session>> {
        let durable = settings.durable;
        let first = durable.then(|| image.clone());
        let session = self.admit_image(settings, image, record).await?;
        if let Some(image) = first {
            self.keep_own_snapshot(&session, image).await?;
        }
        Ok(session)
    }

    /// Admits a session made from `image` (checked against this server's bounds, not
    /// against the template's shape: a mismatch is the snapshot's fault) in a worker; its
    /// packages are found here first (the cache, or the index), never in the worker.
    pub(super) async fn admit_image(
        &self,
        settings: SessionSettings,
        image: SessionImage,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Arc<Session>> {
        let host = self.host()?;
        let pins = image.packages.clone();
        let packages = tokio::task::spawn_blocking(move || host.pinned_packages(&pins))
            .await
            .map_err(|e| SupervisorError::Internal(format!("package resolution: {e}")))?
            .map_err(SupervisorError::Package)?;
        let starts = starting_bytes(&image);
        let mut settings = settings;
        settings.volumes = image.volumes.clone();
        let job = Job::Restore {
            template: settings.template,
            image: Box::new(image),
            packages: PackageRef::of(&packages),
            volumes: Vec::new(),
        };
        let (session, _) = self
            .admit_session(
                settings,
                record,
                Some(starts),
                Placing::Anywhere(job),
                packages,
            )
            .await?;
        Ok(session)
    }

    /// What the store says of snapshot `id`, if `owner` may see it.
    pub async fn snapshot_info(
        &self,
        id: &str,
        owner: Option<&str>,
    ) -> SupervisorResult<SnapshotInfo> {
        self.snapshots.info(id, owner).await
    }

    /// Every snapshot `owner` may see.
    pub async fn list_snapshots(&self, owner: Option<&str>) -> SupervisorResult<Vec<SnapshotInfo>> {
        self.snapshots.list(owner).await
    }

    /// Deletes snapshot `id`, if `owner` may see it.
    pub async fn delete_snapshot(&self, id: &str, owner: Option<&str>) -> SupervisorResult<()> {
        self.snapshots.delete(id, owner).await
    }
}
