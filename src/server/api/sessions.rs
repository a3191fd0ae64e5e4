//! The session endpoints: open, turn, inspect, metrics, files (list, download, upload), close. A turn
//! runs in the session's kept-alive interpreter, so variables and imports persist; the last
//! expression's value is echoed on stdout as the REPL does and also returned as `result`.
//! Wall-clock, fuel and output limits are per turn; memory and disk are for the session.

use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::types::{
    AddPackagesRequest, FileEntry, FileList, OpenSessionRequest, OpenSessionResponse,
    PolicyDeniedBody, SessionPackages, TurnRequest, TurnResponse, UploadResponse, download_file,
    media_type, parse_json, parse_json_or_default, start_turn, turned_response, upload_file,
};
use crate::server::bracket::{Bracket, outcome_of, turn_outcome};
use crate::server::error::{ApiError, ApiResult, ErrorBody, OnWire};
use crate::server::request_context::Caller;
use crate::server::routing::naming_session;
use crate::supervisor::audit::Action;
use crate::supervisor::intake;
use crate::supervisor::session::{SessionInfo, SessionMetrics};

#[utoipa::path(
    post, path = "/v1/sessions", tag = "sessions",
    request_body(content = OpenSessionRequest, description = "May be empty"),
    responses(
        (status = 201, description = "Session opened", body = OpenSessionResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 429, description = "`too_many_sessions` (every resident session busy, hibernation full) or `overloaded` (the memory budget)", body = ErrorBody),
        (status = 503, body = ErrorBody),
    )
)]
pub async fn open(
    Caller { state, ctx }: Caller,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let result = Bracket::open(&state, &ctx, Action::SessionOpen)
        .around(201, async |record| {
            let ask: OpenSessionRequest = parse_json_or_default(body)?;
            let session = intake::open(&state.runner, ask, record).await?;
            Ok::<_, ApiError>(OpenSessionResponse::of(&session))
        })
        .await;
    result.map(|r| {
        let id = r.id.clone();
        naming_session((StatusCode::CREATED, Json(r)).into_response(), &id)
    })
}

#[utoipa::path(
    get, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, body = SessionInfo),
        (status = 404, body = ErrorBody),
        (status = 410, description = "Expired", body = ErrorBody),
    )
)]
pub async fn info(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<SessionInfo>> {
    Ok(Json(
        state
            .runner
            .session_info(&id, ctx.key_id.as_deref())
            .await?,
    ))
}

#[utoipa::path(
    get, path = "/v1/sessions/{id}/metrics", tag = "sessions", operation_id = "session_metrics",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, description = "What the session has used: totals and one sample a turn (a hibernated session answers without waking)", body = SessionMetrics),
        (status = 404, body = ErrorBody),
        (status = 410, description = "Expired", body = ErrorBody),
    )
)]
pub async fn metrics(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<SessionMetrics>> {
    let key = ctx.key_id.as_deref();
    Ok(Json(state.runner.session_metrics(&id, key).await?))
}

#[utoipa::path(
    delete, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 204, description = "Closed; its files are gone"),
        (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody),
    )
)]
pub async fn close(Caller { state, ctx }: Caller, Path(id): Path<String>) -> ApiResult<StatusCode> {
    Bracket::open(&state, &ctx, Action::SessionClose)
        .session(&id)
        .around(204, async |_| {
            state.runner.close_session(&id, ctx.key_id.as_deref()).await
        })
        .await
        .map_err(ApiError::from)
        .map(|()| StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post, path = "/v1/sessions/{id}/packages", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body = AddPackagesRequest,
    responses(
        (status = 200, description = "Every package the session now has; its variables, imports and files are kept", body = SessionPackages),
        (status = 400, description = "`invalid_package_spec`, `too_many_packages`", body = ErrorBody),
        (status = 403, description = "`packages_disabled`, `package_not_allowed`", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "A turn is running", body = ErrorBody),
        (status = 413, description = "`package_too_large`", body = ErrorBody),
        (status = 422, description = "`package_not_found`, `package_has_native_code`, `package_has_no_wheel`, `package_conflicts_with_builtin`, `package_conflict`", body = ErrorBody),
        (status = 502, description = "`package_index_unreachable`", body = ErrorBody),
    )
)]
pub async fn add_packages(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<SessionPackages>> {
    let mut bracket = Bracket::open(&state, &ctx, Action::SessionPackages).session(&id);
    let result = async {
        let req: AddPackagesRequest = parse_json(body)?;
        Ok::<_, ApiError>(
            state
                .runner
                .add_packages(&id, ctx.key_id.as_deref(), req.packages, bracket.record())
                .await?,
        )
    }
    .await;
    bracket.close(outcome_of(&result, 200));
    result.map(|packages| {
        Json(SessionPackages {
            session_id: id,
            packages,
        })
    })
}

#[utoipa::path(
    post, path = "/v1/sessions/{id}/execute", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body = TurnRequest,
    responses(
        (status = 200, description = "The turn ran; `status` says how it ended", body = TurnResponse),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "A turn is already running, or the session has ended", body = ErrorBody),
        (status = 422, description = "`policy_denied` (policy `deny`, the check found something: nothing ran, body with `findings`) or `output_leak` (leakage `deny`, the output held secrets: withheld, body with `leaks`; the session keeps its state)", body = PolicyDeniedBody),
        (status = 410, description = "Expired", body = ErrorBody),
        (status = 429, body = ErrorBody),
    )
)]
pub async fn turn(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (mut bracket, turn_id) = Bracket::turn(&state, &ctx, &id);
    let key = ctx.key_id.as_deref();
    // Parsed before the session is looked up: a malformed body wakes no hibernated session.
    let turn = match parse_json::<TurnRequest>(body)
        .and_then(|ask| Ok(intake::turn_of(ask, bracket.record())?))
    {
        Ok(turn) => turn,
        Err(e) => {
            bracket.close(e.outcome());
            return e.into_response();
        }
    };
    if turn.tools.is_some() {
        // Code mode: the turn suspends at each round of tool calls.
        return start_turn(&state, key, bracket, &id, &turn_id, turn).await;
    }
    let result = intake::turn(&state.runner, &id, key, turn, bracket.record()).await;
    bracket.close(turn_outcome(&result));
    turned_response(&turn_id, &id, result.map_err(ApiError::from))
}

