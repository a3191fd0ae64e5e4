//! The runs and sessions behind the intake.
//!
//! A front door's ask becomes a [`RunSpec`] (or a session call) in `supervisor::intake`,
//! which hands it here; nothing else in the server touches admission, the workers, the
//! session registry or the audit log. For each run the runner:
//!
//! 1. takes the loaded [`Vivarium`] (503 while loading or shutting down);
//! 2. admits it: a concurrency slot and, for sandboxes, room in the memory budget (429 when full);
//! 3. sends it to a worker process as a job (the least loaded for a run or a new session,
//!    the session's own for a turn); dropping the call cancels it there;
//! 4. reads the worker's reply as hostile (bounded, of the job's kind);
//! 5. scans what it returns under the request's leakage policy ([`Guard`]; a large report
//!    on a blocking thread): reports, redacts, or withholds it (422 `output_leak`);
//! 6. counts it in the metrics and completes its audit record.
//!
//! The front door then maps the result to its own wire format. Sessions as data (snapshot,
//! fork, restore: `user_snapshots.rs`; a session's own snapshot: `durability.rs`; wake-up:
//! `wake.rs`; hibernation, pressure and the drain: `residency.rs`; reading an image from a
//! worker: `capture.rs`) are here too.

mod capture;
mod code_mode;
mod console;
mod durability;
mod events;
mod guard;
mod history;
mod live;
mod packages;
mod placement;
mod residency;
mod templates;
mod turns;
mod user_snapshots;
mod volumes;
mod wake;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use super::session::{TurnDone, Turned};
pub use code_mode::CodeMode;
pub use console::ConsoleState;
pub use history::{ForkRequest, KeptTurns, RollbackRequest};
pub use live::{LiveText, TextSink};
pub use templates::BuildPlan;
pub use turns::Opening;
pub use turns::SessionTurn;

use super::admission::{Admission, MemoryNeed, RESERVE_BYTES};
use super::audit::{Audit, AuditRecord, Outcome};
use super::cluster::Cluster;
use super::egress::RunEgress;
use super::error::{SupervisorError, SupervisorResult};
use super::events::{Draft, EventKind};
use super::metrics::{CloseReason, Gauges, Metrics, Rejection, RunKind};
use super::registry::Registry;
use super::snapshots::Snapshots;
use super::tenants::{Tenant, Tenants};
use super::{LeakageConfig, Settings};
use crate::budget::HostBudget;
use crate::check::CheckResult;
use crate::leakage::{Guard, LeakPolicy};
use crate::snapshot::SnapshotStore;
use crate::vivarium::{Executed, RunSpec, Vivarium};
use crate::worker::{Death, ExecuteJob, Failure, Job, JobError, PackageRef, Reply, Sinks, Workers};

/// Admission, the workers, sessions, metrics and audit: what every run goes through.
pub struct Runner {
    /// Set once the runtime is loaded: the supervisor's own (templates, bindings, package
    /// resolution; it runs no guest code when there are workers).
    host: OnceLock<Arc<Vivarium>>,
    /// Where guest code runs; set with `host`.
    workers: OnceLock<Workers>,
    /// The shared page the budget is counted in, for the workers (`None` in process).
    budget_fd: Option<Arc<std::os::fd::OwnedFd>>,
    shutting_down: AtomicBool,
    admission: Admission,
    sessions: Registry,
    metrics: Arc<Metrics>,
    audit: Arc<Audit>,
    /// Network by exception: the performer, when the operator allows any host.
    egress: Option<Arc<super::egress::Egress>>,
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
    /// With `--cluster`: this node's leases and heartbeat in the shared store.
    cluster: Option<Arc<Cluster>>,
    /// SIGTERM arrived: `/readyz` says 503 while requests are still served (the drain delay).
    leaving: AtomicBool,
    /// Who each key belongs to, and what each tenant holds.
    tenants: Tenants,
    /// Whether what the snapshot store held at start is counted against its tenants.
    stored_counted: AtomicBool,
    /// Code mode's executions, resident or kept as journals.
    executions: super::executions::Executions,
    /// Each tenant's lifecycle events and webhooks.
    events: super::events::Events,
    /// Tenants' package jobs: their places, the lines waiting, the resolutions in flight.
    package_jobs: packages::PackageJobs,
    /// Tenants' volumes on this node.
    volumes: Arc<crate::volumes::VolumeStore>,
    /// Tenants' templates on this node (set with the runtime: they live in its home).
    templates: OnceLock<super::templates::UserTemplates>,
    /// Where templates are kept and what a tenant may hold of them (`None`: in the
    /// runtime's home, the default limits).
    template_settings: Option<super::templates::TemplateSettings>,
    /// What a session keeps of its last turns unless it asks otherwise.
    pub(super) turn_history: crate::vocabulary::TurnHistory,
}

