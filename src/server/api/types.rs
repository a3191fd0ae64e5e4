//! The request and response types the front doors share, and what more than one of them
//! does alike: a run's report or a turn made a response, a session's file downloaded or
//! uploaded. The `/v1` bodies of an execution, a session and a turn are the intake's
//! (`supervisor::intake`, which turns them into runs for every door alike), re-exported
//! here for the doors.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::check::Finding;
use crate::limits::Limits;
use crate::report::FileBody;
use crate::report::{FileOut, Leak, PyError, Report, RichOutput, Status, Truncated, Usage};
use crate::server::AppState;
use crate::server::bracket::Bracket;
use crate::server::error::{ApiError, ApiResult, ErrorDetail, OnWire as _};
use crate::server::request_context::Caller;
use crate::supervisor::ErrorCode;
use crate::supervisor::SupervisorError;
use crate::supervisor::audit::Action;
use crate::supervisor::runner::TurnDone;
use crate::supervisor::session::{EndInfo, Session};
use crate::vocabulary::Template;
use crate::vocabulary::check_relative_path;

mod cell;
mod code_mode;
mod files_body;
pub use crate::supervisor::intake::{
    ExecuteRequest, FileIn, NetworkRequest, OpenSessionRequest, TurnRequest, VolumeMountRequest,
};
pub use cell::{Cell, Failure};
pub use code_mode::{
    ForkResponse, ResumeRequest, SuspendedResponse, answers_for, drive, executed_response,
    finished_response, start_turn, turned_response,
};
pub use files_body::{HeldContents, json_with_held, raw_held};

/// A file the run created or changed.
#[derive(Debug, Serialize, ToSchema)]
pub struct FileOutput {
    pub path: String,
    pub size: u64,
    /// Base64; null when the file did not fit in what a response returns (the disk limit).
    pub content: Option<String>,
    /// Guessed from the extension, e.g. `image/png`.
    #[schema(example = "image/png")]
    pub media_type: &'static str,
}

/// The result of one execution or one session turn.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecutionResult {
    pub status: Status,
    /// The guest's exit status; null when a limit stopped it first.
    pub exit_code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub truncated: Truncated,
    /// The uncaught Python exception, parsed from the traceback.
    pub error: Option<PyError>,
    /// What stopped the run when a host limit did.
    pub detail: Option<String>,
    pub files: Vec<FileOutput>,
    pub usage: Usage,
    /// Rich outputs in order: `display(obj)` and `plt.show()` in the guest.
    pub outputs: Vec<RichOutput>,
    /// What the pre-execution check found (policy `warn`); absent with policy `off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<Vec<Finding>>,
    /// What the output-leakage scan found (rule and place, never the text); absent with
    /// leakage `off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaks: Option<Vec<Leak>>,
    /// What the program's outbound HTTP requests did; absent when it was granted no network.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::report::NetworkUsage>,
}

impl From<Report> for ExecutionResult {
    fn from(r: Report) -> Self {
        ExecutionResult {
            status: r.status,
            exit_code: r.exit_code,
            stdout: r.stdout,
            stderr: r.stderr,
            truncated: r.truncated,
            error: r.error,
            detail: r.detail,
            files: {
                let mut room = WHOLE_RESPONSE_HELD_BYTES;
                r.files
                    .into_iter()
                    .map(|f| file_output(f, &mut room))
                    .collect()
            },
            usage: r.usage,
            outputs: r.outputs,
            findings: None,
            leaks: r.leaks,
            network: r.network,
        }
    }
}

/// What the held files of one whole response (MCP, streamed events, Piston) may bring into
/// memory together; a held file past it is listed with `content: null`, as a file past the
/// disk limit is (`POST /v1/execute` without streaming, and a session's download, stream
/// any size).
pub const WHOLE_RESPONSE_HELD_BYTES: u64 = 32 << 20;

