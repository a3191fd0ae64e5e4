//! Piston v2 compatibility: `GET /api/v2/runtimes` and `POST /api/v2/execute` with Piston's
//! request and response shapes, so existing Piston clients run Python here unchanged.
//!
//! The first file is the program (run as `__main__` under its own name, with `sys.argv` =
//! `[name, *args]`); the others are written into the working directory beside it. Piston's
//! limits map to ours: `run_timeout` (ms) to `timeout_ms`, `run_memory_limit` (bytes; -1 =
//! the default) to `memory_bytes`; the compile-stage fields are accepted and ignored (Python
//! has no compile stage here). `run.output` is stdout and stderr interleaved in the order the
//! guest wrote them. Bad requests get Piston's error shape: 400 `{"message": "..."}`.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::limits::{FUEL_PER_CPU_SECOND, LimitsRequest};
use crate::report::StreamKind;
use crate::report::{Report, Status};
use crate::server::AppState;
use crate::server::bracket::Bracket;
use crate::server::error::{ApiError, OnWire};
use crate::server::request_context::Caller;
use crate::supervisor::ErrorCode;
use crate::supervisor::SupervisorError;
use crate::supervisor::audit::{AuditRecord, Outcome};
use crate::supervisor::intake::{self, PlainAsk};
use crate::supervisor::metrics::RunKind;
use crate::sync::lock;
use crate::vocabulary::{MAX_INPUT_FILES, check_relative_path};

const LANGUAGES: &[&str] = &["python", "python3", "py", "py3"];

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct PistonFile {
    #[serde(default)]
    pub name: Option<String>,
    pub content: String,
    /// `utf8` (default), `base64` or `hex`.
    #[serde(default)]
    pub encoding: Option<String>,
}

/// Piston v2's execute request; `compile_*` fields are accepted and ignored (Python has no
/// compile stage), `args` become `sys.argv[1:]`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct PistonRequest {
    pub language: String,
    #[serde(default)]
    pub version: Option<String>,
    pub files: Vec<PistonFile>,
    #[serde(default)]
    pub stdin: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub run_timeout: Option<i64>,
    #[serde(default)]
    pub run_memory_limit: Option<i64>,
    #[serde(default)]
    pub run_cpu_time: Option<i64>,
    /// Accepted and ignored: Python has no compile stage here (listed for the schema).
    #[serde(default)]
    #[expect(dead_code, reason = "accepted for Piston clients, never used")]
    pub compile_timeout: Option<i64>,
    /// Accepted and ignored, as `compile_timeout`.
    #[serde(default)]
    #[expect(dead_code, reason = "accepted for Piston clients, never used")]
    pub compile_memory_limit: Option<i64>,
    /// Accepted and ignored, as `compile_timeout`.
    #[serde(default)]
    #[expect(dead_code, reason = "accepted for Piston clients, never used")]
    pub compile_cpu_time: Option<i64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PistonStage {
    pub stdout: String,
    pub stderr: String,
    pub output: String,
    pub code: Option<i32>,
    pub signal: Option<&'static str>,
    /// Piston's: null when it ran to the end; `RE` runtime error, `SG` died on a signal,
    /// `TO` timed out, `OL`/`EL` stdout/stderr over the limit, `XX` internal error.
    pub status: Option<&'static str>,
    pub message: Option<String>,
    /// Milliseconds of CPU, estimated from fuel (about 10 G fuel a CPU second).
    pub cpu_time: u64,
    pub wall_time: u64,
    pub memory: u64,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PistonResponse {
    pub language: &'static str,
    pub version: String,
    pub run: PistonStage,
}

/// Piston's error shape.
fn bad(message: impl Into<String>) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({"message": message.into()})),
    )
        .into_response()
}

fn from_api(e: impl Into<ApiError>) -> Response {
    let e: ApiError = e.into();
    let status = e.status();
    let mut resp = (status, Json(json!({"message": e.to_string()}))).into_response();
    if let Some(v) = e
        .into_response()
        .headers()
        .get(axum::http::header::RETRY_AFTER)
    {
        resp.headers_mut()
            .insert(axum::http::header::RETRY_AFTER, v.clone());
    }
    resp
}