impl Runner {
    /// A runner for `config`, writing its audit lines to `audit` and keeping snapshots in
    /// `snapshots`; no runtime yet.
    pub fn new(
        config: &Settings,
        audit: Audit,
        snapshots: Arc<dyn SnapshotStore>,
        volumes: Arc<crate::volumes::VolumeStore>,
        tenants: Tenants,
    ) -> Self {
        let metrics = Arc::new(Metrics::new());
        // With workers, one budget for all of them: its counter in a page they share.
        let (budget, budget_fd) = match config
            .shared_budget
            .then(|| HostBudget::shared(config.memory_budget_bytes))
        {
            Some(Ok((budget, fd))) => (budget, Some(Arc::new(fd))),
            Some(Err(e)) => {
                tracing::warn!(error = %e, "no shared memory budget; each worker counts its own");
                (HostBudget::new(config.memory_budget_bytes), None)
            }
            None => (HostBudget::new(config.memory_budget_bytes), None),
        };
        let kept = Snapshots::new(snapshots.clone(), config.snapshot_retention);
        Runner {
            host: OnceLock::new(),
            workers: OnceLock::new(),
            budget_fd,
            shutting_down: AtomicBool::new(false),
            admission: Admission::new(
                config.max_concurrency,
                config.queue_depth,
                config.queue_timeout,
                budget,
                metrics.clone(),
            ),
            sessions: Registry::new(
                config.max_sessions,
                config.max_hibernated_sessions,
                config.session_idle,
                config.session_lifetime,
            ),
            metrics,
            audit: Arc::new(audit),
            egress: config.egress.clone(),
            memory_budget_bytes: config.memory_budget_bytes,
            maximum: config.maximum,
            leakage: config.leakage.clone(),
            cluster: config
                .cluster_ttl
                .map(|ttl| Arc::new(Cluster::new(config.node_id.clone(), snapshots.clone(), ttl))),
            // Journals are counted with snapshots: one store, one ledger.
            executions: super::executions::Executions::new(kept.clone(), config.executions),
            events: super::events::Events::new(config.webhooks.clone()),
            snapshots: kept,
            resuming: Default::default(),
            draining: Default::default(),
            pressure: Default::default(),
            leaving: AtomicBool::new(false),
            tenants,
            stored_counted: AtomicBool::new(false),
            package_jobs: packages::PackageJobs::new(config.queue_timeout),
            volumes,
            templates: OnceLock::new(),
            template_settings: config.templates.clone(),
            turn_history: config.turn_history,
        }
    }

    /// The tenant of API key `key` (`None`: keys are off).
    pub fn tenant(&self, key: Option<&str>) -> Arc<Tenant> {
        self.tenants.of(key)
    }

    /// Every tenant (for `/metrics`).
    pub fn tenants(&self) -> Vec<Arc<Tenant>> {
        self.tenants.all()
    }

    /// The server's hint on a `ModuleNotFoundError` (a worker knows nothing of the server's
    /// package policy).
    fn hint_missing_module(&self, report: &mut crate::report::Report) {
        if let Some(host) = self.loaded_host() {
            host.hint_missing_module(report);
        }
    }

