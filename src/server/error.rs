//! Every way a request can fail before or around an execution, as one enum. Each variant knows
//! its HTTP status and a stable machine-readable code; the body is always
//! `{"error": {"code", "message"}}` (plus `field` when one request field is at fault).
//!
//! How an execution itself ended is never an error here: that is the result's `status`, sent
//! with HTTP 200.

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::check::CheckError;
use crate::leakage::rule_names;
use crate::limits::LimitError;
use crate::packages::{PackageError, PackageErrorKind};
use crate::report::Leak;
use crate::sandbox::SandboxError;
use crate::sandbox::workdir::WorkdirError;

use super::tenants::{Quota, QuotaExceeded, QuotaUse};

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
    /// With `output_leak`: what was found (rule and place, never the text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaks: Option<Vec<Leak>>,
    /// With `quota_exceeded`: which of the tenant's quotas, its use and its limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<QuotaUse>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `invalid_json`, `invalid_limit`, `invalid_path`,
    /// `invalid_base64`, `invalid_request`, `unauthorized`, `not_found`, `session_not_found`,
    /// `session_expired`, `session_busy`, `session_ended`, `session_elsewhere`,
    /// `session_moving`, `session_lost`, `method_not_allowed`,
    /// `payload_too_large`, `overloaded`, `too_many_sessions`, `too_many_mcp_sessions`,
    /// `not_ready`, `shutting_down`,
    /// `output_leak`, `snapshot_not_found`, `snapshot_invalid`, `snapshot_incompatible`,
    /// `snapshot_refused`, `snapshot_quota_exceeded`, `snapshot_store_unavailable`, the
    /// `package_*` refusals (`packages_disabled`, `package_not_found`, ...), `internal`.
    pub code: ErrorCode,
    /// A sentence for humans.
    pub message: String,
    /// The request field at fault, when there is one (e.g. `limits.memory_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not JSON, or not the JSON this endpoint takes (wrong types, unknown fields).
    #[error("{0}")]
    InvalidJson(String),
    /// A limit above the server's maximum (or below its minimum).
    #[error("{0}")]
    InvalidLimit(LimitError),
    /// A file path that is absolute, has `..`, NUL, and so on.
    #[error("{message}")]
    InvalidPath { field: String, message: String },
    #[error("{message}")]
    InvalidBase64 { field: String, message: String },
    /// Anything else wrong with an otherwise well-formed request.
    #[error("{0}")]
    InvalidRequest(String),
    #[error("a valid API key is required: send `Authorization: Bearer KEY`")]
    Unauthorized,
    #[error("no route for {0}")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("no session {0}")]
    SessionNotFound(String),
    #[error("session {0} expired")]
    SessionExpired(String),
    #[error("session {0} is running a turn; wait for it to finish")]
    SessionBusy(String),
    #[error("session {id} has ended ({reason}); open a new one")]
    SessionEnded { id: String, reason: String },
    /// Cluster: another node, alive, holds the session, and it is not durable, so this node
    /// cannot take it over.
    #[error(
        "session {id} is live on node {node}, and it is not durable, so no other node can take it over: send its requests to {node} (the proxy routes by the session id)"
    )]
    SessionElsewhere { id: String, node: String },
    /// Cluster: the session is changing nodes (its node drains, another node took it first,
    /// or took it over while a turn ran here, whose effects were then not kept): nothing of
    /// this request stands, and a retry finds the session where it is now.
    #[error("session {id} is moving between nodes: {why}; retry")]
    SessionMoving { id: String, why: String },
    /// Cluster: the node that held the session stopped, and the session was not durable.
    #[error(
        "session {id} was lost: its node {node} stopped and it was not durable (open sessions with \"durable\": true to keep them through a node's loss)"
    )]
    SessionLost { id: String, node: String },
    #[error("{0} not found in the session's working directory")]
    FileNotFound(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// Admission control refused the request; retry after the given seconds.
    #[error("{message}")]
    Overloaded {
        message: String,
        retry_after_secs: u64,
    },
    #[error("{message}")]
    TooManySessions {
        message: String,
        retry_after_secs: u64,
    },
    /// The server keeps as many MCP sessions as it may (`--max-mcp-sessions`).
    #[error("{0}")]
    TooManyMcpSessions(String),
    /// A tenant's quota would be passed (`quota_exceeded`, naming the quota and its use).
    #[error("{0}")]
    QuotaExceeded(QuotaExceeded),
    #[error("the runtime is still loading")]
    NotReady,
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The worker process running this request died (or was ended for breaking the
    /// protocol) before it answered; nothing else was affected, and a retry runs on another.
    #[error("the worker process running this request was lost ({0}); retry")]
    WorkerLost(String),
    /// The run's output held secrets and the leakage policy is `deny`: it was withheld.
    #[error("{}", output_leak_message(.0))]
    OutputLeak(Vec<Leak>),
    #[error("no snapshot {0}")]
    SnapshotNotFound(String),
    /// The snapshot is damaged, truncated, tampered with or out of bounds: nothing of it
    /// was used.
    #[error("{0}")]
    SnapshotInvalid(String),
    /// The snapshot is of another template build, runtime or format.
    #[error("{0}")]
    SnapshotIncompatible(String),
    /// The session's state cannot be captured now (a file held open, ...).
    #[error("{0}")]
    SnapshotRefused(String),
    /// The key's snapshots would take more than its storage quota.
    #[error("{0}")]
    SnapshotQuota(String),
    /// The snapshot store failed; nothing was lost, try again.
    #[error("{0}")]
    SnapshotStore(String),
    /// The packages asked for cannot be had (`package_*` codes): nothing ran.
    #[error("{0}")]
    Package(PackageError),
    #[error("internal error: {0}")]
    Internal(String),
}

fn output_leak_message(leaks: &[Leak]) -> String {
    let n = leaks.len();
    format!(
        "the output held {n} secret{} or piece{} of personal data (rules: {}) and the leakage \
         policy is \"deny\": stdout, stderr, the result, rich outputs and files were withheld",
        if n == 1 { "" } else { "s" },
        if n == 1 { "" } else { "s" },
        rule_names(leaks).join(", ")
    )
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidJson(_)
            | ApiError::InvalidLimit(_)
            | ApiError::InvalidPath { .. }
            | ApiError::InvalidBase64 { .. }
            | ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_)
            | ApiError::SessionNotFound(_)
            | ApiError::FileNotFound(_)
            | ApiError::SnapshotNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::SessionExpired(_) | ApiError::SessionLost { .. } => StatusCode::GONE,
            ApiError::SessionBusy(_)
            | ApiError::SessionEnded { .. }
            | ApiError::SessionElsewhere { .. }
            | ApiError::SnapshotIncompatible(_)
            | ApiError::SnapshotRefused(_)
            | ApiError::SnapshotQuota(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::QuotaExceeded(q) if q.too_large() => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::QuotaExceeded(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Overloaded { .. }
            | ApiError::TooManySessions { .. }
            | ApiError::TooManyMcpSessions(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::NotReady
            | ApiError::ShuttingDown
            | ApiError::WorkerLost(_)
            | ApiError::SessionMoving { .. }
            | ApiError::SnapshotStore(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::OutputLeak(_) | ApiError::SnapshotInvalid(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ApiError::Package(e) => match e.kind {
                PackageErrorKind::Disabled | PackageErrorKind::NotAllowed => StatusCode::FORBIDDEN,
                PackageErrorKind::InvalidSpec | PackageErrorKind::TooMany => {
                    StatusCode::BAD_REQUEST
                }
                PackageErrorKind::NotFound
                | PackageErrorKind::NativeCode
                | PackageErrorKind::NoWheel
                | PackageErrorKind::ConflictsWithBuiltin
                | PackageErrorKind::Conflict
                | PackageErrorKind::BadWheel => StatusCode::UNPROCESSABLE_ENTITY,
                PackageErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
                PackageErrorKind::IndexUnreachable => StatusCode::BAD_GATEWAY,
                PackageErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
                PackageErrorKind::Host => StatusCode::INTERNAL_SERVER_ERROR,
            },
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::InvalidJson(_) => ErrorCode::InvalidJson,
            ApiError::InvalidLimit(_) => ErrorCode::InvalidLimit,
            ApiError::InvalidPath { .. } => ErrorCode::InvalidPath,
            ApiError::InvalidBase64 { .. } => ErrorCode::InvalidBase64,
            ApiError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            ApiError::Unauthorized => ErrorCode::Unauthorized,
            ApiError::NotFound(_) | ApiError::FileNotFound(_) => ErrorCode::NotFound,
            ApiError::MethodNotAllowed => ErrorCode::MethodNotAllowed,
            ApiError::SessionNotFound(_) => ErrorCode::SessionNotFound,
            ApiError::SessionExpired(_) => ErrorCode::SessionExpired,
            ApiError::SessionBusy(_) => ErrorCode::SessionBusy,
            ApiError::SessionEnded { .. } => ErrorCode::SessionEnded,
            ApiError::SessionElsewhere { .. } => ErrorCode::SessionElsewhere,
            ApiError::SessionMoving { .. } => ErrorCode::SessionMoving,
            ApiError::SessionLost { .. } => ErrorCode::SessionLost,
            ApiError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            ApiError::Overloaded { .. } => ErrorCode::Overloaded,
            ApiError::TooManySessions { .. } => ErrorCode::TooManySessions,
            ApiError::TooManyMcpSessions(_) => ErrorCode::TooManyMcpSessions,
            ApiError::QuotaExceeded(_) => ErrorCode::QuotaExceeded,
            ApiError::NotReady => ErrorCode::NotReady,
            ApiError::ShuttingDown => ErrorCode::ShuttingDown,
            ApiError::WorkerLost(_) => ErrorCode::WorkerLost,
            ApiError::OutputLeak(_) => ErrorCode::OutputLeak,
            ApiError::SnapshotNotFound(_) => ErrorCode::SnapshotNotFound,
            ApiError::SnapshotInvalid(_) => ErrorCode::SnapshotInvalid,
            ApiError::SnapshotIncompatible(_) => ErrorCode::SnapshotIncompatible,
            ApiError::SnapshotRefused(_) => ErrorCode::SnapshotRefused,
            ApiError::SnapshotQuota(_) => ErrorCode::SnapshotQuotaExceeded,
            ApiError::SnapshotStore(_) => ErrorCode::SnapshotStoreUnavailable,
            ApiError::Package(e) => ErrorCode::of_package(e.kind),
            ApiError::Internal(_) => ErrorCode::Internal,
        }
    }

    fn field(&self) -> Option<String> {
        match self {
            ApiError::InvalidLimit(e) => Some(format!("limits.{}", e.field())),
            ApiError::Package(_) => Some("packages".into()),
            ApiError::InvalidPath { field, .. } | ApiError::InvalidBase64 { field, .. } => {
                Some(field.clone())
            }
            _ => None,
        }
    }

    /// A workdir error while placing caller files: the caller's fault unless it is I/O.
    pub fn from_workdir(field: &str, e: WorkdirError) -> ApiError {
        match e {
            WorkdirError::BadPath { .. } => ApiError::InvalidPath {
                field: field.to_string(),
                message: e.to_string(),
            },
            WorkdirError::TooManyFiles { .. } | WorkdirError::InputsTooLarge { .. } => {
                ApiError::InvalidRequest(e.to_string())
            }
            WorkdirError::Io { .. } => ApiError::Internal(e.to_string()),
        }
    }

    pub fn from_sandbox(e: SandboxError) -> ApiError {
        match e {
            SandboxError::Workdir(w) => ApiError::from_workdir("files", w),
            SandboxError::BadEnv(..) => ApiError::InvalidRequest(e.to_string()),
            // Lost the race for the last of the budget between admission and instantiation.
            SandboxError::HostBudget => ApiError::Overloaded {
                message: e.to_string(),
                retry_after_secs: 1,
            },
            other => ApiError::Internal(other.to_string()),
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message: self.to_string(),
                field: self.field(),
            },
            leaks: match self {
                ApiError::OutputLeak(leaks) => Some(leaks.clone()),
                _ => None,
            },
            quota: match self {
                ApiError::QuotaExceeded(q) => Some(QuotaUse {
                    quota: q.quota,
                    used: q.used,
                    limit: Some(q.limit),
                }),
                _ => None,
            },
        }
    }
}

impl From<CheckError> for ApiError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::Sandbox(s) => ApiError::from_sandbox(s),
            other => ApiError::Internal(format!("pre-execution check failed: {other}")),
        }
    }
}

