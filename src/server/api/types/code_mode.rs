//! Code mode's share of the `/v1` doors (`POST /v1/execute` plain and streamed, and
//! `/v1/executions/{id}/…`): the shapes a suspended execution is answered and resumed in,
//! and its stops rendered (the task that runs its program is the intake's:
//! `supervisor::intake::code_mode`).

use std::sync::Arc;

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{ExecuteResponse, TurnResponse, denied_response, json_with_held};
use crate::server::AppState;
use crate::server::bracket::Bracket;
use crate::server::error::{ApiError, ApiResult};
use crate::server::routing::naming_execution;
use crate::supervisor::Executed;
use crate::supervisor::SupervisorError;
use crate::supervisor::executions::{Execution, Finished};
use crate::supervisor::intake::{self, Next};
use crate::supervisor::runner::{SessionTurn, Turned};
use crate::tools::{Answer, ToolCall};

/// A code-mode execution waiting on a round of tool calls: answer them at `POST
/// /v1/executions/{execution_id}/resume` (any order, several requests if need be).
#[derive(Debug, Serialize, ToSchema)]
pub struct SuspendedResponse {
    /// The execution's id (the final result has it as `id` too).
    pub id: String,
    /// The same id, under the name the resume path takes.
    pub execution_id: String,
    /// Always `suspended`.
    #[schema(example = "suspended")]
    pub status: &'static str,
    /// The calls waiting for answers (under `redact`, their arguments redacted).
    pub pending_calls: Vec<ToolCall>,
}

impl SuspendedResponse {
    /// Execution `id` waits on `calls`.
    pub fn new(id: &str, calls: Vec<ToolCall>) -> Self {
        SuspendedResponse {
            id: id.to_string(),
            execution_id: id.to_string(),
            status: "suspended",
            pending_calls: calls,
        }
    }
}

/// `POST /v1/executions/{id}/resume`: answers to pending calls.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// Each `{"call_id", "result"}` or `{"call_id", "error": {"type", "message"}}`; an
    /// error whose type is a Python builtin exception is raised as it, else as
    /// `tools.ToolError`.
    #[schema(value_type = Vec<Object>)]
    pub results: Vec<Value>,
}

/// `POST /v1/executions/{id}/fork`: a new execution waiting on the same round.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForkResponse {
    /// The fork's id: answer its calls at its own resume path.
    pub execution_id: String,
    /// The execution forked.
    pub forked_from: String,
    /// Always `suspended`.
    #[schema(example = "suspended")]
    pub status: &'static str,
    /// The calls the fork waits on.
    pub pending_calls: Vec<ToolCall>,
}

/// Code mode in session turn `turn_id` of `session` (its turn has tools): the turn runs in
/// the intake's task under `bracket`; the response is its first stop (`suspended`, or the
/// turn's result).
pub async fn start_turn(
    state: &AppState,
    key: Option<&str>,
    bracket: Bracket,
    session: &str,
    turn_id: &str,
    turn: SessionTurn,
) -> Response {
    match intake::start_turn(
        &state.runner,
        session,
        turn_id,
        key,
        turn,
        Box::new(bracket),
    )
    .await
    {
        Ok(exec) => drive(state, &exec).await,
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Waits for `exec`'s next stop and answers with it: `suspended` with the calls (once its
/// journal is kept), or the final result, as `POST /v1/execute` answers.
pub async fn drive(state: &AppState, exec: &Arc<Execution>) -> Response {
    match intake::next_stop(&state.runner, exec).await {
        // Named, so a proxy sends its resumes to this node, where its program waits.
        Ok(Next::Suspended(calls)) => naming_execution(
            Json(SuspendedResponse::new(&exec.id, calls)).into_response(),
            &exec.id,
        ),
        Ok(Next::Finished(finished)) => finished_response(state, &exec.id, finished).await,
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The response to execution `id`'s end: as `POST /v1/execute` answers a run, as `POST
/// /v1/sessions/{session}/execute` a turn.
pub async fn finished_response(state: &AppState, id: &str, finished: Finished) -> Response {
    match finished {
        Finished::Run(result) => executed_response(state, id, result.map_err(ApiError::from)).await,
        Finished::Turn { session, result } => {
            turned_response(id, &session, result.map_err(ApiError::from))
        }
    }
}

/// The response to turn `id` of `session` that ended: its result, the policy's refusal, or
/// the error.
pub fn turned_response(id: &str, session: &str, result: ApiResult<Turned>) -> Response {
    match result {
        Ok(Turned::Ran(done)) => Json(TurnResponse::new(id, session, *done)).into_response(),
        Ok(Turned::Denied(findings)) => denied_response(findings),
        Err(e) => e.into_response(),
    }
}

/// The response to a run that ended: the result (a large file streamed from disk into the
/// JSON, never held whole), the policy's refusal, or the error.
pub async fn executed_response(
    state: &AppState,
    id: &str,
    result: ApiResult<Executed>,
) -> Response {
    match result {
        Ok(Executed::Ran { report, findings }) => {
            let (response, held) = ExecuteResponse::with_held(id, *report, findings);
            json_with_held(&response, held, state.runner.budget())
                .await
                .into_response()
        }
        Ok(Executed::Denied(findings)) => denied_response(findings),
        Err(e) => e.into_response(),
    }
}

/// Reads a caller's answers for `exec`, each bounded by its `result_bytes` (400 naming the
/// first fault).
pub fn answers_for(exec: &Execution, values: Vec<Value>) -> ApiResult<Vec<Answer>> {
    let bound = exec.result_bytes();
    values
        .into_iter()
        .map(|v| {
            Answer::from_value(v, bound)
                .map_err(|m| ApiError::from(SupervisorError::InvalidRequest(m)))
        })
        .collect()
}
