//! Worker processes: where guest code runs when Vivarium serves.
//!
//! The server is the supervisor and never runs guest code: `server/` holds the listener,
//! HTTP and auth (`lifecycle.rs`, `auth.rs`), `supervisor/` admission, the audit log,
//! metrics and the session registry. Its runner (`supervisor::runner`) hands each run to a
//! worker as a [`Job`] (plain data) and gets a [`Reply`] back; streamed output and the
//! questions a run asks (`input()`, code mode's tool calls, an outbound HTTP request) cross
//! as [`Event`]s. Sessions live in the worker that opened them (a [`Placed`] handle in the
//! supervisor), and their turns go there.
//!
//! - [`Workers`] is the pool: `N` jailed processes (`process.rs`, `child.rs`, `jail.rs`), or
//!   one in-process worker (`--workers 0`, and library use); both do jobs with the same code
//!   (`serve.rs`).
//! - A worker that dies loses only its own runs: each fails with [`Failure::Lost`], the
//!   supervisor is told ([`Death`]), removes its scratch root and starts a replacement.
//! - The channel (`wire.rs`) is read as hostile by the supervisor: a worker is as hostile as
//!   its guest once compromised.

mod child;
#[cfg(debug_assertions)]
mod fault;
pub mod held;
mod jail;
mod job;
mod process;
mod serve;
mod wire;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use child::main as worker_main;
#[cfg(debug_assertions)]
pub use fault::{Fault, ProbeReport};
pub use jail::{JailConfig, JailReport, Layer, netns_inode};
pub use job::{Event, ExecuteJob, Handle, Job, JobError, PackageRef, Reply, TurnJob, TurnReply};
pub use process::{Death, signal_name};
pub use serve::Worker;
pub use wire::WorkerConfig;

use crate::hostcalls::egress::EgressAsker;
use crate::hostcalls::input::InputAsker;
use crate::hostcalls::tools::ToolAsker;
use crate::packages::PackageEnv;
use crate::sandbox::output::{OutputObserver, StreamKind};
use crate::sync::lock;
use crate::vivarium::Vivarium;
use process::Link;
use serve::Events;
use tracing::Instrument as _;

/// Why a job came back without a reply.
#[derive(Debug)]
pub enum Failure {
    /// The job could not do what it was asked.
    Job(JobError),
    /// The worker died (or broke the protocol and was ended) before it replied.
    Lost,
}

/// Who sees a job's events.
#[derive(Default)]
pub struct Sinks {
    /// Sees output as it is written.
    pub observer: Option<OutputObserver>,
    /// Answers `input()`.
    pub asker: Option<InputAsker>,
    /// Answers a program's tool calls (code mode).
    pub tools: Option<ToolAsker>,
    /// Gives the run's execution slot back while a round of its tool calls waits for answers,
    /// and takes it again before the answers reach the program.
    pub parking: Option<Arc<dyn Parking>>,
    /// Performs the program's outbound HTTP requests (network by exception).
    pub egress: Option<EgressAsker>,
}

/// What a run holds while it computes and need not while it waits on its caller (its
/// execution slot): given back at a round of tool calls, taken again before the answers go
/// in.
pub trait Parking: Send + Sync {
    /// Gives it back.
    fn park(&self);
    /// Takes it again (waiting for it as any run would).
    fn unpark(self: Arc<Self>) -> futures_util::future::BoxFuture<'static, ()>;
}

/// Where a job goes: the in-process worker or one worker process.
#[derive(Clone)]
pub enum Target {
    /// This process (`--workers 0`).
    Local(Arc<Local>),
    /// A worker process.
    Process(Arc<Link>),
}

impl Target {
    /// Its link's id (`0` in process): sessions on a worker that died carry it.
    pub fn link_id(&self) -> u64 {
        match self {
            Target::Local(_) => 0,
            Target::Process(l) => l.id,
        }
    }

