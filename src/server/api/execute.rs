//! `POST /v1/execute`: one program in a fresh sandbox. Files come in and go out base64
//! encoded; the response is the core [`Report`](crate::report::Report) as JSON, each file with
//! a media type, plus an execution `id`. Every execution outcome is HTTP 200: `status` says
//! what the guest did. (With `Accept: text/event-stream` the same route streams: `stream.rs`.)

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};

use super::types::{ExecuteResponse, denied_response, execute_body, json_with_held};
use crate::server::AppState;
use crate::server::bracket::{Bracket, run_outcome};
use crate::server::request_context::RequestContext;
use crate::vivarium::Executed;

pub async fn execute(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (mut bracket, id) = Bracket::run(&state, &ctx);
    let result = execute_body(&state, body, bracket.record()).await;
    bracket.close(run_outcome(&result));
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
