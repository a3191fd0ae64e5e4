//! The session registry: live sessions (each a kept-alive [`Interpreter`], like a notebook
//! kernel), the cap on how many may be open, and expiry. A session is closed when it was
//! idle for `session_idle`, or `session_lifetime` after it opened; an expired id answers 410
//! for a while after, an id never seen (or deleted) 404.
//!
//! The interpreter is taken out of its session for the length of a turn (it runs on a guest
//! thread) and put back after, unless the turn ended it (`exit()`, `os._exit`, a trap or a
//! limit that leaves its state untrustworthy) or the session was closed meanwhile.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use utoipa::ToSchema;

use super::admission::MemoryReservation;
use super::error::SupervisorError;
use super::tenants::{Held, Quota, QuotaExceeded, Tenant};
use super::time::rfc3339;
use crate::leakage::LeakPolicy;
use crate::limits::Limits;
use crate::report::Status;
use crate::sandbox::EndReason;
use crate::sync::lock;
use crate::template::Template;
use crate::worker::{Handle, Placed, Target};

/// How long an expired id keeps answering 410 rather than 404.
const TOMBSTONE_TTL: Duration = Duration::from_secs(24 * 3600);
const MAX_TOMBSTONES: usize = 100_000;

/// Why a session ended, as `EndInfo.reason` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndKind {
    /// The code called `exit()` or `quit()`.
    Quit,
    /// The code called `os._exit(n)`.
    Exit,
    /// A limit or trap stopped the instance mid-turn.
    Stopped,
    /// The host lost the interpreter (a panic on its guest thread).
    HostError,
    /// The worker process that held it died.
    WorkerLost,
}

/// A session's state, as `SessionInfo.state` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Takes turns.
    Idle,
    /// A turn or file operation is running.
    Busy,
    /// Takes no more turns.
    Ended,
}

/// Why a session can take no more turns.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EndInfo {
    /// `quit` (the code called `exit()`/`quit()`), `exit` (`os._exit(n)`), `stopped` (a limit
    /// or trap stopped the instance mid-turn), `host_error`.
    #[schema(example = "quit")]
    pub reason: EndKind,
    /// For `exit`: the status passed to `os._exit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// For `stopped`: the result status of the turn that stopped it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    pub message: String,
    pub ended_at: String,
}

impl EndInfo {
    pub fn from_reason(r: &EndReason) -> Self {
        let (reason, exit_code, status, message) = match r {
            EndReason::Quit => (
                EndKind::Quit,
                None,
                None,
                "the code called exit() or quit()".to_string(),
            ),
            EndReason::Exit(n) => (
                EndKind::Exit,
                Some(*n),
                None,
                format!("the code called os._exit({n})"),
            ),
            EndReason::Stopped(s) => (
                EndKind::Stopped,
                None,
                Some(*s),
                format!(
                    "the instance was stopped mid-turn ({}); its state cannot be trusted",
                    s.as_str()
                ),
            ),
        };
        EndInfo {
            reason,
            exit_code,
            status,
            message,
            ended_at: rfc3339(SystemTime::now()),
        }
    }

    /// The worker process that held the interpreter died: `cause` in words.
    pub fn worker_lost(cause: &str) -> Self {
        EndInfo {
            reason: EndKind::WorkerLost,
            exit_code: None,
            status: None,
            message: format!("the worker process that held it was lost ({cause})"),
            ended_at: rfc3339(SystemTime::now()),
        }
    }

    pub fn host_error(message: String) -> Self {
        EndInfo {
            reason: EndKind::HostError,
            exit_code: None,
            status: Some(Status::Trap),
            message,
            ended_at: rfc3339(SystemTime::now()),
        }
    }
}

/// What `GET /v1/sessions/{id}` says.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionInfo {
    pub id: String,
    pub created_at: String,
    /// When it will expire if left idle (or at the end of its lifetime, if sooner).
    pub expires_at: String,
    pub last_used_at: String,
    /// `idle`, `busy` (a turn is running) or `ended`.
    #[schema(example = "idle")]
    pub state: SessionState,
    /// Turns run so far.
    pub turns: u64,
    pub limits: Limits,
    /// The template its interpreter came from.
    pub template: Template,
    /// Set once the session can take no more turns, with the reason.
    pub ended: Option<EndInfo>,
    /// Whether its interpreter is in memory. `false`: it hibernated (idle, or the coldest
    /// when the server needed room) to the snapshot store, and its next turn or file
    /// operation brings it back, with all its state, before it runs.
    pub resident: bool,
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
    /// Its place under its tenant's `hibernated_sessions` quota.
    _place: Held,
}

/// Counts a session against `max_sessions`, and its tenant's `resident_sessions`, while it
/// is live (not ended, not closed, not hibernated).
pub struct SessionSlot {
    count: Arc<AtomicUsize>,
    tenant: Held,
}

