//! The server's life, shared by `vivarium serve` and `vivarium mcp`: build the state, load
//! the runtime in the background (`/readyz` says when it is loaded), serve, and shut down
//! gracefully on SIGTERM/SIGINT: stop accepting, let running executions finish for up to the
//! grace period, then cancel them through their cancel flags, close every session, wait for
//! every guest thread, and remove the scratch root so no temp dir survives. The sweep, the
//! heartbeat, the drain and that end are the supervisor's (`supervisor/housekeeping.rs`);
//! this file binds, serves and tells it when.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use rmcp::ServiceExt;
use tokio::sync::watch;

use super::api::mcp::VivariumMcp;
use super::auth::ApiKeys;
use super::config::{Config, LogFormat, ServeArgs};
use super::telemetry::{Telemetry, TelemetrySettings};
use super::{AppState, ServerState, openapi, router};
use crate::engine::EngineOptions;
use crate::snapshot::open_store;
use crate::supervisor::audit::{Action, Audit};
use crate::supervisor::housekeeping::{self, Housekeeping};
use crate::supervisor::runner::Runner;
use crate::supervisor::tenants::Tenants;
use crate::sync::lock;
use crate::template::Template;
use crate::vivarium::{Vivarium, VivariumOptions};
use crate::worker::{Death, JailConfig, PoolOptions, WorkerConfig, Workers};

/// A running server.
pub struct Server {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// The address it listens on (with the real port when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts the graceful shutdown and waits for it to finish.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        self.task.await.context("the server task failed")?
    }

    /// Waits until the server stops by itself (the runtime could not be loaded) or `signal`
    /// resolves, then shuts down gracefully.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
        let mut stopped = self.stop.subscribe();
        tokio::select! {
            _ = signal => {}
            _ = stopped.wait_for(|s| *s) => {}
        }
        self.shutdown().await
    }
}

/// The shared state for `config`, with no runtime loaded yet.
fn state(config: Config, keys: Option<ApiKeys>, openapi: String) -> anyhow::Result<AppState> {
    let audit = Audit::open(config.audit_log.as_deref())?;
    let snapshots = open_store(&config.snapshot_dir, config.snapshot_url.as_deref())?;
    let (volumes, unusable) =
        crate::volumes::VolumeStore::open(&config.volume_dir, config.volume_limits);
    if let Some(e) = unusable {
        tracing::warn!(
            dir = %config.volume_dir.display(), error = %e,
            "the volume directory cannot be made: volume operations will fail (--volume-dir)"
        );
    }
    // In a cluster, volumes live in the shared store beside the snapshots; this node's
    // folders are replicas of them.
    let mut config = config;
    let volumes = if config.cluster_ttl.is_some() {
        let (objects, prefix, describe) =
            crate::snapshot::open_objects(&config.snapshot_dir, config.snapshot_url.as_deref())?;
        // So are templates: every node serves every one, fetching a layer it lacks once.
        config.templates.shared = Some(Arc::new(
            crate::supervisor::templates::SharedTemplates::new(objects.clone(), prefix.clone()),
        ));
        let shared = crate::volumes::SharedVolumes::new(
            objects,
            prefix,
            describe,
            config.volume_limits.files,
        );
        volumes.replicating(Arc::new(crate::volumes::Replica::new(shared)))
    } else {
        volumes
    };
    let tenants = match &keys {
        Some(keys) => keys.tenants(config.tenant_quotas),
        None => Tenants::single(config.single_tenant_quotas),
    };
    Ok(Arc::new(ServerState {
        runner: Arc::new(Runner::new(
            &config.supervisor(),
            audit,
            snapshots,
            Arc::new(volumes),
            tenants,
        )),
        keys,
        load_error: Mutex::new(None),
        openapi,
        console_streams: Arc::new(tokio::sync::Semaphore::new(
            super::api::console::MAX_STREAMS,
        )),
        config,
    }))
}

/// How the runtime is opened for `config`.
fn host_options(config: &Config, budget: Arc<crate::budget::HostBudget>) -> VivariumOptions {
    let mut opts = VivariumOptions::from_env();
    opts.budget = budget;
    if let Some(dir) = &config.scratch_dir {
        opts.scratch_base = dir.clone();
    }
    opts.maximum = config.maximum;
    opts.packages = config.packages.clone();
    opts.engine.max_instances = if config.workers > 0 {
        // Guest code runs in the workers: the supervisor's own engine holds the baselines
        // and the package compile sandbox only.
        EngineOptions::slots_for(2)
    } else {
        EngineOptions::slots_for(config.max_live())
    };
    opts
}

