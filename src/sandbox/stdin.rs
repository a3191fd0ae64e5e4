//! The guest's stdin: the caller's bytes, refillable between session turns.
//!
//! wasmtime-wasi's `MemoryInputPipe` is fixed at creation; a session needs each turn's
//! `stdin` to replace what the last turn left unread.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::sync::lock;
use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdinStream};
use wasmtime_wasi::p2::{InputStream, Pollable, StreamError};

#[derive(Clone, Default)]
pub struct GuestStdin {
    buffer: Arc<Mutex<Bytes>>,
}

impl GuestStdin {
    pub fn new(bytes: Vec<u8>) -> Self {
        GuestStdin {
            buffer: Arc::new(Mutex::new(Bytes::from(bytes))),
        }
    }

    /// Replaces whatever is unread with `bytes`.
    pub fn refill(&self, bytes: Vec<u8>) {
        *lock(&self.buffer) = Bytes::from(bytes);
    }

    fn take(&self, max: usize) -> Bytes {
        let mut b = lock(&self.buffer);
        let n = max.min(b.len());
        b.split_to(n)
    }
}

impl IsTerminal for GuestStdin {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdinStream for GuestStdin {
    fn p2_stream(&self) -> Box<dyn InputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncRead + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl InputStream for GuestStdin {
    fn read(&mut self, size: usize) -> Result<Bytes, StreamError> {
        let bytes = self.take(size);
        if bytes.is_empty() && size > 0 {
            return Err(StreamError::Closed);
        }
        Ok(bytes)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestStdin {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncRead for GuestStdin {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let bytes = self.take(buf.remaining());
        buf.put_slice(&bytes);
        Poll::Ready(Ok(()))
    }
}
