//! The session registry: live sessions by id (each a [`Session`], its life in
//! `session/phase.rs`), hibernated ones (asleep in the store: what is known of them without
//! waking them), the caps on how many of each there may be, and expiry. A session is closed
//! when it was idle for `session_idle`, or, when its caller set a deadline
//! ([`Session::set_deadline`]; `deadline_at` in its stored record), at that deadline, used
//! or idle; never later than `session_lifetime` after it opened. An expired id answers 410
//! for a while after, an id never seen (or deleted) 404.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::error::SupervisorError;
use super::session::{
    Busy, EndInfo, Remains, Session, SessionInfo, SessionMetrics, SessionSlot, SessionState, Usage,
};
use super::tenants::{Held, Quota, QuotaExceeded, Tenant};
use super::time::rfc3339;
use crate::sync::lock;

/// How long an expired id keeps answering 410 rather than 404.
const TOMBSTONE_TTL: Duration = Duration::from_secs(24 * 3600);
const MAX_TOMBSTONES: usize = 100_000;

/// Where [`Registry::take_out`] found a session.
pub enum Removed {
    /// Resident: close it.
    Live(Arc<Session>),
    /// Hibernated: its place under its tenant's quota went with it; its snapshot is the
    /// caller's to delete.
    Hibernated,
}

/// A session written to the snapshot store and freed: what is known of it without waking it.
struct Hibernated {
    /// Its info as it went to sleep (`resident: false`).
    info: SessionInfo,
    /// Its [`Session::owner`].
    owner: Option<String>,
    /// When it expires if nobody wakes it (idle or lifetime, whichever is first).
    expires: Instant,
    /// Bytes of its snapshot in the store.
    bytes: u64,
    /// Its [`Session::network`], given back when it wakes.
    network: Option<Arc<crate::egress::Grant>>,
    /// Its [`Session::set_deadline`], given back when it wakes.
    deadline: Option<Instant>,
    /// Its [`Session::labels`] (its snapshot has them too; here for listing).
    labels: crate::snapshot::Labels,
    /// Its [`Session::usage`], given back when it wakes.
    usage: Usage,
    /// Its limits, for its metrics.
    limits: crate::limits::Limits,
    /// Its place under its tenant's `hibernated_sessions` quota.
    _place: Held,
}

/// A hibernated session the sweep found expired: its id and [`Session::owner`].
pub type Slept = (String, Option<String>);

/// Why no resident place was had.
#[derive(Debug)]
pub enum NoPlace {
    /// Every place under `--max-sessions` is taken.
    Full,
    /// The tenant holds all of its own.
    Quota(QuotaExceeded),
}

pub struct Registry {
    live: Mutex<HashMap<String, Arc<Session>>>,
    hibernated: Mutex<HashMap<String, Hibernated>>,
    /// Expired sessions: when, and whose.
    gone: Mutex<HashMap<String, (Instant, Option<String>)>>,
    open: Arc<AtomicUsize>,
    /// Resident sessions at most.
    pub max_sessions: usize,
    /// Hibernated sessions at most.
    pub max_hibernated: usize,
    pub idle: Duration,
    pub lifetime: Duration,
}

impl Registry {
    pub fn new(
        max_sessions: usize,
        max_hibernated: usize,
        idle: Duration,
        lifetime: Duration,
    ) -> Self {
        Registry {
            live: Mutex::new(HashMap::new()),
            hibernated: Mutex::new(HashMap::new()),
            gone: Mutex::new(HashMap::new()),
            open: Arc::new(AtomicUsize::new(0)),
            max_sessions,
            max_hibernated,
            idle,
            lifetime,
        }
    }

