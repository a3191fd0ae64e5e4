//! What one sandbox's `Store` holds: the WASI context, the limiter, the run clock, the
//! filesystem guard.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use wasmtime_wasi::HostMonotonicClock;
use wasmtime_wasi::p1::WasiP1Ctx;

use super::input::InputAsker;
use super::limiter::MemoryLimiter;
use super::live_output::LiveOutput;
use crate::budget::Charge;

/// Why the host stopped a guest in the middle of a call. Raised from the epoch callback and
/// from our `poll_oneoff`, and recognised again by downcasting when the call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Interrupted {
    /// The run's wall-clock deadline passed.
    #[error("the wall-clock deadline passed")]
    Timeout,
    /// The run's cancel flag was set (shutdown, a closed session, a client gone).
    #[error("the host cancelled the run")]
    Cancelled,
    /// A tool limit was breached (code mode: `hostcalls::tools`).
    #[error("{0}")]
    Tool(crate::tools::ToolBreach),
}

/// The wall-clock side of a run: its deadline, a cancel flag the owner may set from any
/// thread, and the origin of the guest's monotonic clock.
#[derive(Clone)]
pub struct RunClock {
    pub deadline: Instant,
    pub cancel: Arc<AtomicBool>,
    pub origin: Instant,
    /// When the current call into the guest started (a turn, a run): what
    /// [`RunClock::is_long`] measures.
    pub call_started: Instant,
}

/// How often a wait for the host's answer looks at the cancel flag.
const HOST_WAIT_POLL: Duration = Duration::from_millis(20);

/// A call into the guest that has run this long is a batch job: its thread yields the CPU
/// to short ones (`guest_threads::demote_current`), so another tenant's hello world beside
/// a backlog of long runs is not slowed by them.
pub const LONG_CALL: std::time::Duration = std::time::Duration::from_millis(100);

impl RunClock {
    /// Whether the current call has run for [`LONG_CALL`].
    pub fn is_long(&self) -> bool {
        self.call_started.elapsed() >= LONG_CALL
    }

    /// Waits at most `limit` for the host's answer on `rx` (a tool round's, an outbound
    /// request's), looking at the cancel flag every [`HOST_WAIT_POLL`]: `Ok(None)` when
    /// `limit` passed first; cancelled when the flag is set or whoever answers went away
    /// (the client, the supervisor's run). The wait is not the program's time: the deadline
    /// and the call's start move by it, which is returned.
    pub fn wait_for_host(
        &mut self,
        rx: &Receiver<String>,
        limit: Duration,
    ) -> (Result<Option<String>, Interrupted>, Duration) {
        let started = Instant::now();
        let got = loop {
            if self.cancel.load(Ordering::Relaxed) {
                break Err(Interrupted::Cancelled);
            }
            let elapsed = started.elapsed();
            if elapsed >= limit {
                break Ok(None);
            }
            match rx.recv_timeout(HOST_WAIT_POLL.min(limit - elapsed)) {
                Ok(answer) => break Ok(Some(answer)),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break Err(Interrupted::Cancelled),
            }
        };
        let waited = started.elapsed();
        self.deadline += waited;
        self.call_started += waited;
        (got, waited)
    }

    /// `Err` once the run must stop.
    pub fn check(&self) -> Result<(), Interrupted> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(Interrupted::Cancelled)
        } else if Instant::now() >= self.deadline {
            Err(Interrupted::Timeout)
        } else {
            Ok(())
        }
    }
}

/// The guest's monotonic clock, counted from the sandbox's creation. Our `poll_oneoff` needs
/// the same origin to honour absolute monotonic timeouts, so we set it rather than let
/// wasmtime-wasi pick a private one.
pub struct GuestMonotonicClock(pub Instant);

