//! Every way a request can fail before or around an execution: the HTTP doors' own
//! refusals (a body that is not JSON, no key, no route) and every [`SupervisorError`], mapped
//! to status, stable code, field and `Retry-After` in one table ([`ApiError::wire`]). The body
//! is always `{"error": {"code", "message"}}` (plus `field` when one request field is at
//! fault).
//!
//! How an execution itself ended is never an error here: that is the result's `status`, sent
//! with HTTP 200.

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::packages::PackageErrorKind;
use crate::report::Leak;
use crate::supervisor::audit::Outcome;
use crate::supervisor::tenants::QuotaUse;
use crate::supervisor::{ErrorCode, SupervisorError};
use crate::volumes::VolumeError;

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
    /// The control plane's refusal: a domain cause.
    #[error(transparent)]
    Supervisor(#[from] SupervisorError),
    /// The body is not JSON, or not the JSON this endpoint takes (wrong types, unknown fields).
    #[error("{0}")]
    InvalidJson(String),
    #[error("a valid API key is required: send `Authorization: Bearer KEY`")]
    Unauthorized,
    /// The key is valid but not one the operator named for this (`--console-keys`).
    #[error(
        "this key may not read the operator console (the operator names those keys with --console-keys)"
    )]
    NotOperator,
    #[error("no route for {0}")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The server keeps as many MCP sessions as it may (`--max-mcp-sessions`).
    #[error("{0}")]
    TooManyMcpSessions(String),
}

/// How one error goes on the wire: its status, code, `Retry-After` seconds and field.
pub struct Wire {
    status: StatusCode,
    code: ErrorCode,
    retry_after: Option<u64>,
    field: Option<String>,
}

impl Wire {
    pub(crate) fn new(status: StatusCode, code: ErrorCode) -> Wire {
        Wire {
            status,
            code,
            retry_after: None,
            field: None,
        }
    }

    fn retry(mut self, secs: u64) -> Wire {
        self.retry_after = Some(secs);
        self
    }

    fn field(mut self, field: impl Into<String>) -> Wire {
        self.field = Some(field.into());
        self
    }
}

/// What the edge knows of a failure: its wire form, and from that its code and audit
/// outcome. Both [`ApiError`] and the [`SupervisorError`] inside it have one.
pub trait OnWire {
    /// The failure's status, code, `Retry-After` and field.
    fn wire(&self) -> Wire;

    fn status(&self) -> StatusCode {
        self.wire().status
    }

    /// The stable machine-readable code.
    fn code(&self) -> ErrorCode {
        self.wire().code
    }

    /// The audit log's outcome of a request that failed with this error.
    fn outcome(&self) -> Outcome {
        let wire = self.wire();
        Outcome::Failed(wire.status.as_u16(), wire.code)
    }
}

impl OnWire for ApiError {
    fn wire(&self) -> Wire {
        use ErrorCode as C;
        use StatusCode as S;
        match self {
            ApiError::Supervisor(e) => e.wire(),
            ApiError::NotOperator => Wire::new(S::FORBIDDEN, C::Forbidden),
            ApiError::InvalidJson(_) => Wire::new(S::BAD_REQUEST, C::InvalidJson),
            ApiError::Unauthorized => Wire::new(S::UNAUTHORIZED, C::Unauthorized),
            ApiError::NotFound(_) => Wire::new(S::NOT_FOUND, C::NotFound),
            ApiError::MethodNotAllowed => Wire::new(S::METHOD_NOT_ALLOWED, C::MethodNotAllowed),
            ApiError::PayloadTooLarge(_) => Wire::new(S::PAYLOAD_TOO_LARGE, C::PayloadTooLarge),
            ApiError::TooManyMcpSessions(_) => {
                Wire::new(S::TOO_MANY_REQUESTS, C::TooManyMcpSessions)
            }
        }
    }
}

