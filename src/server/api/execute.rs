//! `POST /v1/execute`: one program in a fresh sandbox. Files come in and go out base64
//! encoded; the response is the core [`Report`](crate::report::Report) as JSON, each file with
//! a media type, plus an execution `id`. Every execution outcome is HTTP 200: `status` says
//! what the guest did. (With `Accept: text/event-stream` the same route streams: `stream.rs`.)

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};

use super::types::{
    ExecuteRequest, ExecuteResponse, PolicyDeniedBody, denied_response, execute_body,
    json_with_held, run_outcome,
};
use crate::server::AppState;
use crate::server::error::ErrorBody;
use crate::server::request_context::{RequestContext, new_id};
use crate::supervisor::audit::{Action, AuditRecord};
use crate::vivarium::Executed;

#[utoipa::path(
    post,
    path = "/v1/execute",
    tag = "execute",
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
pub async fn execute(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let id = format!("ex-{}", new_id());
    let mut record = AuditRecord::new(&ctx, Action::Execute).execution(&id);
    let result = execute_body(&state, body, &mut record).await;
    state.runner.finish(record, run_outcome(&result));
    match result {
        Ok(Executed::Ran { report, findings }) => {
            // A large returned file is streamed from disk into the JSON, never held whole.
            let (response, held) = ExecuteResponse::with_held(&id, *report, findings);
            json_with_held(&response, held, state.runner.budget())
                .await
                .into_response()
        }
        Ok(Executed::Denied(findings)) => denied_response(findings),
        Err(e) => e.into_response(),
    }
}
