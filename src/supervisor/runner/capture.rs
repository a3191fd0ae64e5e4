//! Capturing a session: its image read from its worker and held to this server's bounds,
//! and the record its own snapshot carries. What is done with images is in the files beside
//! this one: the caller's snapshots and forks (`user_snapshots.rs`), a session's own snapshot
//! (`durability.rs`), bringing one back (`wake.rs`), and hibernation (`residency.rs`).
//!
//! Capturing holds the session busy (409 while a turn runs) while its worker captures it;
//! encoding and decoding (hashing, zstd) run on a blocking thread, never on the executor.

use super::Runner;
use super::turns::{call_held, failed};
use super::{failure, out_of_turn};
use crate::snapshot::{Binding, Provenance, SessionImage, SessionRecord, encode};
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::session::{Busy, Session};
use crate::supervisor::time::now_secs;
use crate::template::Template;
use crate::vivarium::Vivarium;
use crate::worker::{Failure, Job, Reply, Sinks};

/// `image` in the snapshot file format, made now by `owner` after `turns` turns (and, for
/// a session's own snapshot, of `session`), encoded on a blocking thread: encoding hashes and
/// compresses the whole image.
pub(super) async fn encode_now(
    image: SessionImage,
    binding: Binding,
    owner: Option<String>,
    turns: u64,
    session: Option<SessionRecord>,
) -> SupervisorResult<Vec<u8>> {
    let provenance = Provenance {
        binding,
        created_at: now_secs(),
        owner,
        turns,
        session,
    };
    tokio::task::spawn_blocking(move || encode(&image, &provenance))
        .await
        .map_err(|e| SupervisorError::Internal(e.to_string()))
}

pub(super) fn binding(host: &Vivarium, template: Template) -> SupervisorResult<Binding> {
    host.binding(template)
        .map_err(|e| SupervisorError::Internal(e.to_string()))
}

/// Reads the state of the session `busy` holds, in its worker; the use comes back with the
/// image, or with why there is none (a worker lost meanwhile has ended the session, and the
/// use with it).
pub(super) async fn capture(
    runner: &Runner,
    busy: Busy,
) -> SupervisorResult<(Busy, SupervisorResult<SessionImage>)> {
    let job = Job::Capture {
        handle: busy.placed().handle,
    };
    let (busy, done) = call_held(busy, job, Sinks::default()).await?;
    match done {
        Ok(Reply::Image(image)) => Ok((busy, checked_image(runner, *image))),
        Ok(_) => Ok((busy, Err(out_of_turn()))),
        Err(f @ Failure::Lost) => Err(failed(busy, f)),
        Err(f) => {
            let error = failure(f, &busy.session().id);
            Ok((busy, Err(error)))
        }
    }
}

/// An image a worker sent, held to this server's bounds before anything uses it (a worker
/// is as hostile as its guest once compromised).
pub(super) fn checked_image(
    runner: &Runner,
    image: SessionImage,
) -> SupervisorResult<SessionImage> {
    let max = runner.maximum;
    let pages_ok = image.page_data.len() == image.pages.len() * crate::snapshot::PAGE_BYTES
        && image.pages.windows(2).all(|w| w[0] < w[1])
        && image.pages.last().is_none_or(|p| {
            (*p as u64 + 1) * crate::snapshot::PAGE_BYTES as u64 <= image.memory_bytes
        });
    if !pages_ok
        || image.memory_bytes > crate::limits::linear_memory_bound(max.memory_bytes)
        || image.file_bytes() > max.disk_bytes
    {
        return Err(SupervisorError::Internal(
            "a worker sent a session image out of bounds".into(),
        ));
    }
    Ok(image)
}

/// The record a session's own snapshot carries.
pub(super) fn record_of(session: &Session) -> SessionRecord {
    SessionRecord {
        id: session.id.clone(),
        durable: session.durable,
        leakage: session.leakage.as_str().to_string(),
        age_secs: session.age().as_secs(),
        idle_secs: session.idle_for().as_secs(),
        labels: session.labels(),
        deadline_at: session
            .deadline_in()
            .map(|left| crate::supervisor::time::now_secs().saturating_add(left.as_secs())),
    }
}

/// What an interpreter restored from `image` starts with: its linear memory and its files
/// (memory too, on tmpfs).
pub(super) fn starting_bytes(image: &SessionImage) -> u64 {
    let files: u64 = image.files.iter().map(|(_, c)| c.len() as u64).sum();
    image.memory_bytes.saturating_add(files)
}