/// `f` as a response lists it. A held file (too large to carry in memory, `worker::held`)
/// is read here, whole, for the front doors that build a whole response (MCP, streamed
/// events, Piston), while `room` (what is left of [`WHOLE_RESPONSE_HELD_BYTES`]) allows;
/// `POST /v1/execute` streams it instead ([`ExecuteResponse::with_held`]).
fn file_output(f: FileOut, room: &mut u64) -> FileOutput {
    let content = match (f.content, &f.held) {
        (Some(c), _) => Some(STANDARD.encode(c)),
        (None, Some(held)) if f.size <= *room => {
            *room -= f.size;
            crate::report::read_all(held, f.size)
                .map(|c| STANDARD.encode(c))
                .inspect_err(|e| tracing::warn!(path = %f.path, error = %e, "reading a held file"))
                .ok()
        }
        (None, Some(_)) => {
            tracing::debug!(path = %f.path, size = f.size, "a held file past what a whole response carries");
            None
        }
        (None, None) => None,
    };
    FileOutput {
        media_type: media_type(&f.path),
        content,
        path: f.path,
        size: f.size,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExecuteResponse {
    /// This execution's id (also in the audit log).
    #[schema(example = "ex-5f0c8a0d2b7e4c1a9d3e6b8f7a1c2d3e")]
    pub id: String,
    #[serde(flatten)]
    pub result: ExecutionResult,
}

/// A media type from a file name's extension.
/// A session file's path as a request names it: relative, inside the working directory.
pub fn check_file_path(path: &str) -> ApiResult<()> {
    check_relative_path(path).map_err(|e| {
        ApiError::from(SupervisorError::InvalidPath {
            field: "path".into(),
            message: e.to_string(),
        })
    })
}

pub fn media_type(path: &str) -> &'static str {
    let ext = path
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "txt" | "log" | "md" | "py" => "text/plain",
        "html" | "htm" => "text/html",
        "json" => "application/json",
        "xml" => "application/xml",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "parquet" => "application/vnd.apache.parquet",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        _ => "application/octet-stream",
    }
}

/// [`parse_json`] of a body that may be empty (or only whitespace): then `T::default()`.
pub fn parse_json_or_default<T: DeserializeOwned + Default>(
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<T> {
    let body = body?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    parse_json(Ok(body))
}

/// Opens `POST /v1/execute`'s bracket (the execution's id) and parses its body: a body that
/// does not parse closes the bracket and is the error answered.
pub fn open_execution(
    Caller { state, ctx }: &Caller,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(Bracket, String, ExecuteRequest)> {
    let (bracket, id) = Bracket::run(state, ctx);
    match parse_json(body) {
        Ok(ask) => Ok((bracket, id, ask)),
        Err(e) => {
            bracket.close(e.outcome());
            Err(e)
        }
    }
}

/// Parses a JSON body, every failure a JSON error: 413 past the body cap, else 400.
pub fn parse_json<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> ApiResult<T> {
    let body = body?;
    if body.is_empty() {
        return Err(ApiError::InvalidJson(
            "the request body is empty; send a JSON object".into(),
        ));
    }
    serde_json::from_slice(&body).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Data => "the JSON does not fit this endpoint",
            _ => "the body is not valid JSON",
        };
        ApiError::InvalidJson(format!("{what}: {e}"))
    })
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    #[schema(example = "import os\nos.system('ls')")]
    pub code: String,
}

/// The body of `POST /v1/sessions/{id}/packages`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddPackagesRequest {
    /// Requirement specifiers to add to what the session has (its packages keep their
    /// versions).
    #[schema(example = json!(["tabulate"]))]
    pub packages: Vec<String>,
}

/// What a session's extra packages are.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionPackages {
    pub session_id: String,
    /// Every wheel in the session's environment.
    pub packages: Vec<crate::packages::PackagePin>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OpenSessionResponse {
    #[schema(example = "s-0a1b2c3d4e5f60718293a4b5c6d7e8f9")]
    pub id: String,
    pub created_at: String,
    pub expires_at: String,
    pub limits: Limits,
    /// The template its interpreter runs.
    pub template: Template,
    /// Turns run so far: 0 for a new session, the original's for a fork or a restore.
    pub turns: u64,
    /// Every completed turn is snapshotted to the store.
    pub durable: bool,
    /// The volumes mounted in it (left out when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<crate::supervisor::volumes::VolumeMount>,
}

impl OpenSessionResponse {
    /// The response for a session just opened, forked or restored.
    pub fn of(session: &Session) -> Self {
        let info = session.info();
        OpenSessionResponse {
            id: info.id,
            created_at: info.created_at,
            expires_at: info.expires_at,
            limits: session.limits,
            template: session.template,
            turns: info.turns,
            durable: session.durable,
            volumes: info.volumes,
        }
    }
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
    /// Set when this turn ended the session, with why: only a program's own exit
    /// (`exit()`, `os._exit`) ends a session.
    pub ended: Option<EndInfo>,
    /// A limit or trap (`status` says which) stopped the turn, and the session went back to
    /// its exact state before it: variables, imports and files as they were after the
    /// previous turn (this turn's input files are gone too). The next turn runs normally.
    pub rolled_back: bool,
    /// Only when true: this turn alone changed more than the session's kept turns may hold
    /// (`--kept-turn-bytes`), so no state before it is kept to roll back or fork to.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub turns_dropped: bool,
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
    /// Under the session's leakage policy `redact`, without the files whose path holds a
    /// secret (each listed in `leaks`, place `file_name`).
    pub files: Vec<FileEntry>,
    /// What the scan of the paths found (rule and place, never the text); absent with
    /// leakage `off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaks: Option<Vec<Leak>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UploadResponse {
    pub path: String,
    pub size: u64,
}

