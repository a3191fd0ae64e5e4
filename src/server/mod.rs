//! `vivarium serve` and `vivarium mcp`: the server (axum on tokio).
//!
//! This module holds the router and the shared state. `lifecycle` owns the server's life
//! (bind, load the runtime in the background, serve, shut down gracefully). Front doors live
//! in `api`, one file each, and never import each other; every run they ask for goes
//! through the one seam, `supervisor::Runner`, which alone touches admission, the guest
//! threads, the session registry and the audit log. Nothing here holds session, residency,
//! durability or cluster logic: that is `supervisor`.

mod api;
mod auth;
mod config;
mod error;
mod error_scrub;
mod lifecycle;
mod mcp_sessions;
mod openapi;
mod ops;
mod request_context;
mod routing;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use tower_http::catch_panic::CatchPanicLayer;

pub use config::{Config, LogFormat, PackagesMode, ServeArgs};
pub use lifecycle::{Server, bind, mcp_stdio, serve};

use crate::supervisor::Runner;
use api::{check, mcp, piston, sessions as session_api, snapshots as snapshot_api};
use auth::ApiKeys;

/// Everything handlers share.
pub struct ServerState {
    /// The resolved configuration.
    pub config: Config,
    /// Where every run goes (shared with the supervisor's background work).
    runner: Arc<Runner>,
    /// The accepted API keys; `None`: none required.
    keys: Option<ApiKeys>,
    /// Why loading the runtime failed, if it did.
    load_error: Mutex<Option<String>>,
    /// The OpenAPI document, rendered once.
    openapi: String,
}

/// The state handlers get.
pub type AppState = Arc<ServerState>;

/// The router with every route and middleware, over `state`.
fn router(state: AppState) -> Router {
    let mut v1 = Router::new()
        .route("/v1/execute", post(api::execute_or_stream))
        .route("/v1/check", post(check::check))
        .route("/v1/packages", get(api::packages::packages))
        .route("/v1/usage", get(api::usage::usage))
        .route("/v1/sessions", post(session_api::open))
        .route(
            "/v1/sessions/{id}",
            get(session_api::info).delete(session_api::close),
        )
        .route("/v1/sessions/{id}/execute", post(session_api::turn))
        .route(
            "/v1/sessions/{id}/packages",
            post(session_api::add_packages),
        )
        .route("/v1/sessions/{id}/snapshot", post(snapshot_api::snapshot))
        .route("/v1/sessions/{id}/fork", post(snapshot_api::fork))
        .route("/v1/snapshots", get(snapshot_api::list))
        .route(
            "/v1/snapshots/{id}",
            get(snapshot_api::info).delete(snapshot_api::delete),
        )
        .route("/v1/sessions/{id}/files", get(session_api::list_files))
        .route(
            "/v1/sessions/{id}/files/{*path}",
            get(session_api::download).put(session_api::upload),
        );
    v1 = v1
        .route("/api/kernelspecs", get(api::jupyter::kernelspecs))
        .route("/api/kernelspecs/{name}", get(api::jupyter::one_kernelspec))
        .route(
            "/kernelspecs/{name}/{file}",
            get(api::jupyter::kernelspec_resource),
        )
        .route(
            "/api/kernels",
            get(api::jupyter::list).post(api::jupyter::start),
        )
        .route(
            "/api/kernels/{id}",
            get(api::jupyter::info).delete(api::jupyter::shutdown),
        )
        .route("/api/kernels/{id}/interrupt", post(api::jupyter::interrupt))
        .route("/api/kernels/{id}/restart", post(api::jupyter::restart))
        .route("/api/kernels/{id}/channels", get(api::jupyter::channels));
    v1 = v1
        .route("/api/v2/runtimes", get(piston::runtimes))
        .route("/api/v2/execute", post(piston::execute))
        .nest_service("/mcp", mcp::router(state.clone()));
    if state.config.debug_panic_route {
        v1 = v1.route("/v1/debug/panic", post(ops::debug_panic));
        #[cfg(debug_assertions)]
        {
            v1 = v1
                .route("/v1/debug/workers", get(ops::debug_workers))
                .route("/v1/debug/worker-fault", post(ops::debug_worker_fault));
        }
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
        .layer(from_fn_with_state(state.clone(), routing::middleware))
        .layer(from_fn_with_state(state.clone(), error_scrub::middleware))
        .layer(from_fn_with_state(
            state.clone(),
            request_context::middleware,
        ))
        .with_state(state)
}