#[utoipa::path(
    get, path = "/v1/sessions/{id}/files", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, body = FileList),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 410, body = ErrorBody),
        (status = 422, description = "`output_leak`: a file's path held a secret and the session's leakage policy is `deny`", body = ErrorBody),
    )
)]
pub async fn list_files(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<FileList>> {
    let listing = state.runner.list_files(&id, ctx.key_id.as_deref()).await?;
    Ok(Json(FileList {
        files: listing
            .files
            .into_iter()
            .map(|(path, size)| FileEntry {
                media_type: media_type(&path),
                path,
                size,
            })
            .collect(),
        leaks: listing.leaks,
    }))
}

#[utoipa::path(
    get, path = "/v1/sessions/{id}/files/{*path}", tag = "sessions",
    params(
        ("id" = String, Path, description = "Session id"),
        ("path" = String, Path, description = "File path relative to the working directory; may contain `/`"),
    ),
    responses(
        (status = 200, description = "The raw bytes (a text file with secrets redacted under the session's leakage policy `redact`)", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 422, description = "`output_leak`: the file held secrets and the session's leakage policy is `deny`", body = ErrorBody),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 410, body = ErrorBody),
    )
)]
pub async fn download(
    Caller { state, ctx }: Caller,
    Path((id, path)): Path<(String, String)>,
) -> ApiResult<Response> {
    download_file(&state, &ctx, &id, path).await
}

#[utoipa::path(
    put, path = "/v1/sessions/{id}/files/{*path}", tag = "sessions",
    params(
        ("id" = String, Path, description = "Session id"),
        ("path" = String, Path, description = "File path relative to the working directory; may contain `/`"),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The raw bytes"),
    responses(
        (status = 201, body = UploadResponse),
        (status = 400, description = "Bad path, or past the session's disk limit", body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 410, body = ErrorBody),
        (status = 413, body = ErrorBody),
    )
)]
pub async fn upload(
    Caller { state, ctx }: Caller,
    Path((id, path)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<UploadResponse>)> {
    let r = upload_file(&state, &ctx, &id, path, body).await?;
    Ok((StatusCode::CREATED, Json(r)))
}