    /// Does `job` there, in a span of its own: the job's kind, its worker, and for a run its
    /// status, fuel and peak memory.
    pub async fn call(&self, job: Job, sinks: Sinks) -> Result<Reply, Failure> {
        let span = tracing::info_span!(
            "worker.job",
            job = ?job.kind(),
            worker = self.link_id(),
            vivarium.status = tracing::field::Empty,
            vivarium.fuel = tracing::field::Empty,
            vivarium.memory_peak_bytes = tracing::field::Empty,
            vivarium.wall_ms = tracing::field::Empty,
        );
        let reply = match self {
            Target::Local(l) => l.call(job, sinks).instrument(span.clone()).await,
            Target::Process(l) => l.call(job, sinks).instrument(span.clone()).await,
        };
        if let Ok(reply) = &reply
            && let Some(report) = reply.report()
        {
            span.record("vivarium.status", report.status.as_str());
            span.record("vivarium.fuel", report.usage.fuel);
            span.record("vivarium.memory_peak_bytes", report.usage.memory_peak_bytes);
            span.record("vivarium.wall_ms", report.usage.wall_ms);
        }
        reply
    }

    /// Stops session `handle`'s running turn (its `generation`th interrupt).
    pub fn interrupt(&self, handle: Handle, generation: u64) {
        match self {
            Target::Local(l) => l.worker.interrupt(handle, generation),
            Target::Process(l) => l.tell(&wire::ToWorker::Interrupt { handle, generation }),
        }
    }

