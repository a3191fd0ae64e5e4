//! The channel between the supervisor and a worker process: one Unix socket pair, frames of a
//! 4-byte big-endian length and a CBOR body (self-describing, with byte strings for bytes).
//!
//! The supervisor reads every frame as hostile: a frame longer than its bound ends the
//! worker, a body that does not parse ends the worker, and a reply is only taken for a job
//! that is waiting for one and only when it is that job's kind of reply (`Reply::answers`).

use std::io::{self, Read, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::jail::JailReport;
use super::job::{Event, Handle, Job, JobError, Reply};
use crate::limits::Limits;
use crate::template::Template;

/// The id of one job on one worker's channel.
pub type JobId = u64;

/// What a worker process is told first: everything it needs to open its runtime.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// Its scratch root goes under here (`<base>/<pid>`).
    pub scratch_base: PathBuf,
    /// The server's maxima (a request never gets more).
    pub maximum: Limits,
    /// Its memory budget for sandboxes.
    pub budget_bytes: u64,
    /// The budget's counter is the page at [`super::child::BUDGET_FD`], shared with the
    /// supervisor and every other worker (else it counts its own).
    pub shared_budget: bool,
    /// Pooled instance slots.
    pub max_instances: u32,
    /// The package cache (read only: the supervisor resolves and unpacks).
    pub package_dir: PathBuf,
    /// The templates to have ready before it says it is.
    pub templates: Vec<Template>,
    /// What the jail around it should hold.
    pub jail: super::jail::JailConfig,
}

/// Supervisor → worker.
#[derive(Debug, Serialize, Deserialize)]
pub enum ToWorker {
    /// The first frame: open the runtime with this, jail, then say [`FromWorker::Ready`].
    Hello(Box<WorkerConfig>),
    /// Do `job`, answering with [`FromWorker::Done`] for `id`.
    Job {
        /// Its id.
        id: JobId,
        /// What to do.
        job: Job,
    },
    /// Stop job `id` (its client went away).
    Cancel {
        /// The job.
        id: JobId,
    },
    /// Stop session `handle`'s running turn.
    Interrupt {
        /// The session.
        handle: Handle,
    },
    /// The line job `id`'s `input()` asked for.
    Answer {
        /// The job.
        id: JobId,
        /// The line.
        line: String,
    },
    /// Cancel every job running and every later one (shutdown).
    CancelAll,
}

/// Worker → supervisor.
#[derive(Debug, Serialize, Deserialize)]
pub enum FromWorker {
    /// The runtime is open and the jail is on: what it got.
    Ready(JailReport),
    /// Job `id` is done.
    Done {
        /// The job.
        id: JobId,
        /// How.
        result: Result<Reply, JobError>,
    },
    /// Job `id` sends this before its reply.
    Event {
        /// The job.
        id: JobId,
        /// What.
        event: Event,
    },
    /// The worker could not start: why (it exits after).
    Failed(String),
    /// After a job and the teardown it deferred: instances in the worker's pool now (a
    /// gauge, nothing more: a lie changes only what `/metrics` shows).
    Stats {
        /// Instances in its engine's pool.
        pooled_instances: u64,
    },
}

/// The longest frame a worker may send: a session image at the server's largest memory and
/// disk, with room for its encoding.
pub fn max_frame_bytes(maximum: &Limits) -> u64 {
    maximum
        .memory_bytes
        .saturating_add(maximum.disk_bytes)
        .saturating_mul(2)
        .saturating_add(64 << 20)
        .min(u32::MAX as u64)
}

/// Writes one frame.
pub fn write_frame<T: Serialize>(w: &mut impl Write, value: &T) -> io::Result<()> {
    let mut body = Vec::with_capacity(256);
    ciborium::into_writer(value, &mut body).map_err(|e| io::Error::other(e.to_string()))?;
    let len = u32::try_from(body.len())
        .map_err(|_| io::Error::other("a frame over 4 GiB"))?
        .to_be_bytes();
    // One write for small frames: a reader never waits on half a header.
    if body.len() < 64 << 10 {
        let mut all = Vec::with_capacity(4 + body.len());
        all.extend_from_slice(&len);
        all.extend_from_slice(&body);
        w.write_all(&all)?;
    } else {
        w.write_all(&len)?;
        w.write_all(&body)?;
    }
    w.flush()
}

/// Reads one frame's body, refusing one longer than `max` bytes; `None` at a clean end.
pub fn read_body(r: &mut impl Read, max: u64) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as u64;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes, over the bound of {max}"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    Ok(Some(body))
}

/// Parses a frame's body.
pub fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> io::Result<T> {
    ciborium::from_reader(body)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_over_its_bound_or_cut_short_is_refused() {
        let mut long = Vec::new();
        write_frame(&mut long, &"x".repeat(100)).unwrap();
        let err = read_body(&mut long.as_slice(), 50).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(read_body(&mut &long[..long.len() - 1], 1 << 20).is_err());
        assert_eq!(read_body(&mut &[][..], 10).unwrap(), None);
        let body = read_body(&mut long.as_slice(), 1 << 20).unwrap().unwrap();
        assert_eq!(parse::<String>(&body).unwrap().len(), 100);
    }

    #[test]
    fn a_body_that_is_not_a_message_is_refused() {
        for junk in [
            &b""[..],
            b"\xff\xff\xff",
            b"\x9f\x9f\x9f\x9f\x9f\x9f\x9f\x9f",
        ] {
            assert!(parse::<FromWorker>(junk).is_err());
        }
        // Deeply nested arrays stop at the parser's recursion limit, not the stack.
        let deep = vec![0x81u8; 100_000];
        assert!(parse::<FromWorker>(&deep).is_err());
    }
}
