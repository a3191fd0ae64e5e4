//! `vivarium serve`: the HTTP front door (axum on tokio).
//!
//! This module holds the router, the shared state and the server's life: bind, load the
//! runtime in the background (`/readyz` says when it is loaded), serve, and shut down
//! gracefully on SIGTERM/SIGINT: stop accepting, let running executions finish for up to the
//! grace period, then cancel them through their cancel flags, close every session, wait for
//! every guest thread, and remove the scratch root so no temp dir survives.
//!
//! Guest code never runs on executor threads: see [`guest`]. Handlers are thin: they parse,
//! check, ask [`admission`] for a slot, run on a guest thread and translate the result.

pub mod admission;
pub mod audit;
pub mod auth;
pub mod check;
pub mod config;
pub mod error;
pub mod execute;
pub mod guest;
pub mod mcp;
pub mod metrics;
pub mod openapi;
pub mod ops;
pub mod piston;
pub mod request_context;
pub mod session_api;
pub mod sessions;
pub mod stream;
pub mod time;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use tokio::sync::watch;
use tower_http::catch_panic::CatchPanicLayer;

pub use config::{Config, LogFormat, ServeArgs};

use crate::host::{Vivarium, VivariumOptions};
use admission::Admission;
use audit::{Audit, AuditRecord};
use auth::ApiKeys;
use error::ApiError;
use guest::GuestThreads;
use metrics::Metrics;
use sessions::Registry;

/// Everything handlers share.
pub struct ServerState {
    pub config: Config,
    /// Set once the runtime is loaded.
    pub host: OnceLock<Arc<Vivarium>>,
    pub admission: Admission,
    pub sessions: Registry,
    pub guests: GuestThreads,
    pub metrics: Arc<Metrics>,
    pub audit: Audit,
    pub keys: Option<ApiKeys>,
    pub shutting_down: AtomicBool,
    /// Why loading the runtime failed, if it did.
    pub load_error: Mutex<Option<String>>,
    /// The OpenAPI document, rendered once.
    pub openapi: String,
}

pub type AppState = Arc<ServerState>;

impl ServerState {
    /// The runtime, when loaded and not shutting down.
    pub fn host(&self) -> Result<Arc<Vivarium>, ApiError> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(ApiError::ShuttingDown);
        }
        self.host.get().cloned().ok_or(ApiError::NotReady)
    }
}

/// The router with every route and middleware, over `state`.
pub fn router(state: AppState) -> Router {
    let mut v1 = Router::new()
        .route("/v1/execute", post(execute::execute))
        .route("/v1/check", post(check::check))
        .route("/v1/sessions", post(session_api::open))
        .route(
            "/v1/sessions/{id}",
            get(session_api::info).delete(session_api::close),
        )
        .route("/v1/sessions/{id}/execute", post(session_api::turn))
        .route("/v1/sessions/{id}/files", get(session_api::list_files))
        .route(
            "/v1/sessions/{id}/files/{*path}",
            get(session_api::download).put(session_api::upload),
        );
    v1 = v1
        .route("/api/v2/runtimes", get(piston::runtimes))
        .route("/api/v2/execute", post(piston::execute))
        .nest_service("/mcp", mcp::router(state.clone()));
    if state.config.debug_panic_route {
        v1 = v1.route("/v1/debug/panic", post(ops::debug_panic));
    }
    let v1 = v1.route_layer(from_fn_with_state(state.clone(), auth::require_key));
    Router::new()
        .route("/", get(ops::index))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi_json))
        .merge(v1)
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(CatchPanicLayer::custom(ops::panic_response))
        .layer(from_fn_with_state(state.clone(), ops::body_cap))
        .layer(from_fn_with_state(
            state.clone(),
            request_context::middleware,
        ))
        .with_state(state)
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    state: AppState,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// The address it listens on (with the real port when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn state(&self) -> &AppState {
        &self.state
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

/// Binds the listener, starts loading the runtime in the background, and serves.
pub async fn bind(args: ServeArgs) -> anyhow::Result<Server> {
    let config = args.resolve()?;
    let keys = config
        .api_keys_file
        .as_deref()
        .map(ApiKeys::load)
        .transpose()?;
    let audit = Audit::open(config.audit_log.as_deref())?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let addr = listener.local_addr()?;
    let metrics = Arc::new(Metrics::new());
    let openapi = openapi::document()
        .to_json()
        .context("rendering the OpenAPI document")?;
    let state: AppState = Arc::new(ServerState {
        admission: Admission::new(
            config.max_concurrency,
            config.queue_depth,
            config.queue_timeout,
            config.memory_budget_bytes,
            metrics.clone(),
        ),
        sessions: Registry::new(
            config.max_sessions,
            config.session_idle,
            config.session_lifetime,
        ),
        guests: GuestThreads::default(),
        metrics,
        audit,
        keys,
        shutting_down: AtomicBool::new(false),
        load_error: Mutex::new(None),
        host: OnceLock::new(),
        openapi,
        config,
    });
    if let Some(keys) = &state.keys {
        tracing::info!(keys = keys.len(), "API keys required on /v1");
    }
    let (stop, stop_rx) = watch::channel(false);
    spawn_runtime_load(state.clone(), stop.clone());
    let task = tokio::spawn(serve(listener, state.clone(), stop_rx));
    Ok(Server {
        addr,
        state,
        stop,
        task,
    })
}

