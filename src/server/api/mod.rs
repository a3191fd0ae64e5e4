//! The front doors: each file translates one wire format onto the runner and back. They
//! never import each other; what more than one of them needs (request and response types,
//! the translation of an execution or session body) lives in [`types`].

pub mod check;
pub mod e2b;
pub mod execute;
pub mod executions;
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
use super::error::ErrorBody;
use super::request_context::RequestContext;
use types::{ExecuteRequest, ExecuteResponse, PolicyDeniedBody};

// `POST /v1/execute`: server-sent events when the client asks for them (`stream`), else the
// plain JSON answer (`execute`). (A plain comment: a doc comment would become the
// operation's summary in the OpenAPI document.)
#[utoipa::path(
    post,
    path = "/v1/execute",
    tag = "execute",
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
    ),
    security((), ("bearer" = []))
)]
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