    fn hibernated(&self) -> std::sync::MutexGuard<'_, HashMap<String, Hibernated>> {
        lock(&self.hibernated)
    }

    /// Resident sessions, hibernated ones and the bytes their snapshots take, now: read
    /// together ([`Registry::hibernate`] moves a session under the same lock).
    pub fn counts(&self) -> (usize, usize, u64) {
        let h = self.hibernated();
        (
            self.open_count(),
            h.len(),
            h.values().map(|h| h.bytes).sum(),
        )
    }

    /// Whether one more session may hibernate.
    pub fn has_room_to_hibernate(&self) -> bool {
        self.hibernated().len() < self.max_hibernated
    }

    /// Moves the session `busy` holds (its own snapshot of `bytes` is in the store) from
    /// the live sessions to the hibernated ones, holding `place` under its tenant's quota of
    /// hibernated sessions; its id stays good. What it held is the caller's to release.
    /// `Err` when it was closed or ended while its snapshot was written: it stays as it is.
    pub fn hibernate(&self, busy: Busy, bytes: u64, place: Held) -> Result<Remains, Remains> {
        let s = busy.session().clone();
        let expires = s.expires();
        let mut info = s.info();
        info.resident = false;
        // Taken while the hibernation held it busy; asleep, it runs nothing.
        info.state = SessionState::Idle;
        // Both maps at once (live first, as everywhere), so no lookup sees it in neither;
        // its place under the resident cap goes at the same moment.
        let mut live = self.live();
        let mut hibernated = self.hibernated();
        let remains = busy.retire()?;
        live.remove(&s.id);
        hibernated.insert(
            s.id.clone(),
            Hibernated {
                info,
                owner: s.owner.clone(),
                expires,
                bytes,
                network: s.network.clone(),
                deadline: s.deadline(),
                labels: s.labels(),
                usage: s.usage(),
                limits: s.limits,
                _place: place,
            },
        );
        Ok(remains)
    }

    /// The network of hibernated session `id`, to give it back as it wakes.
    pub fn hibernated_network(&self, id: &str) -> Option<Arc<crate::egress::Grant>> {
        self.hibernated().get(id)?.network.clone()
    }

    /// The info and labels of hibernated session `id`, without waking it (its expiry as the
    /// registry keeps it).
    pub fn hibernated_labelled(&self, id: &str) -> Option<(SessionInfo, crate::snapshot::Labels)> {
        let h = self.hibernated();
        let s = h.get(id)?;
        let mut info = s.info.clone();
        info.expires_at =
            rfc3339(SystemTime::now() + s.expires.saturating_duration_since(Instant::now()));
        Some((info, s.labels.clone()))
    }

    /// The usage of hibernated session `id`, to give it back as it wakes.
    pub fn hibernated_usage(&self, id: &str) -> Option<Usage> {
        Some(self.hibernated().get(id)?.usage.clone())
    }

    /// The metrics of hibernated session `id`, without waking it.
    pub fn hibernated_metrics(&self, id: &str) -> Option<SessionMetrics> {
        let h = self.hibernated();
        let s = h.get(id)?;
        Some(s.usage.metrics(
            id,
            s.info.turns,
            s.limits.memory_bytes,
            s.limits.disk_bytes,
            SystemTime::now(),
        ))
    }

    /// The deadline of hibernated session `id` ([`Session::set_deadline`]), to give it back
    /// as it wakes.
    pub fn hibernated_deadline(&self, id: &str) -> Option<Instant> {
        self.hibernated().get(id)?.deadline
    }

    /// The owner of session `id` if this process knows it (live, hibernated or expired
    /// here); `None`: it knows no such session.
    pub fn owner_of(&self, id: &str) -> Option<Option<String>> {
        if let Some(s) = self.live().get(id) {
            return Some(s.owner.clone());
        }
        if let Some(h) = self.hibernated().get(id) {
            return Some(h.owner.clone());
        }
        self.gone().get(id).map(|(_, owner)| owner.clone())
    }

    /// The ages of a session whose own snapshot, written at `written` (Unix seconds), holds
    /// `record`, now (`now`): (age, idle time, time left). Its ages go on from when the
    /// snapshot was written; it has left the least of its lifetime and its caller's deadline,
    /// or, without one, its idle time; zero when it expired meanwhile.
    pub fn stored_ages(
        &self,
        record: &crate::snapshot::SessionRecord,
        written: u64,
        now: u64,
    ) -> (Duration, Duration, Duration) {
        let since = now.saturating_sub(written);
        let age = record.age_secs.saturating_add(since);
        let idle = record.idle_secs.saturating_add(since);
        // A caller's deadline holds it to then, used or idle (`Session::set_deadline`).
        let until_end = match record.deadline_at {
            Some(at) => at.saturating_sub(now),
            None => self.idle.as_secs().saturating_sub(idle),
        };
        let left = self.lifetime.as_secs().saturating_sub(age).min(until_end);
        (
            Duration::from_secs(age),
            Duration::from_secs(idle),
            Duration::from_secs(left),
        )
    }

    /// The info of every session `key` owns, resident or hibernated, by id.
    pub fn infos(&self, key: Option<&str>) -> Vec<SessionInfo> {
        self.labelled(key)
            .into_iter()
            .map(|(info, _)| info)
            .collect()
    }

    /// [`Registry::infos`] with each session's labels.
    pub fn labelled(&self, key: Option<&str>) -> Vec<(SessionInfo, crate::snapshot::Labels)> {
        let mut out: Vec<_> = self
            .live()
            .values()
            .filter(|s| s.owner.as_deref() == key)
            .map(|s| (s.info(), s.labels()))
            .collect();
        out.extend(
            self.hibernated()
                .values()
                .filter(|h| h.owner.as_deref() == key)
                .map(|h| (h.info.clone(), h.labels.clone())),
        );
        out.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        out
    }

    /// Whether `id` is hibernated here.
    pub fn is_hibernated(&self, id: &str) -> bool {
        self.hibernated().contains_key(id)
    }

    /// Forgets hibernated session `id` (it woke, or was closed); whether it was one.
    pub fn unhibernate(&self, id: &str) -> bool {
        self.hibernated().remove(id).is_some()
    }

    /// Resident sessions that may hibernate (settled, not ended), idle for at least `idle`:
    /// those of the tenant holding the most resident places first (relief takes from the
    /// tenant over its share before any other), each tenant's coldest first.
    pub fn coldest(&self, idle: Duration) -> Vec<Arc<Session>> {
        self.coldest_of(idle, None)
    }

    /// [`Registry::coldest`], of `tenant`'s sessions only when it is given.
    pub fn coldest_of(&self, idle: Duration, tenant: Option<&Arc<Tenant>>) -> Vec<Arc<Session>> {
        let mut v: Vec<(u64, Duration, Arc<Session>)> = self
            .live()
            .values()
            .filter(|s| tenant.is_none_or(|t| Arc::ptr_eq(t, &s.tenant)))
            .filter(|s| s.is_idle())
            .map(|s| {
                (
                    s.tenant.used(Quota::ResidentSessions),
                    s.idle_for(),
                    s.clone(),
                )
            })
            .filter(|(_, d, _)| *d >= idle)
            .collect();
        v.sort_by_key(|(held, idle, _)| (std::cmp::Reverse(*held), std::cmp::Reverse(*idle)));
        v.into_iter().map(|(_, _, s)| s).collect()
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        lock(&self.live)
    }

    fn gone(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Option<String>)>> {
        lock(&self.gone)
    }

    /// Sessions open and not ended (what the cap counts).
    pub fn open_count(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Takes a place under the cap, and under `tenant`'s own, for a session about to open.
    pub fn reserve_slot(&self, tenant: &Arc<Tenant>) -> Result<SessionSlot, NoPlace> {
        let held = tenant
            .take(Quota::ResidentSessions, 1)
            .map_err(NoPlace::Quota)?;
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_sessions).then_some(n + 1)
            })
            .map_err(|_| NoPlace::Full)?;
        Ok(SessionSlot::taken(self.open.clone(), held))
    }

    pub fn insert(&self, s: Arc<Session>) {
        self.live().insert(s.id.clone(), s);
    }

    pub fn get(&self, id: &str) -> Result<Arc<Session>, SupervisorError> {
        if let Some(s) = self.live().get(id) {
            return Ok(s.clone());
        }
        if self.gone().contains_key(id) {
            return Err(SupervisorError::SessionExpired(id.to_string()));
        }
        Err(SupervisorError::SessionNotFound(id.to_string()))
    }

    /// Takes session `id` out of the live or the hibernated ones, under both locks (live
    /// first, as everywhere), so a hibernation moving it from one to the other at the same
    /// moment cannot slip past (a close then left it hibernated); what was there is the
    /// caller's to close. `SessionExpired` when it expired here.
    pub fn take_out(&self, id: &str) -> Result<Removed, SupervisorError> {
        {
            let mut live = self.live();
            let mut hibernated = self.hibernated();
            if let Some(s) = live.remove(id) {
                return Ok(Removed::Live(s));
            }
            if hibernated.remove(id).is_some() {
                return Ok(Removed::Hibernated);
            }
        }
        if self.gone().contains_key(id) {
            return Err(SupervisorError::SessionExpired(id.to_string()));
        }
        Err(SupervisorError::SessionNotFound(id.to_string()))
    }

    pub fn remove(&self, id: &str) -> Result<Arc<Session>, SupervisorError> {
        if let Some(s) = self.live().remove(id) {
            return Ok(s);
        }
        if self.gone().contains_key(id) {
            return Err(SupervisorError::SessionExpired(id.to_string()));
        }
        Err(SupervisorError::SessionNotFound(id.to_string()))
    }

    /// Removes every expired session, remembering its id, and returns them to be closed,
    /// with the ids of the hibernated ones that expired (their snapshots to be deleted).
    pub fn sweep(&self) -> (Vec<Arc<Session>>, Vec<Slept>) {
        let now = Instant::now();
        let slept: Vec<(String, Option<String>)> = {
            let mut h = self.hibernated();
            let ids: Vec<String> = h
                .iter()
                .filter(|(_, s)| now >= s.expires)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| h.remove(&id).map(|s| (id, s.owner)))
                .collect()
        };
        let expired: Vec<Arc<Session>> = {
            let mut live = self.live();
            let ids: Vec<String> = live
                .values()
                .filter(|s| s.expired(now))
                .map(|s| s.id.clone())
                .collect();
            ids.iter().filter_map(|id| live.remove(id)).collect()
        };
        let mut gone = self.gone();
        gone.retain(|_, (at, _)| now.duration_since(*at) < TOMBSTONE_TTL);
        if gone.len() + expired.len() + slept.len() > MAX_TOMBSTONES {
            gone.clear();
        }
        for s in &expired {
            gone.insert(s.id.clone(), (now, s.owner.clone()));
        }
        for (id, owner) in &slept {
            gone.insert(id.clone(), (now, owner.clone()));
        }
        (expired, slept)
    }

    /// Removes every session (shutdown).
    pub fn drain(&self) -> Vec<Arc<Session>> {
        self.live().drain().map(|(_, s)| s).collect()
    }

    /// The sessions whose interpreters lived on worker link `link` (it died): durable ones
    /// leave the registry (their next request brings them back from their own snapshot),
    /// the others end with `worker_lost`. Returns `(ended, durable)`.
    pub fn lost_with(&self, link: u64, cause: &str) -> (Vec<Remains>, Vec<Arc<Session>>) {
        let mut live = self.live();
        let on_it: Vec<String> = live
            .iter()
            .filter(|(_, s)| s.target.link_id() == link)
            .map(|(id, _)| id.clone())
            .collect();
        let (mut ended, mut durable) = (Vec::new(), Vec::new());
        for id in on_it {
            let Some(s) = live.get(&id).cloned() else {
                continue;
            };
            if s.durable {
                live.remove(&id);
                ended.push(s.close());
                durable.push(s);
            } else {
                ended.push(s.end(EndInfo::worker_lost(cause)));
            }
        }
        (ended, durable)
    }

    /// How often to look for expired sessions.
    pub fn sweep_interval(&self) -> Duration {
        (self.idle.min(self.lifetime) / 10).clamp(Duration::from_millis(50), Duration::from_secs(5))
    }
}