/// The runtime, opened for `config`, with its workers: worker processes, or this process.
/// Blocking; call on a blocking thread inside the runtime.
fn open_runtime(state: &AppState) -> anyhow::Result<(Arc<Vivarium>, Workers)> {
    let config = &state.config;
    let host = Vivarium::open(host_options(config, state.runner.budget()))?;
    // The default template too (built once per machine, minutes on a new one), so the
    // first request does not wait for it; with workers every template, since a jailed
    // worker only reads the compiled ones.
    let templates: &[Template] = if config.workers > 0 {
        &Template::ALL
    } else {
        &[Template::Scientific]
    };
    for t in templates {
        host.template_pre(*t)?;
    }
    host.engine().forget_compiled_functions();
    if config.workers == 0 {
        return Ok((host.clone(), Workers::in_process(host)));
    }
    let exe = match &config.worker_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    let live = config.max_live();
    let per_worker = (live * 2).div_ceil(config.workers).clamp(1, live);
    let scratch_base = host
        .scratch_root()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| host.scratch_root().to_path_buf());
    // The jail names the folders workers may read, and a folder made after it is not in it.
    let _ = std::fs::create_dir_all(config.templates.dir.join("layers"));
    let worker_config = WorkerConfig {
        scratch_base,
        maximum: config.maximum,
        budget_bytes: config.memory_budget_bytes,
        shared_budget: false,
        max_instances: EngineOptions::slots_for(per_worker),
        package_dir: config.packages.dir.clone(),
        templates: Template::ALL.to_vec(),
        jail: JailConfig {
            enabled: config.worker_jail,
            read_only: vec![
                host.runtime_files().dir.clone(),
                crate::runtime::RuntimeOptions::from_env().home,
                config.packages.dir.clone(),
                config.templates.dir.clone(),
            ],
            read_write: vec![config.volume_dir.clone()],
            open_files: 65_536,
            file_bytes: config.maximum.disk_bytes.saturating_add(64 << 20),
            data_bytes: config.worker_heap_bytes,
            supervisor_netns: crate::worker::netns_inode(),
        },
    };
    let weak = Arc::downgrade(state);
    let on_death: Arc<dyn Fn(&Death) + Send + Sync> = Arc::new(move |death| {
        if let Some(state) = weak.upgrade() {
            state.runner.worker_died(death);
        }
    });
    let workers = tokio::runtime::Handle::current().block_on(Workers::start(
        PoolOptions {
            workers: config.workers,
            exe,
            config: worker_config,
            budget_fd: state.runner.budget_fd(),
        },
        on_death,
    ))?;
    Ok((host, workers))
}

/// Binds the listener, starts loading the runtime in the background, and serves.
pub async fn bind(args: ServeArgs) -> anyhow::Result<Server> {
    let config = args.resolve()?;
    let keys = config
        .api_keys_file
        .as_deref()
        .map(ApiKeys::load)
        .transpose()?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    let openapi = openapi::document()
        .to_json()
        .context("rendering the OpenAPI document")?;
    let state = state(config, keys, openapi)?;
    if let Some(keys) = &state.keys {
        tracing::info!(keys = keys.len(), "API keys required on /v1");
    }
    let (stop, stop_rx) = watch::channel(false);
    spawn_runtime_load(state.clone(), stop.clone());
    let task = tokio::spawn(serve_http(listener, state, stop_rx));
    Ok(Server { addr, stop, task })
}

fn spawn_runtime_load(state: AppState, stop: watch::Sender<bool>) {
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        match open_runtime(&state) {
            Ok((host, workers)) => {
                tracing::info!(
                    ms = started.elapsed().as_millis() as u64,
                    scratch = %host.scratch_root().display(),
                    workers = workers.configured(),
                    "runtime loaded; ready"
                );
                state.runner.set_host(host, workers);
            }
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "could not load the runtime");
                *lock(&state.load_error) = Some(format!("{e:#}"));
                let _ = stop.send(true);
            }
        }
    });
}

async fn serve_http(
    listener: tokio::net::TcpListener,
    state: AppState,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let housekeeping = Housekeeping::start(
        state.runner.clone(),
        state.config.hibernate_after,
        state.config.snapshot_retention,
    );
    let app = router(state.clone());
    let runner = state.runner.clone();
    let (delay, grace) = (state.config.drain_delay, state.config.shutdown_grace);
    let signal = async move {
        let _ = stop.wait_for(|s| *s).await;
        housekeeping::drain(runner, delay, grace).await;
    };
    // Responses streamed a line or an event at a time (NDJSON, SSE, Connect) leave as they
    // are written: with Nagle on, each small write after the first waited for the client's
    // delayed ACK (40 ms a line, measured with the E2B SDKs).
    use axum::serve::ListenerExt as _;
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
    });
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(signal)
    .await;
    housekeeping.stop();
    // Every connection is done. Close what is left and wait for the guest threads.
    housekeeping::finish(&state.runner).await;
    state.runner.audit_internal(Action::Shutdown);
    tracing::info!("shut down");
    served.context("serving HTTP")?;
    if let Some(e) = lock(&state.load_error).take() {
        anyhow::bail!("could not load the runtime: {e}");
    }
    Ok(())
}

