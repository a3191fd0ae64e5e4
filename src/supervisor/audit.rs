//! The audit log: one JSON object per line for every action (each an [`Action`]), with the
//! time, request id, key id, client address, SHA-256 of the code, the limits, the HTTP
//! status, and for runs the result status, exit code and usage. Written to
//! `--audit-log PATH` (appended) or stderr. Never holds an API key or the code itself.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::error::ErrorCode;
use super::time::rfc3339_now;
use crate::limits::Limits;
use crate::packages::PackagePin;
use crate::report::{Leak, Report, Status, Usage};
use crate::sync::lock;

/// What an audit line records, whichever door it came through ([`Door`]); serialised as its
/// snake_case name. The HTTP routes are named here; the other doors map onto the same
/// actions (MCP's `execute_python` is `execute`, a Jupyter cell `session_turn`, Piston's
/// execute `execute`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// `POST /v1/execute` (plain or streamed).
    Execute,
    /// `POST /v1/check`.
    Check,
    /// `POST /v1/sessions`.
    SessionOpen,
    /// `POST /v1/sessions/{id}/execute`.
    SessionTurn,
    /// `DELETE /v1/sessions/{id}`.
    SessionClose,
    /// A session closed by the sweeper.
    SessionExpire,
    /// `GET /v1/sessions/{id}/files/{path}`.
    FileDownload,
    /// `PUT /v1/sessions/{id}/files/{path}`.
    FileUpload,
    /// A file operation of a session other than a read or a write (E2B's stat, list, make,
    /// move, remove): a query of the session, not a turn.
    FileOperation,
    /// `POST /v1/sessions/{id}/snapshot`.
    SessionSnapshot,
    /// `POST /v1/sessions/{id}/fork`.
    SessionFork,
    /// `POST /v1/sessions/{id}/rollback`.
    SessionRollback,
    /// A session hibernated at its caller's asking (E2B's pause).
    SessionPause,
    /// `POST /v1/sessions` with a snapshot: a session restored.
    SessionRestore,
    /// `DELETE /v1/snapshots/{id}`.
    SnapshotDelete,
    /// `POST /v1/sessions/{id}/packages`.
    SessionPackages,
    /// `POST /v1/executions/{id}/resume` (code mode).
    ExecutionResume,
    /// `POST /v1/executions/{id}/fork` (code mode).
    ExecutionFork,
    /// `DELETE /v1/executions/{id}` (code mode).
    ExecutionCancel,
    /// One outbound HTTP request of a run's guest (network by exception): its line carries
    /// the run's request id and key, and `egress`.
    Egress,
    /// `POST /v1/webhooks`.
    WebhookCreate,
    /// `DELETE /v1/webhooks/{id}`.
    WebhookDelete,
    /// `POST /v1/volumes`.
    VolumeCreate,
    /// `DELETE /v1/volumes/{name}`.
    VolumeDelete,
    /// `PUT /v1/volumes/{name}/files/{path}`.
    VolumeUpload,
    /// `GET /v1/volumes/{name}/files/{path}`.
    VolumeDownload,
    /// `DELETE /v1/volumes/{name}/files/{path}`, and a folder made
    /// (`POST /v1/volumes/{name}/dirs/{path}`).
    VolumeFileOperation,
    /// `POST /v1/templates` (a build started, or identical inputs found built).
    TemplateBuild,
    /// `DELETE /v1/templates/{name}`.
    TemplateDelete,
    /// A request refused before any handler (no valid API key).
    Rejection,
    /// The server shut down.
    Shutdown,
}

/// Which front door a request came through (an audit line's `door`), named by the HTTP layer
/// from the request's path; serialised as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Door {
    /// The `/v1` API (plain and streamed), and the operations routes.
    Http,
    /// The Model Context Protocol (`/mcp`, or stdio).
    Mcp,
    /// Jupyter's kernel protocol (`/api/kernels`, `/api/kernelspecs`, `/kernelspecs`).
    Jupyter,
    /// Piston's API (`/api/v2`).
    Piston,
    /// The E2B API (`/e2b`).
    E2b,
    /// No request: the server's own doing (a session's expiry, the shutdown).
    Server,
}

