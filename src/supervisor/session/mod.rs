//! A session: one kept-alive interpreter in a worker (like a notebook kernel), its settings,
//! and its life as one state machine ([`phase`]: idle, busy, ended, closed) under one lock.
//!
//! A use (a turn, a file operation, a query, a capture) begins with [`Session::begin`],
//! which hands out the interpreter in a [`Busy`]; the use ends with [`Busy::finish`],
//! saying what became of the interpreter ([`PutBack`]). A `Busy` dropped without a finish
//! (its request went away mid-way) puts the interpreter back as it was. The registry
//! (`supervisor/registry.rs`) keeps sessions by id; hibernation moves one from there to the
//! store with [`Busy::retire`].

mod info;
mod phase;
mod turned;
mod usage;

use crate::volumes::VolumeMount;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// A session's labels are vocabulary the doors share (E2B's metadata, env and contexts).
pub use crate::snapshot::{Labels, MAX_CONTEXTS};
pub use info::{EndInfo, EndKind, SessionInfo, SessionState};
use phase::{Phase, Refusal};
pub use turned::{TurnDone, Turned};
pub use usage::{SessionMetrics, Usage};

use super::admission::MemoryReservation;
use super::error::SupervisorError;
use super::tenants::{Held, Tenant};
use super::time::rfc3339;
use crate::leakage::LeakPolicy;
use crate::limits::Limits;
use crate::snapshot::LabelsError;
use crate::sync::lock;
use crate::template::Template;
use crate::vocabulary::TurnHistory;
use crate::worker::{Handle, Placed, Target};

/// Counts a session against `max_sessions`, and its tenant's `resident_sessions`, while it
/// is live (not ended, not closed, not hibernated).
pub struct SessionSlot {
    count: Arc<AtomicUsize>,
    tenant: Held,
}