impl From<QuotaExceeded> for ApiError {
    /// Snapshot bytes keep their own code (`snapshot_quota_exceeded`, 409), as before tenants.
    fn from(q: QuotaExceeded) -> Self {
        match q.quota {
            Quota::SnapshotBytes => ApiError::SnapshotQuota(q.to_string()),
            _ => ApiError::QuotaExceeded(q),
        }
    }
}

impl From<LimitError> for ApiError {
    fn from(e: LimitError) -> Self {
        ApiError::InvalidLimit(e)
    }
}

impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(format!("request body too large: {}", r.body_text()))
        } else {
            ApiError::InvalidRequest(format!(
                "could not read the request body: {}",
                r.body_text()
            ))
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::InvalidRequest(r.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::error!(code = self.code().as_str(), error = %self, "request failed");
        }
        let retry_after = match &self {
            ApiError::Overloaded {
                retry_after_secs, ..
            }
            | ApiError::TooManySessions {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            ApiError::QuotaExceeded(q) if !q.too_large() => Some(1),
            ApiError::NotReady
            | ApiError::ShuttingDown
            | ApiError::WorkerLost(_)
            | ApiError::SessionMoving { .. }
            | ApiError::SnapshotStore(_) => Some(1),
            _ => None,
        };
        let mut resp = (status, Json(self.body())).into_response();
        if let Some(secs) = retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if matches!(self, ApiError::Unauthorized) {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        // Handlers read the code back for the audit log and metrics.
        resp.extensions_mut().insert(self.code());
        resp
    }
}

/// Put on error responses so middleware can see which error it was.
/// Every error code the API (and the audit log) uses; serialised as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// `internal`.
    Internal,
    /// `invalid_base64`.
    InvalidBase64,
    /// `invalid_json`.
    InvalidJson,
    /// `invalid_limit`.
    InvalidLimit,
    /// `invalid_path`.
    InvalidPath,
    /// `invalid_request`.
    InvalidRequest,
    /// `method_not_allowed`.
    MethodNotAllowed,
    /// `not_found`.
    NotFound,
    /// `not_ready`.
    NotReady,
    /// `overloaded`.
    Overloaded,
    /// `payload_too_large`.
    PayloadTooLarge,
    /// `session_busy`.
    SessionBusy,
    /// `session_ended`.
    SessionEnded,
    /// `session_elsewhere`.
    SessionElsewhere,
    /// `session_moving`.
    SessionMoving,
    /// `session_lost`.
    SessionLost,
    /// `session_expired`.
    SessionExpired,
    /// `session_not_found`.
    SessionNotFound,
    /// `shutting_down`.
    ShuttingDown,
    /// `too_many_sessions`.
    TooManySessions,
    /// `quota_exceeded`.
    QuotaExceeded,
    /// `too_many_mcp_sessions`.
    TooManyMcpSessions,
    /// `worker_lost`.
    WorkerLost,
    /// `unauthorized`.
    Unauthorized,
    /// `policy_denied`.
    PolicyDenied,
    /// `piston_error`.
    PistonError,
    /// `client_closed_request`.
    ClientClosedRequest,
    /// `output_leak`.
    OutputLeak,
    /// `snapshot_not_found`.
    SnapshotNotFound,
    /// `snapshot_invalid`.
    SnapshotInvalid,
    /// `snapshot_incompatible`.
    SnapshotIncompatible,
    /// `snapshot_refused`.
    SnapshotRefused,
    /// `snapshot_quota_exceeded`.
    SnapshotQuotaExceeded,
    /// `snapshot_store_unavailable`.
    SnapshotStoreUnavailable,
    /// `packages_disabled`.
    PackagesDisabled,
    /// `invalid_package_spec`.
    InvalidPackageSpec,
    /// `too_many_packages`.
    TooManyPackages,
    /// `package_not_allowed`.
    PackageNotAllowed,
    /// `package_not_found`.
    PackageNotFound,
    /// `package_has_native_code`.
    PackageHasNativeCode,
    /// `package_has_no_wheel`.
    PackageHasNoWheel,
    /// `package_conflicts_with_builtin`.
    PackageConflictsWithBuiltin,
    /// `package_conflict`.
    PackageConflict,
    /// `package_too_large`.
    PackageTooLarge,
    /// `package_index_unreachable`.
    PackageIndexUnreachable,
    /// `package_resolution_timeout`.
    PackageResolutionTimeout,
    /// `package_invalid`.
    PackageInvalid,
    /// `package_install_failed`.
    PackageInstallFailed,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Internal => "internal",
            ErrorCode::InvalidBase64 => "invalid_base64",
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::InvalidLimit => "invalid_limit",
            ErrorCode::InvalidPath => "invalid_path",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::NotFound => "not_found",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::SessionBusy => "session_busy",
            ErrorCode::SessionEnded => "session_ended",
            ErrorCode::SessionElsewhere => "session_elsewhere",
            ErrorCode::SessionMoving => "session_moving",
            ErrorCode::SessionLost => "session_lost",
            ErrorCode::SessionExpired => "session_expired",
            ErrorCode::SessionNotFound => "session_not_found",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::TooManySessions => "too_many_sessions",
            ErrorCode::TooManyMcpSessions => "too_many_mcp_sessions",
            ErrorCode::WorkerLost => "worker_lost",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::PolicyDenied => "policy_denied",
            ErrorCode::PistonError => "piston_error",
            ErrorCode::ClientClosedRequest => "client_closed_request",
            ErrorCode::OutputLeak => "output_leak",
            ErrorCode::SnapshotNotFound => "snapshot_not_found",
            ErrorCode::SnapshotInvalid => "snapshot_invalid",
            ErrorCode::SnapshotIncompatible => "snapshot_incompatible",
            ErrorCode::SnapshotRefused => "snapshot_refused",
            ErrorCode::SnapshotQuotaExceeded => "snapshot_quota_exceeded",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::SnapshotStoreUnavailable => "snapshot_store_unavailable",
            ErrorCode::PackagesDisabled => "packages_disabled",
            ErrorCode::InvalidPackageSpec => "invalid_package_spec",
            ErrorCode::TooManyPackages => "too_many_packages",
            ErrorCode::PackageNotAllowed => "package_not_allowed",
            ErrorCode::PackageNotFound => "package_not_found",
            ErrorCode::PackageHasNativeCode => "package_has_native_code",
            ErrorCode::PackageHasNoWheel => "package_has_no_wheel",
            ErrorCode::PackageConflictsWithBuiltin => "package_conflicts_with_builtin",
            ErrorCode::PackageConflict => "package_conflict",
            ErrorCode::PackageTooLarge => "package_too_large",
            ErrorCode::PackageIndexUnreachable => "package_index_unreachable",
            ErrorCode::PackageResolutionTimeout => "package_resolution_timeout",
            ErrorCode::PackageInvalid => "package_invalid",
            ErrorCode::PackageInstallFailed => "package_install_failed",
        }
    }
}