    fn placed(&self, delta: isize) {
        if let Target::Process(l) = self {
            if delta > 0 {
                l.sessions.fetch_add(1, Ordering::AcqRel);
            } else {
                l.sessions.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

/// A session's interpreter in its worker; dropping it closes the interpreter there (its
/// directory is removed).
pub struct Placed {
    /// Its worker.
    pub target: Target,
    /// Its handle there.
    pub handle: Handle,
    /// Its extra packages, held here so the cache keeps them while it lives.
    pub packages: Arc<PackageEnv>,
    /// The volumes lent to it, their room held while it lives.
    leases: Box<[crate::volumes::Lease]>,
}

impl Placed {
    /// Places `handle` on `target`.
    pub fn new(target: Target, handle: Handle, packages: Arc<PackageEnv>) -> Self {
        target.placed(1);
        Placed {
            target,
            handle,
            packages,
            leases: Box::default(),
        }
    }

    /// Holds `leases` (the volumes lent to it) while it lives.
    pub fn holding(mut self, leases: Vec<crate::volumes::Lease>) -> Self {
        self.leases = leases.into_boxed_slice();
        self
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        self.target.placed(-1);
        let close = Job::Close {
            handle: self.handle,
        };
        match &self.target {
            Target::Local(l) => {
                let _ = l.worker.handle(close, Arc::default(), Arc::new(NoEvents));
            }
            Target::Process(link) => {
                if !link.is_alive() {
                    return;
                }
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    let link = link.clone();
                    // Its volumes are let go once the worker closed it (what it left open
                    // in them is in place then, for a cluster's push).
                    let leases = std::mem::take(&mut self.leases);
                    rt.spawn(async move {
                        let _ = link.call(close, Sinks::default()).await;
                        drop(leases);
                    });
                }
            }
        }
    }
}

struct NoEvents;

impl Events for NoEvents {
    fn send(&self, _event: Event) -> Option<std::sync::mpsc::Receiver<String>> {
        None
    }
}

/// The in-process worker: jobs on guest threads of this process.
pub struct Local {
    worker: Worker,
    cancels: Mutex<HashMap<u64, Arc<AtomicBool>>>,
    next: AtomicU64,
}

struct LocalEvents(Sinks, tokio::runtime::Handle);

impl Events for LocalEvents {
    fn send(&self, event: Event) -> Option<std::sync::mpsc::Receiver<String>> {
        match event {
            Event::Output { stderr, bytes } => {
                if let Some(o) = &self.0.observer {
                    let kind = if stderr {
                        StreamKind::Stderr
                    } else {
                        StreamKind::Stdout
                    };
                    o(kind, &bytes);
                }
                None
            }
            Event::Input { prompt } => self.0.asker.as_ref().map(|a| a(prompt)),
            Event::Egress { request } => self.0.egress.as_ref().map(|a| a(*request)),
            Event::ToolCalls { calls } => {
                let rx = self.0.tools.as_ref().map(|a| a(calls))?;
                let Some(parking) = self.0.parking.clone() else {
                    return Some(rx);
                };
                // The guest thread waits on the answers; the slot goes back meanwhile and is
                // taken again before they reach it.
                parking.park();
                let (tx, out) = std::sync::mpsc::channel();
                let rt = self.1.clone();
                self.1.spawn_blocking(move || {
                    if let Ok(line) = rx.recv() {
                        rt.block_on(parking.unpark());
                        let _ = tx.send(line);
                    }
                });
                Some(out)
            }
        }
    }
}

impl Local {
    async fn call(self: &Arc<Self>, job: Job, sinks: Sinks) -> Result<Reply, Failure> {
        self.worker.arm(&job);
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let cancel = self.worker.cancel_flag();
        lock(&self.cancels).insert(id, cancel.clone());
        struct Registered<'a>(&'a Local, u64);
        impl Drop for Registered<'_> {
            fn drop(&mut self) {
                if let Some(flag) = lock(&self.0.cancels).remove(&self.1) {
                    // The caller went away (or the job is done): stop it.
                    flag.store(true, Ordering::Relaxed);
                }
            }
        }
        let _registered = Registered(self, id);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let this = self.clone();
        let events: Arc<dyn Events> =
            Arc::new(LocalEvents(sinks, tokio::runtime::Handle::current()));
        crate::sandbox::guest_threads::spawn_deferring(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut reply = this.worker.handle(job, cancel, events)?;
                // Claimed here, so a reply nobody waits for any more still frees its files.
                held::claim(this.worker.scratch_root(), &mut reply).map_err(JobError::Internal)?;
                Ok(reply)
            }))
            .unwrap_or_else(|panic| {
                let msg = crate::sandbox::guest_threads::panic_message(&*panic);
                tracing::error!(panic = %msg, "guest thread panicked");
                Err(JobError::Internal(format!(
                    "the guest thread panicked: {msg}"
                )))
            });
            let _ = tx.send(result);
        })
        .map_err(|e| {
            Failure::Job(JobError::Internal(format!(
                "could not start a guest thread: {e}"
            )))
        })?;
        match rx.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(Failure::Job(e)),
            Err(_) => Err(Failure::Job(JobError::Internal(
                "the guest thread vanished".into(),
            ))),
        }
    }
}

/// How long a run waits for a worker when every one is being replaced.
const REPLACEMENT_WAIT: Duration = Duration::from_secs(10);

/// How the pool of worker processes is made.
pub struct PoolOptions {
    /// Worker processes.
    pub workers: usize,
    /// The `vivarium` binary they run (`vivarium worker`).
    pub exe: PathBuf,
    /// What each is told.
    pub config: WorkerConfig,
    /// The page the shared memory budget is counted in (each worker gets it at fd 4).
    pub budget_fd: Option<Arc<std::os::fd::OwnedFd>>,
}

struct Pool {
    options: PoolOptions,
    max_frame: u64,
    links: Mutex<Vec<Option<Arc<Link>>>>,
    stopping: AtomicBool,
    on_death: Arc<dyn Fn(&Death) + Send + Sync>,
    /// Workers lost, and replacements started.
    lost: AtomicU64,
    restarted: AtomicU64,
}

/// Where runs go: worker processes, or this process.
pub struct Workers {
    local: Option<Arc<Local>>,
    pool: Option<Arc<Pool>>,
}

impl Workers {
    /// How many interpreters the in-process worker keeps for sessions (`None` with worker
    /// processes).
    #[cfg(test)]
    pub fn local_interpreters(&self) -> Option<usize> {
        self.local.as_ref().map(|l| l.worker.interpreters())
    }

