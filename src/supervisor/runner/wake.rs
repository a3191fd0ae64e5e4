//! Bringing a session back from its own snapshot on its next request (after it hibernated,
//! a restart, or on another node of a cluster), and ending it once when that snapshot can
//! never be restored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Runner;
use super::capture::binding;
use crate::leakage::LeakPolicy;
use crate::snapshot::SnapshotId;
use crate::supervisor::audit::{Action, AuditRecord};
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::metrics::{CloseReason, SessionEvent};
use crate::supervisor::session::{Session, SessionSettings, may_use};
use crate::supervisor::time::now_secs;

impl Runner {
    /// Brings session `id` back from its own snapshot ([`Runner::session`]'s work, for one
    /// request at a time per id), for `key`, which must be its owner.
    /// `own` is the snapshot that is its state (with `--cluster`, the one its lease names).
    #[tracing::instrument(name = "session.wake", skip_all, fields(session = id))]
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
        let now = now_secs();
        let (age, _, left) = self.sessions.stored_ages(&rec, header.created_at, now);
        if left.is_zero() {
            self.forget_own_snapshot(id);
            return Err(SupervisorError::SessionExpired(id.to_string()));
        }
        let rec_deadline = rec.deadline_at;
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
            labels: rec.labels,
            // Its image says what it mounts (`admit_image`).
            volumes: Vec::new(),
            // What it kept of its turns stayed with the interpreter it had: it keeps from
            // here, as much as the server's default.
            history: self.turn_history,
        };
        // Kept while it hibernated; after a restart (or on another node), its snapshot's.
        let deadline = self.sessions.hibernated_deadline(id).or_else(|| {
            rec_deadline.map(|at| Instant::now() + Duration::from_secs(at.saturating_sub(now)))
        });
        let mut record = AuditRecord::internal(Action::SessionRestore).session(id);
        let session = match self.admit_image(settings, image, &mut record).await {
            Ok(s) => s,
            Err(e) => return Err(self.unrestorable(id, &own, e).await),
        };
        if let Some(at) = deadline {
            session.set_deadline_at(at);
        }
        if let Some(usage) = self.sessions.hibernated_usage(id) {
            session.set_usage(usage);
        }
        if self.sessions.unhibernate(id) {
            tracing::debug!(session = %id, "hibernated session woke");
            self.metrics.woke(started.elapsed().as_secs_f64());
        } else {
            tracing::info!(session = %id, turns = header.turns, "session brought back from its snapshot");
            self.metrics.session_event(SessionEvent::Resume);
        }
        self.lifecycle_event(
            &session,
            crate::supervisor::events::EventKind::SessionResumed,
        );
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
}