impl Door {
    /// Its name, as an audit line's `door` says it.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// How a request ended, for its audit line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with this success status.
    Ok(u16),
    /// Failed with this status and error code.
    Failed(u16, ErrorCode),
}

impl Outcome {
    /// Refused by the `deny` policy: 422 `policy_denied`.
    pub const DENIED: Outcome = Outcome::Failed(422, ErrorCode::PolicyDenied);

    /// The client hung up before the answer (a streamed execution): 499.
    pub const CLIENT_CLOSED: Outcome = Outcome::Failed(499, ErrorCode::ClientClosedRequest);
}

/// Who asked, under which id, through which door (a request extension every HTTP handler can
/// read).
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub request_id: String,
    pub client: SocketAddr,
    pub key_id: Option<String>,
    pub door: Door,
}

pub struct Audit {
    out: Mutex<Box<dyn Write + Send>>,
    /// The newest lines, for the operator console ([`Audit::recent`]).
    recent: Mutex<std::collections::VecDeque<String>>,
}

/// Lines [`Audit::recent`] keeps.
pub const RECENT_LINES: usize = 50;
/// A longer line is kept as its first this many bytes and a note of its length.
const RECENT_LINE_BYTES: usize = 2048;

impl Audit {
    pub fn open(path: Option<&Path>) -> anyhow::Result<Self> {
        let out: Box<dyn Write + Send> = match path {
            Some(p) => Box::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| anyhow::anyhow!("opening audit log {}: {e}", p.display()))?,
            ),
            None => Box::new(std::io::stderr()),
        };
        Ok(Audit {
            out: Mutex::new(out),
            recent: Mutex::default(),
        })
    }

    pub fn write(&self, record: AuditRecord) {
        let mut line = match serde_json::to_vec(&record) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "could not serialise an audit record");
                return;
            }
        };
        {
            let shown = match std::str::from_utf8(&line) {
                Ok(l) if l.len() <= RECENT_LINE_BYTES => l.to_string(),
                _ => format!(
                    "{}… ({} bytes)",
                    String::from_utf8_lossy(&line[..line.len().min(RECENT_LINE_BYTES)]),
                    line.len()
                ),
            };
            let mut recent = lock(&self.recent);
            if recent.len() == RECENT_LINES {
                recent.pop_front();
            }
            recent.push_back(shown);
        }
        line.push(b'\n');
        let mut out = lock(&self.out);
        if let Err(e) = out.write_all(&line).and_then(|_| out.flush()) {
            tracing::error!(error = %e, "could not write the audit log");
        }
    }
}

impl Audit {
    /// The newest lines written (at most [`RECENT_LINES`]), oldest first.
    pub fn recent(&self) -> Vec<String> {
        lock(&self.recent).iter().cloned().collect()
    }
}

/// One audit line. Built with [`AuditRecord::new`] and the chained setters.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    pub time: String,
    pub action: Action,
    pub door: Door,
    pub request_id: String,
    pub key_id: Option<String>,
    pub client: String,
    /// HTTP status of the response.
    pub http_status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The snapshot taken, restored or deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// The result status of a run (`ok`, `error`, `timeout`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// The error code when the request failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorCode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What the output-leakage scan found: rule and place, never the matched text.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leaks: Vec<Leak>,
    /// The extra packages the run or session got: each wheel's name, version and SHA-256.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<PackagePin>,
    /// Code mode: each tool call answered so far (its name, sizes and outcome; never its
    /// arguments or its result).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallLine>,
    /// An outbound request's line (action `egress`): never a header, a body or a secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressLine>,
}