    /// Jobs run in this process, on `host`.
    pub fn in_process(host: Arc<Vivarium>) -> Self {
        Workers {
            local: Some(Arc::new(Local {
                worker: Worker::new(host),
                cancels: Mutex::default(),
                next: AtomicU64::new(1),
            })),
            pool: None,
        }
    }

    /// Starts `options.workers` worker processes and waits until each is ready; `on_death`
    /// hears of each that dies (its runs have failed by then), before its replacement starts.
    pub async fn start(
        options: PoolOptions,
        on_death: Arc<dyn Fn(&Death) + Send + Sync>,
    ) -> anyhow::Result<Self> {
        let max_frame = wire::max_frame_bytes(&options.config.maximum);
        let n = options.workers.max(1);
        let pool = Arc::new(Pool {
            options,
            max_frame,
            links: Mutex::new(vec![None; n]),
            stopping: AtomicBool::new(false),
            on_death,
            lost: AtomicU64::new(0),
            restarted: AtomicU64::new(0),
        });
        let started = futures_util::future::join_all((0..n).map(|i| Pool::spawn(&pool, i))).await;
        for r in started {
            r?;
        }
        Ok(Workers {
            local: None,
            pool: Some(pool),
        })
    }

    /// Where a new run or session goes: the worker with the least work (runs in flight,
    /// then sessions placed on it).
    pub fn pick(&self) -> Option<Target> {
        if let Some(l) = &self.local {
            return Some(Target::Local(l.clone()));
        }
        let pool = self.pool.as_ref()?;
        lock(&pool.links)
            .iter()
            .flatten()
            .filter(|l| l.is_alive())
            .min_by_key(|l| (l.in_flight(), l.sessions.load(Ordering::Relaxed)))
            .map(|l| Target::Process(l.clone()))
    }