/// `GET /api/v2/runtimes`.
#[utoipa::path(
    get, path = "/api/v2/runtimes", tag = "piston",
    responses((status = 200, description = "Piston's runtime list: one entry, python 3.15.0 (aliases py, python3, py3)"))
)]
pub async fn runtimes(State(state): State<AppState>) -> Result<Json<serde_json::Value>, Response> {
    let host = state.runner.host().map_err(from_api)?;
    Ok(Json(json!([{
        "language": "python",
        "version": host.runtime_files().python_version,
        "aliases": ["py", "python3", "py3"],
        "runtime": "vivarium",
    }])))
}

/// Whether a Piston version selector matches ours: `*`, `x`, empty, or a prefix of
/// 3.15.0 by components, where a component may be `x` or `*`.
/// Whether Piston's version pattern `v` (`3`, `3.15.x`, `^3`, `*`, ...) matches `ours`.
fn version_matches(v: &str, ours: &str) -> bool {
    let v = v.trim().trim_start_matches(['^', '~', '=', 'v']);
    if v.is_empty() || v == "*" || v == "x" {
        return true;
    }
    let ours: Vec<&str> = ours.split('.').collect();
    let parts: Vec<&str> = v.split('.').collect();
    parts.len() <= ours.len()
        && parts
            .iter()
            .zip(&ours)
            .all(|(p, o)| *p == "x" || *p == "*" || p == o)
}

fn decode(f: &PistonFile, i: usize) -> Result<Vec<u8>, String> {
    match f.encoding.as_deref().unwrap_or("utf8") {
        "utf8" | "utf-8" => Ok(f.content.clone().into_bytes()),
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(f.content.as_bytes())
            .map_err(|e| format!("files[{i}].content is not valid base64: {e}")),
        "hex" => hex::decode(f.content.as_bytes())
            .map_err(|e| format!("files[{i}].content is not valid hex: {e}")),
        other => Err(format!(
            "files[{i}].encoding must be one of utf8, base64, hex (got {other:?})"
        )),
    }
}

/// `POST /api/v2/execute`.
#[utoipa::path(
    post, path = "/api/v2/execute", tag = "piston",
    request_body = PistonRequest,
    responses(
        (status = 200, description = "Piston's result shape; `run.output` interleaves stdout and stderr", body = PistonResponse),
        (status = 400, description = "Piston's error shape: `{\"message\": ...}`"),
        (status = 429, description = "Busy; `Retry-After` says when to retry"),
    )
)]
pub async fn execute(
    Caller { state, ctx }: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (mut bracket, _) = Bracket::run(&state, &ctx);
    let result = run(&state, body, bracket.record()).await;
    let outcome = match &result {
        Ok(_) => Outcome::Ok(200),
        Err(resp) => Outcome::Failed(resp.status().as_u16(), ErrorCode::PistonError),
    };
    bracket.close(outcome);
    result.unwrap_or_else(|resp| resp)
}