/// The logs on stderr (filtered by `VIVARIUM_LOG`) and, with an OTLP endpoint, the trace
/// exporter beside them (the server's own spans at info and above, whatever the log level).
/// Without one the subscriber is the logs' alone, their filter global: a span the logs do
/// not want is never made.
fn init_tracing(
    format: LogFormat,
    telemetry: &TelemetrySettings,
) -> anyhow::Result<Option<Telemetry>> {
    use tracing_subscriber::filter::EnvFilter;
    use tracing_subscriber::layer::{Layer as _, SubscriberExt as _};
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter =
        || EnvFilter::try_from_env("VIVARIUM_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let Some((telemetry, tracer)) = Telemetry::start(telemetry)? else {
        let logs = tracing_subscriber::fmt()
            .with_env_filter(filter())
            .with_ansi(ansi)
            .with_writer(std::io::stderr);
        let _ = match format {
            LogFormat::Text => logs.try_init(),
            LogFormat::Json => logs.json().try_init(),
        };
        return Ok(None);
    };
    let logs = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Text => logs.boxed(),
        LogFormat::Json => logs.json().boxed(),
    }
    .with_filter(filter());
    // The server's own spans at info and above; its log events stay logs (not span events).
    let spans = tracing_subscriber::filter::filter_fn(|meta| {
        meta.is_span()
            && meta.target().starts_with("vivarium")
            && *meta.level() <= tracing::Level::INFO
    });
    let traces = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        // Nothing in the server reads OpenTelemetry's current context (no outbound request
        // carries a `traceparent`), so entering a span need not attach one: a future's span
        // is entered on every poll.
        .with_context_activation(false)
        .with_target(false)
        .with_filter(spans);
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .try_init();
    Ok(Some(telemetry))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
    }
}

fn async_runtime(name: &str) -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(name)
        .build()
        .context("starting the async runtime")
}

/// `vivarium serve`: serves until SIGTERM/SIGINT.
pub fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let telemetry = init_tracing(args.log_format, &args.telemetry())?;
    return_large_buffers_at_once();
    let served = async_runtime("vivarium-http")?.block_on(async move {
        let server = bind(args).await?;
        // The first line on stdout says where we listen (tests and scripts read it).
        println!("vivarium: listening on http://{}", server.addr());
        use std::io::Write;
        let _ = std::io::stdout().flush();
        server.run_until(shutdown_signal()).await
    });
    if let Some(t) = telemetry {
        t.shutdown();
    }
    served
}

/// Buffers of 1 MiB and more (a kernel frame, a request body, a returned file's chunk) are
/// mapped on their own and unmapped when freed, so what a flood of large frames made the
/// supervisor allocate goes back to the kernel at once: glibc's default threshold grows to
/// 32 MiB after the first large free, and freed frames below it stayed in the heap (a
/// kernel-socket flood held 1.75x its bound in RSS, 1.25x with this).
fn return_large_buffers_at_once() {
    // SAFETY: mallopt only changes the allocator's tuning, and glibc takes its arena lock
    // for it, so other threads allocating meanwhile are fine.
    let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
    if ok != 1 {
        tracing::debug!("mallopt(M_MMAP_THRESHOLD) refused; large buffers stay glibc's");
    }
}

/// `vivarium mcp`: the MCP tools over stdio, with the server's defaults and no listener.
pub fn mcp_stdio() -> anyhow::Result<()> {
    async_runtime("vivarium-mcp")?.block_on(async {
        let config = ServeArgs::defaults().resolve()?;
        let state = state(config, None, String::new())?;
        let loaded = state.clone();
        let (host, workers) = tokio::task::spawn_blocking(move || open_runtime(&loaded)).await??;
        state.runner.set_host(host, workers);
        let service = VivariumMcp::new(state.clone())
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| anyhow::anyhow!("starting the MCP service: {e}"))?;
        service
            .waiting()
            .await
            .map_err(|e| anyhow::anyhow!("the MCP service failed: {e}"))?;
        housekeeping::finish(&state.runner).await;
        anyhow::Ok(())
    })
}
