//! The leakage guard where the runner applies it beyond a run's report: a session's file
//! listing (a file's name may be the secret) and the message of every API error (it may
//! echo what a guest wrote or what a caller sent). Reports pass
//! [`crate::leakage::Guard::apply`] where they are made (`mod.rs`), downloads
//! [`crate::leakage::Guard::apply_file`] in `turns.rs` (`read_file_body`).

use super::Runner;
use crate::leakage::{Guard, LeakPolicy};
use crate::report::Leak;
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::worker::{Job, Reply};

/// A session's files as its leakage policy lets them be listed.
pub struct Listing {
    /// `(path, size)` of each file; under `redact`, without those whose path holds a
    /// secret.
    pub files: Vec<(String, u64)>,
    /// What the scan of the paths found (`None` under `off`).
    pub leaks: Option<Vec<Leak>>,
}

impl Runner {
    /// `(path, size)` of every file in session `id`'s working directory, through the
    /// session's leakage policy: each path is scanned; under `redact` a file whose path
    /// (its name or a folder's) holds a secret is left out and reported, under `deny` the
    /// listing is a 422 `output_leak`.
    pub async fn list_files(&self, id: &str, key: Option<&str>) -> SupervisorResult<Listing> {
        let session = self.session(id, key).await?;
        let guard = self.session_guard(&session, session.leakage);
        let mut files = match self
            .use_session(&session, |handle| Job::ListFiles { handle })
            .await?
        {
            Reply::Files(f) => f,
            _ => return Err(super::out_of_turn()),
        };
        let leaks = guard.apply_listing(&mut files);
        match guard.policy() {
            LeakPolicy::Off => Ok(Listing { files, leaks: None }),
            LeakPolicy::Deny if !leaks.is_empty() => Err(SupervisorError::OutputLeak(leaks)),
            _ => Ok(Listing {
                files,
                leaks: Some(leaks),
            }),
        }
    }

    /// `message` (an API error's) with every secret the server's rules find replaced by
    /// `[REDACTED:rule]`, or `None` when it holds none or the server's default policy is
    /// `off`. An error is never withheld (its code still says what failed), whatever the
    /// request's policy: the message alone is rewritten.
    pub fn scrub_error_message(&self, message: &str) -> Option<String> {
        if self.leakage.default == LeakPolicy::Off {
            return None;
        }
        let guard = Guard::new(self.leakage.scanner.clone(), LeakPolicy::Redact, &[], &[]);
        guard.finds_any(message).then(|| guard.redacted(message))
    }
}
