//! Output seen live, as text: the guest's raw chunks made whole UTF-8 characters and, under
//! the `redact` and `deny` leakage policies, passed through the leakage filter a line at a
//! time, before a front door shows them (SSE events, a kernel's `stream` messages). What
//! leaves live is held to the same rules as the final report.

use std::sync::{Arc, Mutex};

use crate::leakage::{Guard, StreamFilter};
use crate::sandbox::output::{OutputObserver, StreamKind};
use crate::sync::lock;

/// Where live text goes. Called on the guest thread: it must not block (hand the text to a
/// channel with `try_send`, or to an unbounded one).
pub type TextSink = Arc<dyn Fn(StreamKind, String) + Send + Sync>;

/// One run's (or one turn's) live text: give [`LiveText::observer`] to the sandbox, and call
/// [`LiveText::finish`] once it ended.
pub struct LiveText {
    carry: Mutex<[Utf8Carry; 2]>,
    filter: Mutex<Option<StreamFilter>>,
    sink: TextSink,
}

impl LiveText {
    /// Text for `sink`, under `guard`'s policy.
    pub fn new(guard: &Arc<Guard>, sink: TextSink) -> Arc<Self> {
        Arc::new(LiveText {
            carry: Mutex::default(),
            filter: Mutex::new(guard.stream_filter()),
            sink,
        })
    }

    /// What the sandbox calls with each chunk the guest writes.
    pub fn observer(self: &Arc<Self>) -> OutputObserver {
        let live = self.clone();
        Arc::new(move |kind: StreamKind, bytes: &[u8]| {
            let text = lock(&live.carry)[kind as usize].push(bytes);
            let text = match lock(&live.filter).as_mut() {
                Some(f) => f.push(kind as usize, &text),
                None => text,
            };
            if !text.is_empty() {
                (live.sink)(kind, text);
            }
        })
    }

    /// Where the text goes.
    pub fn sink(&self) -> &TextSink {
        &self.sink
    }

    /// What the filter still held when the run ended (a last line without its newline),
    /// per stream; to be shown only when the run's result is (under `deny`, a run whose
    /// output leaked is withheld whole).
    pub fn finish(&self) -> Vec<(StreamKind, String)> {
        let mut filter = lock(&self.filter);
        let Some(f) = filter.as_mut() else {
            return Vec::new();
        };
        [StreamKind::Stdout, StreamKind::Stderr]
            .into_iter()
            .map(|k| (k, f.finish(k as usize)))
            .filter(|(_, text)| !text.is_empty())
            .collect()
    }
}

/// Turns raw chunks into text without splitting a UTF-8 sequence across two chunks: an
/// incomplete sequence at a chunk's end waits for the next chunk.
#[derive(Default)]
struct Utf8Carry(Vec<u8>);

impl Utf8Carry {
    fn push(&mut self, bytes: &[u8]) -> String {
        self.0.extend_from_slice(bytes);
        let keep = match std::str::from_utf8(&self.0) {
            Ok(_) => 0,
            Err(e) if e.error_len().is_none() => self.0.len() - e.valid_up_to(),
            Err(_) => 0,
        };
        let rest = self.0.split_off(self.0.len() - keep);
        let text = String::from_utf8_lossy(&self.0).into_owned();
        self.0 = rest;
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_chunks_arrives_whole() {
        let mut c = Utf8Carry::default();
        let e = "é".as_bytes();
        assert_eq!(c.push(&[b'a', e[0]]), "a");
        assert_eq!(c.push(&[e[1], b'b']), "éb");
        // Bytes that can never be UTF-8 are replaced, not held.
        assert_eq!(c.push(&[0xff, b'c']), "\u{fffd}c");
    }
}
