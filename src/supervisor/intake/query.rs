//! A door's [`Query`] of a session between turns, made the guest's code
//! (`guest::queries`) with what it does to the session: a notebook's questions and a stat or
//! a listing only look; a file change and a set-up change the session (a later turn's
//! rollback keeps them, and a durable session stores them before the answer).

use super::ask::{FileOp, Query, SetUp};
use crate::guest::queries::{self, QueryEffect};
use crate::supervisor::{Runner, SupervisorResult};

/// Asks session `id` (for its owner `key`) `query`; the guest's answer, unparsed.
pub async fn query(
    runner: &Runner,
    id: &str,
    key: Option<&str>,
    query: Query,
) -> SupervisorResult<Option<String>> {
    let (code, effect) = code_of(query);
    runner.query_session(id, key, code, effect).await
}

fn code_of(query: Query) -> (String, QueryEffect) {
    match query {
        Query::Complete { code, cursor } => (queries::complete(&code, cursor), QueryEffect::Looks),
        Query::Inspect {
            code,
            cursor,
            detail,
        } => (queries::inspect(&code, cursor, detail), QueryEffect::Looks),
        Query::IsComplete { code } => (queries::is_complete(&code), QueryEffect::Looks),
        Query::FileOperation { op, request, home } => {
            let effect = match op {
                FileOp::Stat | FileOp::ListDir => QueryEffect::Looks,
                FileOp::MakeDir | FileOp::Move | FileOp::Remove => QueryEffect::Changes,
            };
            (queries::file_operation(op.name(), &request, &home), effect)
        }
        Query::SetUp(s) => (set_up_code(&s), QueryEffect::Changes),
    }
}

/// The guest's code of a set-up.
fn set_up_code(s: &SetUp) -> String {
    let env = s.env.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    queries::set_up(&s.cwd, &s.home, env)
}
