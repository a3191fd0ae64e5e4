//! `POST /v1/execute`: one program in a fresh sandbox. Files come in and go out base64
//! encoded; the response is the core [`Report`] as JSON, each file with a media type, plus an
//! execution `id`. Every execution outcome is HTTP 200: `status` says what the guest did.
//!
//! Also the request/response types shared with sessions, and the JSON body extractor that
//! turns every parse failure into a JSON 400 (or 413).

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::audit::AuditRecord;
use super::check::{self, Finding, Policy};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::request_context::{RequestContext, new_id};
use crate::host::InputFile;
use crate::limits::{Limits, LimitsRequest};
use crate::report::{FileOut, PyError, Report, RichOutput, Status, Truncated, Usage};
use crate::sandbox::SandboxError;
use crate::sandbox::SandboxSpec;
use crate::sandbox::output::OutputObserver;
use crate::sandbox::workdir::{MAX_INPUT_FILES, validate_relative_path};
use crate::template::GuestSetup;

/// A file to place in the sandbox's working directory before the code runs.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FileIn {
    /// Relative to the working directory, `/`-separated; no `..`, no NUL.
    #[schema(example = "data.csv")]
    pub path: String,
    /// The bytes, base64 (standard alphabet, padded).
    #[schema(example = "YSxiCjEsMgo=")]
    pub content: String,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteRequest {
    /// Python source, run as `python -c` would.
    #[schema(example = "print('hello')")]
    pub code: String,
    /// Text the program reads on stdin.
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub files: Vec<FileIn>,
    /// Any limit left out gets the server's default; one above the maximum is a 400.
    #[serde(default)]
    pub limits: Option<LimitsRequest>,
    /// Environment variables laid over the guest's base environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Pre-execution check: `warn` (default) returns `findings` with the result, `deny`
    /// refuses code with any finding (422, nothing runs), `off` skips the check.
    #[serde(default)]
    pub policy: Policy,
    /// The snapshot the sandbox starts from: `python` (default) or `scientific` (numpy,
    /// pandas and matplotlib already imported).
    #[serde(default)]
    pub template: crate::template::Template,
}

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
            files: r.files.into_iter().map(file_output).collect(),
            usage: r.usage,
            outputs: r.outputs,
            findings: None,
        }
    }
}