impl SessionSlot {
    /// The place `count` (already counted) and `tenant` stand for.
    pub(in crate::supervisor) fn taken(count: Arc<AtomicUsize>, tenant: Held) -> Self {
        SessionSlot { count, tenant }
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a live session holds besides its interpreter.
pub struct Holds {
    /// Its reserve in the memory budget, given back when this drops.
    _memory: MemoryReservation,
    /// `None` once hibernation gave its place back (at the moment it left the live map).
    slot: Option<SessionSlot>,
}

/// What a use of a session's interpreter leaves it with ([`Busy::finish`]).
pub enum PutBack {
    /// The interpreter goes back as it was (a query, a capture, a refused or failed job).
    Same,
    /// A turn ran: the interpreter goes back and the turn is counted.
    Turned,
    /// The use ended the interpreter (its worker died, or the turn ended it); `turn`: it was
    /// a turn, counted.
    Ended { end: EndInfo, turn: bool },
    /// The interpreter is gone and nothing says why: the session ends as lost.
    Gone,
    /// The interpreter goes back in the state after turn `turn`: the next turn is the one
    /// after it.
    RolledBackTo { turn: u64 },
}

/// What a closed or ended session lets go of; dropped off the executor (it removes dirs).
pub struct Remains(phase::Remains<Placed, Holds>);

impl Remains {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Gives its place under the resident caps back now (the rest goes with the drop).
    fn free_place(&mut self) {
        if let Some(held) = &mut self.0.held {
            held.slot = None;
        }
    }

    /// Gives its place under the resident caps back at once (a close answered is a place
    /// free, for the next open and for `/v1/usage`), and drops the rest on a blocking
    /// thread: removing the working directory is file-system work.
    pub fn release(mut self) {
        if self.is_empty() {
            return;
        }
        self.free_place();
        tokio::task::spawn_blocking(move || drop(self));
    }
}

struct Inner {
    phase: Phase<Placed, Holds>,
    last_used: Instant,
    last_used_at: SystemTime,
    turns: u64,
    /// Its caller's own end ([`Session::set_deadline`]; E2B's sandbox timeout), kept until
    /// then whether used or not; never past its lifetime.
    deadline: Option<Instant>,
    /// What its turns used ([`Session::metrics`]).
    usage: Usage,
}

pub struct Session {
    pub id: String,
    /// Its owner's tenant, whose quotas it counts against.
    pub tenant: Arc<Tenant>,
    /// The id of the API key that opened it: the only key it exists for ([`may_use`]);
    /// every other key is told it is not there (404), as for another key's snapshot. `None`
    /// when it was opened with API keys off: then any key may use it.
    pub owner: Option<String>,
    /// Network by exception: what its turns may reach and the secrets they may carry, as it
    /// was opened (kept while it hibernates; not over a restart).
    pub network: Option<Arc<crate::egress::Grant>>,
    /// The volumes mounted in its interpreter for its life (lent again when it is brought
    /// back, from its image's own list).
    pub volumes: Vec<VolumeMount>,
    /// How many of its last states it keeps to roll back or fork to (in its worker's
    /// memory: not over hibernation or a restart).
    pub history: TurnHistory,
    pub created_at: SystemTime,
    created: Instant,
    pub limits: Limits,
    /// The template its interpreter came from (what its snapshots are bound to).
    pub template: Template,
    /// Every completed turn is snapshotted to the store.
    pub durable: bool,
    /// Orders its own snapshots: bumped per snapshot taken; the store is written only with
    /// a newer one than it holds (`durable_written`), whatever order the writes finish in.
    pub durable_taken: AtomicU64,
    /// The newest generation written to the store.
    pub durable_written: tokio::sync::Mutex<u64>,
    /// The leakage policy of its turns and file reads, unless a turn names its own.
    pub leakage: LeakPolicy,
    /// What its state weighs, memory and files, in bytes: what it was admitted with, then
    /// as of its last turn (the turn's memory peak and disk use). A fork made in its worker
    /// is admitted with this, as one made from an image is with the image's size.
    footprint: AtomicU64,
    idle: Duration,
    lifetime: Duration,
    /// Where its interpreter lives, and its handle there (to interrupt a running use).
    pub(in crate::supervisor) target: Target,
    handle: Handle,
    /// Interrupts asked so far: a turn carries the count as it began, so its worker honours
    /// an interrupt that reached it before the turn did (one asked while the turn waited
    /// for admission) and ignores one meant for an earlier turn.
    interrupts: AtomicU64,
    /// What a door gave it besides its state ([`Labels`]): in its own snapshot, so it
    /// survives hibernation, a restart and a failover.
    labels: Mutex<Labels>,
    inner: Mutex<Inner>,
}

/// One use of a session: it has the interpreter, and the session is busy (a second use gets
/// 409) until [`Busy::finish`] or a drop puts it back.
pub struct Busy {
    session: Arc<Session>,
    interp: Option<Placed>,
    /// The session's interrupts asked before this use began (see `Session::interrupts`).
    interrupts_seen: u64,
}

impl Busy {
    /// The interrupts asked before this use began: its turn carries them to the worker.
    pub fn interrupts_seen(&self) -> u64 {
        self.interrupts_seen
    }

    /// The session in use.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Its interpreter.
    pub fn placed(&self) -> &Placed {
        self.interp
            .as_ref()
            .expect("a use has its interpreter until it ends")
    }

    pub fn placed_mut(&mut self) -> &mut Placed {
        self.interp
            .as_mut()
            .expect("a use has its interpreter until it ends")
    }

    /// Ends the use, saying what became of the interpreter; what the session lets go of is
    /// released off the executor.
    pub fn finish(mut self, back: PutBack) {
        let interp = self.interp.take().expect("finished once");
        self.session.finish(interp, back).release();
    }

    /// Ends the use by moving the session out of here (hibernation): it closes and lets go
    /// of everything, its place under the caps at once. `Err` when it was closed or ended
    /// while the use ran (it must not be moved: what is returned is only to be dropped).
    pub(in crate::supervisor) fn retire(mut self) -> Result<Remains, Remains> {
        let interp = self.interp.take().expect("retired once");
        let mut inner = self.session.lock();
        match inner.phase.retire(interp) {
            Ok(r) => {
                let mut r = Remains(r);
                r.free_place();
                Ok(r)
            }
            Err(r) => Err(Remains(r)),
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(interp) = self.interp.take() {
            self.session.finish(interp, PutBack::Same).release();
        }
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
    /// Its [`Session::network`].
    pub network: Option<Arc<crate::egress::Grant>>,
    /// Its [`Session::labels`].
    pub labels: Labels,
    /// Its [`Session::volumes`].
    pub volumes: Vec<VolumeMount>,
    /// Its [`Session::history`].
    pub history: TurnHistory,
}

impl Session {
    pub fn new(
        interp: Placed,
        settings: SessionSettings,
        footprint: u64,
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
            network,
            labels,
            volumes,
            history,
        } = settings;
        let (id, age) = resumed.unwrap_or_else(|| (new_session_id(), Duration::ZERO));
        Arc::new(Session {
            id,
            tenant: slot.tenant.tenant().clone(),
            owner,
            network,
            created_at: now - age,
            created: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            limits,
            template,
            durable,
            durable_taken: Default::default(),
            durable_written: Default::default(),
            leakage,
            footprint: AtomicU64::new(footprint),
            idle,
            lifetime,
            target: interp.target.clone(),
            handle: interp.handle,
            interrupts: AtomicU64::new(0),
            labels: Mutex::new(labels),
            volumes,
            history,
            inner: Mutex::new(Inner {
                phase: Phase::new(
                    interp,
                    Holds {
                        _memory: memory,
                        slot: Some(slot),
                    },
                ),
                last_used: Instant::now(),
                last_used_at: now,
                turns,
                deadline: None,
                usage: Usage::new(footprint, now),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// Its labels, now.
    pub fn labels(&self) -> Labels {
        lock(&self.labels).clone()
    }

    /// Changes its labels with `change`, kept only when they stay within their bounds;
    /// what `change` answered. (A durable session's store copy takes them with its next
    /// own snapshot: `Runner::relabel` writes one at once.)
    pub(in crate::supervisor) fn relabel<R>(
        &self,
        change: impl FnOnce(&mut Labels) -> Result<R, LabelsError>,
    ) -> Result<R, LabelsError> {
        let mut labels = lock(&self.labels);
        let mut changed = labels.clone();
        let answer = change(&mut changed)?;
        changed.check()?;
        *labels = changed;
        Ok(answer)
    }

    /// Turns it has run (what `info().turns` says, without the rest of the info).
    pub fn turns(&self) -> u64 {
        self.lock().turns
    }

    /// What its state weighs now, as far as the supervisor knows (see `footprint`).
    pub fn footprint(&self) -> u64 {
        self.footprint.load(Ordering::Acquire)
    }

    /// Notes what its state weighs after a turn.
    pub(in crate::supervisor) fn note_footprint(&self, bytes: u64) {
        self.footprint.store(bytes, Ordering::Release);
    }

    /// The generation of an own snapshot taken now (see `durable_taken`).
    pub fn next_own_generation(&self) -> u64 {
        self.durable_taken.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Stops the running use, if one runs (a notebook's interrupt): a turn is rolled back
    /// and the session goes on (the worker clears the interrupt before its next turn).
    /// Returns whether one was running.
    pub fn interrupt(&self) -> bool {
        let asked = {
            let inner = self.lock();
            inner
                .phase
                .is_busy()
                .then(|| self.interrupts.fetch_add(1, Ordering::AcqRel) + 1)
        };
        if let Some(generation) = asked {
            self.target.interrupt(self.handle, generation);
        }
        asked.is_some()
    }

    /// Begins a use: hands out the interpreter, or says why there is none now (busy: 409;
    /// ended: 409 with why; closed: 404).
    pub fn begin(self: &Arc<Self>) -> Result<Busy, SupervisorError> {
        let mut inner = self.lock();
        let interp = inner.phase.begin().map_err(|r| match r {
            Refusal::Busy => SupervisorError::SessionBusy(self.id.clone()),
            Refusal::Ended(reason) => SupervisorError::SessionEnded {
                id: self.id.clone(),
                reason,
            },
            Refusal::Closed => SupervisorError::SessionNotFound(self.id.clone()),
        })?;
        let interrupts_seen = self.interrupts.load(Ordering::Acquire);
        drop(inner);
        Ok(Busy {
            session: self.clone(),
            interp: Some(interp),
            interrupts_seen,
        })
    }

    /// The end of a use ([`Busy`]): the interpreter back, or let go with what the session
    /// held when the use ended it.
    fn finish(&self, interp: Placed, back: PutBack) -> Remains {
        let (end, counted_turn) = match back {
            PutBack::Same => (None, false),
            PutBack::RolledBackTo { turn } => {
                self.lock().turns = turn;
                (None, false)
            }
            PutBack::Turned => (None, true),
            PutBack::Ended { end, turn } => (Some(end), turn),
            PutBack::Gone => (
                Some(EndInfo::host_error("the interpreter was lost".into())),
                false,
            ),
        };
        let mut inner = self.lock();
        inner.last_used = Instant::now();
        inner.last_used_at = SystemTime::now();
        if counted_turn {
            inner.turns += 1;
        }
        Remains(inner.phase.finish(interp, end))
    }

    /// Closes the session: stops a running use and gives back what it holds (a running
    /// use's interpreter goes when the use finishes).
    pub fn close(&self) -> Remains {
        let (remains, was_busy) = self.lock().phase.close();
        if was_busy {
            let generation = self.interrupts.fetch_add(1, Ordering::AcqRel) + 1;
            self.target.interrupt(self.handle, generation);
        }
        Remains(remains)
    }

    /// Ends the session (its interpreter is gone): it takes no more turns and lets go of
    /// what it holds; it stays in the registry, saying why.
    pub fn end(&self, why: EndInfo) -> Remains {
        Remains(self.lock().phase.end(why))
    }

    pub fn is_busy(&self) -> bool {
        self.lock().phase.is_busy()
    }

    /// Whether it can begin a use now (idle: neither busy, ended nor closed).
    pub fn is_idle(&self) -> bool {
        self.lock().phase.is_idle()
    }

    /// The idle/lifetime deadline, whichever is first.
    pub(in crate::supervisor) fn expires(&self) -> Instant {
        self.expiry(&self.lock())
    }

    fn expiry(&self, inner: &Inner) -> Instant {
        let end = self.created + self.lifetime;
        match inner.deadline {
            // A deadline holds it to then, used or idle.
            Some(deadline) => deadline.min(end),
            None => (inner.last_used + self.idle).min(end),
        }
    }

    /// Ends the session `after` from now, used or idle, instead of after its idle time (no
    /// later than its lifetime allows: any `after`, however large, saturates there); returns
    /// when it will end.
    pub fn set_deadline(&self, after: Duration) -> SystemTime {
        let end = self.created + self.lifetime;
        let at = Instant::now()
            .checked_add(after)
            .map_or(end, |at| at.min(end));
        self.set_deadline_at(at);
        let left = self
            .expiry(&self.lock())
            .saturating_duration_since(Instant::now());
        SystemTime::now() + left
    }

    /// Time left before its deadline (no later than its lifetime), when it has one: a door
    /// giving the sessions it opened for this one the same end.
    pub fn deadline_in(&self) -> Option<Duration> {
        let inner = self.lock();
        inner.deadline?;
        Some(
            self.expiry(&inner)
                .saturating_duration_since(Instant::now()),
        )
    }

    /// [`Session::set_deadline`] at an instant (a hibernated session's, as it wakes).
    pub(in crate::supervisor) fn set_deadline_at(&self, at: Instant) {
        self.lock().deadline = Some(at);
    }

    /// Its deadline, if it has one.
    pub(in crate::supervisor) fn deadline(&self) -> Option<Instant> {
        self.lock().deadline
    }

    /// How long it has been idle (since its last use ended).
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

    /// Whether it is past its lifetime, or, not busy, past its idle time.
    pub(in crate::supervisor) fn expired(&self, now: Instant) -> bool {
        let inner = self.lock();
        now >= self.created + self.lifetime
            || inner.deadline.is_some_and(|d| now >= d)
            || (!inner.phase.is_busy() && now >= self.expiry(&inner))
    }

    /// Counts a completed turn's use (`run`, and `network`'s requests) in its metrics.
    pub(in crate::supervisor) fn note_usage(
        &self,
        run: &crate::report::Usage,
        network: Option<&crate::report::NetworkUsage>,
    ) {
        self.lock().usage.note_turn(run, network, SystemTime::now());
    }

    /// What it has used ([`Usage`]), to keep while it hibernates.
    pub(in crate::supervisor) fn usage(&self) -> Usage {
        self.lock().usage.clone()
    }

    /// Its usage as it was before it hibernated, given back as it wakes.
    pub(in crate::supervisor) fn set_usage(&self, usage: Usage) {
        self.lock().usage = usage;
    }

    /// `GET /v1/sessions/{id}/metrics`.
    pub fn metrics(&self) -> SessionMetrics {
        let inner = self.lock();
        inner.usage.metrics(
            &self.id,
            inner.turns,
            self.limits.memory_bytes,
            self.limits.disk_bytes,
            SystemTime::now(),
        )
    }

    pub fn info(&self) -> SessionInfo {
        let inner = self.lock();
        let now = Instant::now();
        let expires_in = self.expiry(&inner).saturating_duration_since(now);
        let ended = inner.phase.ended().cloned();
        SessionInfo {
            id: self.id.clone(),
            created_at: rfc3339(self.created_at),
            expires_at: rfc3339(SystemTime::now() + expires_in),
            last_used_at: rfc3339(inner.last_used_at),
            // A closed session is no longer looked up; what it last said is idle.
            state: if ended.is_some() {
                SessionState::Ended
            } else if inner.phase.is_busy() {
                SessionState::Busy
            } else {
                SessionState::Idle
            },
            turns: inner.turns,
            limits: self.limits,
            template: self.template,
            ended,
            resident: true,
            volumes: self.volumes.clone(),
        }
    }
}
