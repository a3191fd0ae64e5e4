//! The session endpoints: open, turn, inspect, files (list, download, upload), close. A turn
//! runs in the session's kept-alive interpreter, so variables and imports persist; the last
//! expression's value is echoed on stdout as the REPL does and also returned as `result`.
//! Wall-clock, fuel and output limits are per turn; memory and disk are for the session.

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::audit::AuditRecord;
use super::check::{self, Finding, Policy};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::execute::{ExecutionResult, FileIn, decode_files, media_type, parse_json};
use super::request_context::{RequestContext, new_id};
use super::sessions::{EndInfo, Session, SessionInfo};
use crate::limits::{LimitError, Limits, LimitsRequest};
use crate::sandbox::TurnLimits;
use crate::sandbox::fs_guard::measure_dir;
use crate::sandbox::workdir::validate_relative_path;

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSessionRequest {
    /// Memory and disk hold for the session's life; timeout, fuel and output are the
    /// defaults of each turn.
    #[serde(default)]
    pub limits: Option<LimitsRequest>,
    /// The snapshot the interpreter starts from: `python` (default) or `scientific`
    /// (numpy, pandas and matplotlib already imported).
    #[serde(default)]
    pub template: crate::template::Template,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenSessionResponse {
    #[schema(example = "s-0a1b2c3d4e5f60718293a4b5c6d7e8f9")]
    pub id: String,
    pub created_at: String,
    pub expires_at: String,
    pub limits: Limits,
}

/// Per-turn limits; each left out is the session's.
#[derive(Debug, Default, Clone, Copy, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnLimitsRequest {
    pub timeout_ms: Option<u64>,
    pub fuel: Option<u64>,
    pub output_bytes: Option<u64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    #[schema(example = "x = 21\nx * 2")]
    pub code: String,
    #[serde(default)]
    pub stdin: Option<String>,
    /// Written into the working directory before the code runs.
    #[serde(default)]
    pub files: Vec<FileIn>,
    #[serde(default)]
    pub limits: Option<TurnLimitsRequest>,
    /// Pre-execution check, as for `/v1/execute`: `warn` (default), `deny` or `off`.
    #[serde(default)]
    pub policy: Policy,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TurnResponse {
    /// This turn's id (also in the audit log).
    pub id: String,
    pub session_id: String,
    /// 1 for the session's first turn.
    pub turn: u64,
    /// `repr` of the last expression's value, when the turn ended with an expression that
    /// was not None (it is also echoed on stdout).
    #[schema(example = "42")]
    pub result: Option<String>,
    /// Set when this turn ended the session, with why.
    pub ended: Option<EndInfo>,
    #[serde(flatten)]
    pub report: ExecutionResult,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FileEntry {
    pub path: String,
    pub size: u64,
    pub media_type: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FileList {
    pub files: Vec<FileEntry>,
}

fn audit_result<T>(state: &AppState, mut record: AuditRecord, result: &ApiResult<T>, ok: u16) {
    record = match result {
        Ok(_) => record.http(ok),
        Err(e) => record.http(e.status().as_u16()).error(e.code()),
    };
    state.audit.write(record);
}

#[utoipa::path(
    post,
    path = "/v1/sessions",
    tag = "sessions",
    request_body(content = OpenSessionRequest, description = "May be empty"),
    responses(
        (status = 201, description = "Session opened", body = OpenSessionResponse),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 429, description = "Too many live sessions, or the memory budget is taken", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
pub async fn open(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<OpenSessionResponse>)> {
    let mut record = AuditRecord::new(&ctx, "session_open");
    let result = open_inner(&state, body, &mut record).await;
    audit_result(&state, record, &result, 201);
    result.map(|r| (StatusCode::CREATED, Json(r)))
}

pub(crate) async fn open_inner(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    record: &mut AuditRecord,
) -> ApiResult<OpenSessionResponse> {
    let host = state.host()?;
    let body = body?;
    let req: OpenSessionRequest = if body.iter().all(u8::is_ascii_whitespace) {
        OpenSessionRequest::default()
    } else {
        parse_json(Ok(body))?
    };
    let limits = host.resolve_limits(&req.limits.unwrap_or_default())?;
    crate::template::check_limits(req.template, &limits)?;
    record.limits = Some(limits);
    let slot = state.sessions.reserve_slot().ok_or_else(|| {
        state
            .admission
            .reject(super::admission::Rejection::TooManySessions)
    })?;
    let memory = state
        .admission
        .reserve_memory(host.footprint_bytes(&limits))?;
    let ticket = state.admission.admit(None).await?;
    let template = req.template;
    let interp = state
        .guests
        .run(move || {
            let _ticket = ticket;
            let sandbox = host.prepare_with(
                crate::sandbox::SandboxSpec {
                    limits,
                    env: Vec::new(),
                    files: Vec::new(),
                    stdin: Vec::new(),
                    observer: None,
                    cancel: Default::default(),
                    setup: crate::template::GuestSetup {
                        rich: true,
                        ..Default::default()
                    },
                },
                template,
            )?;
            Ok::<_, crate::sandbox::SandboxError>(sandbox.into_interpreter())
        })
        .await?
        .map_err(ApiError::from_sandbox)?;
    let session = Session::new(
        interp,
        limits,
        memory,
        slot,
        state.sessions.idle,
        state.sessions.lifetime,
    );
    state.sessions.insert(session.clone());
    state.metrics.session_opened();
    record.session_id = Some(session.id.clone());
    let info = session.info();
    Ok(OpenSessionResponse {
        id: info.id,
        created_at: info.created_at,
        expires_at: info.expires_at,
        limits,
    })
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{id}",
    tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, body = SessionInfo),
        (status = 404, body = ErrorBody),
        (status = 410, description = "Expired", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
pub async fn info(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<SessionInfo>> {
    Ok(Json(state.sessions.get(&id)?.info()))
}

#[utoipa::path(
    delete,
    path = "/v1/sessions/{id}",
    tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 204, description = "Closed; its files are gone"),
        (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
pub async fn close(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let record = AuditRecord::new(&ctx, "session_close").session(&id);
    let result = state.sessions.remove(&id).map(|s| {
        s.close().release();
        state.metrics.session_closed("deleted");
    });
    audit_result(&state, record, &result, 204);
    result.map(|_| StatusCode::NO_CONTENT)
}

/// Per-turn limits: the session's unless asked, never above the server's maxima, and never
/// past the session's lifetime.
fn turn_limits(
    asked: TurnLimitsRequest,
    session: &Session,
    maximum: &Limits,
) -> Result<TurnLimits, LimitError> {
    fn pick(
        field: &'static str,
        v: Option<u64>,
        d: u64,
        max: u64,
        min: u64,
    ) -> Result<u64, LimitError> {
        let value = v.unwrap_or(d);
        if value > max {
            return Err(LimitError::AboveMaximum { field, value, max });
        }
        if value < min {
            return Err(LimitError::BelowMinimum { field, value, min });
        }
        Ok(value)
    }
    let l = &session.limits;
    let timeout_ms = pick(
        "timeout_ms",
        asked.timeout_ms,
        l.timeout_ms,
        maximum.timeout_ms,
        1,
    )?;
    let left = session.lifetime_left().as_millis() as u64;
    Ok(TurnLimits {
        timeout_ms: timeout_ms.min(left).max(1),
        fuel: pick("fuel", asked.fuel, l.fuel, maximum.fuel, 1)?,
        output_bytes: pick(
            "output_bytes",
            asked.output_bytes,
            l.output_bytes,
            maximum.output_bytes,
            0,
        )?,
    })
}

#[utoipa::path(
    post,
    path = "/v1/sessions/{id}/execute",
    tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    request_body = TurnRequest,
    responses(
        (status = 200, description = "The turn ran; `status` says how it ended", body = TurnResponse),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, description = "A turn is already running, or the session has ended", body = ErrorBody),
        (status = 422, description = "Policy `deny` and the check found something: nothing ran", body = check::PolicyDeniedBody),
        (status = 410, description = "Expired", body = ErrorBody),
        (status = 429, body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
pub async fn turn(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let turn_id = format!("turn-{}", new_id());
    let mut record = AuditRecord::new(&ctx, "session_turn")
        .session(&id)
        .execution(&turn_id);
    let result = turn_inner(&state, &id, &turn_id, body, &mut record).await;
    match result {
        Ok(Err(findings)) => {
            state.audit.write(record.http(422).error("policy_denied"));
            check::denied_response(findings)
        }
        Ok(Ok(r)) => {
            audit_result(&state, record, &Ok(()), 200);
            Json(r).into_response()
        }
        Err(e) => {
            let failed: ApiResult<()> = Err(e);
            audit_result(&state, record, &failed, 200);
            failed.map_or_else(IntoResponse::into_response, |()| {
                StatusCode::OK.into_response()
            })
        }
    }
}

pub(crate) async fn turn_inner(
    state: &AppState,
    id: &str,
    turn_id: &str,
    body: Result<Bytes, BytesRejection>,
    record: &mut AuditRecord,
) -> ApiResult<Result<TurnResponse, Vec<Finding>>> {
    let host = state.host()?;
    let session = state.sessions.get(id)?;
    let req: TurnRequest = parse_json(body)?;
    record.set_code(&req.code);
    let findings = match req.policy {
        Policy::Off => None,
        policy => {
            // In a fresh sandbox of its own: the session's interpreter is not touched.
            let c = check::check_code(state, host, req.code.clone()).await?;
            if policy == Policy::Deny && !c.findings.is_empty() {
                return Ok(Err(c.findings));
            }
            Some(c.findings)
        }
    };
    let limits = turn_limits(
        req.limits.unwrap_or_default(),
        &session,
        &state.config.maximum,
    )?;
    let mut shown = session.limits;
    shown.timeout_ms = limits.timeout_ms;
    shown.fuel = limits.fuel;
    shown.output_bytes = limits.output_bytes;
    record.limits = Some(shown);
    let files = decode_files(req.files, session.limits.disk_bytes)?;
    let busy = session.begin()?;
    let ticket = state.admission.admit(None).await?;
    let mut interp = session.take_interpreter(&busy)?;
    // The session's own flag: shutdown and close set it; a client hanging up does not.
    let _registered = state.guests.register_uncancelled(session.cancel_flag());
    let code = req.code;
    let stdin = req.stdin.map(String::into_bytes).unwrap_or_default();
    let disk_limit = session.limits.disk_bytes;
    let ran = state
        .guests
        .run(move || {
            let _ticket = ticket;
            let _busy = busy;
            if !files.is_empty() {
                let used = measure_dir(interp.workdir().path());
                let adding: u64 = files.iter().map(|f| f.content.len() as u64).sum();
                if used + adding > disk_limit {
                    return (
                        Some(interp),
                        Err(ApiError::InvalidRequest(format!(
                            "the files would take the session past its disk limit of {disk_limit} bytes"
                        ))),
                    );
                }
                for (i, f) in files.iter().enumerate() {
                    if let Err(e) = interp.workdir_mut().write_file(&f.path, &f.content) {
                        return (Some(interp), Err(ApiError::from_workdir(&format!("files[{i}].path"), e)));
                    }
                }
            }
            match interp.turn(&code, stdin, &limits) {
                Ok(outcome) => {
                    if outcome.ended.is_some() {
                        // Dead: let it go here, off the executor (this removes its dir).
                        drop(interp);
                        (None, Ok(outcome))
                    } else {
                        (Some(interp), Ok(outcome))
                    }
                }
                Err(reason) => (
                    None,
                    Err(ApiError::SessionEnded {
                        id: String::new(),
                        reason: EndInfo::from_reason(&reason).message,
                    }),
                ),
            }
        })
        .await;
    let (interp, outcome) = match ran {
        Ok(v) => v,
        Err(e) => {
            // The guest thread panicked: the interpreter is gone with it.
            session
                .put_back(None, Some(EndInfo::host_error(e.to_string())), true)
                .release();
            state.metrics.session_closed("ended");
            return Err(e);
        }
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            session.put_back(interp, None, false).release();
            return Err(match e {
                ApiError::SessionEnded { reason, .. } => ApiError::SessionEnded {
                    id: id.to_string(),
                    reason,
                },
                other => other,
            });
        }
    };
    let ended = outcome.ended.as_ref().map(EndInfo::from_reason);
    if ended.is_some() {
        state.metrics.session_closed("ended");
    }
    session.put_back(interp, ended.clone(), true).release();
    state.metrics.executed("session_turn", &outcome.report);
    record.set_report(&outcome.report);
    let mut report: ExecutionResult = outcome.report.into();
    report.findings = findings;
    Ok(Ok(TurnResponse {
        id: turn_id.to_string(),
        session_id: id.to_string(),
        turn: session.info().turns,
        result: outcome.result,
        ended,
        report,
    }))
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{id}/files",
    tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, body = FileList),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 410, body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
pub async fn list_files(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<FileList>> {
    let session = state.sessions.get(&id)?;
    let busy = session.begin()?;
    let interp = session.take_interpreter(&busy)?;
    let (interp, files) = state
        .guests
        .run(move || {
            let files = interp.workdir().list_files();
            (interp, files)
        })
        .await
        .map_err(|e| lost(&session, e))?;
    session.put_back(Some(interp), None, false).release();
    drop(busy);
    Ok(Json(FileList {
        files: files
            .into_iter()
            .map(|(path, size)| FileEntry {
                media_type: media_type(&path),
                path,
                size,
            })
            .collect(),
    }))
}

/// A guest thread panicked while it held the interpreter: the session has lost it.
fn lost(session: &Session, e: ApiError) -> ApiError {
    session
        .put_back(None, Some(EndInfo::host_error(e.to_string())), false)
        .release();
    e
}

fn check_path(path: &str) -> ApiResult<()> {
    validate_relative_path(path).map_err(|e| ApiError::InvalidPath {
        field: "path".into(),
        message: e.to_string(),
    })
}

#[utoipa::path(
    get,
    path = "/v1/sessions/{id}/files/{path}",
    tag = "sessions",
    params(
        ("id" = String, Path, description = "Session id"),
        ("path" = String, Path, description = "File path relative to the working directory; may contain `/`"),
    ),
    responses(
        (status = 200, description = "The raw bytes", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody),
        (status = 410, body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
pub async fn download(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    Path((id, path)): Path<(String, String)>,
) -> ApiResult<Response> {
    let record = AuditRecord::new(&ctx, "file_download").session(&id);
    let result = download_inner(&state, &id, &path).await;
    let record = match &result {
        Ok(bytes) => record.path(&path, bytes.len() as u64),
        Err(_) => record.path(&path, 0),
    };
    audit_result(&state, record, &result, 200);
    let bytes = result?;
    Ok((
        [(header::CONTENT_TYPE, media_type(&path))],
        Body::from(bytes),
    )
        .into_response())
}

async fn download_inner(state: &AppState, id: &str, path: &str) -> ApiResult<Vec<u8>> {
    check_path(path)?;
    let session = state.sessions.get(id)?;
    let busy = session.begin()?;
    let interp = session.take_interpreter(&busy)?;
    let max = session.limits.disk_bytes;
    let owned = path.to_string();
    let (interp, read) = state
        .guests
        .run(move || {
            let r = interp.workdir().read_file(&owned, max);
            (interp, r)
        })
        .await
        .map_err(|e| lost(&session, e))?;
    session.put_back(Some(interp), None, false).release();
    drop(busy);
    match read {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(ApiError::FileNotFound(path.to_string())),
        Err(e) => Err(ApiError::from_workdir("path", e)),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UploadResponse {
    pub path: String,
    pub size: u64,
}

#[utoipa::path(
    put,
    path = "/v1/sessions/{id}/files/{path}",
    tag = "sessions",
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
    ),
    security((), ("bearer" = []))
)]
pub async fn upload(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    Path((id, path)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<UploadResponse>)> {
    let record = AuditRecord::new(&ctx, "file_upload").session(&id);
    let result = upload_inner(&state, &id, &path, body).await;
    let size = result.as_ref().map(|r| r.size).unwrap_or(0);
    audit_result(&state, record.path(&path, size), &result, 201);
    result.map(|r| (StatusCode::CREATED, Json(r)))
}

async fn upload_inner(
    state: &AppState,
    id: &str,
    path: &str,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<UploadResponse> {
    check_path(path)?;
    let session = state.sessions.get(id)?;
    let bytes = body?;
    let busy = session.begin()?;
    let mut interp = session.take_interpreter(&busy)?;
    let disk_limit = session.limits.disk_bytes;
    let owned = path.to_string();
    let (interp, written) = state
        .guests
        .run(move || {
            let used = measure_dir(interp.workdir().path());
            if used + bytes.len() as u64 > disk_limit {
                let e = ApiError::InvalidRequest(format!(
                    "the file would take the session past its disk limit of {disk_limit} bytes"
                ));
                return (interp, Err(e));
            }
            let r = interp
                .workdir_mut()
                .write_file(&owned, &bytes)
                .map(|_| bytes.len() as u64)
                .map_err(|e| ApiError::from_workdir("path", e));
            (interp, r)
        })
        .await
        .map_err(|e| lost(&session, e))?;
    session.put_back(Some(interp), None, false).release();
    drop(busy);
    Ok(UploadResponse {
        path: path.to_string(),
        size: written?,
    })
}