    /// Whether this node is one of a cluster's (`--cluster`): there, a door whose sessions
    /// must outlive their node (E2B's sandboxes) opens them durable.
    pub fn in_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// This node's part in a cluster (`--cluster`).
    pub(in crate::supervisor) fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    /// The drain's first step (SIGTERM): `/readyz` turns 503, the heartbeat says the node
    /// drains; everything is still served until [`Runner::stop_taking_work`].
    pub(in crate::supervisor) async fn start_leaving(&self) {
        self.leaving.store(true, Ordering::Release);
        if let Some(c) = &self.cluster {
            c.start_draining().await;
        }
    }

    /// Whether the node is leaving (SIGTERM arrived).
    pub fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::Acquire)
    }

    /// The leakage policy for a request that asks for `requested` (`None`: the server's
    /// default); 400 when it is weaker than the server's floor.
    pub fn leak_policy(&self, requested: Option<LeakPolicy>) -> SupervisorResult<LeakPolicy> {
        let policy = requested.unwrap_or(self.leakage.default);
        if policy < self.leakage.floor {
            return Err(SupervisorError::InvalidRequest(format!(
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
        self.leak_guard_with_secrets(policy, env, allow_env, &Default::default())
    }

    /// The leakage guard of what leaves session `session` under `policy`: with its network
    /// secrets' values as literal secrets, when it has any.
    pub fn session_guard(
        &self,
        session: &super::session::Session,
        policy: LeakPolicy,
    ) -> Arc<Guard> {
        match &session.network {
            Some(grant) => self.leak_guard_with_secrets(policy, &[], &[], &grant.secrets),
            None => self.leak_guard(policy, &[], &[]),
        }
    }

    /// The egress counts, in Prometheus' text format (nothing when no host is allowed).
    pub fn render_egress(&self, out: &mut String) {
        if let Some(e) = &self.egress {
            e.render(out);
        }
    }

    /// [`Runner::leak_guard`] for a run whose requests carry `secrets`: their values are
    /// literal secrets of the scan, whatever the policy.
    pub fn leak_guard_with_secrets(
        &self,
        policy: LeakPolicy,
        env: &[(String, String)],
        allow_env: &[String],
        secrets: &crate::egress::Secrets,
    ) -> Arc<Guard> {
        Arc::new(Guard::with_secrets(
            self.leakage.scanner.clone(),
            policy,
            env,
            allow_env,
            &secrets.literals(),
            &secrets
                .env()
                .into_iter()
                .map(|(_, p)| p)
                .collect::<Vec<_>>(),
        ))
    }

    /// A run's network grant and secrets, from a request's `network.allow` (`None`: the
    /// operator's list as it is) and `secrets`, for the caller holding `key`: a 400 naming
    /// the field for a rule or a secret that does not parse or that the caller may not use,
    /// or for either on a server that allows no host.
    pub fn network_grant(
        &self,
        allow: Option<Vec<String>>,
        secrets: Vec<(String, crate::egress::SecretSource)>,
        key: Option<&str>,
    ) -> SupervisorResult<(Option<crate::egress::Network>, crate::egress::Secrets)> {
        use crate::egress::{AllowList, SecretSource, Secrets};
        let Some(egress) = &self.egress else {
            if allow.as_ref().is_some_and(|a| !a.is_empty()) || !secrets.is_empty() {
                return Err(SupervisorError::InvalidRequest(
                    "network: this server allows no outbound requests (its --egress-allow is empty)"
                        .into(),
                ));
            }
            return Ok((None, Secrets::default()));
        };
        let narrowed = match allow {
            None => None,
            Some(rules) => Some(
                AllowList::parse(&rules)
                    .map_err(|e| SupervisorError::InvalidRequest(format!("network.allow: {e}")))?,
            ),
        };
        let mut items = Vec::with_capacity(secrets.len());
        for (name, source) in secrets {
            let (value, hosts) = match source {
                SecretSource::Given { value, hosts } => (value, hosts),
                SecretSource::Operator(defined) => egress
                    .operator_secret(&defined, key)
                    .ok_or_else(|| {
                        SupervisorError::InvalidRequest(format!(
                            "secrets.{name}: the server defines no secret {defined:?} this key may use"
                        ))
                    })?,
            };
            items.push((name, value, hosts));
        }
        let secrets = Secrets::new(items)
            .map_err(|e| SupervisorError::InvalidRequest(format!("secrets: {e}")))?;
        // `network.allow: []` narrows to nothing: no network.
        let network = match narrowed {
            Some(n) if n.is_empty() => None,
            n => egress.grant(n),
        };
        if network.is_none() && !secrets.is_empty() {
            return Err(SupervisorError::InvalidRequest(
                "secrets: the run has no network to use them with".into(),
            ));
        }
        Ok((network, secrets))
    }

    /// Makes the loaded runtime and its workers available; runs are refused with 503 until
    /// then.
    pub fn set_host(&self, host: Arc<Vivarium>, workers: Workers) {
        let settings =
            self.template_settings
                .clone()
                .unwrap_or_else(|| super::templates::TemplateSettings {
                    dir: host.home().join("user-templates"),
                    limits: Default::default(),
                    shared: None,
                });
        let _ = self
            .templates
            .set(super::templates::UserTemplates::open(&settings));
        let _ = self.workers.set(workers);
        let _ = self.host.set(host);
    }

    /// Network by exception for one run or turn granted `network`: its requests performed
    /// here with `secrets` put in, audited as `record`'s, for `tenant`. The asker the
    /// worker's door calls and the run's record of its requests; `None` without network or
    /// when the operator allows no host.
    fn run_egress(
        &self,
        network: Option<&crate::egress::Network>,
        secrets: crate::egress::Secrets,
        tenant: &str,
        record: &AuditRecord,
    ) -> Option<(crate::hostcalls::egress::EgressAsker, Arc<RunEgress>)> {
        let (network, performer) = (network?, self.egress.as_ref()?);
        let budget = self.admission.budget().clone();
        let run = Arc::new(RunEgress::new(
            network.clone(),
            secrets,
            tenant,
            record,
            budget,
        ));
        Some((performer.asker(run.clone(), self.audit.clone()), run))
    }

    /// The runtime, when loaded and not shutting down.
    pub fn host(&self) -> SupervisorResult<Arc<Vivarium>> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(SupervisorError::ShuttingDown);
        }
        self.host.get().cloned().ok_or(SupervisorError::NotReady)
    }

    /// The shared budget's page, to hand each worker.
    pub fn budget_fd(&self) -> Option<Arc<std::os::fd::OwnedFd>> {
        self.budget_fd.clone()
    }

    /// The workers, once loaded.
    pub fn workers(&self) -> SupervisorResult<&Workers> {
        self.workers.get().ok_or(SupervisorError::NotReady)
    }

    /// The workers, if they were started (for shutdown and the ops endpoints).
    pub fn loaded_workers(&self) -> Option<&Workers> {
        self.workers.get()
    }

    /// A worker died: its sessions end (durable ones leave, to come back from their own
    /// snapshot on their next request), with a metric and an audit line each; its runs
    /// have already failed with `worker_lost`.
    pub fn worker_died(&self, death: &Death) {
        self.metrics.worker_lost(death.signal);
        let (ended, durable) = self.sessions.lost_with(death.link, &death.cause);
        for s in &durable {
            tracing::warn!(session = %s.id, "session's worker lost; it comes back from its own snapshot");
        }
        for _ in 0..ended.len() - durable.len() {
            self.metrics.session_closed(CloseReason::WorkerLost);
        }
        for remains in ended {
            remains.release();
        }
    }

    /// The runtime if it was loaded, shutting down or not (for clean-up).
    pub(in crate::supervisor) fn loaded_host(&self) -> Option<&Arc<Vivarium>> {
        self.host.get()
    }

    /// The metrics, for the counters only front doors see (responses, panics).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Runs `spec` in a fresh sandbox, admitted for its memory; counted as `kind`, with the
    /// report's status, exit code, usage and leaks on `record`. What it returns passes
    /// `guard` first (a large output is scanned on a blocking thread, not the executor):
    /// under `deny`, a leak is a 422 `output_leak` and nothing else leaves.
    pub async fn execute(
        &self,
        spec: RunSpec,
        guard: Arc<Guard>,
        kind: RunKind,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Executed> {
        let host = self.host()?;
        let program = &spec.program;
        if let Some(layer) = &program.layer {
            // A program may come back from a journal in the store: its layer must be one of
            // ours, where ours are.
            self.user_templates()?.check_layer(layer)?;
        }
        let input: u64 = program.files.iter().map(|f| f.content.len() as u64).sum();
        let need = MemoryNeed {
            reserve: reserve_for(&program.limits),
            starts_with: host
                .starting_bytes(program.template, input)
                .saturating_add(program.layer.as_ref().map_or(0, |l| l.extra_bytes)),
            counted: true,
        };
        // Idle sessions make way for work: the coldest hibernate when the budget is short.
        let tenant = self.tenant(record.key_id.as_deref());
        self.make_room(need.reserve + need.starts_with, false).await;
        let ticket = self.admit_run(&tenant, need).await?;
        let RunSpec {
            program,
            observer,
            packages,
            tools,
            egress: _,
            secrets,
            volumes: _,
        } = spec;
        let (leases, volumes) = self
            .lend_volumes(tenant.id(), &program.volumes, program.limits.disk_bytes)
            .await?;
        let egress = self.run_egress(program.network.as_ref(), secrets, tenant.id(), record);
        let job = Job::Execute(Box::new(ExecuteJob {
            program,
            observe: observer.is_some(),
            packages: PackageRef::of(&packages),
            volumes,
        }));
        // Code mode: the slot goes back while a round of tool calls waits for answers.
        let parking = tools
            .is_some()
            .then(|| ticket.slot() as Arc<dyn crate::worker::Parking>);
        let sinks = Sinks {
            observer,
            asker: None,
            tools,
            parking,
            egress: egress.as_ref().map(|(asker, _)| asker.clone()),
        };
        // Dropping this call (the client went away) cancels the run in its worker.
        let reply = self.workers()?.call(job, sinks).await;
        // Admission, the packages and the volumes' room are held until the run is done; a
        // writable volume's changes reach the shared store (a cluster) before the answer.
        drop((ticket, packages));
        for lease in leases {
            lease.settle().await;
        }
        let executed = match reply.map_err(|f| failure(f, ""))? {
            Reply::Executed(Executed::Ran {
                mut report,
                findings,
            }) => {
                self.hint_missing_module(&mut report);
                report.network = egress.map(|(_, run)| run.usage());
                Executed::Ran { report, findings }
            }
            Reply::Executed(denied @ Executed::Denied(_)) => denied,
            _ => return Err(out_of_turn()),
        };
        let policy = guard.policy();
        let (executed, leaks) = scan(executed, guard).await?;
        if let Executed::Ran { report, .. } = &executed {
            self.metrics.executed(kind, report);
            record.set_report(report);
            withhold_if_denied(policy, leaks, record)?;
        }
        Ok(executed)
    }

    /// Admits a run of `tenant` needing `need`; when its share of the memory budget is full,
    /// its own coldest idle session hibernates first (never another tenant's).
    async fn admit_run(
        &self,
        tenant: &Arc<Tenant>,
        need: MemoryNeed,
    ) -> SupervisorResult<super::admission::Ticket> {
        self.within_memory_share(tenant, || self.admission.admit(tenant, Some(need)))
            .await
    }

    /// Checks `code` in a worker's checker (`sandbox::Checkers`), admitted like any execution
    /// of key `key`'s tenant.
    pub async fn check(&self, code: String, key: Option<&str>) -> SupervisorResult<CheckResult> {
        let need = self.checker_need().await?;
        let ticket = self.admission.admit(&self.tenant(key), Some(need)).await?;
        let reply = self
            .workers()?
            .call(Job::Check { code }, Sinks::default())
            .await;
        drop(ticket);
        match reply.map_err(|f| failure(f, ""))? {
            Reply::Checked(c) => Ok(c),
            _ => Err(out_of_turn()),
        }
    }

    /// What a check's sandbox asks of the budget (not counted against the tenant's share:
    /// see [`MemoryNeed::counted`]), with room made for it first.
    pub(super) async fn checker_need(&self) -> SupervisorResult<MemoryNeed> {
        let host = self.host()?;
        let need = MemoryNeed {
            reserve: reserve_for(&host.checker_limits()),
            starts_with: host.starting_bytes(crate::template::Template::Python, 0),
            counted: false,
        };
        self.make_room(need.reserve + need.starts_with, false).await;
        Ok(need)
    }

    /// Test builds: does `fault` in the worker with the least work.
    #[cfg(debug_assertions)]
    pub async fn inflict(
        &self,
        fault: crate::worker::Fault,
    ) -> SupervisorResult<crate::worker::ProbeReport> {
        match self
            .workers()?
            .call(Job::Fault(fault), Sinks::default())
            .await
            .map_err(|f| failure(f, ""))?
        {
            Reply::Probed(report) => Ok(report),
            _ => Err(out_of_turn()),
        }
    }

    /// Writes `record`, completed with how its request ended.
    pub fn finish(&self, record: AuditRecord, outcome: Outcome) {
        if let Some((kind, draft)) = super::events::Events::of_audit(&record, outcome) {
            let tenant = self.tenant(record.key_id.as_deref());
            self.events.emit(tenant.id(), kind, draft);
        }
        self.audit.write(record.outcome(outcome));
    }

    /// Counts and audits a request refused before it reached a front door (no API key).
    pub fn refused(&self, record: AuditRecord, why: Rejection, outcome: Outcome) {
        self.metrics.rejected(why);
        self.finish(record, outcome);
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
            sandbox_dirs: self.host.get().map_or(0, |h| {
                h.live_sandbox_dirs() + self.workers.get().map_or(0, |w| worker_dirs(h, w))
            }),
            pooled_instances: self
                .host
                .get()
                .and_then(|h| h.pooled_instances())
                .unwrap_or(0)
                + self
                    .workers
                    .get()
                    .and_then(Workers::pooled_instances)
                    .unwrap_or(0),
            ready: self.host().is_ok(),
            workers: self.workers.get().map_or(0, |w| w.processes().len()),
            workers_configured: self.workers.get().map_or(0, Workers::configured),
            workers_restarted: self.workers.get().map_or(0, |w| w.lost_and_restarted().1),
            jail: self.workers.get().map_or_else(Vec::new, |w| {
                w.processes()
                    .iter()
                    .flat_map(|(_, j)| j.layers().map(|(n, l)| (n, l.as_str())))
                    .collect()
            }),
        }
    }

    /// Shutdown's first step: no new work is taken (503 and 429 `shutting_down` from now on).
    pub(in crate::supervisor) fn stop_taking_work(&self) {
        self.shutting_down.store(true, Ordering::Release);
        self.admission.close();
    }

    /// Guest runs in progress now.
    pub(in crate::supervisor) fn running(&self) -> usize {
        self.workers.get().map_or(0, Workers::in_flight)
    }

    /// Cancels every run in progress, and every later one.
    pub(in crate::supervisor) fn cancel_all(&self) {
        if let Some(w) = self.workers.get() {
            w.cancel_all();
        }
    }

    /// Waits until no run is left, or `limit` passes; true when none is left.
    pub(in crate::supervisor) async fn wait_idle(&self, limit: Duration) -> bool {
        let until = std::time::Instant::now() + limit;
        while self.running() > 0 {
            if std::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Closes expired sessions, with an audit line each.
    pub(in crate::supervisor) fn sweep_sessions(&self) {
        let (expired, slept) = self.sessions.sweep();
        let ids = expired
            .iter()
            .map(|s| (s.id.as_str(), s.tenant.clone()))
            .chain(
                slept
                    .iter()
                    .map(|(id, owner)| (id.as_str(), self.tenant(owner.as_deref()))),
            );
        for (id, tenant) in ids {
            tracing::info!(session = %id, "session expired");
            self.events
                .emit(tenant.id(), EventKind::SessionExpired, Draft::session(id));
            self.audit
                .write(AuditRecord::internal(super::audit::Action::SessionExpire).session(id));
            self.metrics.session_closed(CloseReason::Expired);
            self.forget_own_snapshot(id);
        }
        for s in expired {
            s.close().release();
        }
    }

    /// Deletes snapshots past their retention; the first time, counts what the store holds
    /// against its owners' tenants' `snapshot_bytes` quotas first. Returns the ids the store
    /// holds that are no snapshots (for [`Runner::sweep_executions`]).
    pub(in crate::supervisor) async fn sweep_snapshots(&self) -> Vec<crate::snapshot::SnapshotId> {
        let first = !self.stored_counted.swap(true, Ordering::AcqRel);
        let tenant_of = |owner: Option<&str>| self.tenant(owner);
        match self.snapshots.sweep(first.then_some(&tenant_of as _)).await {
            Ok((0, others)) => others,
            Ok((n, others)) => {
                tracing::info!(deleted = n, "snapshots past their retention deleted");
                others
            }
            Err(e) => {
                tracing::warn!(error = %e, "sweeping snapshots failed");
                if first {
                    // What the store holds is counted at the next sweep then.
                    self.stored_counted.store(false, Ordering::Release);
                }
                Vec::new()
            }
        }
    }

    /// How often [`Runner::sweep_sessions`] should run.
    pub(in crate::supervisor) fn sweep_interval(&self) -> Duration {
        self.sessions.sweep_interval()
    }

    /// The lifecycle event `kind` of `session`, which no request caused (it hibernated, woke).
    pub(in crate::supervisor) fn lifecycle_event(
        &self,
        session: &super::session::Session,
        kind: EventKind,
    ) {
        self.events
            .emit(session.tenant.id(), kind, Draft::session(&session.id));
    }

    /// Writes an audit line with no request behind it (shutdown).
    pub fn audit_internal(&self, action: super::audit::Action) {
        self.audit.write(AuditRecord::internal(action));
    }
}

/// Records what the leakage scan found on `record` and, under `deny`, turns any finding into
/// the 422 `output_leak` that withholds everything the run returned.
/// [`withhold_if_denied`] for output served as it is on disk, which cannot be redacted in
/// place: under `redact`, a `text` one holding a secret is withheld as under `deny`.
fn withhold_unredactable(
    policy: LeakPolicy,
    leaks: Vec<crate::report::Leak>,
    text: bool,
    record: &mut AuditRecord,
) -> SupervisorResult<()> {
    if policy == LeakPolicy::Redact && text && !leaks.is_empty() {
        return withhold_if_denied(LeakPolicy::Deny, leaks, record);
    }
    withhold_if_denied(policy, leaks, record)
}

fn withhold_if_denied(
    policy: LeakPolicy,
    leaks: Vec<crate::report::Leak>,
    record: &mut AuditRecord,
) -> SupervisorResult<()> {
    record.set_leaks(&leaks);
    if policy == LeakPolicy::Deny && !leaks.is_empty() {
        return Err(SupervisorError::OutputLeak(leaks));
    }
    Ok(())
}

/// Sandbox directories under the workers' scratch roots (`<base>/<pid>` each).
fn worker_dirs(host: &Vivarium, workers: &Workers) -> usize {
    let Some(base) = host.scratch_root().parent() else {
        return 0;
    };
    workers
        .processes()
        .iter()
        .map(|(pid, _)| crate::sandbox::workdir::sandbox_dirs_in(&base.join(pid.to_string())))
        .sum()
}

/// A run's result scanned under `guard` before anything leaves ([`scan_output`]).
async fn scan(
    executed: Executed,
    guard: Arc<Guard>,
) -> SupervisorResult<(Executed, Vec<crate::report::Leak>)> {
    match executed {
        Executed::Ran { report, findings } => {
            let (report, _, leaks) = scan_output(guard, *report, None).await?;
            let report = Box::new(report);
            Ok((Executed::Ran { report, findings }, leaks))
        }
        denied @ Executed::Denied(_) => Ok((denied, Vec::new())),
    }
}

/// Scans what a run or a turn returns under `guard`, the one rule for both: its streams,
/// a turn's final value, its files in memory, and its files held on disk (too large to
/// carry: scanned from there); off the executor when it is large. The report, the value and
/// the leaks found.
pub(super) async fn scan_output(
    guard: Arc<Guard>,
    mut report: crate::report::Report,
    mut result: Option<String>,
) -> SupervisorResult<(
    crate::report::Report,
    Option<String>,
    Vec<crate::report::Leak>,
)> {
    let large = report_bytes(&report) > 64 << 10;
    let apply = move || {
        let mut leaks = guard.apply(&mut report, result.as_mut());
        leaks.extend(crate::worker::held::scan_report(&guard, &mut report));
        (report, result, leaks)
    };
    if large {
        tokio::task::spawn_blocking(apply)
            .await
            .map_err(|e| SupervisorError::Internal(format!("scanning the output: {e}")))
    } else {
        Ok(apply())
    }
}

/// About how many bytes a scan of `report` reads.
pub(super) fn report_bytes(report: &crate::report::Report) -> usize {
    report.stdout.len()
        + report.stderr.len()
        + report
            .files
            .iter()
            .map(|f| match (&f.content, &f.held) {
                (Some(c), _) => c.len(),
                (None, Some(_)) => f.size as usize,
                (None, None) => 0,
            })
            .sum::<usize>()
        + report.outputs.iter().map(|o| o.data.len()).sum::<usize>()
}

/// A worker's refusal as the API says it; `session` names the session it was about.
pub(super) fn job_error(e: JobError, session: &str) -> SupervisorError {
    match e {
        JobError::InvalidPath { field, message } => SupervisorError::InvalidPath { field, message },
        JobError::InvalidRequest(m) => SupervisorError::InvalidRequest(m),
        JobError::HostBudget(message) => SupervisorError::Overloaded {
            message,
            retry_after_secs: 1,
        },
        JobError::Ended(reason) => SupervisorError::SessionEnded {
            id: session.to_string(),
            reason: crate::supervisor::session::EndInfo::from_reason(&reason).message,
        },
        JobError::CaptureRefused(m) => SupervisorError::SnapshotRefused(m),
        JobError::Incompatible(m) => SupervisorError::SnapshotIncompatible(m),
        JobError::Package(p) => SupervisorError::Package(p),
        JobError::NoSuchHandle(_) => SupervisorError::SessionNotFound(session.to_string()),
        JobError::NotKept(turn) => SupervisorError::TurnNotKept {
            id: session.to_string(),
            turn,
        },
        JobError::Internal(m) => SupervisorError::Internal(m),
    }
}

/// A job that came back without a reply, as the API says it.
pub(super) fn failure(f: Failure, session: &str) -> SupervisorError {
    match f {
        Failure::Job(e) => job_error(e, session),
        Failure::Lost => SupervisorError::WorkerLost("its process died".into()),
    }
}

/// A worker's reply of another kind than its job's (the reader checks kinds, so this is a
/// bug of ours, not the worker's).
pub(super) fn out_of_turn() -> SupervisorError {
    SupervisorError::Internal("a worker answered out of turn".into())
}

/// What a sandbox under `limits` holds for its life besides its memory: the reserve, and its
/// two output streams up to their cap.
fn reserve_for(limits: &crate::limits::Limits) -> u64 {
    RESERVE_BYTES.saturating_add(limits.output_bytes.saturating_mul(2))
}
