//! Sessions as data: snapshot a session, fork it (once or many times, from its state now or
//! a kept turn's), and list, inspect or delete snapshots.
//! Restoring one is `POST /v1/sessions {"snapshot": "snap-…"}` (`sessions.rs`). A snapshot
//! belongs to the API key that took it: another key (or none, with keys on) gets 404.

use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::types::{OpenSessionResponse, parse_json_or_default};
use crate::server::bracket::Bracket;
use crate::server::error::{ApiError, ApiResult, ErrorBody};
use crate::server::request_context::Caller;
use crate::server::routing::naming_session;
use crate::supervisor::audit::Action;
use crate::supervisor::runner::ForkRequest;
use crate::supervisor::snapshots::SnapshotInfo;

#[utoipa::path(
    post, path = "/v1/sessions/{id}/snapshot", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 201, description = "Snapshot taken and stored", body = SnapshotInfo),
        (status = 404, body = ErrorBody),
        (status = 409, description = "`session_busy` (a turn is running), `session_ended`, or `snapshot_refused` (a folder is held open between turns, or the state is past a bound of the snapshot format)", body = ErrorBody),
        (status = 410, body = ErrorBody),
        (status = 503, description = "`snapshot_store_unavailable`: nothing was lost, try again", body = ErrorBody),
    )
)]
pub async fn snapshot(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<SnapshotInfo>)> {
    Bracket::open(&state, &ctx, Action::SessionSnapshot)
        .session(&id)
        .around(201, async |record| {
            let owner = ctx.key_id.clone();
            state.runner.snapshot_session(&id, owner, record).await
        })
        .await
        .map_err(ApiError::from)
        .map(|info| (StatusCode::CREATED, Json(info)))
}

/// `POST /v1/sessions/{id}/fork` with a `count`: every session made.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForkedSessions {
    pub sessions: Vec<OpenSessionResponse>,
}

#[utoipa::path(
    post, path = "/v1/sessions/{id}/fork", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body(content = ForkRequest, description = "May be empty: one fork of the state it is in"),
    responses(
        (status = 201, description = "A new live session with the same state (of a kept turn, with `turn`); the two diverge from here. With `count`, `ForkedSessions`: that many, all or none", body = OpenSessionResponse),
        (status = 400, body = ErrorBody),
        (status = 404, description = "`session_not_found`, or `turn_not_kept`", body = ErrorBody),
        (status = 409, description = "`session_busy`, `session_ended` or `snapshot_refused`", body = ErrorBody),
        (status = 410, body = ErrorBody),
        (status = 429, description = "`too_many_sessions` (every resident session busy, hibernation full), `overloaded` (the memory budget) or `quota_exceeded`", body = ErrorBody),
    )
)]
pub async fn fork(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let key = ctx.key_id.as_deref();
    let mut listed = false;
    let result = Bracket::open(&state, &ctx, Action::SessionFork)
        .session(&id)
        .around(201, async |record| {
            let ask: ForkRequest = parse_json_or_default(body)?;
            listed = ask.count.is_some();
            Ok::<_, ApiError>(state.runner.fork_sessions(&id, key, ask, record).await?)
        })
        .await;
    result.map(|made| match (listed, made.first()) {
        (false, Some(s)) => {
            let created = (StatusCode::CREATED, Json(OpenSessionResponse::of(s)));
            naming_session(created.into_response(), &s.id)
        }
        _ => {
            let sessions = made.iter().map(|s| OpenSessionResponse::of(s)).collect();
            (StatusCode::CREATED, Json(ForkedSessions { sessions })).into_response()
        }
    })
}

#[utoipa::path(
    get, path = "/v1/snapshots", tag = "sessions",
    responses(
        (status = 200, description = "The caller's snapshots, oldest first", body = Vec<SnapshotInfo>),
        (status = 503, body = ErrorBody),
    )
)]
pub async fn list(Caller { state, ctx }: Caller) -> ApiResult<Json<Vec<SnapshotInfo>>> {
    Ok(Json(
        state.runner.list_snapshots(ctx.key_id.as_deref()).await?,
    ))
}

#[utoipa::path(
    get, path = "/v1/snapshots/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Snapshot id")),
    responses(
        (status = 200, body = SnapshotInfo),
        (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody),
    )
)]
pub async fn info(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<SnapshotInfo>> {
    Ok(Json(
        state
            .runner
            .snapshot_info(&id, ctx.key_id.as_deref())
            .await?,
    ))
}

#[utoipa::path(
    delete, path = "/v1/snapshots/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Snapshot id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody),
    )
)]
pub async fn delete(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let mut bracket = Bracket::open(&state, &ctx, Action::SnapshotDelete);
    bracket.record().snapshot_id = Some(id.chars().take(64).collect());
    let key = ctx.key_id.as_deref();
    bracket
        .around(204, async |_| state.runner.delete_snapshot(&id, key).await)
        .await
        .map_err(ApiError::from)
        .map(|()| StatusCode::NO_CONTENT)
}
