//! `vivarium serve` and `vivarium mcp`: the server (axum on tokio).
//!
//! This module holds the router and the shared state. `lifecycle` owns the server's life
//! (bind, load the runtime in the background, serve, shut down gracefully). Front doors live
//! in `api`, one file each, and never import each other; each action they audit is one
//! `bracket::Bracket` (its line written once, when closed or dropped). Every run they ask for
//! goes through the intake (`supervisor::intake`) and `supervisor::Runner`, which alone touch
//! admission, the workers, the session registry and the audit log. Nothing here holds session, residency,
//! durability or cluster logic: that is `supervisor`.

mod api;
mod auth;
mod bracket;
mod config;
mod error;
mod error_scrub;
mod lifecycle;
mod mcp_sessions;
mod openapi;
mod ops;
mod request_context;
mod routing;
mod telemetry;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::post;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use config::{Config, LogFormat, PackagesMode, ServeArgs};
pub use lifecycle::{Server, bind, mcp_stdio, serve};

use crate::supervisor::Runner;
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
    /// Places for the operator console's streams (`api/console.rs`).
    console_streams: Arc<tokio::sync::Semaphore>,
}

/// The state handlers get.
pub type AppState = Arc<ServerState>;

/// The open routes (no key) that the OpenAPI document describes; as the doors' keyed ones
/// (`api::documented_routes`).
fn open_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(ops::index))
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(ops::metrics))
        .routes(routes!(ops::openapi_json))
        .route("/console", axum::routing::get(api::console::page))
        .route("/console.js", axum::routing::get(api::console::script))
}

/// The router with every route and middleware, over `state`: the documented routes, and the
/// ones the document leaves to their own protocols (Jupyter's, MCP's transport) or out (the
/// debug routes).
fn router(state: AppState) -> Router {
    let (documented, _) = api::documented_routes().split_for_parts();
    let mut v1 = documented.merge(api::protocol_routes(&state));
    if state.config.debug_panic_route {
        v1 = v1.route("/v1/debug/panic", post(ops::debug_panic));
        #[cfg(debug_assertions)]
        {
            v1 = v1
                .route("/v1/debug/workers", axum::routing::get(ops::debug_workers))
                .route("/v1/debug/worker-fault", post(ops::debug_worker_fault));
        }
    }
    let v1 = v1.route_layer(from_fn_with_state(state.clone(), auth::require_key));
    let (open, _) = open_routes().split_for_parts();
    open.merge(v1)
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(CatchPanicLayer::custom(ops::panic_response))
        .layer(from_fn_with_state(state.clone(), ops::body_cap))
        .layer(from_fn_with_state(state.clone(), routing::middleware))
        .layer(from_fn_with_state(state.clone(), error_scrub::middleware))
        .layer(from_fn_with_state(
            state.clone(),
            |state, req: axum::extract::Request, next| {
                let door = api::door_of(req.uri().path());
                request_context::middleware(state, door, req, next)
            },
        ))
        .with_state(state)
}
