//! A stdout/stderr sink that never fails the guest: it keeps the first `cap` bytes, drops the
//! rest while reporting them as written, and remembers that it did.
//!
//! wasmtime-wasi's `MemoryOutputPipe` answers a full buffer with EIO, which makes Python raise
//! in `print` and fail its final flush; a runaway print loop must instead run on until a real
//! limit (fuel, deadline) stops it, with the output truncated and said to be. A short tail of
//! the stream is kept as well, so a traceback printed after a flood can still be parsed.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

pub use crate::hostcalls::live_output::{LiveOutput, OutputObserver, StreamKind};
use crate::sync::lock;
use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// Bytes kept of the end of a stream past the cap: enough for a traceback.
const TAIL_BYTES: usize = 16 << 10;

/// What a pipe captured during one run or one turn.
#[derive(Debug, Default, Clone)]
pub struct Captured {
    /// The first `cap` bytes.
    pub head: Vec<u8>,
    /// The last bytes written, when some were dropped (else empty).
    pub tail: Vec<u8>,
    /// Everything the guest wrote, kept or not.
    pub total: u64,
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.total > self.head.len() as u64
    }
}

struct Buffer {
    cap: usize,
    captured: Captured,
    tail: std::collections::VecDeque<u8>,
}

/// A cheaply clonable handle; every clone writes to the same buffer.
#[derive(Clone)]
pub struct CappedPipe {
    kind: StreamKind,
    buffer: Arc<Mutex<Buffer>>,
    live: Arc<LiveOutput>,
}

impl CappedPipe {
    pub fn new(kind: StreamKind, cap: usize, live: Arc<LiveOutput>) -> Self {
        CappedPipe {
            kind,
            buffer: Arc::new(Mutex::new(Buffer {
                cap,
                captured: Captured::default(),
                tail: Default::default(),
            })),
            live,
        }
    }

    /// Takes what was captured so far and starts afresh with a new cap (the next turn),
    /// seen live again.
    pub fn take(&self, next_cap: usize) -> Captured {
        self.live.unmute(self.kind);
        let mut b = lock(&self.buffer);
        b.cap = next_cap;
        let mut captured = std::mem::take(&mut b.captured);
        if captured.truncated() {
            captured.tail = b.tail.drain(..).collect();
        }
        b.tail.clear();
        captured
    }

    fn accept(&self, bytes: &[u8]) {
        let kept = {
            let mut b = lock(&self.buffer);
            let room = b.cap.saturating_sub(b.captured.head.len());
            let kept = room.min(bytes.len());
            b.captured.head.extend_from_slice(&bytes[..kept]);
            b.captured.total += bytes.len() as u64;
            // The tail only matters once something is dropped; keep it bounded either way.
            let overflow = &bytes[kept..];
            if !overflow.is_empty() {
                let keep_from = overflow.len().saturating_sub(TAIL_BYTES);
                b.tail.extend(&overflow[keep_from..]);
                let excess = b.tail.len().saturating_sub(TAIL_BYTES);
                b.tail.drain(..excess);
            }
            kept
        };
        if kept > 0 {
            self.live.observe(self.kind, &bytes[..kept]);
        }
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

/// How much the guest may write in one call: large so a big `print` is one host call.
const WRITE_PERMIT: usize = 1 << 20;

#[wasmtime_wasi::async_trait]
impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.accept(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.accept(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_drops_rest_and_says_so() {
        let pipe = CappedPipe::new(StreamKind::Stdout, 4, LiveOutput::new(None));
        pipe.accept(b"abc");
        pipe.accept(b"defgh");
        let c = pipe.take(10);
        assert_eq!(c.head, b"abcd");
        assert_eq!(c.total, 8);
        assert!(c.truncated());
        assert_eq!(c.tail, b"efgh");
        pipe.accept(b"xyz");
        let c = pipe.take(10);
        assert_eq!(c.head, b"xyz");
        assert!(!c.truncated());
    }

    #[test]
    fn a_muted_stream_is_captured_but_not_seen_until_the_next_turn() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let observer: OutputObserver = {
            let seen = seen.clone();
            Arc::new(move |_, b: &[u8]| lock(&seen).extend_from_slice(b))
        };
        let live = LiveOutput::new(Some(observer));
        let out = CappedPipe::new(StreamKind::Stdout, 100, live.clone());
        let err = CappedPipe::new(StreamKind::Stderr, 100, live.clone());
        out.accept(b"a");
        live.mute(StreamKind::Stdout);
        out.accept(b"b");
        err.accept(b"c");
        assert_eq!(out.take(100).head, b"ab");
        out.accept(b"d");
        live.set(None);
        out.accept(b"e");
        assert_eq!(*lock(&seen), b"acd");
    }
}
