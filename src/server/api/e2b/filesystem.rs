//! envd's `filesystem.Filesystem` service (Stat, ListDir, MakeDir, Move, Remove), each a
//! query of the sandbox's session (`intake::Query::FileOperation`): the guest's own view of
//! its files (folders, sizes, times), and no file operation the host does itself beyond
//! reading and writing a file (`envd.rs`). A query is not a turn: the session's turn count,
//! its numbering and its audit of the caller's code are untouched; the call is audited as a
//! `file_operation` on the session, its answer read from the host's result channel (not
//! from the guest's output) and bounded. Watching a folder is not served (`unimplemented`).
//!
//! Paths are the guest's: `/home/user/x` is the sandbox's `/home/user/x`, and a relative
//! path is relative to `/home/user`, as envd resolves one.

use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use serde_json::{Value, json};

use super::connect::{Code, ConnectError, Unary};
use super::{DoorState, HOME, SandboxHeader};
use crate::server::bracket::{Bracket, outcome_of};
use crate::server::request_context::Caller;
use crate::supervisor::audit::Action;
use crate::supervisor::intake::{self, FileOp, Query};

/// `POST /filesystem.Filesystem/{method}`.
pub async fn call(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
    Path(method): Path<String>,
    body: Bytes,
) -> Unary {
    let Some(op) = FileOp::named(&method) else {
        return Err(ConnectError::new(
            Code::Unimplemented,
            format!(
                "filesystem.Filesystem/{method} is not served by Vivarium (watching a folder \
                 is not offered; Stat, ListDir, MakeDir, Move and Remove are)"
            ),
        ));
    };
    let request: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ConnectError::new(Code::InvalidArgument, format!("the request message: {e}"))
        })?
    };
    if !request.is_object() {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            "the request message is not an object",
        ));
    }
    let id = sandbox.id().map_err(ConnectError::from)?;
    let mut bracket = Bracket::open(&door.app, &ctx, Action::FileOperation).session(&id);
    let path = request
        .get("path")
        .or_else(|| request.get("source"))
        .and_then(Value::as_str)
        .unwrap_or(HOME);
    bracket.record().path = Some(path.to_string());
    let query = Query::FileOperation {
        op,
        request: request.to_string(),
        home: HOME.to_string(),
    };
    let answered = async {
        let answer = intake::query(&door.app.runner, &id, ctx.key_id.as_deref(), query)
            .await?
            .and_then(|a| serde_json::from_str::<Value>(&a).ok())
            .filter(Value::is_object)
            .ok_or_else(|| {
                ConnectError::new(
                    Code::Internal,
                    format!(
                        "the file operation {} did not finish (the sandbox gave no answer)",
                        op.name()
                    ),
                )
            })?;
        match answer.get("error") {
            Some(e) => Err(ConnectError::new(
                Code::named(e["code"].as_str().unwrap_or("internal")),
                e["message"].as_str().unwrap_or_default(),
            )),
            None => Ok(answer),
        }
    }
    .await;
    bracket.close(outcome_of(&answered, 200));
    answered.map(Json)
}

/// The working-directory path of an envd path (for the host's file reads and writes).
pub fn relative(path: &str) -> Result<String, ConnectError> {
    let bad = |why: String| ConnectError::new(Code::InvalidArgument, why);
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{HOME}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in full.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    if parts.is_empty() {
        return Err(bad(format!("{path:?} names no file")));
    }
    let rel = parts.join("/");
    crate::vocabulary::check_relative_path(&rel).map_err(|e| bad(e.to_string()))?;
    Ok(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_the_guests() {
        assert_eq!(relative("/home/user/a.txt").unwrap(), "home/user/a.txt");
        assert_eq!(relative("a.txt").unwrap(), "home/user/a.txt");
        assert_eq!(relative("sub/../b.txt").unwrap(), "home/user/b.txt");
        assert_eq!(relative("/tmp/x").unwrap(), "tmp/x");
        assert_eq!(relative("/../../etc/passwd").unwrap(), "etc/passwd");
        assert!(relative("/").is_err());
    }
}