/// One outbound HTTP request as its audit line records it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EgressLine {
    /// The method.
    pub method: String,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// The host asked for.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The upstream's status, when a response came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it was refused or did not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<crate::egress::Refused>,
    /// Bytes sent (target, headers, body).
    pub bytes_sent: u64,
    /// Bytes of the response's body.
    pub bytes_received: u64,
    /// Milliseconds it took.
    pub ms: f64,
    /// Secrets whose values went to their own host in it (names only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Secrets whose placeholder was sent to a host not theirs (sent as the placeholder).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub misdirected: Vec<String>,
}

/// One tool call as an audit line records it: never its arguments or its result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCallLine {
    /// The tool.
    pub name: String,
    /// Bytes of its arguments, as JSON.
    pub argument_bytes: u64,
    /// Bytes of its result (or error message).
    pub result_bytes: u64,
    /// `result`, or `error:<type>`.
    pub outcome: String,
}

impl AuditRecord {
    /// A record of `action` for the request `ctx` describes, at its door (HTTP 200 until told
    /// otherwise).
    pub fn new(ctx: &RequestContext, action: Action) -> Self {
        AuditRecord {
            request_id: ctx.request_id.clone(),
            key_id: ctx.key_id.clone(),
            client: ctx.client.to_string(),
            http_status: 200,
            ..AuditRecord::blank(action, ctx.door)
        }
    }

    /// A record with no request behind it (session expiry, shutdown).
    pub fn internal(action: Action) -> Self {
        AuditRecord {
            client: "server".into(),
            ..AuditRecord::blank(action, Door::Server)
        }
    }

    fn blank(action: Action, door: Door) -> Self {
        AuditRecord {
            time: rfc3339_now(),
            action,
            door,
            request_id: String::new(),
            key_id: None,
            client: String::new(),
            http_status: 0,
            execution_id: None,
            session_id: None,
            snapshot_id: None,
            code_sha256: None,
            limits: None,
            status: None,
            exit_code: None,
            usage: None,
            error: None,
            path: None,
            bytes: None,
            detail: None,
            leaks: Vec::new(),
            packages: Vec::new(),
            tool_calls: Vec::new(),
            egress: None,
        }
    }

    pub fn set_code(&mut self, code: &str) {
        self.code_sha256 = Some(hex::encode(Sha256::digest(code.as_bytes())));
    }

    /// Records the leaks a scan found (rules and places only).
    pub fn set_leaks(&mut self, leaks: &[Leak]) {
        self.leaks = leaks.to_vec();
    }

    pub fn set_report(&mut self, report: &Report) {
        self.status = Some(report.status);
        self.exit_code = report.exit_code;
        self.usage = Some(report.usage);
    }

    /// Completes the record with how its request ended.
    pub fn outcome(mut self, outcome: Outcome) -> Self {
        match outcome {
            Outcome::Ok(status) => self.http_status = status,
            Outcome::Failed(status, code) => {
                self.http_status = status;
                self.error = Some(code);
            }
        }
        self
    }

    pub fn execution(mut self, id: &str) -> Self {
        self.execution_id = Some(id.to_string());
        self
    }

    pub fn session(mut self, id: &str) -> Self {
        self.session_id = Some(id.to_string());
        self
    }

    /// The file the action read or wrote, and its size.
    pub fn set_path(&mut self, path: &str, bytes: u64) {
        self.path = Some(path.to_string());
        self.bytes = Some(bytes);
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_its_action_and_its_door_apart() {
        let ctx = RequestContext {
            request_id: "r-1".into(),
            client: SocketAddr::from(([127, 0, 0, 1], 9)),
            key_id: Some("alice".into()),
            door: Door::Mcp,
        };
        let line = serde_json::to_value(AuditRecord::new(&ctx, Action::SessionRestore)).unwrap();
        assert_eq!(
            (&line["action"], &line["door"]),
            (&"session_restore".into(), &"mcp".into())
        );
        let line = serde_json::to_value(AuditRecord::internal(Action::SessionExpire)).unwrap();
        assert_eq!(
            (&line["action"], &line["door"]),
            (&"session_expire".into(), &"server".into())
        );
    }
}