/// The body of a 422 for a denied execution: the usual error plus the findings.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyDeniedBody {
    pub error: ErrorDetail,
    pub findings: Vec<Finding>,
}

/// The 422 response for an execution the policy refused.
pub fn denied_response(findings: Vec<Finding>) -> axum::response::Response {
    use axum::response::IntoResponse;
    let body = denied_body(findings);
    (axum::http::StatusCode::UNPROCESSABLE_ENTITY, Json(body)).into_response()
}

/// The body of a refusal by the `deny` policy.
pub fn denied_body(findings: Vec<Finding>) -> PolicyDeniedBody {
    let n = findings.len();
    PolicyDeniedBody {
        error: ErrorDetail {
            code: ErrorCode::PolicyDenied,
            message: format!(
                "the pre-execution check found {n} issue{} and the policy is \"deny\"; nothing ran",
                if n == 1 { "" } else { "s" }
            ),
            field: None,
        },
        findings,
    }
}

impl ExecuteResponse {
    /// The response for execution `id`, with the check's findings.
    pub fn new(id: &str, report: Report, findings: Option<Vec<Finding>>) -> Self {
        let mut result: ExecutionResult = report.into();
        result.findings = findings;
        ExecuteResponse {
            id: id.to_string(),
            result,
        }
    }

    /// [`ExecuteResponse::new`], each held file's content left on disk: a placeholder here,
    /// which [`json_with_held`] streams the file's base64 into.
    pub fn with_held(
        id: &str,
        mut report: Report,
        findings: Option<Vec<Finding>>,
    ) -> (Self, HeldContents) {
        let mut held = HeldContents::default();
        let marks: Vec<Option<String>> = report.files.iter_mut().map(|f| held.take(f)).collect();
        let mut response = Self::new(id, report, findings);
        for (f, mark) in response.result.files.iter_mut().zip(marks) {
            if mark.is_some() {
                f.content = mark;
            }
        }
        (response, held)
    }
}

impl TurnResponse {
    /// The response for turn `turn_id` of session `session_id`.
    pub fn new(turn_id: &str, session_id: &str, done: TurnDone) -> Self {
        let TurnDone {
            report,
            result,
            ended,
            rolled_back,
            turn,
            findings,
            unkept,
        } = done;
        let mut report: ExecutionResult = report.into();
        report.findings = findings;
        TurnResponse {
            id: turn_id.to_string(),
            session_id: session_id.to_string(),
            turn,
            result,
            ended,
            rolled_back,
            turns_dropped: unkept,
            report,
        }
    }
}

/// Session `id`'s file `path` as a raw response (a large one streamed from disk, never whole
/// in memory), through the session's leakage policy; one audit line (`file_download`).
pub async fn download_file(
    state: &AppState,
    ctx: &crate::server::request_context::RequestContext,
    id: &str,
    path: String,
) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse as _;
    let mut bracket =
        crate::server::bracket::Bracket::open(state, ctx, Action::FileDownload).session(id);
    let result = match check_file_path(&path) {
        Ok(()) => state
            .runner
            .read_file_body(id, ctx.key_id.as_deref(), path.clone(), bracket.record())
            .await
            .map_err(ApiError::from),
        Err(e) => Err(e),
    };
    let size = result.as_ref().map_or(0, |b| b.size());
    bracket.record().set_path(&path, size);
    bracket.close(crate::server::bracket::outcome_of(&result, 200));
    match result? {
        FileBody::Bytes(bytes) => Ok((
            [(axum::http::header::CONTENT_TYPE, media_type(&path))],
            axum::body::Body::from(bytes),
        )
            .into_response()),
        FileBody::Held { held, size } => match held.file {
            Some(file) => raw_held(file, size, media_type(&path), state.runner.budget()).await,
            None => Err(ApiError::from(SupervisorError::FileNotFound(path))),
        },
    }
}

/// Writes `body` as session `id`'s file `path`, within its disk limit; one audit line
/// (`file_upload`).
pub async fn upload_file(
    state: &AppState,
    ctx: &crate::server::request_context::RequestContext,
    id: &str,
    path: String,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<UploadResponse> {
    let mut bracket =
        crate::server::bracket::Bracket::open(state, ctx, Action::FileUpload).session(id);
    let key = ctx.key_id.as_deref();
    let result = async {
        check_file_path(&path)?;
        state.runner.session(id, key).await?;
        let bytes = body?;
        let size = state
            .runner
            .write_file(id, key, path.clone(), bytes)
            .await?;
        Ok(UploadResponse {
            path: path.clone(),
            size,
        })
    }
    .await;
    let size = result.as_ref().map_or(0, |r: &UploadResponse| r.size);
    bracket.record().set_path(&path, size);
    bracket.close(crate::server::bracket::outcome_of(&result, 201));
    result
}
