//! Leakage control for output streamed while the code runs (server-sent events).
//!
//! A secret may reach the host in two writes (`print(tok[:10], end="")`, then the rest), so
//! a chunk cannot be scanned alone. The filter holds back the last, incomplete line of each
//! stream and lets text out a line at a time, scanned; a PEM block that has begun and not
//! ended is held whole. What is still held when the run ends leaves with [`StreamFilter::finish`].
//! Under `deny`, the first finding stops the stream: nothing after it leaves.

use std::sync::Arc;

use super::{Guard, LeakPolicy};

/// A line longer than this is let out in pieces, cut at whitespace where there is some.
const MAX_HOLD_BYTES: usize = 64 << 10;
/// What stays held of such a line, so that a secret across the cut is scanned whole.
const TAIL_BYTES: usize = 4 << 10;

/// Per-stream held text, over one request's [`Guard`].
pub struct StreamFilter {
    guard: Arc<Guard>,
    held: [String; 2],
    tripped: bool,
}

impl StreamFilter {
    pub(super) fn new(guard: Arc<Guard>) -> Self {
        StreamFilter {
            guard,
            held: [String::new(), String::new()],
            tripped: false,
        }
    }

    /// `text` written to stream `stream` (0 stdout, 1 stderr): returns what may leave now,
    /// redacted (empty while a line is incomplete, or after a `deny` finding).
    pub fn push(&mut self, stream: usize, text: &str) -> String {
        if self.tripped {
            return String::new();
        }
        let held = &mut self.held[stream];
        held.push_str(text);
        let cut = cut_point(held);
        if cut == 0 {
            return String::new();
        }
        let rest = held.split_off(cut);
        let ready = std::mem::replace(held, rest);
        self.release(&ready)
    }

    /// The end of the run: whatever stream `stream` still holds, redacted.
    pub fn finish(&mut self, stream: usize) -> String {
        if self.tripped {
            return String::new();
        }
        let ready = std::mem::take(&mut self.held[stream]);
        self.release(&ready)
    }

    /// Whether a `deny` finding has stopped the stream.
    #[cfg(test)]
    pub fn tripped(&self) -> bool {
        self.tripped
    }

    fn release(&mut self, ready: &str) -> String {
        if ready.is_empty() {
            return String::new();
        }
        match self.guard.policy() {
            LeakPolicy::Deny => {
                if self.guard.finds_any(ready) {
                    self.tripped = true;
                    String::new()
                } else {
                    ready.to_string()
                }
            }
            LeakPolicy::Redact => self.guard.redacted(ready),
            LeakPolicy::Off | LeakPolicy::Report => ready.to_string(),
        }
    }
}

/// Where `held` may be cut: after its last newline, but before an open PEM block; inside a
/// line longer than [`MAX_HOLD_BYTES`], at whitespace before its last [`TAIL_BYTES`].
fn cut_point(held: &str) -> usize {
    let mut cut = held.rfind('\n').map_or(0, |i| i + 1);
    if let Some(begin) = open_pem_block(held)
        && held.len() - begin <= MAX_HOLD_BYTES
    {
        cut = cut.min(begin);
    }
    if held.len() - cut > MAX_HOLD_BYTES {
        let mut limit = held.len() - TAIL_BYTES;
        while !held.is_char_boundary(limit) {
            limit -= 1;
        }
        cut = held[..limit]
            .rfind(|c: char| c.is_ascii_whitespace())
            .map_or(limit, |i| i + 1)
            .max(cut);
    }
    cut
}

/// The start of the last `-----BEGIN` whose block has not ended (fewer than the four runs of
/// five dashes a whole block has: BEGIN, its close, END, its close).
fn open_pem_block(held: &str) -> Option<usize> {
    let lower = held.to_ascii_lowercase();
    let begin = lower.rfind("-----begin")?;
    (lower[begin..].matches("-----").count() < 4).then_some(begin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leakage::Scanner;

    fn filter(policy: LeakPolicy) -> StreamFilter {
        let g = Guard::new(Arc::new(Scanner::new(None).unwrap()), policy, &[], &[]);
        StreamFilter::new(Arc::new(g))
    }

    const GH: &str = "ghp_R2d4kPq8ZtW1xY7bN3mC5vL9sA0fH6jE2uTo";

    #[test]
    fn a_secret_split_across_writes_is_redacted() {
        let mut f = filter(LeakPolicy::Redact);
        assert_eq!(f.push(0, "ok\ntoken: "), "ok\n");
        assert_eq!(f.push(0, &GH[..12]), "");
        assert_eq!(f.push(0, &GH[12..]), "");
        assert_eq!(f.push(0, "\nnext"), "token: [REDACTED:github-pat]\n");
        assert_eq!(f.finish(0), "next");
    }

    #[test]
    fn an_open_pem_block_is_held_until_it_ends() {
        let mut f = filter(LeakPolicy::Redact);
        let body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n";
        assert_eq!(f.push(0, "-----BEGIN PRIVATE KEY-----\n"), "");
        assert_eq!(f.push(0, body), "");
        let out = f.push(0, "-----END PRIVATE KEY-----\n");
        assert_eq!(out, "[REDACTED:private-key]\n");
    }

    #[test]
    fn deny_stops_the_stream_at_the_first_finding() {
        let mut f = filter(LeakPolicy::Deny);
        assert_eq!(f.push(1, "fine\n"), "fine\n");
        assert_eq!(f.push(1, &format!("{GH}\n")), "");
        assert!(f.tripped());
        assert_eq!(f.push(1, "more\n"), "");
        assert_eq!(f.finish(1), "");
    }

    #[test]
    fn a_long_line_is_let_out_at_whitespace_keeping_a_tail() {
        let line = "word ".repeat(20_000);
        assert!(line.len() > MAX_HOLD_BYTES);
        let cut = cut_point(&line);
        assert!(cut > 0 && line.len() - cut >= TAIL_BYTES);
        assert_eq!(&line[cut - 1..cut], " ");
    }
}
