//! Prometheus metrics, kept in atomics and small maps and rendered as text exposition format
//! on `GET /metrics`: executions by kind and status, an execution latency histogram, fuel and
//! peak memory used, resident and hibernated sessions, queue depth, running executions, rejections by reason and
//! HTTP responses by status.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::report::Report;
use crate::sync::lock;

/// Upper bounds (seconds) of the latency histogram's buckets.
const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Upper bounds (bytes) of the peak-memory histogram's buckets.
const MEMORY_BUCKETS: [f64; 7] = [
    64.0 * 1048576.0,
    128.0 * 1048576.0,
    256.0 * 1048576.0,
    512.0 * 1048576.0,
    1024.0 * 1048576.0,
    2048.0 * 1048576.0,
    4096.0 * 1048576.0,
];

struct Histogram<const N: usize> {
    bounds: [f64; N],
    counts: [AtomicU64; N],
    count: AtomicU64,
    /// The sum, as f64 bits (updated under the metrics mutex-free CAS loop).
    sum_bits: AtomicU64,
}

impl<const N: usize> Histogram<N> {
    fn new(bounds: [f64; N]) -> Self {
        Histogram {
            bounds,
            counts: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_bits: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// The upper bound of the bucket holding quantile `q` (0..1) of what was observed: the
    /// value is at most that; `None` before anything was, or past the last bound.
    fn at_most(&self, q: f64) -> Option<f64> {
        let count = self.count.load(Ordering::Relaxed);
        if count == 0 {
            return None;
        }
        let want = (q * count as f64).ceil().max(1.0) as u64;
        self.bounds
            .iter()
            .zip(&self.counts)
            .find(|(_, c)| c.load(Ordering::Relaxed) >= want)
            .map(|(b, _)| *b)
    }

    fn observe(&self, v: f64) {
        for (i, b) in self.bounds.iter().enumerate() {
            if v <= *b {
                self.counts[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum_bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + v).to_bits())
            });
    }

    fn render(&self, out: &mut String, name: &str) {
        for (i, b) in self.bounds.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{b}\"}} {}",
                self.counts[i].load(Ordering::Relaxed)
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            f64::from_bits(self.sum_bits.load(Ordering::Relaxed))
        );
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// The counters the operator console shows (`GET /v1/console/state`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConsoleCounters {
    /// Executions and turns run since the server started.
    pub runs: u64,
    /// Their wall time's p50, p90 and p99, each as the upper bound of its histogram bucket
    /// (`null` before any run, or past 30 s).
    pub latency_at_most_seconds: std::collections::BTreeMap<String, Option<f64>>,
    /// Requests refused by admission control, by reason.
    pub refusals: std::collections::BTreeMap<String, u64>,
    /// HTTP responses by status.
    pub responses: std::collections::BTreeMap<String, u64>,
}

/// Why a request was refused, in `vivarium_rejections_total{reason=...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    QueueFull,
    QueueTimeout,
    MemoryBudget,
    TooManySessions,
    ShuttingDown,
    /// No valid API key (counted here, refused by `auth`).
    Unauthorized,
    /// A tenant's quota (`quota_exceeded`, `snapshot_quota_exceeded`).
    Quota,
}

impl Rejection {
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::QueueFull => "queue_full",
            Rejection::QueueTimeout => "queue_timeout",
            Rejection::MemoryBudget => "memory_budget",
            Rejection::TooManySessions => "too_many_sessions",
            Rejection::ShuttingDown => "shutting_down",
            Rejection::Unauthorized => "unauthorized",
            Rejection::Quota => "tenant_quota",
        }
    }
}

/// What a run is counted as in `vivarium_executions_total{kind=...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// `/v1/execute`, streamed or not, and MCP's `execute_python`.
    Execute,
    /// A session turn (HTTP or MCP).
    SessionTurn,
    /// `/api/v2/execute`.
    PistonExecute,
}

impl RunKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Execute => "execute",
            RunKind::SessionTurn => "session_turn",
            RunKind::PistonExecute => "piston_execute",
        }
    }
}

