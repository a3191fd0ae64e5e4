//! A session's kept turns: list them, roll the session back to one. Forking from one is
//! `POST /v1/sessions/{id}/fork {"turn": k, "count": n}` (`snapshots.rs`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use serde::Serialize;
use utoipa::ToSchema;

use super::types::parse_json;
use crate::server::bracket::Bracket;
use crate::server::error::{ApiError, ApiResult, ErrorBody};
use crate::server::request_context::Caller;
use crate::supervisor::audit::Action;
use crate::supervisor::runner::{KeptTurns, RollbackRequest};

/// What `POST /v1/sessions/{id}/rollback` did.
#[derive(Debug, Serialize, ToSchema)]
pub struct RollbackResponse {
    /// The turn the session is back after: its next turn is `turn + 1`.
    pub turn: u64,
    /// With `"branch": true`: the new session that holds the state it was in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/sessions/{id}/turns", tag = "sessions", operation_id = "session_turns",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "The states the session keeps to roll back or fork to, oldest first; the last is the one it is in", body = KeptTurns),
        (status = 404, body = ErrorBody),
        (status = 409, description = "`session_busy` or `session_ended`", body = ErrorBody),
        (status = 410, body = ErrorBody),
    )
)]
pub async fn list(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<KeptTurns>> {
    let key = ctx.key_id.as_deref();
    Ok(Json(state.runner.kept_turns(&id, key).await?))
}

#[utoipa::path(
    post, path = "/v1/sessions/{id}/rollback", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body = RollbackRequest,
    responses(
        (status = 200, description = "The session is in its state just after `turn` (interpreter, files, the shell's folder and variables); the states after it are dropped, or kept as a new session with `branch`", body = RollbackResponse),
        (status = 400, body = ErrorBody),
        (status = 404, description = "`session_not_found`, or `turn_not_kept`: the session keeps no state after that turn", body = ErrorBody),
        (status = 409, description = "`session_busy` or `session_ended`", body = ErrorBody),
        (status = 410, body = ErrorBody),
        (status = 429, description = "With `branch`: as for a fork", body = ErrorBody),
    )
)]
pub async fn rollback(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<RollbackResponse>> {
    let key = ctx.key_id.as_deref();
    Bracket::open(&state, &ctx, Action::SessionRollback)
        .session(&id)
        .around(200, async |record| {
            let ask: RollbackRequest = parse_json(body)?;
            let turn = ask.turn;
            let branch = state.runner.rollback_session(&id, key, ask, record).await?;
            Ok::<_, ApiError>(RollbackResponse {
                turn,
                branch: branch.map(|b| b.id.clone()),
            })
        })
        .await
        .map(Json)
}