impl ErrorCode {
    /// The code of a package refusal.
    fn of_package(kind: PackageErrorKind) -> ErrorCode {
        match kind {
            PackageErrorKind::Disabled => ErrorCode::PackagesDisabled,
            PackageErrorKind::InvalidSpec => ErrorCode::InvalidPackageSpec,
            PackageErrorKind::TooMany => ErrorCode::TooManyPackages,
            PackageErrorKind::NotAllowed => ErrorCode::PackageNotAllowed,
            PackageErrorKind::NotFound => ErrorCode::PackageNotFound,
            PackageErrorKind::NativeCode => ErrorCode::PackageHasNativeCode,
            PackageErrorKind::NoWheel => ErrorCode::PackageHasNoWheel,
            PackageErrorKind::ConflictsWithBuiltin => ErrorCode::PackageConflictsWithBuiltin,
            PackageErrorKind::Conflict => ErrorCode::PackageConflict,
            PackageErrorKind::TooLarge => ErrorCode::PackageTooLarge,
            PackageErrorKind::IndexUnreachable => ErrorCode::PackageIndexUnreachable,
            PackageErrorKind::Timeout => ErrorCode::PackageResolutionTimeout,
            PackageErrorKind::BadWheel => ErrorCode::PackageInvalid,
            PackageErrorKind::Host => ErrorCode::PackageInstallFailed,
        }
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