/// Why a session closed, in `vivarium_sessions_closed_total{reason=...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Closed by its client.
    Deleted,
    /// Idle or past its lifetime.
    Expired,
    /// A turn ended its interpreter.
    Ended,
    /// The server shut down.
    Shutdown,
    /// The worker process that held it died.
    WorkerLost,
    /// Cluster: another node took it over (its lease names that node now); the copy here
    /// was dropped unwritten.
    Moved,
}

impl CloseReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Deleted => "deleted",
            CloseReason::Expired => "expired",
            CloseReason::Ended => "ended",
            CloseReason::Shutdown => "shutdown",
            CloseReason::WorkerLost => "worker_lost",
            CloseReason::Moved => "moved",
        }
    }
}

/// What happened to a session as data, in `vivarium_session_events_total{event=...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEvent {
    /// A stopped turn rolled its session back.
    Rollback,
    /// A snapshot was taken (`POST /v1/sessions/{id}/snapshot`, MCP).
    Snapshot,
    /// A session was forked.
    Fork,
    /// A session was restored from a snapshot.
    Restore,
    /// A session this process did not hold came back from its own snapshot.
    Resume,
    /// An idle session was written to the store and its instance freed (idle past the
    /// threshold, or the coldest when the server needed room).
    Hibernate,
    /// A hibernated session came back for a request.
    Wake,
    /// A session was put back in the state after one of its kept turns.
    RollbackToTurn,
}

impl SessionEvent {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionEvent::Rollback => "rollback",
            SessionEvent::Snapshot => "snapshot",
            SessionEvent::Fork => "fork",
            SessionEvent::Restore => "restore",
            SessionEvent::Resume => "resume",
            SessionEvent::Hibernate => "hibernate",
            SessionEvent::Wake => "wake",
            SessionEvent::RollbackToTurn => "rollback_to_turn",
        }
    }
}

/// Gauges read from elsewhere at render time.
pub struct Gauges {
    /// Sessions whose interpreter is in memory.
    pub live_sessions: usize,
    /// Sessions written to the store, to come back on their next request.
    pub hibernated_sessions: usize,
    /// Bytes the hibernated sessions' snapshots take in the store.
    pub hibernated_bytes: u64,
    pub queue_depth: usize,
    pub running: usize,
    pub memory_charged_bytes: u64,
    pub memory_budget_bytes: u64,
    pub sandbox_dirs: usize,
    /// Instances in the engine's pool (sandboxes, sessions, teardowns, baselines).
    pub pooled_instances: u64,
    pub ready: bool,
    /// Worker processes alive (0 when runs are in process), and the pool's size.
    pub workers: usize,
    pub workers_configured: usize,
    /// Replacement workers started (one per worker lost, once it came up).
    pub workers_restarted: u64,
    /// Each jail layer's state in the workers, as `(layer, state)`, one per live worker.
    pub jail: Vec<(&'static str, &'static str)>,
}

