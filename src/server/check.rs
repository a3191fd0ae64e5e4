//! Pre-execution checks: `POST /v1/check`, the `policy` of executions and session turns, and
//! `vivarium check FILE`.
//!
//! Syntax is validated by the guest's own parser: the checker (`python-wasi/guest/check.py`,
//! loaded into every template) runs in the hidden set-up turn of a fresh sandbox, before any
//! of the submitted code runs. An execution checks in the very sandbox that then runs the
//! program; `/v1/check`, the CLI and session turns use a sandbox of their own. The checker
//! `ast.parse`s and compiles the source (never runs it), walks the tree for the static rules,
//! and sends one JSON object through the host door. The host trusts that only as data: it
//! must fit in [`MAX_CHECKER_OUTPUT`], parse into the fixed types below (unknown fields
//! refused), and every string is cut to a bound. Anything else is a checker failure (HTTP 500
//! with a clear message), never a verdict.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::audit::AuditRecord;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::execute::parse_json;
use super::request_context::RequestContext;
use crate::host::Vivarium;
use crate::limits::Limits;
use crate::sandbox::{SandboxError, SandboxSpec};
use crate::template::GuestSetup;

/// The most checker output the host reads; more is a checker failure.
pub const MAX_CHECKER_OUTPUT: u64 = 1 << 20;
/// The most findings kept (the checker stops at the same number).
pub const MAX_FINDINGS: usize = 200;
const MAX_TEXT: usize = 1_000;
/// The memory of a sandbox that only checks. Its time and fuel are the set-up turn's, in
/// which the checker runs (`template::SETUP_LIMITS`): parsing and walking even a large
/// program takes well under that.
const CHECKER_MEMORY: u64 = 256 << 20;

/// Whether and how an execution is checked before it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// No check, no extra cost.
    Off,
    /// Check first; the findings come back in the result as `findings`. The default.
    #[default]
    Warn,
    /// Check first; any finding refuses the execution with 422 `policy_denied`.
    Deny,
}

/// A syntax error the guest's parser (or compiler) reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SyntaxIssue {
    /// 1-based.
    pub line: u32,
    /// 1-based.
    pub col: u32,
    #[schema(example = "SyntaxError: invalid syntax")]
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SyntaxCheck {
    pub ok: bool,
    pub errors: Vec<SyntaxIssue>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Cannot work in the sandbox, or is dangerous.
    Error,
    /// Probably not what was meant.
    Warning,
}

/// One static-analysis finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// `os_system`, `subprocess`, `eval_exec`, `network`, `ctypes`, `fork`,
    /// `infinite_loop`, `write_outside_workdir`.
    #[schema(example = "os_system")]
    pub rule: String,
    pub severity: Severity,
    /// 1-based.
    pub line: u32,
    /// 1-based.
    pub col: u32,
    pub message: String,
}

/// What the checker found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckResult {
    pub syntax: SyntaxCheck,
    pub findings: Vec<Finding>,
}

impl CheckResult {
    /// Syntax fine and no error-severity finding (what `vivarium check` exits 0 on).
    pub fn passes(&self) -> bool {
        self.syntax.ok && !self.findings.iter().any(|f| f.severity == Severity::Error)
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckRequest {
    #[schema(example = "import os\nos.system('ls')")]
    pub code: String,
}

/// Why the checker gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("the checker could not start: {0}")]
    Sandbox(#[from] crate::sandbox::SandboxError),
    #[error("the checker did not finish ({status}): {detail}")]
    Failed {
        status: &'static str,
        detail: String,
    },
    #[error("the checker's output was larger than {MAX_CHECKER_OUTPUT} bytes")]
    TooLarge,
    #[error("the checker's output was not the expected JSON: {0}")]
    BadOutput(String),
}

impl From<CheckError> for ApiError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::Sandbox(s) => ApiError::from_sandbox(s),
            other => ApiError::Internal(format!("pre-execution check failed: {other}")),
        }
    }
}

/// The limits of a sandbox that only checks: its own small budget, never above what this host
/// allows.
pub fn checker_limits(host: &Vivarium) -> Limits {
    let max = host.maximum();
    let d = host.defaults();
    let setup = crate::template::SETUP_LIMITS;
    Limits {
        timeout_ms: setup.timeout_ms.min(max.timeout_ms),
        fuel: setup.fuel.min(max.fuel),
        memory_bytes: CHECKER_MEMORY.min(max.memory_bytes),
        output_bytes: MAX_CHECKER_OUTPUT.min(max.output_bytes),
        disk_bytes: d.disk_bytes,
        open_files: d.open_files,
    }
}

