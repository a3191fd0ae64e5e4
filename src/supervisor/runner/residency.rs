//! Residency: which sessions hold memory here. Hibernating idle sessions and the coldest
//! under pressure, room made for a new run or session, each tenant's memory share, a
//! caller's pause (E2B's), and the drain at shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Runner;
use super::capture::capture;
use crate::supervisor::admission::{MemoryNeed, MemoryReservation};
use crate::supervisor::cluster::Holder;
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::metrics::{CloseReason, Rejection, SessionEvent};
use crate::supervisor::registry::NoPlace;
use crate::supervisor::session::{PutBack, Session, SessionSlot};
use crate::supervisor::tenants::{Quota, Tenant};

/// How long shutdown waits for a session's running turn to hand its interpreter back
/// (turns are cancelled by then, and a cancelled turn rolls back at once).
const DRAIN_WAIT: Duration = Duration::from_secs(5);

impl Runner {
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
    #[tracing::instrument(name = "session.hibernate", skip_all, fields(session = %s.id))]
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
        self.lifecycle_event(s, crate::supervisor::events::EventKind::SessionHibernated);
        // Its instance and reserve go here, off the executor.
        let _ = tokio::task::spawn_blocking(move || drop(remains)).await;
        Ok(())
    }
}