pub struct Metrics {
    /// (kind, status) → count; kind is `execute` or `session_turn`.
    executions: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    latency: Histogram<12>,
    memory_peak: Histogram<7>,
    /// How long a hibernated session took to come back.
    wake: Histogram<12>,
    fuel_total: AtomicU64,
    rejections: Mutex<BTreeMap<&'static str, u64>>,
    responses: Mutex<BTreeMap<u16, u64>>,
    sessions_opened: AtomicU64,
    /// reason → count (`deleted`, `expired`, `ended`, `shutdown`).
    sessions_closed: Mutex<BTreeMap<&'static str, u64>>,
    /// event → count (`rollback`, `snapshot`, `fork`, `restore`, `resume`).
    session_events: Mutex<BTreeMap<&'static str, u64>>,
    panics: AtomicU64,
    /// Worker processes lost, by the signal that ended them (`none` for an exit or a
    /// protocol breach).
    workers_lost: Mutex<BTreeMap<&'static str, u64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            executions: Mutex::new(BTreeMap::new()),
            latency: Histogram::new(LATENCY_BUCKETS),
            memory_peak: Histogram::new(MEMORY_BUCKETS),
            wake: Histogram::new(LATENCY_BUCKETS),
            fuel_total: AtomicU64::new(0),
            rejections: Mutex::new(BTreeMap::new()),
            responses: Mutex::new(BTreeMap::new()),
            sessions_opened: AtomicU64::new(0),
            sessions_closed: Mutex::new(BTreeMap::new()),
            session_events: Mutex::new(BTreeMap::new()),
            panics: AtomicU64::new(0),
            workers_lost: Mutex::new(BTreeMap::new()),
        }
    }

    /// A worker process died, of `signal` if one ended it.
    pub fn worker_lost(&self, signal: Option<i32>) {
        let cause = signal.map_or("none", crate::worker::signal_name);
        *lock(&self.workers_lost).entry(cause).or_default() += 1;
    }

    pub fn executed(&self, kind: RunKind, report: &Report) {
        let kind = kind.as_str();
        *lock(&self.executions)
            .entry((kind, report.status.as_str()))
            .or_default() += 1;
        self.latency.observe(report.usage.wall_ms / 1e3);
        self.memory_peak
            .observe(report.usage.memory_peak_bytes as f64);
        self.fuel_total
            .fetch_add(report.usage.fuel, Ordering::Relaxed);
    }

    pub fn rejected(&self, reason: Rejection) {
        *lock(&self.rejections).entry(reason.as_str()).or_default() += 1;
    }

    pub fn responded(&self, status: u16) {
        *lock(&self.responses).entry(status).or_default() += 1;
    }

    pub fn session_opened(&self) {
        self.sessions_opened.fetch_add(1, Ordering::Relaxed);
    }

    pub fn session_closed(&self, reason: CloseReason) {
        *lock(&self.sessions_closed)
            .entry(reason.as_str())
            .or_default() += 1;
    }

    pub fn session_event(&self, event: SessionEvent) {
        *lock(&self.session_events)
            .entry(event.as_str())
            .or_default() += 1;
    }

    /// A hibernated session came back, in `seconds`.
    pub fn woke(&self, seconds: f64) {
        self.session_event(SessionEvent::Wake);
        self.wake.observe(seconds);
    }

    pub fn panicked(&self) {
        self.panics.fetch_add(1, Ordering::Relaxed);
    }

    /// What the operator console shows of the counters.
    pub fn console(&self) -> ConsoleCounters {
        ConsoleCounters {
            runs: lock(&self.executions).values().sum(),
            latency_at_most_seconds: [0.5, 0.9, 0.99]
                .into_iter()
                .map(|q| (format!("p{}", (q * 100.0) as u32), self.latency.at_most(q)))
                .collect(),
            refusals: lock(&self.rejections)
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            responses: lock(&self.responses)
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        }
    }

    pub fn render(&self, g: &Gauges) -> String {
        let mut out = Exposition(String::with_capacity(4096));
        out.header(
            "vivarium_executions_total",
            "counter",
            "Executions and session turns that ran, by kind and result status.",
        );
        for ((kind, status), n) in lock(&self.executions).iter() {
            out.line(format_args!(
                "vivarium_executions_total{{kind=\"{kind}\",status=\"{status}\"}} {n}"
            ));
        }
        out.histogram(
            "vivarium_execution_duration_seconds",
            "Wall time of executions and session turns.",
            &self.latency,
        );
        out.histogram(
            "vivarium_execution_memory_peak_bytes",
            "Peak linear memory of each execution or turn.",
            &self.memory_peak,
        );
        out.histogram(
            "vivarium_session_wake_seconds",
            "How long a hibernated session took to come back (read, decode, restore).",
            &self.wake,
        );
        out.value(
            "vivarium_fuel_consumed_total",
            "counter",
            "Fuel burnt by all executions and turns.",
            self.fuel_total.load(Ordering::Relaxed),
        );
        out.counts(
            "vivarium_rejections_total",
            "Requests refused by admission control, by reason.",
            "reason",
            &lock(&self.rejections),
        );
        out.counts(
            "vivarium_http_responses_total",
            "HTTP responses sent, by status code.",
            "code",
            &lock(&self.responses),
        );
        out.value(
            "vivarium_sessions_opened_total",
            "counter",
            "Sessions opened.",
            self.sessions_opened.load(Ordering::Relaxed),
        );
        out.counts(
            "vivarium_sessions_closed_total",
            "Sessions closed, by reason (deleted, expired, ended, shutdown).",
            "reason",
            &lock(&self.sessions_closed),
        );
        out.counts(
            "vivarium_session_events_total",
            "Sessions as data: rollbacks of stopped turns and to kept turns, snapshots, forks, restores, and sessions brought back from their own snapshot.",
            "event",
            &lock(&self.session_events),
        );
        out.value(
            "vivarium_handler_panics_total",
            "counter",
            "Panics caught in request handlers (answered with 500).",
            self.panics.load(Ordering::Relaxed),
        );
        let gauges: [(&str, &str, f64); 10] = [
            (
                "vivarium_pooled_instances",
                "Instances in the engine's pool now (sandboxes, sessions, teardowns, baselines).",
                g.pooled_instances as f64,
            ),
            (
                "vivarium_live_sessions",
                "Sessions resident now (their interpreter in memory).",
                g.live_sessions as f64,
            ),
            (
                "vivarium_hibernated_sessions",
                "Sessions hibernated now (in the snapshot store, back on their next request).",
                g.hibernated_sessions as f64,
            ),
            (
                "vivarium_hibernated_bytes",
                "Bytes the hibernated sessions' snapshots take in the store.",
                g.hibernated_bytes as f64,
            ),
            (
                "vivarium_queue_depth",
                "Requests waiting for an execution slot.",
                g.queue_depth as f64,
            ),
            (
                "vivarium_running_executions",
                "Guest runs in progress.",
                g.running as f64,
            ),
            (
                "vivarium_memory_charged_bytes",
                "Memory charged to the budget now: the linear memory, tmpfs files and reserves of running sandboxes and resident sessions.",
                g.memory_charged_bytes as f64,
            ),
            (
                "vivarium_memory_budget_bytes",
                "The budget what is charged must fit in.",
                g.memory_budget_bytes as f64,
            ),
            (
                "vivarium_sandbox_dirs",
                "Sandbox temp dirs present now.",
                g.sandbox_dirs as f64,
            ),
            (
                "vivarium_ready",
                "1 when the runtime is loaded and the server takes executions.",
                if g.ready { 1.0 } else { 0.0 },
            ),
        ];
        for (name, help, v) in gauges {
            out.value(name, "gauge", help, v);
        }
        if g.workers_configured > 0 {
            out.value(
                "vivarium_workers",
                "gauge",
                "Worker processes alive now (guest code runs only in them).",
                g.workers,
            );
            out.counts(
                "vivarium_workers_lost_total",
                "Worker processes that died, by the signal that ended them; each was replaced.",
                "signal",
                &lock(&self.workers_lost),
            );
            out.value(
                "vivarium_workers_restarted_total",
                "counter",
                "Replacement worker processes started.",
                g.workers_restarted,
            );
            out.header(
                "vivarium_worker_jail_layers",
                "gauge",
                "Live workers by jail layer and how much of it holds (full, partial, missing).",
            );
            let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
            for k in &g.jail {
                *counts.entry(*k).or_default() += 1;
            }
            for ((layer, state), n) in counts {
                out.line(format_args!(
                    "vivarium_worker_jail_layers{{layer=\"{layer}\",state=\"{state}\"}} {n}"
                ));
            }
        }
        out.0
    }
}

/// Prometheus' text exposition format, written a metric at a time.
struct Exposition(String);

impl Exposition {
    fn line(&mut self, line: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.0, "{line}");
    }

    /// A metric's `# HELP` and `# TYPE` lines.
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        self.line(format_args!("# HELP {name} {help}"));
        self.line(format_args!("# TYPE {name} {kind}"));
    }

    /// A metric of one value.
    fn value(&mut self, name: &str, kind: &str, help: &str, v: impl std::fmt::Display) {
        self.header(name, kind, help);
        self.line(format_args!("{name} {v}"));
    }

    /// A counter by one label.
    fn counts<K: std::fmt::Display>(
        &mut self,
        name: &str,
        help: &str,
        label: &str,
        counts: &BTreeMap<K, u64>,
    ) {
        self.header(name, "counter", help);
        for (k, n) in counts {
            self.line(format_args!("{name}{{{label}=\"{k}\"}} {n}"));
        }
    }

    fn histogram<const N: usize>(&mut self, name: &str, help: &str, h: &Histogram<N>) {
        self.header(name, "histogram", help);
        h.render(&mut self.0, name);
    }
}