/// The table: every domain cause's status, code, `Retry-After` and field.
impl OnWire for SupervisorError {
    fn wire(&self) -> Wire {
        use ErrorCode as C;
        use StatusCode as S;
        use SupervisorError as E;
        match self {
            E::InvalidLimit(l) => {
                Wire::new(S::BAD_REQUEST, C::InvalidLimit).field(format!("limits.{}", l.field()))
            }
            E::InvalidPath { field, .. } => {
                Wire::new(S::BAD_REQUEST, C::InvalidPath).field(field.clone())
            }
            E::InvalidBase64 { field, .. } => {
                Wire::new(S::BAD_REQUEST, C::InvalidBase64).field(field.clone())
            }
            E::InvalidRequest(_) => Wire::new(S::BAD_REQUEST, C::InvalidRequest),
            E::SessionNotFound(_) => Wire::new(S::NOT_FOUND, C::SessionNotFound),
            E::ExecutionNotFound(_) => Wire::new(S::NOT_FOUND, C::ExecutionNotFound),
            E::WebhookNotFound(_) => Wire::new(S::NOT_FOUND, C::WebhookNotFound),
            E::TooManyWebhooks(_) => Wire::new(S::TOO_MANY_REQUESTS, C::QuotaExceeded),
            E::ExecutionBusy(_) => Wire::new(S::CONFLICT, C::ExecutionBusy),
            E::ReplayDiverged(..) => Wire::new(S::CONFLICT, C::ReplayDiverged),
            E::FileNotFound(_) => Wire::new(S::NOT_FOUND, C::NotFound),
            E::TurnNotKept { .. } => Wire::new(S::NOT_FOUND, C::TurnNotKept),
            E::SnapshotNotFound(_) => Wire::new(S::NOT_FOUND, C::SnapshotNotFound),
            E::Template(e) => template_wire(e),
            E::SessionExpired(_) => Wire::new(S::GONE, C::SessionExpired),
            E::SessionLost { .. } => Wire::new(S::GONE, C::SessionLost),
            E::SessionBusy(_) => Wire::new(S::CONFLICT, C::SessionBusy),
            E::SessionEnded { .. } => Wire::new(S::CONFLICT, C::SessionEnded),
            E::SessionElsewhere { .. } => Wire::new(S::CONFLICT, C::SessionElsewhere),
            E::SnapshotIncompatible(_) => Wire::new(S::CONFLICT, C::SnapshotIncompatible),
            E::SnapshotRefused(_) => Wire::new(S::CONFLICT, C::SnapshotRefused),
            E::SnapshotQuota(_) => Wire::new(S::CONFLICT, C::SnapshotQuotaExceeded),
            E::QuotaExceeded(q) if q.too_large() => {
                Wire::new(S::PAYLOAD_TOO_LARGE, C::QuotaExceeded)
            }
            E::QuotaExceeded(_) => Wire::new(S::TOO_MANY_REQUESTS, C::QuotaExceeded).retry(1),
            E::Overloaded {
                retry_after_secs, ..
            } => Wire::new(S::TOO_MANY_REQUESTS, C::Overloaded).retry(*retry_after_secs),
            E::TooManySessions {
                retry_after_secs, ..
            } => Wire::new(S::TOO_MANY_REQUESTS, C::TooManySessions).retry(*retry_after_secs),
            E::NotReady => Wire::new(S::SERVICE_UNAVAILABLE, C::NotReady).retry(1),
            E::ShuttingDown => Wire::new(S::SERVICE_UNAVAILABLE, C::ShuttingDown).retry(1),
            E::WorkerLost(_) => Wire::new(S::SERVICE_UNAVAILABLE, C::WorkerLost).retry(1),
            E::SessionMoving { .. } => Wire::new(S::SERVICE_UNAVAILABLE, C::SessionMoving).retry(1),
            E::SnapshotStore(_) => {
                Wire::new(S::SERVICE_UNAVAILABLE, C::SnapshotStoreUnavailable).retry(1)
            }
            E::OutputLeak(_) => Wire::new(S::UNPROCESSABLE_ENTITY, C::OutputLeak),
            E::SnapshotInvalid(_) => Wire::new(S::UNPROCESSABLE_ENTITY, C::SnapshotInvalid),
            E::Package(p) => {
                let status = match p.kind {
                    PackageErrorKind::Disabled | PackageErrorKind::NotAllowed => S::FORBIDDEN,
                    PackageErrorKind::InvalidSpec | PackageErrorKind::TooMany => S::BAD_REQUEST,
                    PackageErrorKind::NotFound
                    | PackageErrorKind::NativeCode
                    | PackageErrorKind::NoWheel
                    | PackageErrorKind::ConflictsWithBuiltin
                    | PackageErrorKind::Conflict
                    | PackageErrorKind::BadWheel => S::UNPROCESSABLE_ENTITY,
                    PackageErrorKind::TooLarge => S::PAYLOAD_TOO_LARGE,
                    PackageErrorKind::IndexUnreachable => S::BAD_GATEWAY,
                    PackageErrorKind::Timeout => S::GATEWAY_TIMEOUT,
                    PackageErrorKind::Host => S::INTERNAL_SERVER_ERROR,
                };
                Wire::new(status, package_code(p.kind)).field("packages")
            }
            E::Volume(v) => volume_wire(v),
            E::Internal(_) => Wire::new(S::INTERNAL_SERVER_ERROR, C::Internal),
        }
    }
}

