//! Why the control plane refused or could not do what was asked, as domain causes: a session
//! that is not there or is busy, a quota reached, a snapshot damaged, a worker lost. Nothing
//! here knows HTTP: `server/error.rs` maps every variant to its status, stable code, field
//! and `Retry-After` in one table.
//!
//! How an execution itself ended is never an error here: that is the report's `status`.

use crate::leakage::rule_names;
use crate::limits::LimitError;
use crate::packages::PackageError;
use crate::report::Leak;

use super::tenants::{Quota, QuotaExceeded};

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
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
    /// The session does not keep its state after that turn (never was one, dropped past
    /// its kept turns or their bytes, or lost with a hibernation or a restart).
    #[error(
        "session {id} does not keep its state after turn {turn}: GET /v1/sessions/{id}/turns lists the turns it keeps"
    )]
    TurnNotKept { id: String, turn: u64 },
    /// Code mode: no suspended or running execution by that id (never was, ended, expired,
    /// cancelled, or another key's).
    #[error("no execution {0} waits for tool results (it ended, expired or was cancelled)")]
    ExecutionNotFound(String),
    /// No webhook by that id (never was, deleted, or another tenant's).
    #[error("no webhook {0}")]
    WebhookNotFound(String),
    /// The tenant has as many webhooks as it may.
    #[error("a tenant has at most {0} webhooks: delete one first")]
    TooManyWebhooks(usize),
    /// Code mode: the execution is running, or another request is resuming it: no round of
    /// calls waits for these answers now.
    #[error("execution {0} is running; no round of its tool calls waits for answers now")]
    ExecutionBusy(String),
    /// Code mode: brought back from its journal, the program did not make the calls it had
    /// made (it read the clock, or something else the replay cannot give it again).
    #[error("execution {0} could not be brought back: {1}")]
    ReplayDiverged(String, String),
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
    /// A volume operation refused or failed (`volume_*` codes, `invalid_path`, ...).
    #[error("{0}")]
    Volume(#[from] crate::volumes::VolumeError),
    /// A user template is not there, not ready, or past a limit (`template_*` codes).
    #[error("{0}")]
    Template(#[from] super::templates::UserTemplateError),
    /// The packages asked for cannot be had (`package_*` codes): nothing ran.
    #[error("{0}")]
    Package(PackageError),
    #[error("internal error: {0}")]
    Internal(String),
}

pub type SupervisorResult<T> = Result<T, SupervisorError>;

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

impl From<QuotaExceeded> for SupervisorError {
    /// Snapshot bytes keep their own code (`snapshot_quota_exceeded`, 409), as before tenants.
    fn from(q: QuotaExceeded) -> Self {
        match q.quota {
            Quota::SnapshotBytes => SupervisorError::SnapshotQuota(q.to_string()),
            _ => SupervisorError::QuotaExceeded(q),
        }
    }
}

impl From<LimitError> for SupervisorError {
    fn from(e: LimitError) -> Self {
        SupervisorError::InvalidLimit(e)
    }
}

// Every code a failure is known by, on the wire (`{"error": {"code"}}`) and in the audit log.
// Which failure has which code is `server/error.rs`'s table. The doc comment below is the
// OpenAPI schema's description, pinned by the golden wire test.
/// Put on error responses so middleware can see which error it was.
/// Every error code the API (and the audit log) uses; serialised as its snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[derive(serde::Serialize, utoipa::ToSchema, strum::IntoStaticStr, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ErrorCode {
    Internal,
    InvalidBase64,
    InvalidJson,
    InvalidLimit,
    InvalidPath,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    NotReady,
    Overloaded,
    PayloadTooLarge,
    SessionBusy,
    SessionEnded,
    SessionElsewhere,
    SessionMoving,
    SessionLost,
    SessionExpired,
    SessionNotFound,
    ExecutionNotFound,
    TurnNotKept,
    WebhookNotFound,
    VolumeNotFound,
    VolumeExists,
    TemplateNotFound,
    TemplateBuilding,
    TemplateFailed,
    VolumeFull,
    ExecutionBusy,
    ReplayDiverged,
    ShuttingDown,
    TooManySessions,
    QuotaExceeded,
    TooManyMcpSessions,
    WorkerLost,
    Unauthorized,
    Forbidden,
    PolicyDenied,
    PistonError,
    ClientClosedRequest,
    OutputLeak,
    SnapshotNotFound,
    SnapshotInvalid,
    SnapshotIncompatible,
    SnapshotRefused,
    SnapshotQuotaExceeded,
    SnapshotStoreUnavailable,
    PackagesDisabled,
    InvalidPackageSpec,
    TooManyPackages,
    PackageNotAllowed,
    PackageNotFound,
    PackageHasNativeCode,
    PackageHasNoWheel,
    PackageConflictsWithBuiltin,
    PackageConflict,
    PackageTooLarge,
    PackageIndexUnreachable,
    PackageResolutionTimeout,
    PackageInvalid,
    PackageInstallFailed,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;
    use strum::IntoEnumIterator;

    #[test]
    fn every_code_is_named_alike_on_the_wire_and_in_logs() {
        for code in ErrorCode::iter() {
            let wire = serde_json::to_value(code).unwrap();
            assert_eq!(wire.as_str(), Some(code.as_str()), "{code:?}");
        }
        assert_eq!(ErrorCode::InvalidBase64.as_str(), "invalid_base64");
        assert_eq!(
            ErrorCode::SnapshotStoreUnavailable.as_str(),
            "snapshot_store_unavailable"
        );
    }
}