    /// [`Workers::pick`], waiting (at most [`REPLACEMENT_WAIT`]) while every worker is
    /// being replaced: a run that arrives then waits for one rather than failing.
    pub async fn pick_live(&self) -> Option<Target> {
        let until = std::time::Instant::now() + REPLACEMENT_WAIT;
        loop {
            if let Some(t) = self.pick() {
                return Some(t);
            }
            let stopping = self
                .pool
                .as_ref()
                .is_none_or(|p| p.stopping.load(Ordering::Acquire));
            if stopping || std::time::Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Does `job` on the worker with the least work.
    pub async fn call(&self, job: Job, sinks: Sinks) -> Result<Reply, Failure> {
        match self.pick_live().await {
            Some(t) => t.call(job, sinks).await,
            None => Err(Failure::Lost),
        }
    }

    /// Runs in flight on every worker.
    pub fn in_flight(&self) -> usize {
        if let Some(l) = &self.local {
            return lock(&l.cancels).len();
        }
        self.links().iter().map(|l| l.in_flight()).sum()
    }

    /// Cancels everything running, and everything later (shutdown).
    pub fn cancel_all(&self) {
        if let Some(l) = &self.local {
            l.worker.cancel_everything();
            for flag in lock(&l.cancels).values() {
                flag.store(true, Ordering::Relaxed);
            }
        }
        for link in self.links() {
            link.tell(&wire::ToWorker::CancelAll);
        }
    }

    /// The live worker processes.
    fn links(&self) -> Vec<Arc<Link>> {
        self.pool.as_ref().map_or_else(Vec::new, |p| {
            lock(&p.links)
                .iter()
                .flatten()
                .filter(|l| l.is_alive())
                .cloned()
                .collect()
        })
    }

    /// `(pid, jail)` of each live worker process (none in process).
    pub fn processes(&self) -> Vec<(u32, JailReport)> {
        self.links()
            .iter()
            .map(|l| (l.pid, l.jail.clone()))
            .collect()
    }

    /// `(pid, runs in flight, sessions placed)` of each live worker process (test builds'
    /// `/v1/debug/workers`).
    #[cfg(debug_assertions)]
    pub fn loads(&self) -> Vec<(u32, usize, usize)> {
        self.links()
            .iter()
            .map(|l| (l.pid, l.in_flight(), l.sessions.load(Ordering::Relaxed)))
            .collect()
    }

    /// Instances in the workers' pools (as each last said; `None` in process, where the
    /// server's own engine is the one).
    pub fn pooled_instances(&self) -> Option<u64> {
        self.pool.as_ref()?;
        Some(
            self.links()
                .iter()
                .map(|l| l.pooled.load(Ordering::Relaxed))
                .sum(),
        )
    }

    /// How many worker processes the pool keeps (0: in process).
    pub fn configured(&self) -> usize {
        self.pool.as_ref().map_or(0, |p| lock(&p.links).len())
    }

    /// Workers lost so far, and replacements started.
    pub fn lost_and_restarted(&self) -> (u64, u64) {
        self.pool.as_ref().map_or((0, 0), |p| {
            (
                p.lost.load(Ordering::Relaxed),
                p.restarted.load(Ordering::Relaxed),
            )
        })
    }

    /// Ends every worker process and waits (at most `limit`) until each is gone and its
    /// scratch root removed.
    pub async fn stop(&self, limit: Duration) {
        let Some(pool) = &self.pool else { return };
        pool.stopping.store(true, Ordering::Release);
        let links: Vec<Arc<Link>> = lock(&pool.links).iter().flatten().cloned().collect();
        for link in &links {
            // SAFETY: kill with a pid this process started and has not reaped.
            unsafe { libc::kill(link.pid as i32, libc::SIGKILL) };
        }
        let until = std::time::Instant::now() + limit;
        while lock(&pool.links).iter().any(Option::is_some) && std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Pool {
    async fn spawn(pool: &Arc<Pool>, index: usize) -> anyhow::Result<()> {
        let weak = Arc::downgrade(pool);
        let mut config = pool.options.config.clone();
        config.shared_budget = pool.options.budget_fd.is_some();
        let link = Link::spawn(
            index,
            &pool.options.exe,
            config,
            pool.options.budget_fd.clone(),
            pool.max_frame,
            move |death| {
                if let Some(pool) = weak.upgrade() {
                    Pool::died(pool, death);
                }
            },
        )
        .await?;
        tracing::info!(
            worker = index,
            pid = link.pid,
            jail = ?link.jail.layers().map(|(n, l)| format!("{n}={}", l.as_str())),
            "worker ready"
        );
        for (name, layer) in link.jail.layers() {
            if let Layer::Partial(why) | Layer::Missing(why) = layer {
                tracing::warn!(worker = index, layer = name, state = layer.as_str(), why = %why, "a jail layer does not hold in full");
            }
        }
        lock(&pool.links)[index] = Some(link);
        Ok(())
    }

    /// A worker died: its runs have failed; tell the supervisor, remove its scratch root,
    /// start a replacement (unless the pool is stopping).
    fn died(pool: Arc<Pool>, death: Death) {
        let stopping = pool.stopping.load(Ordering::Acquire);
        if !stopping {
            pool.lost.fetch_add(1, Ordering::Relaxed);
            tracing::error!(worker = death.index, pid = death.pid, cause = %death.cause, in_flight = death.in_flight, "worker lost");
            (pool.on_death)(&death);
        }
        let root = pool.options.config.scratch_base.join(death.pid.to_string());
        let _ = std::fs::remove_dir_all(&root);
        {
            let mut links = lock(&pool.links);
            if links[death.index]
                .as_ref()
                .is_some_and(|l| l.id == death.link)
            {
                links[death.index] = None;
            }
        }
        if stopping {
            return;
        }
        tokio::spawn(async move {
            loop {
                match Pool::spawn(&pool, death.index).await {
                    Ok(()) => {
                        pool.restarted.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Err(e) => {
                        tracing::error!(worker = death.index, error = %e, "a replacement worker did not start; retrying");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
                if pool.stopping.load(Ordering::Acquire) {
                    return;
                }
            }
        });
    }
}
