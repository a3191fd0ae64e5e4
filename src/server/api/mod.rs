//! The front doors: each file translates one wire format onto the runner and back. They
//! never import each other; what more than one of them needs (request and response types,
//! the translation of an execution or session body) lives in [`types`].

pub mod check;
pub mod execute;
pub mod jupyter;
pub mod mcp;
pub mod packages;
pub mod piston;
pub mod sessions;
pub mod snapshots;
pub mod stream;
pub mod types;
pub mod usage;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::Response;

use super::AppState;
use super::request_context::RequestContext;

/// `POST /v1/execute`: server-sent events when the client asks for them (`stream`), else the
/// plain JSON answer (`execute`).
pub async fn execute_or_stream(
    state: State<AppState>,
    ctx: Extension<RequestContext>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if stream::wants_event_stream(&headers) {
        stream::execute_stream(state.0, ctx.0, body).await
    } else {
        execute::execute(state, ctx, body).await
    }
}
