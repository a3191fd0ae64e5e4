//! `POST /v1/execute`: one program in a fresh sandbox. Files come in and go out base64
//! encoded; the response is the core [`Report`](crate::report::Report) as JSON, each file with
//! a media type, plus an execution `id`. Every execution outcome is HTTP 200: `status` says
//! what the guest did. (With `Accept: text/event-stream` the same route streams: `stream.rs`.)
//!
//! The body is parsed here and nothing else is decided here: the run is the intake's
//! (`supervisor::intake::execute`, or `prepare` and `start_execution`, code mode's task, for
//! a program with tools).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};

use super::types::{ExecuteRequest, drive, executed_response, open_execution};
use crate::server::AppState;
use crate::server::bracket::{Bracket, run_outcome};
use crate::server::error::{ApiError, OnWire};
use crate::server::request_context::{Caller, RequestContext};
use crate::supervisor::intake;

pub async fn execute(caller: Caller, body: Result<Bytes, BytesRejection>) -> Response {
    let (mut bracket, id, ask) = match open_execution(&caller, body) {
        Ok(opened) => opened,
        Err(e) => return e.into_response(),
    };
    let Caller { state, ctx } = caller;
    if !ask.tools.is_empty() {
        return code_mode(state, ctx, bracket, id, ask).await;
    }
    let result = intake::execute(&state.runner, ask, bracket.record()).await;
    bracket.close(run_outcome(&result));
    executed_response(&state, &id, result.map_err(ApiError::from)).await
}

/// Code mode without streaming: the program runs in the intake's task, under this request's
/// bracket; the response is its first stop (a round of calls, `suspended`, or its end).
async fn code_mode(
    state: AppState,
    ctx: RequestContext,
    mut bracket: Bracket,
    id: String,
    ask: ExecuteRequest,
) -> Response {
    let prepared = match intake::prepare(&state.runner, ask, bracket.record()).await {
        Ok(prepared) => prepared,
        Err(e) => {
            bracket.close(e.outcome());
            return ApiError::from(e).into_response();
        }
    };
    let key = ctx.key_id.as_deref();
    match intake::start_execution(&state.runner, prepared, &id, key, Box::new(bracket)) {
        Ok(exec) => drive(&state, &exec).await,
        Err(e) => ApiError::from(e).into_response(),
    }
}
