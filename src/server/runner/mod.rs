//! The one seam where a request becomes a run.
//!
//! Every front door (`server::api`) parses its own wire format into a [`RunSpec`] (or a
//! session call) and hands it here; nothing else in the server touches admission, the guest
//! threads, the session registry or the audit log. For each run the runner:
//!
//! 1. takes the loaded [`Vivarium`] (503 while loading or shutting down);
//! 2. admits it: a concurrency slot and, for sandboxes, room in the memory budget (429 when full);
//! 3. registers its cancel flag, so shutdown and a client that hangs up end it;
//! 4. runs it on a guest thread (`Vivarium::run`, `open_interpreter`, `check`, a turn);
//! 5. scans what it returns under the request's leakage policy ([`Guard`]): reports,
//!    redacts, or withholds it (422 `output_leak`);
//! 6. counts it in the metrics and completes its audit record.
//!
//! The front door then maps the result to its own wire format. Sessions as data (snapshot,
//! fork, restore) are here too (`snapshots.rs`); a worker-process boundary belongs here,
//! behind these methods.

mod live;
mod sessions;
mod snapshots;
mod threads;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use live::{LiveText, TextSink};
pub use sessions::{SessionTurn, TurnDone, Turned};

use super::admission::{Admission, MemoryNeed, RESERVE_BYTES};
use super::audit::{Audit, AuditRecord, Outcome};
use super::config::{Config, LeakageConfig};
use super::error::{ApiError, ApiResult};
use super::metrics::{CloseReason, Gauges, Metrics, Rejection, RunKind};
use super::sessions::Registry;
use super::snapshots::Snapshots;
use crate::budget::HostBudget;
use crate::check::CheckResult;
use crate::leakage::{Guard, LeakPolicy};
use crate::packages::PackageEnv;
use crate::snapshot::SnapshotStore;
use crate::vivarium::{Executed, RunSpec, Vivarium};
use threads::GuestThreads;

/// Admission, guest threads, sessions, metrics and audit: what every run goes through.
pub struct Runner {
    /// Set once the runtime is loaded.
    host: OnceLock<Arc<Vivarium>>,
    shutting_down: AtomicBool,
    admission: Admission,
    guests: GuestThreads,
    sessions: Registry,
    metrics: Arc<Metrics>,
    audit: Audit,
    /// The memory budget admission holds sandboxes to (for the gauges).
    memory_budget_bytes: u64,
    /// What a session turn may ask for at most.
    maximum: crate::limits::Limits,
    /// The leakage rules and policies.
    leakage: LeakageConfig,
    /// Where session snapshots are kept.
    snapshots: Snapshots,
    /// One gate per session id coming back from its own snapshot: it comes back once.
    resuming: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Held while shutdown keeps sessions over the restart.
    draining: tokio::sync::Mutex<()>,
    /// Notified when resident sessions come close to the cap: the sweeper then hibernates
    /// the coldest in the background, so the next open or wake rarely waits for one.
    pressure: tokio::sync::Notify,
}

impl Runner {
    /// A runner for `config`, writing its audit lines to `audit` and keeping snapshots in
    /// `snapshots`; no runtime yet.
    pub fn new(config: &Config, audit: Audit, snapshots: Arc<dyn SnapshotStore>) -> Self {
        let metrics = Arc::new(Metrics::new());
        let budget = HostBudget::new(config.memory_budget_bytes);
        Runner {
            host: OnceLock::new(),
            shutting_down: AtomicBool::new(false),
            admission: Admission::new(
                config.max_concurrency,
                config.queue_depth,
                config.queue_timeout,
                budget,
                metrics.clone(),
            ),
            guests: GuestThreads::default(),
            sessions: Registry::new(
                config.max_sessions,
                config.max_hibernated_sessions,
                config.session_idle,
                config.session_lifetime,
            ),
            metrics,
            audit,
            memory_budget_bytes: config.memory_budget_bytes,
            maximum: config.maximum,
            leakage: config.leakage.clone(),
            snapshots: Snapshots::new(
                snapshots,
                config.snapshot_retention,
                config.snapshot_quota_bytes,
            ),
            resuming: Default::default(),
            draining: Default::default(),
            pressure: Default::default(),
        }
    }

