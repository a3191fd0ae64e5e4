//! Sessions as data at the runner: snapshot a session into the store, fork it into a new
//! live session, restore a session from a snapshot; a session's own snapshot (durable
//! sessions after every turn, every session at shutdown) and bringing a session back from it
//! on its next request; and the snapshots' listing and deletion.
//!
//! Capturing holds the session busy (409 while a turn runs) while its worker captures it;
//! encoding and decoding (hashing, zstd) run on a blocking thread, never on the executor. A
//! restored or forked session is admitted like a new one (the session cap, its memory).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::Runner;
use super::turns::{Placing, call_held, failed};
use super::{failure, out_of_turn};
use crate::leakage::LeakPolicy;
use crate::snapshot::{Binding, Provenance, SessionImage, SessionRecord, SnapshotId, encode};
use crate::supervisor::admission::{MemoryNeed, MemoryReservation};
use crate::supervisor::audit::{Action, AuditRecord};
use crate::supervisor::cluster::{Cluster, Holder, Seen};
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::metrics::{CloseReason, Rejection, SessionEvent};
use crate::supervisor::registry::NoPlace;
use crate::supervisor::session::{
    Busy, PutBack, Session, SessionSettings, SessionSlot, is_session_id, may_use,
};
use crate::supervisor::snapshots::{SnapshotInfo, Snapshots};
use crate::supervisor::tenants::{Quota, Tenant};
use crate::template::Template;
use crate::vivarium::Vivarium;
use crate::worker::{Failure, Job, PackageRef, Reply, Sinks};

/// How long shutdown waits for a session's running turn to hand its interpreter back
/// (turns are cancelled by then, and a cancelled turn rolls back at once).
const DRAIN_WAIT: Duration = Duration::from_secs(5);

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn binding(host: &Vivarium, template: Template) -> SupervisorResult<Binding> {
    host.binding(template)
        .map_err(|e| SupervisorError::Internal(e.to_string()))
}

/// Reads the state of the session `busy` holds, in its worker; the use comes back with the
/// image, or with why there is none (a worker lost meanwhile has ended the session, and the
/// use with it).
async fn capture(
    runner: &Runner,
    busy: Busy,
) -> SupervisorResult<(Busy, SupervisorResult<SessionImage>)> {
    let job = Job::Capture {
        handle: busy.placed().handle,
    };
    let (busy, done) = call_held(busy, job, Sinks::default()).await?;
    match done {
        Ok(Reply::Image(image)) => Ok((busy, checked_image(runner, *image))),
        Ok(_) => Ok((busy, Err(out_of_turn()))),
        Err(f @ Failure::Lost) => Err(failed(busy, f)),
        Err(f) => {
            let error = failure(f, &busy.session().id);
            Ok((busy, Err(error)))
        }
    }
}

/// An image a worker sent, held to this server's bounds before anything uses it (a worker
/// is as hostile as its guest once compromised).
fn checked_image(runner: &Runner, image: SessionImage) -> SupervisorResult<SessionImage> {
    let max = runner.maximum;
    let pages_ok = image.page_data.len() == image.pages.len() * crate::snapshot::PAGE_BYTES
        && image.pages.windows(2).all(|w| w[0] < w[1])
        && image.pages.last().is_none_or(|p| {
            (*p as u64 + 1) * crate::snapshot::PAGE_BYTES as u64 <= image.memory_bytes
        });
    if !pages_ok
        || image.memory_bytes > crate::limits::linear_memory_bound(max.memory_bytes)
        || image.file_bytes() > max.disk_bytes
    {
        return Err(SupervisorError::Internal(
            "a worker sent a session image out of bounds".into(),
        ));
    }
    Ok(image)
}

/// The record a session's own snapshot carries.
fn record_of(session: &Session) -> SessionRecord {
    SessionRecord {
        id: session.id.clone(),
        durable: session.durable,
        leakage: session.leakage.as_str().to_string(),
        age_secs: session.age().as_secs(),
        idle_secs: session.idle_for().as_secs(),
    }
}