impl HostMonotonicClock for GuestMonotonicClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Accounting for the descriptor cap and the disk quota (see `fs_guard.rs`).
pub struct FsGuard {
    /// Host path of the working directory, measured when the running estimate says the quota
    /// is exceeded.
    pub root: PathBuf,
    pub open_fds: u32,
    pub max_open_fds: u32,
    /// Successful `path_open`s over the sandbox's life. A program that opened nothing can
    /// have left no file buffer unflushed, so its execution skips the flush turn.
    pub opens: u64,
    /// A call that may change what the working directory holds, or its files' times, was
    /// made (`path_open` for writing, a removal, a rename, a link, a time set; and
    /// `path_readlink`, which sets a link's access time), whether or not it succeeded.
    /// With `opens`, it tells a run that left its directory as it found it
    /// ([`crate::sandbox`]'s kept template folders).
    pub changed: bool,
    /// A running upper bound of the bytes the working directory holds.
    pub charged_bytes: u64,
    pub quota_bytes: u64,
    /// When the working directory is on tmpfs (its bytes are memory): the bytes reserved for
    /// it against the host's budget, at least `charged_bytes` once a write went through.
    pub host: Option<Charge>,
    /// Whether a write was refused with ENOSPC, or an open with EMFILE, since the last turn.
    pub refused_disk: bool,
    pub refused_fd: bool,
    /// Whether the host's budget (not the quota) refused a write since the last turn.
    pub refused_host_disk: bool,
    /// The volumes mounted in the sandbox, and what the guest holds open in them.
    pub mounts: super::mounts::Mounts,
    /// The first descriptor the guest itself opens: past stdio, the preopens and the
    /// mounts' preopens.
    pub first_fd: u32,
}

impl FsGuard {
    /// A guard for the working directory at `root`, which holds `charged_bytes` already.
    pub fn new(
        root: PathBuf,
        charged_bytes: u64,
        quota_bytes: u64,
        max_open_fds: u32,
        open_fds: u32,
        host: Option<Charge>,
    ) -> Self {
        FsGuard {
            root,
            open_fds,
            max_open_fds,
            opens: 0,
            changed: false,
            charged_bytes,
            quota_bytes,
            host,
            refused_disk: false,
            refused_fd: false,
            refused_host_disk: false,
            mounts: Default::default(),
            first_fd: open_fds,
        }
    }

    /// Mounts `mounts`, whose preopens follow the fixed table.
    pub fn mount(&mut self, mounts: super::mounts::Mounts) {
        self.open_fds += mounts.preopens();
        self.first_fd += mounts.preopens();
        self.mounts = mounts;
    }

    /// Starts a new turn's accounting of refusals.
    pub fn rearm(&mut self) {
        self.refused_disk = false;
        self.refused_fd = false;
        self.refused_host_disk = false;
    }

    /// Holds `bytes` for the directory against the host's budget (when it is on tmpfs):
    /// grows the reservation, or sets it to exactly `bytes` when `exact` (after a measure).
    /// `false` when the budget has no room.
    pub fn hold_on_host(&mut self, bytes: u64, exact: bool) -> bool {
        match &mut self.host {
            None => true,
            Some(c) if c.bytes() >= bytes && !exact => true,
            Some(c) => c.set(bytes),
        }
    }
}

/// The `T` of `Store<T>` for every guest.
pub struct GuestState {
    pub wasi: WasiP1Ctx,
    pub limiter: MemoryLimiter,
    pub clock: RunClock,
    pub fs: FsGuard,
    /// The `repr` of the last turn's final expression, sent through the door.
    pub last_result: Option<String>,
    /// pyplot made a figure since the host last looked (the door's figure message).
    pub figure_made: bool,
    /// Who sees the output live; the door mutes a stream of it for the rest of a turn.
    pub live_output: Arc<LiveOutput>,
    /// Who answers `input()` during this turn (a kernel's client), if anyone.
    pub input: Option<InputAsker>,
    /// The tools this run's code may call, and who answers them (code mode), if any.
    pub tools: Option<super::tool_door::ToolDoor>,
    /// The network this run was granted, and who performs its requests, if any.
    pub egress: Option<super::egress_door::EgressDoor>,
}

/// A deadline far enough away to mean "none" without overflowing `Instant`.
pub fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}