/// Why no resident place was had.
#[derive(Debug)]
pub enum NoPlace {
    /// Every place under `--max-sessions` is taken.
    Full,
    /// The tenant holds all of its own.
    Quota(QuotaExceeded),
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a use of a session's interpreter leaves it with ([`Session::put_back`]).
pub enum PutBack {
    /// The interpreter goes back as it was (a query, a capture, a refused or failed job).
    Same(Placed),
    /// A turn ran: the interpreter goes back and the turn is counted.
    Turned(Placed),
    /// The use ended the interpreter (its worker died, or the turn ended it); `turn`: it was
    /// a turn, counted.
    Ended { end: EndInfo, turn: bool },
    /// The interpreter is gone and nothing says why: the session ends as lost.
    Gone,
}

/// What a closed or ended session lets go of; dropped off the executor (it removes dirs).
pub struct Remains {
    _interp: Option<Placed>,
    _memory: Option<MemoryReservation>,
    _slot: Option<SessionSlot>,
}

impl Remains {
    pub fn is_empty(&self) -> bool {
        self._interp.is_none() && self._memory.is_none() && self._slot.is_none()
    }

    /// Drops on a blocking thread: removing the working directory is file-system work.
    pub fn release(self) {
        if self.is_empty() {
            return;
        }
        tokio::task::spawn_blocking(move || drop(self));
    }
}

struct Inner {
    interp: Option<Placed>,
    memory: Option<MemoryReservation>,
    slot: Option<SessionSlot>,
    last_used: Instant,
    last_used_at: SystemTime,
    ended: Option<EndInfo>,
    closed: bool,
    turns: u64,
}

pub struct Session {
    pub id: String,
    /// Its owner's tenant, whose quotas it counts against.
    pub tenant: Arc<Tenant>,
    /// The id of the API key that opened it: the only key it exists for ([`may_use`]);
    /// every other key is told it is not there (404), as for another key's snapshot. `None`
    /// when it was opened with API keys off: then any key may use it.
    pub owner: Option<String>,
    pub created_at: SystemTime,
    created: Instant,
    pub limits: Limits,
    /// The template its interpreter came from (what its snapshots are bound to).
    pub template: Template,
    /// Every completed turn is snapshotted to the store.
    pub durable: bool,
    /// Orders its own snapshots: bumped per snapshot taken; the store is written only with
    /// a newer one than it holds (`durable_written`), whatever order the writes finish in.
    pub durable_taken: std::sync::atomic::AtomicU64,
    /// The newest generation written to the store.
    pub durable_written: tokio::sync::Mutex<u64>,
    /// The leakage policy of its turns and file reads, unless a turn names its own.
    pub leakage: LeakPolicy,
    idle: Duration,
    lifetime: Duration,
    busy: AtomicBool,
    /// Set to stop a running turn (close, shutdown, an interrupt); the worker is told.
    cancel: Arc<AtomicBool>,
    /// Where its interpreter lives, and its handle there.
    target: Target,
    handle: Handle,
    /// Set with `cancel` by an interrupt, so that the turn's end clears what the interrupt
    /// set (and only that: a close or a shutdown stays).
    interrupted: AtomicBool,
    inner: Mutex<Inner>,
}

/// Held while a turn or a file operation uses the session; a second one gets 409.
pub struct BusyGuard {
    session: Arc<Session>,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.session.busy.store(false, Ordering::Release);
    }
}

/// A new session's id.
fn new_session_id() -> String {
    format!("s-{:032x}", rand::random::<u128>())
}

/// Whether API key `key` may use a session owned by `owner`: its owner, or anyone when it
/// has none (opened without API keys, or by a version before owners: a bearer capability,
/// as it was then). The one place this rule lives.
pub fn may_use(owner: Option<&str>, key: Option<&str>) -> bool {
    owner.is_none() || owner == key
}

/// Whether `id` has the shape of a session id (before anything looks it up elsewhere).
pub fn is_session_id(id: &str) -> bool {
    id.strip_prefix("s-")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// What a new session is, besides its interpreter and what it holds.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    /// Memory and disk for its life; the rest its turns' defaults.
    pub limits: Limits,
    /// The template its interpreter came from.
    pub template: Template,
    /// Its turns' and file reads' leakage policy.
    pub leakage: LeakPolicy,
    /// Turns it has run already (a restored or forked session goes on counting).
    pub turns: u64,
    /// Every completed turn is snapshotted to the store (`"durable": true`).
    pub durable: bool,
    /// The id and age of a session coming back (from its own snapshot, after a restart or
    /// on another node); `None` for a new one.
    pub resumed: Option<(String, Duration)>,
    /// Its [`Session::owner`].
    pub owner: Option<String>,
}

