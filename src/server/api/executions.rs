//! `/v1/executions/{id}/…`: answering a code-mode execution's tool calls.
//!
//! - `POST …/resume` `{"results": [...]}` answers pending calls (any of them, in any
//!   order) and returns the next stop: `suspended` with what still waits, or the final
//!   result as `POST /v1/execute` gives it. An execution no longer resident (evicted after
//!   `--suspended-resident-secs`, or left by a restart) is brought back from its journal
//!   first: its program replays to the round it waits on.
//! - `POST …/tool-results` `{"call_id", "result" | "error"}` answers one call of a streamed
//!   execution (its stream carries what follows).
//! - `POST …/fork` makes a new execution waiting on the same round, to answer another way.
//! - `DELETE …` cancels it: its program stops, its journal goes.

use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::types::{
    ForkResponse, ResumeRequest, SuspendedResponse, answers_for, drive, finished_response,
    parse_json,
};
use crate::server::AppState;
use crate::server::bracket::Bracket;
use crate::server::error::{ApiResult, ErrorBody, OnWire};
use crate::server::request_context::{Caller, RequestContext, new_id};
use crate::supervisor::SupervisorError;
use crate::supervisor::audit::{Action, Outcome};
use crate::supervisor::executions::Progress;
use crate::supervisor::intake::{self, Closer, Found};

#[utoipa::path(
    post, path = "/v1/executions/{id}/resume", tag = "execute",
    params(("id" = String, Path, description = "Execution id (`ex-…`)")),
    request_body = ResumeRequest,
    responses(
        (status = 200, description = "The next stop: `suspended` with the calls still waiting (`SuspendedResponse`), or the final result, as `POST /v1/execute` answers", body = SuspendedResponse),
        (status = 400, description = "An answer out of shape, over `result_bytes`, or for a call that does not wait", body = ErrorBody),
        (status = 404, description = "`execution_not_found`", body = ErrorBody),
        (status = 409, description = "`execution_busy` (its program runs: no round waits) or `replay_diverged`", body = ErrorBody),
    )
)]
pub async fn resume(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let bracket = Bracket::open(&state, &ctx, Action::ExecutionResume).execution(&id);
    match resume_body(&state, &ctx, &id, body).await {
        Ok(response) => {
            bracket.close(Outcome::Ok(response.status().as_u16()));
            response
        }
        Err(e) => {
            bracket.close(e.outcome());
            e.into_response()
        }
    }
}

async fn resume_body(
    state: &AppState,
    ctx: &RequestContext,
    id: &str,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let req: ResumeRequest = parse_json(body)?;
    let key = ctx.key_id.as_deref();
    // Resident here, or brought back from its journal: the program replays (under an
    // `execute` line of its own) to the round it waits on.
    let replay =
        || Box::new(Bracket::open(state, ctx, Action::Execute).execution(id)) as Box<dyn Closer>;
    let exec = match intake::resident_or_replayed(&state.runner, id, key, replay).await? {
        Found::Waiting(exec) => exec,
        Found::Finished(finished) => return Ok(finished_response(state, id, finished).await),
    };
    if exec.streaming {
        return Err(SupervisorError::InvalidRequest(format!(
            "execution {id} is streamed: answer its calls at /v1/executions/{id}/tool-results"
        ))
        .into());
    }
    if exec.ended() {
        // It ended while it waited (a tool limit, its total wait): that is the answer.
        return Ok(drive(state, &exec).await);
    }
    let answers = answers_for(&exec, req.results)?;
    match exec.answer(answers)? {
        Progress::Waiting(calls) => {
            state.runner.execution_suspended(&exec).await?;
            Ok(Json(SuspendedResponse::new(id, calls)).into_response())
        }
        Progress::Resumed => Ok(drive(state, &exec).await),
    }
}

#[utoipa::path(
    post, path = "/v1/executions/{id}/tool-results", tag = "execute",
    params(("id" = String, Path, description = "Execution id (`ex-…`), from a `tool_call` event")),
    request_body(content = Object, description = "`{\"call_id\", \"result\"}` or `{\"call_id\", \"error\": {\"type\", \"message\"}}`"),
    responses(
        (status = 200, description = "Taken: `{\"waiting\": [call ids of the round still unanswered]}`; the program goes on once none waits"),
        (status = 400, description = "An answer out of shape, over `result_bytes`, for a call that does not wait, or to an execution that is not streamed", body = ErrorBody),
        (status = 404, description = "`execution_not_found`", body = ErrorBody),
        (status = 409, description = "`execution_busy`: no round waits", body = ErrorBody),
    )
)]
pub async fn tool_results(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let answer: Value = parse_json(body)?;
    let exec = state
        .runner
        .resident_execution(&id, ctx.key_id.as_deref())
        .ok_or_else(|| SupervisorError::ExecutionNotFound(id.clone()))?;
    if !exec.streaming {
        return Err(SupervisorError::InvalidRequest(format!(
            "execution {id} is not streamed: answer its calls at /v1/executions/{id}/resume"
        ))
        .into());
    }
    let answers = answers_for(&exec, vec![answer])?;
    let waiting: Vec<String> = match exec.answer(answers)? {
        Progress::Waiting(calls) => calls.into_iter().map(|c| c.call_id).collect(),
        Progress::Resumed => Vec::new(),
    };
    Ok(Json(json!({ "waiting": waiting })))
}

#[utoipa::path(
    post, path = "/v1/executions/{id}/fork", tag = "execute",
    params(("id" = String, Path, description = "A suspended execution's id")),
    responses(
        (status = 201, description = "A new execution waiting on the same round (kept in the snapshot store; answering it replays the program down its own branch)", body = ForkResponse),
        (status = 404, description = "`execution_not_found`", body = ErrorBody),
        (status = 409, description = "`execution_busy`: it is not suspended", body = ErrorBody),
        (status = 429, description = "`quota_exceeded` (`suspended_executions`)", body = ErrorBody),
    )
)]
pub async fn fork(Caller { state, ctx }: Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let new = format!("ex-{}", new_id());
    let key = ctx.key_id.as_deref();
    let calls = Bracket::open(&state, &ctx, Action::ExecutionFork)
        .execution(&new)
        .around(201, async |_| {
            state.runner.fork_execution(&id, &new, key).await
        })
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(ForkResponse {
            execution_id: new,
            forked_from: id,
            status: "suspended",
            pending_calls: calls,
        }),
    )
        .into_response())
}

#[utoipa::path(
    delete, path = "/v1/executions/{id}", tag = "execute",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 204, description = "Cancelled: its program stopped, its journal deleted"),
        (status = 404, description = "`execution_not_found`", body = ErrorBody),
    )
)]
pub async fn cancel(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let key = ctx.key_id.as_deref();
    Bracket::open(&state, &ctx, Action::ExecutionCancel)
        .execution(&id)
        .around(204, async |_| state.runner.cancel_execution(&id, key).await)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
