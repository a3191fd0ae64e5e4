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
        /// The session's count of interrupts with this one (see `TurnJob::interrupts_seen`).
        generation: u64,
    },
    /// The line job `id`'s `input()` asked for, or the answers to its round of tool calls.
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

/// Writes one frame. Its body is serialized twice: once into nothing, to learn its length
/// (bytes cost nothing to count), then into `w` through a small buffer, so a large frame (a
/// session image) is never built whole in memory: fresh megabytes cost a page fault per 4 KiB
/// to fill, more than the serializing.
pub fn write_frame<T: Serialize>(w: &mut impl Write, value: &T) -> io::Result<()> {
    let mut counted = Counter(0);
    ciborium::into_writer(value, &mut counted).map_err(|e| io::Error::other(e.to_string()))?;
    let len = u32::try_from(counted.0)
        .map_err(|_| io::Error::other("a frame over 4 GiB"))?
        .to_be_bytes();
    // A small frame leaves in one write (the buffer holds it whole): a reader never waits on
    // half a header.
    let mut out = io::BufWriter::with_capacity(64 << 10, w);
    out.write_all(&len)?;
    ciborium::into_writer(value, &mut out).map_err(|e| io::Error::other(e.to_string()))?;
    out.flush()
}

/// Counts what is written to it.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The length of the next frame, refusing one longer than `max` bytes; `None` at a clean end.
fn read_len(r: &mut impl Read, max: u64) -> io::Result<Option<u64>> {
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
    Ok(Some(len))
}

/// Reads one frame's body, refusing one longer than `max` bytes; `None` at a clean end.
pub fn read_body(r: &mut impl Read, max: u64) -> io::Result<Option<Vec<u8>>> {
    let Some(len) = read_len(r, max)? else {
        return Ok(None);
    };
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    Ok(Some(body))
}

/// Reads and parses one frame straight from `r` (no buffer of the whole body), refusing one
/// longer than `max` bytes, or whose message ends before or after its length says; `None` at
/// a clean end.
pub fn read_message<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
    max: u64,
) -> io::Result<Option<T>> {
    let Some(len) = read_len(r, max)? else {
        return Ok(None);
    };
    let mut body = r.take(len);
    let msg = ciborium::from_reader(&mut body)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    if body.limit() != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a frame longer than its message",
        ));
    }
    Ok(Some(msg))
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
        // Read straight from the stream: the same bounds, and the length must be the message's.
        let err = read_message::<String>(&mut long.as_slice(), 50).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(read_message::<String>(&mut &long[..long.len() - 1], 1 << 20).is_err());
        assert_eq!(read_message::<String>(&mut &[][..], 10).unwrap(), None);
        let mut two = long.clone();
        write_frame(&mut two, &7u32).unwrap();
        let mut stream = two.as_slice();
        assert_eq!(
            read_message::<String>(&mut stream, 1 << 20)
                .unwrap()
                .unwrap()
                .len(),
            100
        );
        assert_eq!(read_message::<u32>(&mut stream, 1 << 20).unwrap(), Some(7));
        let mut padded = long.clone();
        padded[3] += 1;
        padded.push(0);
        let err = read_message::<String>(&mut padded.as_slice(), 1 << 20).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_large_frame_is_written_as_it_is_read() {
        let image = vec![0xabu8; 3 << 20];
        let mut frame = Vec::new();
        write_frame(&mut frame, &serde_bytes::ByteBuf::from(image.clone())).unwrap();
        let body = read_body(&mut frame.as_slice(), 4 << 20).unwrap().unwrap();
        assert_eq!(body.len() + 4, frame.len());
        let back: serde_bytes::ByteBuf = read_message(&mut frame.as_slice(), 4 << 20)
            .unwrap()
            .unwrap();
        assert_eq!(back.into_vec(), image);
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
