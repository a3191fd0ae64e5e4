//! The front doors: each file translates one wire format onto the supervisor's intake and
//! back. They never import each other; the wire types more than one of them needs live in
//! [`types`] (the `/v1` bodies are the intake's asks, re-exported there).
//!
//! This file is the doors' registry: their modules and their routes ([`documented_routes`]
//! for those the OpenAPI document describes, [`protocol_routes`] for a protocol of its own).
//! [`door_of`] names the door of a request by its path's prefix (its audit line's `door`):
//! the request's context is made before routing, with it.

pub mod check;
pub mod console;
pub mod e2b;
pub mod events;
pub mod execute;
pub mod executions;
pub mod jupyter;
pub mod mcp;
pub mod packages;
pub mod piston;
pub mod sessions;
pub mod snapshots;
pub mod stream;
pub mod templates;
pub mod turns;
pub mod types;
pub mod usage;
pub mod volumes;
pub mod webhooks;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::error::ErrorBody;
use super::request_context::Caller;
use crate::supervisor::audit::Door;
use types::{ExecuteRequest, ExecuteResponse, PolicyDeniedBody};

/// The routes behind an API key that the OpenAPI document describes. Each is registered
/// once, here: the router and the document are both made from this list
/// (`server::router`, `openapi::document`), so neither can name a route the other lacks.
pub fn documented_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(execute_or_stream))
        .routes(routes!(executions::resume))
        .routes(routes!(executions::tool_results))
        .routes(routes!(executions::fork))
        .routes(routes!(executions::cancel))
        .routes(routes!(check::check))
        .routes(routes!(packages::packages))
        .routes(routes!(usage::usage))
        .routes(routes!(events::list))
        .routes(routes!(webhooks::create, webhooks::list))
        .routes(routes!(webhooks::delete))
        .routes(routes!(volumes::create, volumes::list))
        .routes(routes!(volumes::info, volumes::delete))
        .routes(routes!(volumes::files))
        .routes(routes!(
            volumes::put_file,
            volumes::get_file,
            volumes::delete_file
        ))
        .routes(routes!(volumes::make_dir))
        .routes(routes!(templates::build, templates::list))
        .routes(routes!(templates::info, templates::delete))
        .routes(routes!(sessions::open))
        .routes(routes!(sessions::info, sessions::close))
        .routes(routes!(sessions::metrics))
        .routes(routes!(sessions::turn))
        .routes(routes!(sessions::add_packages))
        .routes(routes!(snapshots::snapshot))
        .routes(routes!(snapshots::fork))
        .routes(routes!(turns::list))
        .routes(routes!(turns::rollback))
        .routes(routes!(snapshots::list))
        .routes(routes!(snapshots::info, snapshots::delete))
        .routes(routes!(sessions::list_files))
        .routes(routes!(sessions::download, sessions::upload))
        .routes(routes!(piston::runtimes))
        .routes(routes!(piston::execute))
}

/// The routes behind an API key of the protocols the document leaves to themselves:
/// Jupyter's kernels, MCP's transport, E2B's planes.
pub fn protocol_routes(state: &AppState) -> Router<AppState> {
    Router::new()
        .route("/api/kernelspecs", get(jupyter::kernelspecs))
        .route("/api/kernelspecs/{name}", get(jupyter::one_kernelspec))
        .route(
            "/kernelspecs/{name}/{file}",
            get(jupyter::kernelspec_resource),
        )
        .route("/api/kernels", get(jupyter::list).post(jupyter::start))
        .route(
            "/api/kernels/{id}",
            get(jupyter::info).delete(jupyter::shutdown),
        )
        .route("/api/kernels/{id}/interrupt", post(jupyter::interrupt))
        .route("/api/kernels/{id}/restart", post(jupyter::restart))
        .route("/api/kernels/{id}/channels", get(jupyter::channels))
        .route("/v1/console/state", get(console::state))
        .route("/v1/console/stream", get(console::stream))
        .nest_service("/mcp", mcp::router(state.clone()))
        .nest_service("/e2b", e2b::router(state.clone()))
}

// `POST /v1/execute`: server-sent events when the client asks for them (`stream`), else the
// plain JSON answer (`execute`). (A plain comment: a doc comment would become the
// operation's summary in the OpenAPI document.)
#[utoipa::path(
    post, path = "/v1/execute", tag = "execute",
    // The plain answer's name (`execute::execute`); this function only picks the answer.
    operation_id = "execute",
    request_body = ExecuteRequest,
    responses(
        (status = 200, description = "The execution ran; `status` says how it ended. With `Accept: text/event-stream`: server-sent events `stdout`/`stderr` (`{\"text\"}`) as the code runs, then `result` (this body) or `error`", body = ExecuteResponse),
        (status = 400, description = "Malformed request, bad path or base64, limit above the maximum", body = ErrorBody),
        (status = 422, description = "`policy_denied` (policy `deny`, the pre-execution check found something: nothing ran, body with `findings`) or `output_leak` (leakage `deny`, the output held secrets: withheld, body with `leaks`)", body = PolicyDeniedBody),
        (status = 401, description = "API key missing or wrong", body = ErrorBody),
        (status = 413, description = "Body above the cap", body = ErrorBody),
        (status = 429, description = "Too busy: retry after the Retry-After header", body = ErrorBody),
        (status = 503, description = "Not ready, or shutting down", body = ErrorBody),
    )
)]
pub async fn execute_or_stream(
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if stream::wants_event_stream(&headers) {
        stream::execute_stream(caller, body).await
    } else {
        execute::execute(caller, body).await
    }
}

/// The door a request's path is for (its audit line's `door`): each door's prefix, `/v1` and
/// the operations routes the plain HTTP API's.
pub fn door_of(path: &str) -> Door {
    let under = |prefix: &str| {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    if under("/mcp") {
        Door::Mcp
    } else if under("/api/v2") {
        Door::Piston
    } else if under("/e2b") {
        Door::E2b
    } else if under("/api/kernels") || under("/api/kernelspecs") || under("/kernelspecs") {
        Door::Jupyter
    } else {
        Door::Http
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protocol_is_known_by_its_prefix() {
        assert_eq!(door_of("/v1/execute"), Door::Http);
        assert_eq!(door_of("/v1/sessions/s-1/execute"), Door::Http);
        assert_eq!(door_of("/mcp"), Door::Mcp);
        assert_eq!(door_of("/mcp/"), Door::Mcp);
        assert_eq!(door_of("/mcpx"), Door::Http);
        assert_eq!(door_of("/api/v2/execute"), Door::Piston);
        assert_eq!(door_of("/e2b/v2/sandboxes"), Door::E2b);
        assert_eq!(door_of("/e2bx"), Door::Http);
        assert_eq!(door_of("/api/kernels/s-2/channels"), Door::Jupyter);
        assert_eq!(door_of("/api/kernelspecs"), Door::Jupyter);
        assert_eq!(
            door_of("/kernelspecs/vivarium-python/logo-64x64.png"),
            Door::Jupyter
        );
        assert_eq!(door_of("/api/kernelsx"), Door::Http);
        assert_eq!(door_of("/"), Door::Http);
    }
}