impl Session {
    pub fn new(
        interp: Placed,
        settings: SessionSettings,
        memory: MemoryReservation,
        slot: SessionSlot,
        idle: Duration,
        lifetime: Duration,
    ) -> Arc<Self> {
        let now = SystemTime::now();
        let SessionSettings {
            limits,
            template,
            leakage,
            turns,
            durable,
            resumed,
            owner,
        } = settings;
        let (id, age) = resumed.unwrap_or_else(|| (new_session_id(), Duration::ZERO));
        Arc::new(Session {
            id,
            tenant: slot.tenant.tenant().clone(),
            owner,
            created_at: now - age,
            created: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            limits,
            template,
            durable,
            durable_taken: Default::default(),
            durable_written: Default::default(),
            leakage,
            idle,
            lifetime,
            busy: AtomicBool::new(false),
            cancel: Arc::default(),
            target: interp.target.clone(),
            handle: interp.handle,
            interrupted: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                interp: Some(interp),
                memory: Some(memory),
                slot: Some(slot),
                last_used: Instant::now(),
                last_used_at: now,
                ended: None,
                closed: false,
                turns,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// The generation of an own snapshot taken now (see `durable_taken`).
    pub fn next_own_generation(&self) -> u64 {
        self.durable_taken.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Stops the running turn, if one runs (a notebook's interrupt): it is rolled back and
    /// the session goes on. Returns whether a turn was running.
    pub fn interrupt(&self) -> bool {
        if !self.is_busy() {
            return false;
        }
        self.interrupted.store(true, Ordering::Release);
        self.cancel.store(true, Ordering::Release);
        self.target.interrupt(self.handle);
        true
    }

    /// After a turn: takes back what an interrupt set, so the next turn runs.
    pub fn clear_interrupt(&self) {
        if self.interrupted.swap(false, Ordering::AcqRel) {
            self.cancel.store(false, Ordering::Release);
        }
    }

    /// Marks the session busy, or says why it cannot be used now.
    pub fn begin(self: &Arc<Self>) -> Result<BusyGuard, SupervisorError> {
        self.check_usable()?;
        if self
            .busy
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(SupervisorError::SessionBusy(self.id.clone()));
        }
        let guard = BusyGuard {
            session: self.clone(),
        };
        // It may have ended between the check and the flag.
        self.check_usable()?;
        Ok(guard)
    }

    fn check_usable(&self) -> Result<(), SupervisorError> {
        let inner = self.lock();
        if inner.closed {
            return Err(SupervisorError::SessionNotFound(self.id.clone()));
        }
        if let Some(end) = &inner.ended {
            return Err(SupervisorError::SessionEnded {
                id: self.id.clone(),
                reason: end.message.clone(),
            });
        }
        Ok(())
    }

    /// Takes the interpreter for a turn or a file operation (hold a [`BusyGuard`]).
    pub fn take_interpreter(&self, _busy: &BusyGuard) -> Result<Placed, SupervisorError> {
        let mut inner = self.lock();
        match inner.interp.take() {
            Some(i) => Ok(i),
            None => Err(match &inner.ended {
                Some(end) => SupervisorError::SessionEnded {
                    id: self.id.clone(),
                    reason: end.message.clone(),
                },
                None => SupervisorError::SessionNotFound(self.id.clone()),
            }),
        }
    }

    /// Puts the interpreter back after use, or lets it go when the use ended it or the
    /// session ended or closed meanwhile. Returns what to release.
    pub fn put_back(&self, back: PutBack) -> Remains {
        let (interp, ended, counted_turn) = match back {
            PutBack::Same(p) => (Some(p), None, false),
            PutBack::Turned(p) => (Some(p), None, true),
            PutBack::Ended { end, turn } => (None, Some(end), turn),
            PutBack::Gone => (None, None, false),
        };
        let mut inner = self.lock();
        inner.last_used = Instant::now();
        inner.last_used_at = SystemTime::now();
        if counted_turn {
            inner.turns += 1;
        }
        if inner.ended.is_none() {
            inner.ended = ended;
        }
        if inner.closed || inner.ended.is_some() || interp.is_none() {
            if inner.ended.is_none() && !inner.closed {
                inner.ended = Some(EndInfo::host_error("the interpreter was lost".into()));
            }
            return Remains {
                _interp: interp,
                _memory: inner.memory.take(),
                _slot: inner.slot.take(),
            };
        }
        inner.interp = interp;
        Remains {
            _interp: None,
            _memory: None,
            _slot: None,
        }
    }

    /// Closes the session: cancels a running turn and gives back what it holds (a running
    /// turn's interpreter is dropped when the turn returns it).
    pub fn close(&self) -> Remains {
        self.cancel.store(true, Ordering::Relaxed);
        if self.is_busy() {
            self.target.interrupt(self.handle);
        }
        let mut inner = self.lock();
        inner.closed = true;
        Remains {
            _interp: inner.interp.take(),
            _memory: inner.memory.take(),
            _slot: inner.slot.take(),
        }
    }

    /// Ends the session (its interpreter is gone): it takes no more turns and lets go of
    /// what it holds; it stays in the registry, saying why.
    pub fn end(&self, why: EndInfo) -> Remains {
        let mut inner = self.lock();
        if inner.ended.is_none() {
            inner.ended = Some(why);
        }
        Remains {
            _interp: inner.interp.take(),
            _memory: inner.memory.take(),
            _slot: inner.slot.take(),
        }
    }

    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Whether its interpreter is back in it, ready for a turn (a turn that just finished
    /// on its guest thread puts it back a moment after it lets go of the busy flag).
    pub fn is_settled(&self) -> bool {
        let inner = self.lock();
        inner.ended.is_some() || inner.closed || (inner.interp.is_some() && !self.is_busy())
    }

    /// The idle/lifetime deadline, whichever is first.
    fn expiry(&self, inner: &Inner) -> Instant {
        (inner.last_used + self.idle).min(self.created + self.lifetime)
    }

    /// How long it has been idle (since its last turn or file operation ended).
    pub fn idle_for(&self) -> Duration {
        self.lock().last_used.elapsed()
    }

    /// How long ago it was created (counted across restarts).
    pub fn age(&self) -> Duration {
        self.created.elapsed()
    }

    /// Time left before the end of the session's lifetime.
    pub fn lifetime_left(&self) -> Duration {
        (self.created + self.lifetime).saturating_duration_since(Instant::now())
    }

    fn expired(&self, now: Instant) -> bool {
        let inner = self.lock();
        now >= self.created + self.lifetime || (!self.is_busy() && now >= self.expiry(&inner))
    }

    pub fn info(&self) -> SessionInfo {
        let inner = self.lock();
        let now = Instant::now();
        let expires_in = self.expiry(&inner).saturating_duration_since(now);
        SessionInfo {
            id: self.id.clone(),
            created_at: rfc3339(self.created_at),
            expires_at: rfc3339(SystemTime::now() + expires_in),
            last_used_at: rfc3339(inner.last_used_at),
            state: if inner.ended.is_some() {
                SessionState::Ended
            } else if self.is_busy() {
                SessionState::Busy
            } else {
                SessionState::Idle
            },
            turns: inner.turns,
            limits: self.limits,
            template: self.template,
            ended: inner.ended.clone(),
            resident: true,
        }
    }
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

    /// Moves `s` from the live sessions to the hibernated ones (its own snapshot of `bytes`
    /// is in the store), holding `place` under its tenant's quota of hibernated sessions;
    /// its id stays good. What it held is the caller's to release.
    pub fn hibernate(&self, s: &Arc<Session>, bytes: u64, place: Held) {
        let expires = s.expiry(&s.lock());
        let mut info = s.info();
        info.resident = false;
        // Taken while the hibernation held it busy; asleep, it runs nothing.
        info.state = SessionState::Idle;
        // Both maps at once (live first, as everywhere), so no lookup sees it in neither;
        // its place under the resident cap goes at the same moment.
        let mut live = self.live();
        let mut hibernated = self.hibernated();
        live.remove(&s.id);
        drop(s.lock().slot.take());
        hibernated.insert(
            s.id.clone(),
            Hibernated {
                info,
                owner: s.owner.clone(),
                expires,
                bytes,
                _place: place,
            },
        );
    }

    /// The info of hibernated session `id`, without waking it.
    pub fn hibernated_info(&self, id: &str) -> Option<SessionInfo> {
        let h = self.hibernated();
        let s = h.get(id)?;
        let mut info = s.info.clone();
        info.expires_at =
            rfc3339(SystemTime::now() + s.expires.saturating_duration_since(Instant::now()));
        Some(info)
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

    /// The info of every session `key` owns, resident or hibernated, by id.
    pub fn infos(&self, key: Option<&str>) -> Vec<SessionInfo> {
        let mut out: Vec<SessionInfo> = self
            .live()
            .values()
            .filter(|s| s.owner.as_deref() == key)
            .map(|s| s.info())
            .collect();
        out.extend(
            self.hibernated()
                .values()
                .filter(|h| h.owner.as_deref() == key)
                .map(|h| h.info.clone()),
        );
        out.sort_by(|a, b| a.id.cmp(&b.id));
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
            .filter(|s| !s.is_busy() && s.is_settled())
            .filter(|s| s.lock().ended.is_none())
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
        Ok(SessionSlot {
            count: self.open.clone(),
            tenant: held,
        })
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
    pub fn sweep(&self) -> (Vec<Arc<Session>>, Vec<String>) {
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
        let slept = slept
            .into_iter()
            .map(|(id, owner)| {
                gone.insert(id.clone(), (now, owner));
                id
            })
            .collect();
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
