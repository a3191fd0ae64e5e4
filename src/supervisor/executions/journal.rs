//! A suspended execution as data: the program, the rounds of tool calls it made with their
//! answers, and the round it waits on. Bringing it back is a replay: the program runs again
//! from the start with the same randomness, each round it makes answered from here, until it
//! makes the round it waits on. Kept in the snapshot store (any node finds it by the
//! execution's id) as `MAGIC`, the expiry (seconds since the epoch, little-endian), then CBOR
//! (a program's files are bytes there, not JSON's lists of numbers).
//!
//! What the store gives back is hostile data: its size is bounded before it is read, and every
//! field is checked again when the execution is brought back (its limits against the server's
//! maximum, its tools as a request's are).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::leakage::LeakPolicy;
use crate::snapshot::SnapshotId;
use crate::tools::ToolCall;
use crate::vivarium::Program;

/// What a journal's bytes start with.
const MAGIC: &[u8; 8] = b"VIVJRNL1";
/// The largest journal kept or read: a program's files and every answer it got.
pub const MAX_JOURNAL_BYTES: usize = 256 << 20;

/// One round the program made and the answers it got, in the order of its calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// The calls, as they left.
    pub calls: Vec<ToolCall>,
    /// Their answers as the caller sent them (`Answer::to_value`), in the calls' order.
    pub answers: Vec<Value>,
}

/// A suspended execution as data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// The execution's id (`ex-…`).
    pub id: String,
    /// The API key's id that started it (`None`: keys are off); only it may resume it.
    pub owner: Option<String>,
    /// The program as admitted, with its tools and its seed.
    pub program: Program,
    /// The extra packages it asked for (resolved again when it is brought back).
    pub packages: Vec<String>,
    /// Its leakage policy, and the `env` names whose values are not secrets.
    pub leakage: LeakPolicy,
    /// See [`Journal::leakage`].
    pub allow_env: Vec<String>,
    /// The rounds answered, in order.
    pub rounds: Vec<Round>,
    /// The round it waits on (empty while it runs).
    pub pending: Vec<ToolCall>,
    /// The answers to `pending` already given (a resume may answer some of them).
    #[serde(default)]
    pub partial: Vec<Value>,
    /// When it may be forgotten (seconds since the epoch).
    pub expires_at: u64,
}

impl Journal {
    /// Where the store keeps it: derived from the id, so any node finds it.
    pub fn store_id(execution: &str) -> SnapshotId {
        SnapshotId::derived("vivarium-execution", execution)
    }

    /// The calls of the pending round not answered yet (no answer among `partial`).
    pub fn waiting(&self) -> impl Iterator<Item = &ToolCall> {
        self.pending.iter().filter(|c| self.is_waiting(&c.call_id))
    }

    /// Whether call `id` has no answer among `partial`.
    pub fn is_waiting(&self, id: &str) -> bool {
        !self
            .partial
            .iter()
            .any(|v| v.get("call_id").and_then(Value::as_str) == Some(id))
    }

    /// Its bytes in the store.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&self.expires_at.to_le_bytes());
        ciborium::into_writer(self, &mut out).expect("a journal serialises");
        out
    }

    /// A journal from the store's bytes, for execution `id`; `None` when they are not one
    /// (another kind of file, damaged, too large, or another execution's).
    pub fn decode(id: &str, bytes: &[u8]) -> Option<Journal> {
        if bytes.len() > MAX_JOURNAL_BYTES {
            return None;
        }
        let body = bytes.strip_prefix(MAGIC.as_slice())?.get(8..)?;
        let journal: Journal = ciborium::from_reader(body).ok()?;
        (journal.id == id).then_some(journal)
    }

    /// The expiry in the first bytes of a store entry, if it is a journal (the sweep reads
    /// no more of it).
    pub fn expiry(prefix: &[u8]) -> Option<u64> {
        let at = prefix.strip_prefix(MAGIC.as_slice())?.get(..8)?;
        Some(u64::from_le_bytes(at.try_into().ok()?))
    }

    /// How many bytes [`Journal::expiry`] reads.
    pub const PREFIX_BYTES: usize = MAGIC.len() + 8;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ToolLimits, ToolSpec, Toolbox};
    use serde_json::json;

    fn journal() -> Journal {
        let call = |n: u32| ToolCall {
            call_id: format!("call_{n}"),
            name: "search".into(),
            arguments: json!({"q": "x", "n": n}),
        };
        Journal {
            id: "ex-1".into(),
            owner: Some("key-a".into()),
            program: Program {
                code: "print(tools.search(q='x'))".into(),
                stdin: b"in".to_vec(),
                files: vec![crate::vivarium::InputFile {
                    path: "data.bin".into(),
                    content: vec![0u8; 1 << 20],
                }],
                limits: crate::limits::Limits::DEFAULT,
                env: vec![("K".into(), "v".into())],
                template: crate::template::Template::Python,
                rich: true,
                line_buffered: false,
                policy: crate::check::Policy::Off,
                tools: Some(Toolbox {
                    tools: vec![ToolSpec {
                        name: "search".into(),
                        description: String::new(),
                        parameters: json!({"type": "object"}),
                    }],
                    limits: ToolLimits::DEFAULT,
                }),
                seed: Some([7; 32]),
                language: crate::guest::Language::Python,
                network: None,
                volumes: Vec::new(),
                layer: None,
            },
            packages: vec![],
            leakage: LeakPolicy::Redact,
            allow_env: vec![],
            rounds: vec![Round {
                calls: vec![call(1)],
                answers: vec![json!({"call_id": "call_1", "result": [1, "a", null]})],
            }],
            pending: vec![call(2)],
            partial: vec![],
            expires_at: 1_900_000_000,
        }
    }

    #[test]
    fn a_journal_reads_back_as_written_and_nothing_else_does() {
        let j = journal();
        let bytes = j.encode();
        // A megabyte of file is a megabyte and a little, not a list of numbers.
        assert!(bytes.len() < (1 << 20) + 4096, "{}", bytes.len());
        assert_eq!(
            Journal::expiry(&bytes[..Journal::PREFIX_BYTES]),
            Some(1_900_000_000)
        );
        let back = Journal::decode("ex-1", &bytes).unwrap();
        assert_eq!(back.rounds, j.rounds);
        assert_eq!(back.pending, j.pending);
        assert_eq!(back.program.files[0].content.len(), 1 << 20);
        assert_eq!(back.program.seed, Some([7; 32]));
        // Another execution's, cut short, another kind of file: none is a journal.
        assert!(Journal::decode("ex-2", &bytes).is_none());
        assert!(Journal::decode("ex-1", &bytes[..bytes.len() / 2]).is_none());
        assert!(Journal::decode("ex-1", b"SNAPSHOT and the rest").is_none());
        assert!(Journal::expiry(b"VIVJRNL").is_none());
    }
}
