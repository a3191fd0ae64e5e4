//! A session's kept turns: listing them, rolling the session back to one, and forking one
//! or many sessions from one. The states live in the session's worker, in its rollback
//! checkpoint (`sandbox/kept_turns.rs`); here they are asked for, and the session's turn
//! count follows a rollback.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::Runner;
use super::out_of_turn;
use super::turns::{call_held, failed};
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::metrics::SessionEvent;
use crate::supervisor::session::{PutBack, Session};
use crate::supervisor::time::rfc3339;
use crate::vocabulary::TurnHistory;
use crate::worker::{Job, Reply, Sinks};

/// The most sessions one fork makes.
pub const MAX_FORKS: u32 = 100;

/// One state a session keeps (`GET /v1/sessions/{id}/turns`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KeptTurn {
    /// The turn after which the session was in this state (0: as it was opened).
    pub turn: u64,
    /// When that turn ended (when the session opened or came back, for its first kept
    /// state).
    #[schema(example = "2026-12-07T15:26:16Z")]
    pub at: String,
    /// What keeping it costs beyond the state after it: the pages and files the next turn
    /// changed, as they were (0 for the state the session is in).
    pub bytes: u64,
    /// The first line of the turn's code (at most 120 characters).
    pub code: String,
}

/// The states a session keeps, oldest first; the last is the one it is in.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KeptTurns {
    pub turns: Vec<KeptTurn>,
    /// How many it keeps at most (the one it is in counted), and within how many bytes.
    pub keep_turns: u32,
    pub kept_bytes_max: u64,
}

/// `POST /v1/sessions/{id}/rollback`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// The kept turn to go back to (its state just after it): the next turn is `turn + 1`.
    pub turn: u64,
    /// Keep the state the session is in now as a new session (a branch) instead of
    /// dropping it.
    #[serde(default)]
    pub branch: bool,
}

/// `POST /v1/sessions/{id}/fork`: from which state, how many. The body may be left out
/// (one fork of the state it is in).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    /// A kept turn to fork from (left out: the state it is in).
    #[serde(default)]
    pub turn: Option<u64>,
    /// How many sessions to make (1 to 100); with it, the answer is the list of them.
    #[serde(default)]
    pub count: Option<u32>,
}

impl Runner {
    /// What a session keeps of its turns: as asked (`keep_turns`, 1 to
    /// [`TurnHistory::MAX_TURNS`]), else the server's default; the bytes are the server's.
    pub fn turn_history(&self, keep_turns: Option<u32>) -> SupervisorResult<TurnHistory> {
        let turns = keep_turns.unwrap_or(self.turn_history.turns);
        if !(1..=TurnHistory::MAX_TURNS).contains(&turns) {
            return Err(SupervisorError::InvalidRequest(format!(
                "keep_turns must be from 1 to {}, not {turns}",
                TurnHistory::MAX_TURNS
            )));
        }
        Ok(TurnHistory {
            turns,
            bytes: self.turn_history.bytes,
        })
    }

    /// The states session `id` keeps (for `key`, its owner), oldest first.
    pub async fn kept_turns(&self, id: &str, key: Option<&str>) -> SupervisorResult<KeptTurns> {
        let session = self.session(id, key).await?;
        let reply = self
            .use_session(&session, |handle| Job::Turns {
                handle,
                current: session.turns(),
            })
            .await?;
        let Reply::Turns(states) = reply else {
            return Err(out_of_turn());
        };
        // A worker's list, held to what a session can keep.
        let most = TurnHistory::MAX_TURNS as usize;
        let turns = states
            .into_iter()
            .rev()
            .take(most)
            .rev()
            .map(|s| KeptTurn {
                turn: s.mark.turn,
                at: rfc3339(s.mark.at),
                bytes: s.bytes,
                code: s.mark.code.chars().take(120).collect(),
            })
            .collect();
        Ok(KeptTurns {
            turns,
            keep_turns: session.history.turns,
            kept_bytes_max: session.history.bytes,
        })
    }

    /// Puts session `id` back in its state just after kept turn `turn` (interpreter, files,
    /// the shell's folder and variables); the states after it are dropped, or, with
    /// `branch`, the state it was in goes on as a new session (returned). A durable
    /// session's own snapshot follows.
    pub async fn rollback_session(
        &self,
        id: &str,
        key: Option<&str>,
        ask: RollbackRequest,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Option<Arc<Session>>> {
        let session = self.session(id, key).await?;
        let branch = match ask.branch {
            true => Some(self.fork_one(&session, None, record).await?),
            false => None,
        };
        let rolled = self.roll_back(&session, ask.turn).await;
        match (rolled, branch) {
            (Ok(()), branch) => Ok(branch),
            (Err(e), Some(b)) => {
                let _ = self.close_session(&b.id, key).await;
                Err(e)
            }
            (Err(e), None) => Err(e),
        }
    }

    async fn roll_back(&self, session: &Arc<Session>, turn: u64) -> SupervisorResult<()> {
        let busy = self.begin(session).await?;
        let job = Job::Rollback {
            handle: busy.placed().handle,
            turn,
            current: session.turns(),
            want_image: session.durable,
        };
        let (busy, done) = call_held(busy, job, Sinks::default()).await?;
        let image = match done {
            Ok(Reply::RolledBack(image)) => image,
            Ok(_) => {
                busy.finish(PutBack::Same);
                return Err(out_of_turn());
            }
            Err(f) => return Err(failed(busy, f)),
        };
        busy.finish(PutBack::RolledBackTo { turn });
        self.metrics.session_event(SessionEvent::RollbackToTurn);
        if let Some(image) = image {
            let image = super::capture::checked_image(self, *image)?;
            self.keep_own_snapshot(session, image).await?;
        }
        Ok(())
    }

    /// `count` new live sessions (1 to [`MAX_FORKS`]) with session `id`'s state now or
    /// after its kept turn `turn`, each admitted as a fork is; all or none (a refusal part
    /// way closes the ones made).
    pub async fn fork_sessions(
        &self,
        id: &str,
        key: Option<&str>,
        ask: ForkRequest,
        record: &mut AuditRecord,
    ) -> SupervisorResult<Vec<Arc<Session>>> {
        let count = ask.count.unwrap_or(1);
        if !(1..=MAX_FORKS).contains(&count) {
            return Err(SupervisorError::InvalidRequest(format!(
                "count must be from 1 to {MAX_FORKS}, not {count}"
            )));
        }
        let session = self.session(id, key).await?;
        let mut made = Vec::with_capacity(count as usize);
        for _ in 0..count {
            match self.fork_one(&session, ask.turn, record).await {
                Ok(s) => made.push(s),
                Err(e) => {
                    for s in made {
                        let _ = self.close_session(&s.id, key).await;
                    }
                    return Err(e);
                }
            }
        }
        Ok(made)
    }
}
