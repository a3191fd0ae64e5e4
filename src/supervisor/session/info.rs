//! What a session says of itself: its info (`GET /v1/sessions/{id}`) and, once it ended, why.

use std::time::SystemTime;

use serde::Serialize;
use utoipa::ToSchema;

use crate::limits::Limits;
use crate::report::Status;
use crate::sandbox::EndReason;
use crate::supervisor::time::rfc3339;
use crate::template::Template;

/// Why a session ended, as `EndInfo.reason` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndKind {
    /// The code called `exit()` or `quit()`.
    Quit,
    /// The code called `os._exit(n)`.
    Exit,
    /// A limit or trap stopped the instance mid-turn.
    Stopped,
    /// The host lost the interpreter (a panic on its guest thread).
    HostError,
    /// The worker process that held it died.
    WorkerLost,
}

/// A session's state, as `SessionInfo.state` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Takes turns.
    Idle,
    /// A turn or file operation is running.
    Busy,
    /// Takes no more turns.
    Ended,
}

/// Why a session can take no more turns.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EndInfo {
    /// `quit` (the code called `exit()`/`quit()`), `exit` (`os._exit(n)`), `stopped` (a limit
    /// or trap stopped the instance mid-turn), `host_error`.
    #[schema(example = "quit")]
    pub reason: EndKind,
    /// For `exit`: the status passed to `os._exit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// For `stopped`: the result status of the turn that stopped it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    pub message: String,
    pub ended_at: String,
}

impl EndInfo {
    pub fn from_reason(r: &EndReason) -> Self {
        let (reason, exit_code, status, message) = match r {
            EndReason::Quit => (
                EndKind::Quit,
                None,
                None,
                "the code called exit() or quit()".to_string(),
            ),
            EndReason::Exit(n) => (
                EndKind::Exit,
                Some(*n),
                None,
                format!("the code called os._exit({n})"),
            ),
            EndReason::Stopped(s) => (
                EndKind::Stopped,
                None,
                Some(*s),
                format!(
                    "the instance was stopped mid-turn ({}); its state cannot be trusted",
                    s.as_str()
                ),
            ),
        };
        EndInfo {
            reason,
            exit_code,
            status,
            message,
            ended_at: rfc3339(SystemTime::now()),
        }
    }

    /// The worker process that held the interpreter died: `cause` in words.
    pub fn worker_lost(cause: &str) -> Self {
        EndInfo {
            reason: EndKind::WorkerLost,
            exit_code: None,
            status: None,
            message: format!("the worker process that held it was lost ({cause})"),
            ended_at: rfc3339(SystemTime::now()),
        }
    }

    pub fn host_error(message: String) -> Self {
        EndInfo {
            reason: EndKind::HostError,
            exit_code: None,
            status: Some(Status::Trap),
            message,
            ended_at: rfc3339(SystemTime::now()),
        }
    }
}

/// What `GET /v1/sessions/{id}` says.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionInfo {
    pub id: String,
    pub created_at: String,
    /// When it will expire if left idle (or at the end of its lifetime, if sooner).
    pub expires_at: String,
    pub last_used_at: String,
    /// `idle`, `busy` (a turn is running) or `ended`.
    #[schema(example = "idle")]
    pub state: SessionState,
    /// Turns run so far.
    pub turns: u64,
    pub limits: Limits,
    /// The template its interpreter came from.
    pub template: Template,
    /// Set once the session can take no more turns, with the reason.
    pub ended: Option<EndInfo>,
    /// Whether its interpreter is in memory. `false`: it hibernated (idle, or the coldest
    /// when the server needed room) to the snapshot store, and its next turn or file
    /// operation brings it back, with all its state, before it runs.
    pub resident: bool,
    /// The volumes mounted in it (left out when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<crate::volumes::VolumeMount>,
}