async fn run(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    record: &mut AuditRecord,
) -> Result<Response, Response> {
    let host = state.runner.host().map_err(from_api)?;
    let python_version = host.runtime_files().python_version.clone();
    let body = body.map_err(|e| from_api(ApiError::from(e)))?;
    let req: PistonRequest =
        serde_json::from_slice(&body).map_err(|e| bad(format!("invalid request body: {e}")))?;
    let version = req.version.clone().unwrap_or_else(|| "*".into());
    if !LANGUAGES.contains(&req.language.to_ascii_lowercase().as_str())
        || !version_matches(&version, &python_version)
    {
        return Err(bad(format!(
            "{}-{} runtime is unknown",
            req.language, version
        )));
    }
    if req.files.is_empty() {
        return Err(bad("files must contain at least one file"));
    }
    if req.files.len() > MAX_INPUT_FILES {
        return Err(bad("too many files"));
    }
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, f) in req.files.iter().enumerate() {
        let content = decode(f, i).map_err(bad)?;
        let name = match f.name.as_deref() {
            Some(n) if !n.is_empty() => n.trim_start_matches("./").to_string(),
            _ if i == 0 => "main.py".to_string(),
            _ => format!("file{i}.code"),
        };
        check_relative_path(&name).map_err(|e| bad(format!("files[{i}].name: {e}")))?;
        if files.iter().any(|(path, _)| *path == name) {
            return Err(bad(format!("files[{i}].name {name:?} is given twice")));
        }
        files.push((name, content));
    }
    let ask = PlainAsk {
        files,
        args: req.args,
        stdin: req.stdin.unwrap_or_default().into_bytes(),
        limits: LimitsRequest {
            timeout_ms: req.run_timeout.filter(|t| *t > 0).map(|t| t as u64),
            memory_bytes: req.run_memory_limit.filter(|m| *m > 0).map(|m| m as u64),
            ..LimitsRequest::default()
        },
        cpu_ms: req.run_cpu_time.filter(|t| *t > 0).map(|t| t as u64),
    };
    let invalid = |e: SupervisorError| match e {
        SupervisorError::InvalidRequest(m) => bad(m),
        other => from_api(other),
    };
    let mut run = intake::plain(&state.runner, ask, record).map_err(invalid)?;
    // `output`: both streams in the order they were written, capped like each stream.
    let cap = (run.limits.output_bytes as usize).saturating_mul(2);
    let combined = Arc::new(Mutex::new(Vec::<u8>::new()));
    run.observe({
        let combined = combined.clone();
        Arc::new(move |_kind: StreamKind, bytes: &[u8]| {
            let mut c = lock(&combined);
            let room = cap.saturating_sub(c.len());
            c.extend_from_slice(&bytes[..bytes.len().min(room)]);
        })
    });
    let ran = run
        .run(&state.runner, RunKind::PistonExecute, record)
        .await
        .map_err(from_api)?;
    // `output` is the streams again, interleaved: it gets what they got.
    let output = String::from_utf8_lossy(&lock(&combined)).into_owned();
    let output = if ran.policy == crate::leakage::LeakPolicy::Redact {
        ran.guard.redacted(&output)
    } else {
        output
    };
    Ok(Json(PistonResponse {
        language: "python",
        version: python_version,
        run: stage(*ran.report, output),
    })
    .into_response())
}

/// Our report in Piston's terms.
fn stage(r: Report, output: String) -> PistonStage {
    let (status, signal, message): (Option<&'static str>, Option<&'static str>, Option<String>) =
        match r.status {
            Status::Ok if r.truncated.stdout => {
                (Some("OL"), None, Some("stdout length exceeded".into()))
            }
            Status::Ok if r.truncated.stderr => {
                (Some("EL"), None, Some("stderr length exceeded".into()))
            }
            Status::Ok => (None, None, None),
            Status::Error => (
                Some("RE"),
                None,
                Some(format!(
                    "Exited with error status {}",
                    r.exit_code.unwrap_or(1)
                )),
            ),
            Status::MemoryExceeded => (Some("RE"), None, Some("Memory limit exceeded".into())),
            Status::HostMemoryExceeded => (
                Some("RE"),
                None,
                Some("The server's memory budget was exceeded; retry later".into()),
            ),
            Status::Timeout => (
                Some("TO"),
                Some("SIGKILL"),
                Some("Time limit exceeded".into()),
            ),
            Status::FuelExhausted => (
                Some("TO"),
                Some("SIGKILL"),
                Some("CPU time limit exceeded".into()),
            ),
            Status::StackOverflow => (Some("SG"), Some("SIGSEGV"), r.detail.clone()),
            Status::Trap => (Some("SG"), Some("SIGABRT"), r.detail.clone()),
            Status::Cancelled => (Some("XX"), Some("SIGKILL"), Some("Cancelled".into())),
            // Piston's requests offer no tools; named should a run ever end so.
            Status::ToolTimeout | Status::ToolLimit => (Some("XX"), None, r.detail.clone()),
        };
    PistonStage {
        stdout: r.stdout,
        stderr: r.stderr,
        output,
        code: r.exit_code,
        signal,
        status,
        message,
        cpu_time: r.usage.fuel / (FUEL_PER_CPU_SECOND / 1000),
        wall_time: r.usage.wall_ms.round() as u64,
        memory: r.usage.memory_peak_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        for v in ["*", "", "3", "3.15", "3.15.0", "3.x", "3.15.x", "^3", "x"] {
            assert!(version_matches(v, "3.15.0"), "{v}");
        }
        for v in ["2", "3.14", "3.15.1", "3.15.0.1", "10"] {
            assert!(!version_matches(v, "3.15.0"), "{v}");
        }
    }
}