impl Runner {
    /// Snapshots session `id` into the store, owned by `owner` (the API key's id, which
    /// must own the session).
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
        let turns = session.info().turns;
        let image = self.session_image(&session).await?;
        let bytes = tokio::task::spawn_blocking(move || {
            encode(
                &image,
                &Provenance {
                    binding,
                    created_at: now_secs(),
                    owner,
                    turns,
                    session: None,
                },
            )
        })
        .await
        .map_err(|e| SupervisorError::Internal(e.to_string()))?;
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
        let settings = SessionSettings {
            limits: session.limits,
            template: session.template,
            leakage: session.leakage,
            turns: session.info().turns,
            durable: session.durable,
            resumed: None,
            owner: session.owner.clone(),
            // A fork is its source's owner's, with the same network.
            network: session.network.clone(),
        };
        let forked = if session.durable {
            // Its first own snapshot needs the image here anyway.
            let image = self.session_image(&session).await?;
            self.admit_restored(settings, image, record).await?
        } else {
            // Made in the source's worker: the image does not cross the channel twice.
            let busy = self.begin(&session).await?;
            let source = busy.session().clone();
            let packages = busy.placed().packages.clone();
            let job = Job::Fork {
                handle: busy.placed().handle,
                packages: PackageRef::of(&packages),
            };
            self.admit_session(
                settings,
                record,
                Some(source.footprint()),
                Placing::Beside(busy, job),
                packages,
            )
            .await?
            .0
        };
        self.metrics.session_event(SessionEvent::Fork);
        Ok(forked)
    }

    /// A new session from snapshot `snapshot`, which `owner` must own (and owns the
    /// session); `leakage` and `durable` as for opening one (the snapshot keeps its limits
    /// and template).
    pub async fn restore_session(
        &self,
        snapshot: &str,
        owner: Option<&str>,
        leakage: Option<LeakPolicy>,
        durable: bool,
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
            // A snapshot carries no network: a restored session has none.
            network: None,
        };
        let restored = self.admit_restored(settings, image, record).await?;
        self.metrics.session_event(SessionEvent::Restore);
        Ok(restored)
    }

    /// Session `session`'s state now, read in its worker (409 while a turn runs).
    async fn session_image(&self, session: &Arc<Session>) -> SupervisorResult<SessionImage> {
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
    async fn admit_image(
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
        let job = Job::Restore {
            template: settings.template,
            image: Box::new(image),
            packages: PackageRef::of(&packages),
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

    /// Brings session `id` back from its own snapshot ([`Runner::session`]'s work, for one
    /// request at a time per id), for `key`, which must be its owner.
    /// `own` is the snapshot that is its state (with `--cluster`, the one its lease names).
    pub(super) async fn bring_back(
        &self,
        id: &str,
        key: Option<&str>,
        own: SnapshotId,
    ) -> SupervisorResult<Arc<Session>> {
        let started = Instant::now();
        let host = self.host()?;
        let loaded = self
            .snapshots
            .load_own(&own, id, self.maximum, |t| binding(&host, t))
            .await;
        let (template, header, image) = match loaded {
            Ok(v) => v,
            Err(SupervisorError::SnapshotNotFound(_)) => {
                return Err(SupervisorError::SessionNotFound(id.to_string()));
            }
            Err(e) => return Err(self.unrestorable(id, &own, e).await),
        };
        let Some(rec) = header.session else {
            return Err(SupervisorError::SessionNotFound(id.to_string()));
        };
        // Checked before (`check_owner`), and again on the verified header.
        if !may_use(header.owner.as_deref(), key) {
            return Err(SupervisorError::SessionNotFound(id.to_string()));
        }
        // Its age and idle time go on from when the snapshot was written.
        let since = Duration::from_secs(now_secs().saturating_sub(header.created_at));
        let age = Duration::from_secs(rec.age_secs) + since;
        let idle = Duration::from_secs(rec.idle_secs) + since;
        if age >= self.sessions.lifetime || idle >= self.sessions.idle {
            self.forget_own_snapshot(id);
            return Err(SupervisorError::SessionExpired(id.to_string()));
        }
        let leakage = <LeakPolicy as clap::ValueEnum>::from_str(&rec.leakage, false)
            .map_err(|_| SupervisorError::SnapshotInvalid("the session's leakage policy".into()))?;
        let settings = SessionSettings {
            limits: image.limits,
            template,
            leakage: self.leak_policy(Some(leakage))?,
            turns: header.turns,
            durable: rec.durable,
            resumed: Some((id.to_string(), age)),
            owner: header.owner.clone(),
            // Kept while it hibernated; after a restart (or on another node) it has none.
            network: self.sessions.hibernated_network(id),
        };
        let deadline = self.sessions.hibernated_deadline(id);
        let mut record = AuditRecord::internal(Action::SessionRestore).session(id);
        let session = match self.admit_image(settings, image, &mut record).await {
            Ok(s) => s,
            Err(e) => return Err(self.unrestorable(id, &own, e).await),
        };
        if let Some(at) = deadline {
            session.set_deadline_at(at);
        }
        if self.sessions.unhibernate(id) {
            tracing::debug!(session = %id, "hibernated session woke");
            self.metrics.woke(started.elapsed().as_secs_f64());
        } else {
            tracing::info!(session = %id, turns = header.turns, "session brought back from its snapshot");
            self.metrics.session_event(SessionEvent::Resume);
        }
        self.finish(record, crate::supervisor::audit::Outcome::Ok(201));
        Ok(session)
    }

    /// `e`, from bringing session `id` back; when it says its own snapshot can never be
    /// restored (damaged, out of bounds, not of this server's build), the session ends here,
    /// once, with why: its snapshot (`own`) is deleted before the answer, so no later
    /// request decodes it again.
    async fn unrestorable(
        &self,
        id: &str,
        own: &SnapshotId,
        e: SupervisorError,
    ) -> SupervisorError {
        if !matches!(
            e,
            SupervisorError::SnapshotInvalid(_) | SupervisorError::SnapshotIncompatible(_)
        ) {
            return e;
        }
        tracing::warn!(session = %id, error = %e, "a session's own snapshot cannot be restored; the session ends");
        self.sessions.unhibernate(id);
        let _ = self.snapshots.delete_own(own).await;
        self.forget_own_snapshot(id);
        self.metrics.session_closed(CloseReason::Ended);
        SupervisorError::SessionEnded {
            id: id.to_string(),
            reason: format!("its snapshot cannot be restored: {e}"),
        }
    }

    /// Writes `image` as `session`'s own snapshot: encoded on a blocking thread, stored in
    /// the background, off the response path; with `--cluster`, before the response (a
    /// durable turn answered is a turn another node can bring back), committed through the
    /// session's lease ([`Cluster::commit`]). Writes of one session land in the order they
    /// were taken (an older one finishing late is dropped), and each replaces the previous
    /// in one step, so the store always holds a whole, recent snapshot.
    ///
    /// With `--cluster`, a session whose lease another node took meanwhile (a turn ran here
    /// while the proxy sent the session elsewhere, even during this write) is given up, and
    /// this is an error: what ran here is not the session's state, so it must not be
    /// answered as done (the new node has the state of the last turn committed).
    pub(super) async fn keep_own_snapshot(
        &self,
        session: &Arc<Session>,
        state: SessionImage,
    ) -> SupervisorResult<()> {
        let Some(host) = self.loaded_host().cloned() else {
            return Ok(());
        };
        let taken = session.next_own_generation();
        let turns = session.info().turns;
        let Some(c) = self.cluster.clone() else {
            let (snapshots, s) = (self.snapshots.clone(), session.clone());
            tokio::spawn(async move {
                if let Err(e) =
                    write_own(&host, &snapshots, None, &s, state, turns, taken, false).await
                {
                    tracing::warn!(session = %s.id, error = %e, "could not store the session's snapshot");
                }
            });
            return Ok(());
        };
        let written = write_own(
            &host,
            &self.snapshots,
            Some(&c),
            session,
            state,
            turns,
            taken,
            false,
        );
        match written.await {
            Ok(_) => Ok(()),
            Err(e @ SupervisorError::SessionNotFound(_)) => {
                self.give_up(session, &Holder::Nobody);
                Err(e)
            }
            Err(SupervisorError::SessionElsewhere { node, .. }) => {
                self.give_up(session, &Holder::Live(node.clone()));
                Err(SupervisorError::SessionMoving {
                    id: session.id.clone(),
                    why: format!(
                        "node {node} took it over while this ran here, so what ran here was not kept"
                    ),
                })
            }
            // The lease was released, or changed while the snapshot was written: the write
            // is nobody's state, so neither is this copy.
            Err(e @ SupervisorError::SessionMoving { .. }) => {
                self.give_up(session, &Holder::Released);
                Err(e)
            }
            Err(e) => {
                // A store error: the state is still here, and the lease is this node's: the
                // turn stands.
                tracing::warn!(session = %session.id, error = %e, "could not store the session's snapshot");
                Ok(())
            }
        }
    }

    /// Removes session `id`'s own snapshot (it was closed or expired), in the background.
    /// With `--cluster`, only while this node holds its lease (another node may have taken
    /// the session over: its snapshot is that node's now), and the lease goes too.
    pub(super) fn forget_own_snapshot(&self, id: &str) {
        tokio::spawn(self.forgetting_own_snapshot(id));
    }

    /// [`Runner::forget_own_snapshot`], waited for: where an answer must not leave before the
    /// snapshot is gone (a close, whose 204 is the session's end; a hibernation that lost to
    /// a close), since a session not live here comes back from its own snapshot on its next
    /// request. A task of its own, so a caller that goes away does not stop it halfway.
    pub(super) async fn forget_own_snapshot_before_answering(&self, id: &str) {
        let _ = tokio::spawn(self.forgetting_own_snapshot(id)).await;
    }

    fn forgetting_own_snapshot(
        &self,
        id: &str,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let snapshots = self.snapshots.clone();
        let own = SnapshotId::for_session(id);
        let cluster = self.cluster.clone();
        let id = id.to_string();
        async move {
            if let Some(c) = cluster {
                let Ok(seen) = c.seen(&id).await else {
                    return;
                };
                if !matches!(seen.holder, Holder::Me | Holder::Nobody) {
                    return;
                }
                let _ = c.forget(&id, &seen).await;
                if let Some(committed) = seen.lease.map(|l| l.own_snapshot()) {
                    let _ = snapshots.delete_own(&committed).await;
                }
            }
            let _ = snapshots.delete_own(&own).await;
        }
    }

    /// Whether the store holds session `id`'s own snapshot (a session not live here): with
    /// `--cluster`, the one its lease names, starting from `seen` when the caller has just
    /// read it. (A commit replaces that object and removes the one before: when the named
    /// one is gone, the lease is read again, in case it moved on.)
    pub(super) async fn has_own_snapshot(&self, id: &str, mut seen: Option<Seen>) -> bool {
        if !is_session_id(id) {
            return false;
        }
        let Some(c) = &self.cluster else {
            return self
                .snapshots
                .exists(&SnapshotId::for_session(id))
                .await
                .unwrap_or(false);
        };
        let mut named = None;
        for _ in 0..4 {
            let seen = match seen.take() {
                Some(s) => s,
                None => match c.seen(id).await {
                    Ok(s) => s,
                    Err(_) => return false,
                },
            };
            let own = seen
                .lease
                .map_or_else(|| SnapshotId::for_session(id), |l| l.own_snapshot());
            if named.as_ref() == Some(&own) {
                return false;
            }
            if self.snapshots.exists(&own).await.unwrap_or(false) {
                return true;
            }
            named = Some(own);
        }
        false
    }

    /// Shutdown: every live session's state goes to the store as its own snapshot (a turn
    /// still running was cancelled, so it rolls back and hands its interpreter over), then
    /// the session is closed. On the next start each comes back on its first request.
    pub(in crate::supervisor) async fn close_all_sessions(&self) {
        let _one = self.draining.lock().await;
        let host = self.loaded_host().cloned();
        for s in self.sessions.drain() {
            let until = Instant::now() + DRAIN_WAIT;
            while s.is_busy() && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            if let Some(host) = &host
                && let Err(e) = self.keep_on_shutdown(host, &s).await
            {
                tracing::warn!(session = %s.id, error = %e, "session not kept over the restart");
            }
            self.metrics.session_closed(CloseReason::Shutdown);
            let remains = s.close();
            let _ = tokio::task::spawn_blocking(move || drop(remains)).await;
        }
    }

    /// Hibernates every session idle past `after` (the sweeper, every tick).
    pub(in crate::supervisor) async fn hibernate_idle(&self, after: Duration) {
        for s in self.sessions.coldest(after) {
            if !self.sessions.has_room_to_hibernate() {
                break;
            }
            if let Err(e) = self.hibernate_one(&s).await {
                tracing::debug!(session = %s.id, error = %e, "session not hibernated");
            }
        }
    }

    /// Resident places kept free by [`Runner::relieve_pressure`]: a sixteenth of the cap.
    fn spare_places(&self) -> usize {
        (self.sessions.max_sessions / 16).max(1)
    }

    /// Asks the sweeper to hibernate the coldest sessions when fewer than
    /// [`Runner::spare_places`] resident places are left.
    pub(super) fn note_pressure(&self) {
        let left = self
            .sessions
            .max_sessions
            .saturating_sub(self.sessions.open_count());
        if left < self.spare_places() {
            self.pressure.notify_one();
        }
    }

    /// Resolves when [`Runner::note_pressure`] asked for relief.
    pub(in crate::supervisor) async fn pressed(&self) {
        self.pressure.notified().await
    }

    /// Hibernates idle sessions (idle at least a second; the tenant holding the most
    /// resident places first, its coldest first) until [`Runner::spare_places`] resident
    /// places are free, or none is left to hibernate. A session that cannot go (busy, its
    /// tenant's hibernated quota full, a store error) is passed over, not the end of it.
    pub(in crate::supervisor) async fn relieve_pressure(&self) {
        let spare = self.spare_places();
        let short = || {
            self.sessions
                .max_sessions
                .saturating_sub(self.sessions.open_count())
                < spare
        };
        if !short() {
            return;
        }
        for s in self.sessions.coldest(Duration::from_secs(1)) {
            if !short() || !self.sessions.has_room_to_hibernate() {
                return;
            }
            if let Err(e) = self.hibernate_one(&s).await {
                tracing::debug!(session = %s.id, error = %e, "session not hibernated");
            }
        }
    }

    /// Makes room for `bytes` in the memory budget and, with `resident`, for one more
    /// resident session (a place under `--max-sessions`), by hibernating the coldest idle
    /// sessions, as few as it takes. Whether there is room now.
    pub(super) async fn make_room(&self, bytes: u64, resident: bool) -> bool {
        let fits = || {
            (!resident || self.sessions.open_count() < self.sessions.max_sessions)
                && self.admission.budget().available() >= bytes
        };
        if fits() {
            return true;
        }
        for s in self.sessions.coldest(Duration::ZERO) {
            if !self.sessions.has_room_to_hibernate() {
                break;
            }
            match self.hibernate_one(&s).await {
                Ok(()) if fits() => return true,
                Ok(()) => {}
                Err(e) => {
                    tracing::debug!(session = %s.id, error = %e, "session not hibernated");
                }
            }
        }
        fits()
    }

    /// A resident place for a session of `tenant`: under the server's cap and the tenant's
    /// own. When the tenant holds all of its own, its own coldest idle session hibernates
    /// (never another tenant's); when the server's are taken, [`Runner::make_room`]'s
    /// choice does (the tenant holding the most first). Each candidate that cannot move is
    /// passed over, not the end of the search.
    pub(super) async fn resident_place(
        &self,
        tenant: &Arc<Tenant>,
    ) -> SupervisorResult<SessionSlot> {
        let mut tried = 0;
        loop {
            match self.sessions.reserve_slot(tenant) {
                Ok(slot) => return Ok(slot),
                Err(NoPlace::Quota(q)) => {
                    if !self.hibernate_own(tenant).await {
                        return Err(self.admission.refuse(q));
                    }
                }
                Err(NoPlace::Full) => {
                    if !self.make_room(0, true).await {
                        return Err(self.admission.reject(Rejection::TooManySessions));
                    }
                }
            }
            // Another request may take the place just freed; a few tries, then refuse.
            tried += 1;
            if tried >= 4 {
                return Err(self.admission.reject(Rejection::TooManySessions));
            }
        }
    }

    /// A new session's reserve in the memory budget and in `tenant`'s share of it: when the
    /// share is full, the tenant's own coldest idle session hibernates (never another
    /// tenant's), as for its resident places.
    pub(super) async fn session_memory(
        &self,
        tenant: &Arc<Tenant>,
        need: MemoryNeed,
    ) -> SupervisorResult<MemoryReservation> {
        self.within_memory_share(tenant, || async {
            self.admission.reserve_memory(tenant, need)
        })
        .await
    }

    /// `attempt`, tried again (a few times) after each of `tenant`'s own coldest idle
    /// sessions that hibernates while `attempt` finds the tenant's memory share full; that
    /// refusal when none can.
    pub(super) async fn within_memory_share<T, F>(
        &self,
        tenant: &Arc<Tenant>,
        mut attempt: impl FnMut() -> F,
    ) -> SupervisorResult<T>
    where
        F: std::future::Future<Output = SupervisorResult<T>>,
    {
        for _ in 0..4 {
            match attempt().await {
                Err(SupervisorError::QuotaExceeded(q))
                    if q.quota == Quota::MemoryBytes && !q.too_large() =>
                {
                    if !self.hibernate_own(tenant).await {
                        return Err(SupervisorError::QuotaExceeded(q));
                    }
                }
                done => return done,
            }
        }
        attempt().await
    }

    /// Hibernates `tenant`'s own coldest idle session that can go; whether one went.
    async fn hibernate_own(&self, tenant: &Arc<Tenant>) -> bool {
        for s in self.sessions.coldest_of(Duration::ZERO, Some(tenant)) {
            if self.hibernate_one(&s).await.is_ok() {
                return true;
            }
        }
        false
    }

    /// Hibernates session `id` now, at its caller's asking (E2B's pause): its next use
    /// brings it back, as after any hibernation.
    pub async fn pause_session(&self, id: &str, key: Option<&str>) -> SupervisorResult<()> {
        let session = self.session(id, key).await?;
        self.hibernate_one(&session).await
    }

    /// Writes `s`'s own snapshot and frees its instance, holding it busy throughout (a
    /// request meanwhile gets 409; once it is gone, a request brings it back). Its id,
    /// expiry and limits stay; `GET /v1/sessions/{id}` says `resident: false`.
    async fn hibernate_one(&self, s: &Arc<Session>) -> SupervisorResult<()> {
        let host = self.host()?;
        let place = s
            .tenant
            .take(Quota::HibernatedSessions, 1)
            .map_err(SupervisorError::from)?;
        let busy = s.begin()?;
        let (busy, image) = capture(self, busy).await?;
        let written = match image {
            Ok(image) => self.write_own_now(&host, s, image).await,
            Err(e) => Err(e),
        };
        let bytes = match written {
            Ok(b) => b,
            Err(SupervisorError::SessionElsewhere { id, node }) => {
                // Another node took it over: this copy goes, unwritten.
                busy.finish(PutBack::Same);
                self.give_up(s, &Holder::Live(node.clone()));
                return Err(SupervisorError::SessionElsewhere { id, node });
            }
            Err(SupervisorError::SessionNotFound(id)) if self.cluster.is_some() => {
                // Another node closed it: this copy goes too.
                busy.finish(PutBack::Same);
                self.give_up(s, &Holder::Nobody);
                return Err(SupervisorError::SessionNotFound(id));
            }
            Err(e) => {
                busy.finish(PutBack::Same);
                return Err(e);
            }
        };
        let moved = self.sessions.hibernate(busy, bytes, place);
        let remains = match moved {
            Ok(remains) => remains,
            Err(remains) => {
                // Closed (or ended) while its snapshot was written: it stays so, and the
                // snapshot just written must not bring it back.
                remains.release();
                self.forget_own_snapshot_before_answering(&s.id).await;
                return Err(SupervisorError::SessionNotFound(s.id.clone()));
            }
        };
        self.metrics.session_event(SessionEvent::Hibernate);
        // Its instance and reserve go here, off the executor.
        let _ = tokio::task::spawn_blocking(move || drop(remains)).await;
        Ok(())
    }

    async fn keep_on_shutdown(
        &self,
        host: &Arc<Vivarium>,
        s: &Arc<Session>,
    ) -> SupervisorResult<()> {
        let busy = s.begin()?;
        let (busy, image) = capture(self, busy).await?;
        busy.finish(PutBack::Same);
        self.write_own_now(host, s, image?).await.map(drop)
    }

    /// Stores `image` as `s`'s own snapshot now, as its newest generation, and, with
    /// `--cluster`, lets its lease go in the same commit (hibernation, the drain: any node
    /// may take it from here); the bytes written.
    async fn write_own_now(
        &self,
        host: &Vivarium,
        s: &Arc<Session>,
        image: SessionImage,
    ) -> SupervisorResult<u64> {
        let taken = s.next_own_generation();
        let turns = s.info().turns;
        let cluster = self.cluster.as_deref();
        write_own(host, &self.snapshots, cluster, s, image, turns, taken, true).await
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

/// Encodes and stores `session`'s own snapshot number `taken`, unless a newer one is
/// already stored; the bytes written.
///
/// Without a cluster, under the name derived from the session's id, replacing the last.
/// With one (`cluster`), as a new object that becomes the session's state only through
/// [`Cluster::commit`] on the lease read here, under the session's write lock (so its own
/// writes never race each other's commits): a lease this node no longer holds is the error
/// that says why (`session_elsewhere`, `session_moving`, `session_not_found` when it was
/// closed), and the object is removed. `release` lets the lease go in the same commit.
#[allow(clippy::too_many_arguments)]
async fn write_own(
    host: &Vivarium,
    snapshots: &Snapshots,
    cluster: Option<&Cluster>,
    session: &Arc<Session>,
    state: SessionImage,
    turns: u64,
    taken: u64,
    release: bool,
) -> SupervisorResult<u64> {
    let mut written = session.durable_written.lock().await;
    if taken <= *written {
        return Ok(0);
    }
    let provenance = Provenance {
        binding: binding(host, session.template)?,
        created_at: now_secs(),
        owner: session.owner.clone(),
        turns,
        session: Some(record_of(session)),
    };
    let bytes = tokio::task::spawn_blocking(move || encode(&state, &provenance))
        .await
        .map_err(|e| SupervisorError::Internal(e.to_string()))?;
    let size = bytes.len() as u64;
    let Some(c) = cluster else {
        snapshots
            .put_at(
                &SnapshotId::for_session(&session.id),
                bytes,
                &session.tenant,
            )
            .await?;
        *written = taken;
        return Ok(size);
    };
    let seen = c.seen(&session.id).await?;
    not_mine(&session.id, &seen.holder)?;
    let object = SnapshotId::random();
    snapshots.put_at(&object, bytes, &session.tenant).await?;
    debug_commit_delay().await;
    if !c.commit(&session.id, &seen, &object, release).await? {
        let _ = snapshots.delete_own(&object).await;
        let now = c.seen(&session.id).await?;
        not_mine(&session.id, &now.holder)?;
        return Err(SupervisorError::SessionMoving {
            id: session.id.clone(),
            why: "its lease changed while its snapshot was written".into(),
        });
    }
    // The object the lease named before is nobody's state now.
    let before = seen.lease.as_ref().map(|l| l.own_snapshot());
    if let Some(before) = before.filter(|b| *b != object) {
        let snapshots = snapshots.clone();
        tokio::spawn(async move {
            let _ = snapshots.delete_own(&before).await;
        });
    }
    *written = taken;
    Ok(size)
}

/// The error for a session whose lease, as read, is not this node's (`Ok` when it is).
fn not_mine(id: &str, holder: &Holder) -> SupervisorResult<()> {
    let id = id.to_string();
    match holder {
        Holder::Me => Ok(()),
        // Its lease is gone: another node closed it.
        Holder::Nobody => Err(SupervisorError::SessionNotFound(id)),
        Holder::Live(node) | Holder::Draining(node) | Holder::Dead(node) => {
            Err(SupervisorError::SessionElsewhere {
                id,
                node: node.clone(),
            })
        }
        Holder::Released => Err(SupervisorError::SessionMoving {
            id,
            why: "it was released to the other nodes".into(),
        }),
    }
}

/// Debug builds only, for the tests of the commit's race: waits
/// `VIVARIUM_DEBUG_COMMIT_DELAY_MS` between writing a session's snapshot and committing it.
async fn debug_commit_delay() {
    #[cfg(debug_assertions)]
    {
        static DELAY: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
        let delay = DELAY.get_or_init(|| {
            std::env::var("VIVARIUM_DEBUG_COMMIT_DELAY_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis)
        });
        if let Some(d) = delay {
            tokio::time::sleep(*d).await;
        }
    }
}

/// What an interpreter restored from `image` starts with: its linear memory and its files
/// (memory too, on tmpfs).
fn starting_bytes(image: &SessionImage) -> u64 {
    let files: u64 = image.files.iter().map(|(_, c)| c.len() as u64).sum();
    image.memory_bytes.saturating_add(files)
}
