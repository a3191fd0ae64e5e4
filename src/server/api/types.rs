//! The request and response types the front doors share, and the translations more than one
//! of them makes (a session body into a runner call), so HTTP, streaming and MCP validate
//! exactly alike. An execution's body is the intake's (`supervisor::intake`), re-exported
//! here for the doors.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::check::{Finding, Policy};
use crate::guest::Language;
use crate::leakage::LeakPolicy;
use crate::limits::{Limits, LimitsRequest, TurnLimitsRequest};
use crate::report::{FileOut, Leak, PyError, Report, RichOutput, Status, Truncated, Usage};
use crate::sandbox::workdir::validate_relative_path;
use crate::server::AppState;
use crate::server::error::{ApiError, ApiResult, ErrorDetail};
use crate::supervisor::ErrorCode;
use crate::supervisor::SupervisorError;
use crate::supervisor::audit::{Action, AuditRecord};
use crate::supervisor::runner::{SessionTurn, TurnDone, Turned};
use crate::supervisor::session::{EndInfo, Session};
use crate::template::Template;
use crate::worker::held::FileBody;

mod cell;
mod code_mode;
mod files_body;
pub use crate::supervisor::intake::{
    ExecuteRequest, FileIn, NetworkRequest, SecretRequest, decode_files, files_within,
};
use crate::supervisor::intake::{network_of, no_tools_in_shell, toolbox};
pub use cell::{Cell, Failure};
pub use code_mode::{
    ForkResponse, ResumeRequest, SuspendedResponse, answers_for, drive, executed_response,
    finished_response, spawn_run, start_code_mode, start_turn, turned_response,
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
            crate::worker::held::read_all(held, f.size)
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
    validate_relative_path(path).map_err(|e| {
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

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSessionRequest {
    /// Memory and disk hold for the session's life; timeout, fuel and output are the
    /// defaults of each turn.
    #[serde(default)]
    pub limits: Option<LimitsRequest>,
    /// The snapshot the interpreter starts from: `scientific` (the default) or `python`
    /// (minimal). `limits.memory_bytes` counts beyond the template's own image.
    #[serde(default)]
    pub template: Option<Template>,
    /// Output leakage control of the session's turns and file reads (a turn may name its
    /// own): `off`, `report`, `redact` or `deny`; left out, the server's default.
    #[serde(default)]
    pub leakage: Option<LeakPolicy>,
    /// Restore this snapshot (`snap-…`, from `POST /v1/sessions/{id}/snapshot`): the new
    /// session starts with its state, limits and template (so `limits` and `template` must
    /// be left out).
    #[serde(default)]
    #[schema(example = "snap-0a1b2c3d4e5f60718293a4b5")]
    pub snapshot: Option<String>,
    /// Snapshot every completed turn to the store, so that after a crash (even `kill -9`)
    /// the session comes back at its last completed turn on its next request. Every
    /// session, durable or not, is kept over a graceful restart.
    #[serde(default)]
    pub durable: bool,
    /// Extra pure-Python packages for the session (requirement specifiers); more can be
    /// added between turns (`POST /v1/sessions/{id}/packages`).
    #[serde(default)]
    pub packages: Vec<String>,
    /// Network by exception for every turn, as for `POST /v1/execute`: narrows the
    /// operator's `--egress-allow` (absent: the operator's list as it is).
    #[serde(default)]
    pub network: Option<NetworkRequest>,
    /// Secrets the session's turns can use but never read, as for `POST /v1/execute`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub secrets: BTreeMap<String, SecretRequest>,
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
        }
    }
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRequest {
    #[schema(example = "x = 21\nx * 2")]
    pub code: String,
    /// As for `/v1/execute`: `python` (the default) or `bash` (`sh`). A shell's `cd` and
    /// `export` stay for the session's next turns, Python's included (`os.getcwd()`,
    /// `os.environ`).
    #[serde(default)]
    pub language: Language,
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
    /// This turn's output leakage control; left out, the session's.
    #[serde(default)]
    pub leakage: Option<LeakPolicy>,
    /// Code mode, as for `/v1/execute`: tools the turn's code may call. A call suspends the
    /// turn (`status: "suspended"`, answered at `POST /v1/executions/{turn id}/resume`;
    /// the last answer's response is this turn's result). A turn's suspension stays
    /// resident (its state is the session's): it is not kept over a restart, nor forked.
    #[serde(default)]
    pub tools: Vec<crate::tools::ToolSpec>,
    /// Code mode's limits, as for `/v1/execute`.
    #[serde(default)]
    pub tool_limits: Option<crate::tools::ToolLimitsRequest>,
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

/// What a session-open body asks for.
pub enum OpenSession {
    /// A new interpreter.
    New {
        /// Resolved.
        limits: Limits,
        /// Resolved.
        template: Template,
        /// As asked.
        leakage: Option<LeakPolicy>,
        /// As asked.
        durable: bool,
        /// As asked (checked, not resolved).
        packages: Vec<String>,
        /// Its network and secrets, checked.
        network: Option<crate::egress::Grant>,
    },
    /// A session restored from a snapshot.
    Restore {
        /// The snapshot's id, as given.
        snapshot: String,
        /// As asked.
        leakage: Option<LeakPolicy>,
        /// As asked.
        durable: bool,
    },
}

impl OpenSessionRequest {
    /// Parses a session-open body (empty means all defaults) into resolved limits, recorded,
    /// or a snapshot to restore.
    pub fn parse(
        state: &AppState,
        body: Result<Bytes, BytesRejection>,
        record: &mut AuditRecord,
    ) -> ApiResult<OpenSession> {
        state.runner.host()?;
        let body = body?;
        let req: OpenSessionRequest = if body.iter().all(u8::is_ascii_whitespace) {
            OpenSessionRequest::default()
        } else {
            parse_json(Ok(body))?
        };
        req.into_open(state, record)
    }

    /// What this request asks for: as [`OpenSessionRequest::parse`] after the JSON.
    pub fn into_open(self, state: &AppState, record: &mut AuditRecord) -> ApiResult<OpenSession> {
        let req = self;
        let host = state.runner.host()?;
        if let Some(snapshot) = req.snapshot {
            if req.network.is_some() || !req.secrets.is_empty() {
                return Err(ApiError::from(SupervisorError::InvalidRequest(
                    "network: a restored session has no network (a snapshot carries none); \
                     open a new session to give one"
                        .into(),
                )));
            }
            if req.limits.is_some() || req.template.is_some() || !req.packages.is_empty() {
                return Err(ApiError::from(SupervisorError::InvalidRequest(
                    "a restored session keeps the snapshot's limits, template and packages: \
                     leave `limits`, `template` and `packages` out (add packages after)"
                        .into(),
                )));
            }
            return Ok(OpenSession::Restore {
                snapshot,
                leakage: req.leakage,
                durable: req.durable,
            });
        }
        let (template, limits) = host
            .resolve_for(req.template, &req.limits.unwrap_or_default())
            .map_err(SupervisorError::from)?;
        record.limits = Some(limits);
        host.check_packages(&req.packages)
            .map_err(|e| ApiError::from(SupervisorError::Package(e)))?;
        let (network, secrets) = network_of(&state.runner, req.network, req.secrets, record)?;
        Ok(OpenSession::New {
            limits,
            template,
            leakage: req.leakage,
            durable: req.durable,
            packages: req.packages,
            network: network.map(|network| crate::egress::Grant { network, secrets }),
        })
    }
}

impl TurnRequest {
    /// Parses a turn body, knowing nothing of its session: the files are checked against
    /// its disk limit once it is looked up ([`files_within`]).
    pub fn parse(
        body: Result<Bytes, BytesRejection>,
        record: &mut AuditRecord,
    ) -> ApiResult<SessionTurn> {
        parse_json::<TurnRequest>(body)?.into_turn(record)
    }

    /// The turn this request asks for: as [`TurnRequest::parse`] after the JSON.
    pub fn into_turn(self, record: &mut AuditRecord) -> ApiResult<SessionTurn> {
        let req = self;
        record.set_code(&req.code);
        let tools = toolbox(req.tools, req.tool_limits)?;
        no_tools_in_shell(req.language, &tools)?;
        Ok(SessionTurn {
            files: decode_files(req.files, u64::MAX)?,
            code: req.code,
            stdin: req.stdin.map(String::into_bytes).unwrap_or_default(),
            limits: req.limits.unwrap_or_default(),
            policy: req.policy,
            leakage: req.leakage,
            live: None,
            input: None,
            tools,
            tool_asker: None,
            env: Vec::new(),
            language: req.language,
        })
    }
}

/// Runs a turn a door built itself (MCP's `run_in_session`), as `POST
/// /v1/sessions/{id}/execute` does.
pub async fn turn_request(
    state: &AppState,
    id: &str,
    key: Option<&str>,
    req: TurnRequest,
    record: &mut AuditRecord,
) -> ApiResult<Turned> {
    state.runner.host()?;
    let turn = req.into_turn(record)?;
    run_turn(state, id, key, turn, record).await
}

/// Runs a parsed turn in session `id` for `key`.
pub async fn run_turn(
    state: &AppState,
    id: &str,
    key: Option<&str>,
    turn: SessionTurn,
    record: &mut AuditRecord,
) -> ApiResult<Turned> {
    let session = state.runner.session(id, key).await?;
    files_within(&turn.files, session.limits.disk_bytes)?;
    // Packages its `pip install` lines name are added to the session first, as `POST
    // /v1/sessions/{id}/packages` adds them (its state kept), so its pip finds them.
    let named = state
        .runner
        .host()?
        .packages_named_by(&turn.code, turn.language);
    if !named.is_empty() {
        state.runner.add_packages(id, key, named, record).await?;
    }
    Ok(state.runner.turn(&session, turn, record).await?)
}

/// Opens a session from a session-open body (the sessions API and MCP's `open_session`).
pub async fn open_session(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    record: &mut AuditRecord,
) -> ApiResult<OpenSessionResponse> {
    let open = OpenSessionRequest::parse(state, body, record)?;
    open_parsed(state, open, record).await
}

/// Opens a session a door asked for itself (MCP's `open_session`), as [`open_session`] does.
pub async fn open_session_request(
    state: &AppState,
    req: OpenSessionRequest,
    record: &mut AuditRecord,
) -> ApiResult<OpenSessionResponse> {
    state.runner.host()?;
    let open = req.into_open(state, record)?;
    open_parsed(state, open, record).await
}

async fn open_parsed(
    state: &AppState,
    open: OpenSession,
    record: &mut AuditRecord,
) -> ApiResult<OpenSessionResponse> {
    let session = match open {
        OpenSession::New {
            limits,
            template,
            leakage,
            durable,
            packages,
            network,
        } => {
            let packages = state.runner.packages(packages, record).await?;
            // A session, like a snapshot, is the key's that made it.
            let owner = record.key_id.clone();
            let opening = crate::supervisor::runner::Opening {
                limits,
                template,
                leakage,
                durable,
                packages,
                owner,
                network,
            };
            state.runner.open_session(opening, record).await?
        }
        OpenSession::Restore {
            snapshot,
            leakage,
            durable,
        } => {
            record.action = Action::SessionRestore;
            // Restoring is the key's own: a snapshot belongs to the key that took it.
            let owner = record.key_id.clone();
            state
                .runner
                .restore_session(&snapshot, owner.as_deref(), leakage, durable, record)
                .await?
        }
    };
    Ok(OpenSessionResponse::of(&session))
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