fn spawn_runtime_load(state: AppState, stop: watch::Sender<bool>) {
    let mut opts = VivariumOptions::from_env();
    if let Some(dir) = &state.config.scratch_dir {
        opts.scratch_base = dir.clone();
    }
    opts.maximum = state.config.maximum;
    // Slots for every live session and running execution, plus sessions being dropped.
    opts.engine.max_instances =
        (state.config.max_sessions + state.config.max_concurrency + 32) as u32;
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        match Vivarium::open(opts) {
            Ok(host) => {
                tracing::info!(
                    ms = started.elapsed().as_millis() as u64,
                    scratch = %host.scratch_root().display(),
                    "runtime loaded; ready"
                );
                let _ = state.host.set(host);
            }
            Err(e) => {
                tracing::error!(error = %e, "could not load the runtime");
                *state.load_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
                let _ = stop.send(true);
            }
        }
    });
}

async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    mut stop: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let sweeper = tokio::spawn(sweep_sessions(state.clone()));
    let app = router(state.clone());
    let grace = state.config.shutdown_grace;
    let st = state.clone();
    let signal = async move {
        let _ = stop.wait_for(|s| *s).await;
        tracing::info!(
            grace_ms = grace.as_millis() as u64,
            "shutting down: no new work taken"
        );
        st.shutting_down.store(true, Ordering::Release);
        st.admission.close();
        // After the grace period, end what still runs.
        let st2 = st.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if st2.guests.running() > 0 {
                tracing::warn!(
                    running = st2.guests.running(),
                    "grace period over: cancelling running executions"
                );
            }
            st2.guests.cancel_all();
            for s in st2.sessions.drain() {
                s.close().release();
                st2.metrics.session_closed("shutdown");
            }
        });
    };
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(signal)
    .await;
    sweeper.abort();
    // Every connection is done. Close what is left and wait for the guest threads.
    state.guests.cancel_all();
    let remains: Vec<_> = state
        .sessions
        .drain()
        .into_iter()
        .map(|s| {
            state.metrics.session_closed("shutdown");
            s.close()
        })
        .collect();
    let _ = tokio::task::spawn_blocking(move || drop(remains)).await;
    if !state.guests.wait_idle(Duration::from_secs(10)).await {
        tracing::warn!(
            "guest threads still running after shutdown; removing the scratch root anyway"
        );
    }
    if let Some(host) = state.host.get() {
        let root = host.scratch_root().to_path_buf();
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(root)).await;
    }
    state.audit.write(AuditRecord::internal("shutdown"));
    tracing::info!("shut down");
    served.context("serving HTTP")?;
    if let Some(e) = state
        .load_error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        anyhow::bail!("could not load the runtime: {e}");
    }
    Ok(())
}

/// Closes expired sessions, every `sweep_interval`.
async fn sweep_sessions(state: AppState) {
    let mut tick = tokio::time::interval(state.sessions.sweep_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for s in state.sessions.sweep() {
            tracing::info!(session = %s.id, "session expired");
            state
                .audit
                .write(AuditRecord::internal("session_expire").session(&s.id));
            state.metrics.session_closed("expired");
            s.close().release();
        }
    }
}

fn init_tracing(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("VIVARIUM_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
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

/// `vivarium serve`.
pub fn main(args: ServeArgs) -> ExitCode {
    init_tracing(args.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("vivarium-http")
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vivarium: starting the async runtime: {e}");
            return ExitCode::from(crate::cli::EXIT_HOST_FAILURE);
        }
    };
    let result = runtime.block_on(async move {
        let server = bind(args).await?;
        // The first line on stdout says where we listen (tests and scripts read it).
        println!("vivarium: listening on http://{}", server.addr());
        use std::io::Write;
        let _ = std::io::stdout().flush();
        server.run_until(shutdown_signal()).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vivarium: {e:#}");
            ExitCode::from(crate::cli::EXIT_HOST_FAILURE)
        }
    }
}