fn file_output(f: FileOut) -> FileOutput {
    FileOutput {
        media_type: media_type(&f.path),
        content: f.content.map(|c| STANDARD.encode(c)),
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

/// Decodes and checks caller files: valid paths, base64, count and total size.
pub fn decode_files(files: Vec<FileIn>, disk_bytes: u64) -> ApiResult<Vec<InputFile>> {
    if files.len() > MAX_INPUT_FILES {
        return Err(ApiError::InvalidRequest(format!(
            "{} files given; at most {MAX_INPUT_FILES}",
            files.len()
        )));
    }
    let mut out = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for (i, f) in files.into_iter().enumerate() {
        validate_relative_path(&f.path).map_err(|e| ApiError::InvalidPath {
            field: format!("files[{i}].path"),
            message: e.to_string(),
        })?;
        let content =
            STANDARD
                .decode(f.content.as_bytes())
                .map_err(|e| ApiError::InvalidBase64 {
                    field: format!("files[{i}].content"),
                    message: format!("files[{i}].content is not valid base64: {e}"),
                })?;
        total += content.len() as u64;
        if total > disk_bytes {
            return Err(ApiError::InvalidRequest(format!(
                "the files total more than the disk limit of {disk_bytes} bytes"
            )));
        }
        out.push(InputFile {
            path: f.path,
            content,
        });
    }
    Ok(out)
}

#[utoipa::path(
    post,
    path = "/v1/execute",
    tag = "execute",
    request_body = ExecuteRequest,
    responses(
        (status = 200, description = "The execution ran; `status` says how it ended. With `Accept: text/event-stream`: server-sent events `stdout`/`stderr` (`{\"text\"}`) as the code runs, then `result` (this body) or `error`", body = ExecuteResponse),
        (status = 400, description = "Malformed request, bad path or base64, limit above the maximum", body = ErrorBody),
        (status = 422, description = "Policy `deny` and the pre-execution check found something: nothing ran", body = super::check::PolicyDeniedBody),
        (status = 401, description = "API key missing or wrong", body = ErrorBody),
        (status = 413, description = "Body above the cap", body = ErrorBody),
        (status = 429, description = "Too busy: retry after the Retry-After header", body = ErrorBody),
        (status = 503, description = "Not ready, or shutting down", body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
pub async fn execute(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if super::stream::wants_event_stream(&headers) {
        return super::stream::execute_stream(state, ctx, body).await;
    }
    let id = format!("ex-{}", new_id());
    let mut record = AuditRecord::new(&ctx, "execute").execution(&id);
    let result = match prepare_execute(&state, body, &mut record) {
        Ok(prepared) => run_prepared(&state, &id, prepared, None, &mut record).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(Executed::Ran(response)) => {
            state.audit.write(record);
            Json(response).into_response()
        }
        Ok(Executed::Denied(findings)) => {
            state.audit.write(record.http(422).error("policy_denied"));
            check::denied_response(findings)
        }
        Err(e) => {
            state
                .audit
                .write(record.http(e.status().as_u16()).error(e.code()));
            e.into_response()
        }
    }
}

/// An execution request, parsed and checked, ready to run.
pub struct PreparedExecute {
    host: std::sync::Arc<crate::host::Vivarium>,
    limits: Limits,
    files: Vec<InputFile>,
    env: Vec<(String, String)>,
    code: String,
    stdin: Vec<u8>,
    policy: Policy,
    template: crate::template::Template,
}

/// A run with the check's findings, or the findings that refused it (policy `deny`).
type CheckedRun = Result<(Report, Option<Vec<Finding>>), Vec<Finding>>;

/// How an execution request ended, when not with an error.
pub enum Executed {
    Ran(Box<ExecuteResponse>),
    /// The policy is `deny` and the check found these: nothing ran.
    Denied(Vec<Finding>),
}

/// Parses and validates an execution request (no admission yet).
pub fn prepare_execute(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    record: &mut AuditRecord,
) -> ApiResult<PreparedExecute> {
    let host = state.host()?;
    let req: ExecuteRequest = parse_json(body)?;
    record.set_code(&req.code);
    let limits: Limits = host.resolve_limits(&req.limits.unwrap_or_default())?;
    crate::template::check_limits(req.template, &limits)?;
    record.limits = Some(limits);
    let files = decode_files(req.files, limits.disk_bytes)?;
    Ok(PreparedExecute {
        host,
        limits,
        files,
        env: req.env.into_iter().collect(),
        code: req.code,
        stdin: req.stdin.map(String::into_bytes).unwrap_or_default(),
        policy: req.policy,
        template: req.template,
    })
}

/// Admits and runs a prepared execution on a guest thread: the pre-execution check first
/// (unless the policy is `off`), then the program with the rich-output helpers loaded.
/// `observer` sees output live (streaming); stdout and stderr are then line-buffered.
pub async fn run_prepared(
    state: &AppState,
    id: &str,
    p: PreparedExecute,
    observer: Option<OutputObserver>,
    record: &mut AuditRecord,
) -> ApiResult<Executed> {
    let PreparedExecute {
        host,
        limits,
        files,
        env,
        code,
        stdin,
        policy,
        template,
    } = p;
    let ticket = state
        .admission
        .admit(Some(host.footprint_bytes(&limits)))
        .await?;
    let cancel = state.guests.register();
    let flag = cancel.flag();
    let ran = state
        .guests
        .run(move || -> ApiResult<CheckedRun> {
            let _ticket = ticket;
            let check = (policy != Policy::Off).then(|| code.clone());
            // One sandbox: its hidden set-up turn checks the code (before any of it runs) and
            // loads the rich-output helpers; then the program runs, unless denied.
            let sandbox = host
                .prepare_with(
                    SandboxSpec {
                        limits,
                        env,
                        files,
                        stdin,
                        cancel: flag,
                        setup: GuestSetup {
                            rich: true,
                            line_buffered: observer.is_some(),
                            check,
                        },
                        observer,
                    },
                    template,
                )
                .map_err(|e| match e {
                    SandboxError::Setup { .. } if policy != Policy::Off => {
                        ApiError::from(check::CheckError::from_setup(e))
                    }
                    e => ApiError::from_sandbox(e),
                })?;
            let findings = match policy {
                Policy::Off => None,
                Policy::Warn | Policy::Deny => {
                    let c = check::interpret(sandbox.check_verdict())?;
                    if policy == Policy::Deny && !c.findings.is_empty() {
                        return Ok(Err(c.findings));
                    }
                    Some(c.findings)
                }
            };
            Ok(Ok((sandbox.run(&code), findings)))
        })
        .await??;
    drop(cancel);
    let (report, findings) = match ran {
        Ok(v) => v,
        Err(findings) => return Ok(Executed::Denied(findings)),
    };
    state.metrics.executed("execute", &report);
    record.set_report(&report);
    let mut result: ExecutionResult = report.into();
    result.findings = findings;
    Ok(Executed::Ran(Box::new(ExecuteResponse {
        id: id.to_string(),
        result,
    })))
}
