//! A session's kept turns: how many of its last states it keeps to roll back or fork to,
//! within how many bytes, and what a kept turn shows of its code.

use serde::{Deserialize, Serialize};

/// How far back a session can go: the states after its last `turns` turns (the state it is
/// in counted), within `bytes` of what those turns replaced. `turns: 1` keeps only the
/// state it is in (no rollback past it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnHistory {
    /// States kept at most, the one the session is in counted (1 to [`Self::MAX_TURNS`]).
    pub turns: u32,
    /// Bytes the kept states may hold together (what their turns replaced).
    pub bytes: u64,
}

impl TurnHistory {
    /// The most turns a session may keep.
    pub const MAX_TURNS: u32 = 64;
    /// What a session keeps unless it or the server says otherwise.
    pub const DEFAULT: TurnHistory = TurnHistory {
        turns: 16,
        bytes: 64 << 20,
    };
}

impl Default for TurnHistory {
    fn default() -> Self {
        TurnHistory::DEFAULT
    }
}

/// The first line of `code`, at most 120 characters: what a kept turn shows of it.
pub fn first_line(code: &str) -> String {
    let line = code.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.chars().take(120).collect()
}