/// A volume's refusals: a full volume is 507 (HTTP's "no space", the guest's ENOSPC).
fn volume_wire(v: &VolumeError) -> Wire {
    use ErrorCode as C;
    use StatusCode as S;
    match v {
        VolumeError::InvalidName { .. } => {
            Wire::new(S::BAD_REQUEST, C::InvalidRequest).field("name")
        }
        VolumeError::InvalidPath { .. } => Wire::new(S::BAD_REQUEST, C::InvalidPath).field("path"),
        VolumeError::NotFound(_) => Wire::new(S::NOT_FOUND, C::VolumeNotFound),
        VolumeError::FileNotFound { .. } => Wire::new(S::NOT_FOUND, C::NotFound),
        VolumeError::Exists(_) => Wire::new(S::CONFLICT, C::VolumeExists),
        VolumeError::WrongKind { .. } => Wire::new(S::CONFLICT, C::InvalidPath).field("path"),
        VolumeError::Full { .. } => Wire::new(S::INSUFFICIENT_STORAGE, C::VolumeFull),
        VolumeError::InvalidMount(_) => {
            Wire::new(S::BAD_REQUEST, C::InvalidRequest).field("volumes")
        }
        VolumeError::TooMany(_) => Wire::new(S::TOO_MANY_REQUESTS, C::QuotaExceeded),
        VolumeError::Io(_) => Wire::new(S::INTERNAL_SERVER_ERROR, C::Internal),
        VolumeError::Shared(_) => {
            Wire::new(S::SERVICE_UNAVAILABLE, C::SnapshotStoreUnavailable).retry(1)
        }
    }
}

impl ApiError {
    pub fn body(&self) -> ErrorBody {
        let wire = self.wire();
        ErrorBody {
            error: ErrorDetail {
                code: wire.code,
                message: self.to_string(),
                field: wire.field,
            },
            leaks: match self {
                ApiError::Supervisor(SupervisorError::OutputLeak(leaks)) => Some(leaks.clone()),
                _ => None,
            },
            quota: match self {
                ApiError::Supervisor(SupervisorError::QuotaExceeded(q)) => Some(QuotaUse {
                    quota: q.quota,
                    used: q.used,
                    limit: Some(q.limit),
                }),
                _ => None,
            },
        }
    }
}

impl From<BytesRejection> for ApiError {
    fn from(r: BytesRejection) -> Self {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(format!("request body too large: {}", r.body_text()))
        } else {
            SupervisorError::InvalidRequest(format!(
                "could not read the request body: {}",
                r.body_text()
            ))
            .into()
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        SupervisorError::InvalidRequest(r.body_text()).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let wire = self.wire();
        if wire.status.is_server_error() {
            tracing::error!(code = wire.code.as_str(), error = %self, "request failed");
        }
        let mut resp = (wire.status, Json(self.body())).into_response();
        if let Some(secs) = wire.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if matches!(self, ApiError::Unauthorized) {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        // Handlers read the code back for the audit log and metrics.
        resp.extensions_mut().insert(wire.code);
        resp
    }
}

/// The code of a package refusal.
fn package_code(kind: PackageErrorKind) -> ErrorCode {
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

pub type ApiResult<T> = Result<T, ApiError>;

/// A user template's refusals.
fn template_wire(e: &crate::supervisor::templates::UserTemplateError) -> Wire {
    use crate::supervisor::templates::UserTemplateError as T;
    use ErrorCode as C;
    use StatusCode as S;
    match e {
        T::NotFound(_) => Wire::new(S::NOT_FOUND, C::TemplateNotFound).field("template"),
        T::Building(_) => Wire::new(S::CONFLICT, C::TemplateBuilding).retry(1),
        T::Failed { .. } => Wire::new(S::CONFLICT, C::TemplateFailed),
        T::TooMany(_) => Wire::new(S::TOO_MANY_REQUESTS, C::QuotaExceeded),
        T::TooManyBuilds(_) => Wire::new(S::TOO_MANY_REQUESTS, C::QuotaExceeded).retry(5),
        T::NoUpload => Wire::new(S::NOT_FOUND, C::NotFound),
        T::UploadsFull(_) => Wire::new(S::SERVICE_UNAVAILABLE, C::Overloaded).retry(5),
        T::InvalidName { .. } => Wire::new(S::BAD_REQUEST, C::InvalidRequest).field("name"),
        T::Io(_) => Wire::new(S::INTERNAL_SERVER_ERROR, C::Internal),
        T::Store(_) => Wire::new(S::SERVICE_UNAVAILABLE, C::SnapshotStoreUnavailable).retry(1),
    }
}