/// Runs the checker on `code` in a fresh sandbox of its own (the CLI, `/v1/check`, session
/// turns). Blocking: call on a guest thread.
pub fn check_on_this_thread(
    host: &Vivarium,
    code: &str,
    cancel: Arc<AtomicBool>,
) -> Result<CheckResult, CheckError> {
    let sandbox = host
        .prepare(SandboxSpec {
            limits: checker_limits(host),
            env: Vec::new(),
            files: Vec::new(),
            stdin: Vec::new(),
            observer: None,
            cancel,
            setup: GuestSetup {
                check: Some(code.to_string()),
                ..GuestSetup::default()
            },
        })
        .map_err(CheckError::from_setup)?;
    interpret(sandbox.check_verdict())
}

/// Runs the checker on a guest thread of its own (the CLI). Blocking.
pub fn check_blocking(host: &Arc<Vivarium>, code: &str) -> Result<CheckResult, CheckError> {
    let host = host.clone();
    let code = code.to_string();
    crate::sandbox::run_on_guest_thread(move || check_on_this_thread(&host, &code, Arc::default()))
        .unwrap_or_else(|p| {
            Err(CheckError::Failed {
                status: "panic",
                detail: super::guest::panic_message(&*p),
            })
        })
}

impl CheckError {
    /// A set-up turn that failed was the checker failing; anything else kept the sandbox
    /// from starting.
    pub fn from_setup(e: SandboxError) -> Self {
        match e {
            SandboxError::Setup { status, detail } => CheckError::Failed {
                status: status.as_str(),
                detail: cut(detail),
            },
            other => CheckError::Sandbox(other),
        }
    }
}

/// Turns the checker's verdict (sent through the host door by the set-up turn) into a
/// result, trusting it only as bounded data.
pub fn interpret(verdict: Option<&str>) -> Result<CheckResult, CheckError> {
    let text =
        verdict.ok_or_else(|| CheckError::BadOutput("the checker sent no verdict".into()))?;
    if text.len() as u64 > MAX_CHECKER_OUTPUT {
        return Err(CheckError::TooLarge);
    }
    let mut result: CheckResult =
        serde_json::from_str(text.trim()).map_err(|e| CheckError::BadOutput(e.to_string()))?;
    result.syntax.errors.truncate(16);
    for e in &mut result.syntax.errors {
        e.message = cut(std::mem::take(&mut e.message));
    }
    if result.syntax.ok != result.syntax.errors.is_empty() {
        return Err(CheckError::BadOutput(
            "syntax.ok disagrees with syntax.errors".into(),
        ));
    }
    result.findings.truncate(MAX_FINDINGS);
    for f in &mut result.findings {
        f.rule = cut_to(std::mem::take(&mut f.rule), 64);
        f.message = cut(std::mem::take(&mut f.message));
    }
    Ok(result)
}

fn cut(s: String) -> String {
    cut_to(s, MAX_TEXT)
}

fn cut_to(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// The body of a 422 for a denied execution: the usual error plus the findings.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyDeniedBody {
    pub error: super::error::ErrorDetail,
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
        error: super::error::ErrorDetail {
            code: "policy_denied",
            message: format!(
                "the pre-execution check found {n} issue{} and the policy is \"deny\"; nothing ran",
                if n == 1 { "" } else { "s" }
            ),
            field: None,
        },
        findings,
    }
}

#[utoipa::path(
    post,
    path = "/v1/check",
    tag = "execute",
    request_body = CheckRequest,
    responses(
        (status = 200, description = "The verdict: syntax by the guest's own parser, static findings", body = CheckResult),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 429, body = ErrorBody),
        (status = 500, description = "The checker failed (its output is never trusted beyond data)", body = ErrorBody),
        (status = 503, body = ErrorBody),
    ),
    security((), ("bearer" = []))
)]
pub async fn check(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<CheckResult>> {
    let mut record = AuditRecord::new(&ctx, "check");
    let result = check_inner(&state, body, &mut record).await;
    record = match &result {
        Ok(_) => record.http(200),
        Err(e) => record.http(e.status().as_u16()).error(e.code()),
    };
    state.audit.write(record);
    result.map(Json)
}

async fn check_inner(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    record: &mut AuditRecord,
) -> ApiResult<CheckResult> {
    let host = state.host()?;
    let req: CheckRequest = parse_json(body)?;
    record.set_code(&req.code);
    check_code(state, host, req.code).await
}

/// Checks `code` on a guest thread, admitted like any execution.
pub async fn check_code(
    state: &AppState,
    host: Arc<Vivarium>,
    code: String,
) -> ApiResult<CheckResult> {
    let ticket = state
        .admission
        .admit(Some(host.footprint_bytes(&checker_limits(&host))))
        .await?;
    let cancel = state.guests.register();
    let flag = cancel.flag();
    let result = state
        .guests
        .run(move || {
            let _ticket = ticket;
            check_on_this_thread(&host, &code, flag)
        })
        .await?;
    drop(cancel);
    Ok(result?)
}