    /// The leakage policy for a request that asks for `requested` (`None`: the server's
    /// default); 400 when it is weaker than the server's floor.
    pub fn leak_policy(&self, requested: Option<LeakPolicy>) -> ApiResult<LeakPolicy> {
        let policy = requested.unwrap_or(self.leakage.default);
        if policy < self.leakage.floor {
            return Err(ApiError::InvalidRequest(format!(
                "leakage \"{}\" is weaker than this server allows (at least \"{}\")",
                policy.as_str(),
                self.leakage.floor.as_str()
            )));
        }
        Ok(policy)
    }

    /// The guard for one run under `policy` (from [`Runner::leak_policy`]): the server's
    /// rules, the values of `env` as literal secrets unless named in `allow_env`.
    pub fn leak_guard(
        &self,
        policy: LeakPolicy,
        env: &[(String, String)],
        allow_env: &[String],
    ) -> Arc<Guard> {
        Arc::new(Guard::new(
            self.leakage.scanner.clone(),
            policy,
            env,
            allow_env,
        ))
    }

    /// Makes the loaded runtime available; runs are refused with 503 until then.
    pub fn set_host(&self, host: Arc<Vivarium>) {
        let _ = self.host.set(host);
    }

    /// The runtime, when loaded and not shutting down.
    pub fn host(&self) -> ApiResult<Arc<Vivarium>> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(ApiError::ShuttingDown);
        }
        self.host.get().cloned().ok_or(ApiError::NotReady)
    }

    /// The runtime if it was loaded, shutting down or not (for clean-up).
    pub fn loaded_host(&self) -> Option<&Arc<Vivarium>> {
        self.host.get()
    }

    /// The metrics, for the counters only front doors see (responses, panics).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Runs `spec` in a fresh sandbox, admitted for its memory; counted as `kind`, with the
    /// report's status, exit code, usage and leaks on `record`. What it returns passes
    /// `guard` first, on the guest thread (a scan of a large output is not executor work):
    /// under `deny`, a leak is a 422 `output_leak` and nothing else leaves.
    pub async fn execute(
        &self,
        spec: RunSpec,
        guard: Arc<Guard>,
        kind: RunKind,
        record: &mut AuditRecord,
    ) -> ApiResult<Executed> {
        let host = self.host()?;
        let input: u64 = spec.files.iter().map(|f| f.content.len() as u64).sum();
        let need = MemoryNeed {
            reserve: reserve_for(&spec.limits),
            starts_with: host.starting_bytes(spec.template, input),
        };
        // Idle sessions make way for work: the coldest hibernate when the budget is short.
        self.make_room(need.reserve + need.starts_with, false).await;
        let ticket = self.admission.admit(Some(need)).await?;
        let cancel = self.guests.register();
        let flag = cancel.flag();
        let policy = guard.policy();
        let (executed, leaks) = self
            .guests
            .run(move || {
                // Admission holds until the sandbox is done, on the guest thread.
                let _ticket = ticket;
                host.run(spec, flag).map(|mut executed| {
                    let leaks = match &mut executed {
                        Executed::Ran { report, .. } => guard.apply(report, None),
                        Executed::Denied(_) => Vec::new(),
                    };
                    (executed, leaks)
                })
            })
            .await?
            .map_err(ApiError::from_exec)?;
        drop(cancel);
        if let Executed::Ran { report, .. } = &executed {
            self.metrics.executed(kind, report);
            record.set_report(report);
            withhold_if_denied(policy, leaks, record)?;
        }
        Ok(executed)
    }

    /// The environment of the packages `raw` names (checked by the front door), resolved off
    /// the executor (pip runs, and downloads on a first request); its wheels go on `record`.
    /// Nothing is admitted until it is there: a failed resolution runs nothing.
    pub async fn packages(
        &self,
        raw: Vec<String>,
        record: &mut AuditRecord,
    ) -> ApiResult<Arc<PackageEnv>> {
        let host = self.host()?;
        if raw.is_empty() {
            return Ok(host.no_packages());
        }
        let env = tokio::task::spawn_blocking(move || host.packages(&raw))
            .await
            .map_err(|e| ApiError::Internal(format!("package resolution: {e}")))?
            .map_err(ApiError::Package)?;
        record.packages = env.pins.clone();
        Ok(env)
    }

    /// Checks `code` in a fresh sandbox of its own, admitted like any execution.
    pub async fn check(&self, code: String) -> ApiResult<CheckResult> {
        let host = self.host()?;
        let need = MemoryNeed {
            reserve: reserve_for(&host.checker_limits()),
            starts_with: host.starting_bytes(crate::template::Template::Python, 0),
        };
        self.make_room(need.reserve + need.starts_with, false).await;
        let ticket = self.admission.admit(Some(need)).await?;
        let cancel = self.guests.register();
        let flag = cancel.flag();
        let result = self
            .guests
            .run(move || {
                let _ticket = ticket;
                host.check(&code, flag)
            })
            .await?;
        drop(cancel);
        Ok(result?)
    }

    /// Writes `record`, completed with how its request ended.
    pub fn finish(&self, record: AuditRecord, outcome: Outcome) {
        self.audit.write(record.outcome(outcome));
    }

    /// Counts and audits a request refused before it reached a front door (no API key).
    pub fn refused(&self, record: AuditRecord, why: Rejection, error: &ApiError) {
        self.metrics.rejected(why);
        self.finish(record, Outcome::failed(error));
    }

    /// The budget every sandbox of this server is charged to (the runtime is opened with
    /// it).
    pub fn budget(&self) -> Arc<HostBudget> {
        self.admission.budget().clone()
    }

    /// The gauges `/metrics` shows.
    pub fn gauges(&self) -> Gauges {
        let (resident, hibernated, hibernated_bytes) = self.sessions.counts();
        Gauges {
            live_sessions: resident,
            hibernated_sessions: hibernated,
            hibernated_bytes,
            queue_depth: self.admission.queue_depth(),
            running: self.admission.running(),
            memory_charged_bytes: self.admission.budget().charged(),
            memory_budget_bytes: self.memory_budget_bytes,
            sandbox_dirs: self.host.get().map_or(0, |h| h.live_sandbox_dirs()),
            pooled_instances: self
                .host
                .get()
                .and_then(|h| h.pooled_instances())
                .unwrap_or(0),
            ready: self.host().is_ok(),
        }
    }

    /// Shutdown's first step: no new work is taken (503 and 429 `shutting_down` from now on).
    pub fn stop_taking_work(&self) {
        self.shutting_down.store(true, Ordering::Release);
        self.admission.close();
    }

    /// Guest runs in progress now.
    pub fn running(&self) -> usize {
        self.guests.running()
    }

    /// Cancels every run in progress, and every later one.
    pub fn cancel_all(&self) {
        self.guests.cancel_all();
    }

    /// Waits until no guest thread is left, or `limit` passes; true when none is left.
    pub async fn wait_idle(&self, limit: Duration) -> bool {
        self.guests.wait_idle(limit).await
    }

    /// Closes expired sessions, with an audit line each.
    pub fn sweep_sessions(&self) {
        let (expired, slept) = self.sessions.sweep();
        let ids = expired
            .iter()
            .map(|s| s.id.as_str())
            .chain(slept.iter().map(String::as_str));
        for id in ids {
            tracing::info!(session = %id, "session expired");
            self.audit
                .write(AuditRecord::internal(super::audit::Action::SessionExpire).session(id));
            self.metrics.session_closed(CloseReason::Expired);
            self.forget_own_snapshot(id);
        }
        for s in expired {
            s.close().release();
        }
    }

    /// Deletes snapshots past their retention.
    pub async fn sweep_snapshots(&self) {
        match self.snapshots.sweep().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "snapshots past their retention deleted"),
            Err(e) => tracing::warn!(error = %e, "sweeping snapshots failed"),
        }
    }

    /// How often [`Runner::sweep_sessions`] should run.
    pub fn sweep_interval(&self) -> Duration {
        self.sessions.sweep_interval()
    }

    /// Writes an audit line with no request behind it (shutdown).
    pub fn audit_internal(&self, action: super::audit::Action) {
        self.audit.write(AuditRecord::internal(action));
    }
}

/// Records what the leakage scan found on `record` and, under `deny`, turns any finding into
/// the 422 `output_leak` that withholds everything the run returned.
fn withhold_if_denied(
    policy: LeakPolicy,
    leaks: Vec<crate::report::Leak>,
    record: &mut AuditRecord,
) -> ApiResult<()> {
    record.set_leaks(&leaks);
    if policy == LeakPolicy::Deny && !leaks.is_empty() {
        return Err(ApiError::OutputLeak(leaks));
    }
    Ok(())
}

/// What a sandbox under `limits` holds for its life besides its memory: the reserve, and its
/// two output streams up to their cap.
fn reserve_for(limits: &crate::limits::Limits) -> u64 {
    RESERVE_BYTES.saturating_add(limits.output_bytes.saturating_mul(2))
}
