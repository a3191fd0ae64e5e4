//! The limits on a program's tool calls, and the breach of one.

use serde::{Deserialize, Serialize};

/// How many calls a program may make, how large each argument and result may be, and how
/// long it may wait. Waiting burns no fuel and does not count against `timeout_ms`: these
/// bound it instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolLimits {
    /// Tool calls over the whole execution (all turns of a resumed one).
    pub calls: u32,
    /// Bytes of one call's arguments, as JSON.
    pub argument_bytes: u64,
    /// Bytes of one call's result (or error), as JSON.
    pub result_bytes: u64,
    /// How long one round of calls may wait for its answers, in milliseconds.
    pub tool_timeout_ms: u64,
    /// How long the execution may wait for answers in all, in milliseconds.
    pub total_wait_ms: u64,
}

impl ToolLimits {
    /// What a caller gets when it asks for nothing.
    pub const DEFAULT: ToolLimits = ToolLimits {
        calls: 1_000,
        argument_bytes: 256 << 10,
        result_bytes: 1 << 20,
        tool_timeout_ms: 60_000,
        total_wait_ms: 10 * 60_000,
    };

    /// The most a caller may ask for.
    pub const MAXIMUM: ToolLimits = ToolLimits {
        calls: 100_000,
        argument_bytes: 4 << 20,
        result_bytes: 16 << 20,
        tool_timeout_ms: 60 * 60_000,
        total_wait_ms: 24 * 60 * 60_000,
    };
}

impl Default for ToolLimits {
    fn default() -> Self {
        ToolLimits::DEFAULT
    }
}

/// Tool limits as a request gives them: each optional, each checked against
/// [`ToolLimits::MAXIMUM`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolLimitsRequest {
    /// Tool calls over the whole execution (default 1000, at most 100000).
    pub calls: Option<u32>,
    /// Bytes of one call's arguments as JSON (default 256 KiB, at most 4 MiB).
    pub argument_bytes: Option<u64>,
    /// Bytes of one call's result as JSON (default 1 MiB, at most 16 MiB).
    pub result_bytes: Option<u64>,
    /// How long one round of calls may wait for its answers (default 60000 ms, at most 1 h).
    pub tool_timeout_ms: Option<u64>,
    /// How long the execution may wait in all (default 600000 ms, at most 24 h).
    pub total_wait_ms: Option<u64>,
}

impl ToolLimitsRequest {
    /// The limits, or the name of the field above its maximum and that maximum.
    pub fn resolve(&self) -> Result<ToolLimits, (&'static str, u64)> {
        let (d, m) = (ToolLimits::DEFAULT, ToolLimits::MAXIMUM);
        let pick = |asked: Option<u64>, default: u64, max: u64, name: &'static str| match asked {
            Some(v) if v > max => Err((name, max)),
            Some(0) => Err((name, max)),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        Ok(ToolLimits {
            calls: pick(
                self.calls.map(u64::from),
                d.calls.into(),
                m.calls.into(),
                "calls",
            )? as u32,
            argument_bytes: pick(
                self.argument_bytes,
                d.argument_bytes,
                m.argument_bytes,
                "argument_bytes",
            )?,
            result_bytes: pick(
                self.result_bytes,
                d.result_bytes,
                m.result_bytes,
                "result_bytes",
            )?,
            tool_timeout_ms: pick(
                self.tool_timeout_ms,
                d.tool_timeout_ms,
                m.tool_timeout_ms,
                "tool_timeout_ms",
            )?,
            total_wait_ms: pick(
                self.total_wait_ms,
                d.total_wait_ms,
                m.total_wait_ms,
                "total_wait_ms",
            )?,
        })
    }
}

/// Which tool limit stopped a program, with its value: the run's status is `tool_timeout`
/// for the waits and `tool_limit` for the others, and `detail` says this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum ToolBreach {
    /// A round of calls went unanswered for `tool_timeout_ms`.
    #[error("no answer to a tool call within tool_timeout_ms of {0} ms")]
    CallWait(u64),
    /// The waits added up past `total_wait_ms`.
    #[error("the tool calls' waits reached total_wait_ms of {0} ms")]
    TotalWait(u64),
    /// One call more than `calls`.
    #[error("more tool calls than the limit of {0}")]
    Calls(u32),
    /// A call's arguments were larger than `argument_bytes`.
    #[error("a tool call's arguments were larger than argument_bytes of {0}")]
    ArgumentBytes(u64),
    /// One round of calls (their names and arguments together, as JSON) was larger than the
    /// host takes at once, whatever the limits asked for.
    #[error(
        "a round of tool calls was larger than the {0} bytes the host takes at once (names \
         and arguments of the calls made together, as JSON): make fewer calls at once"
    )]
    RoundBytes(u64),
}

impl ToolBreach {
    /// Whether it is a wait (status `tool_timeout`) rather than a count or a size.
    pub fn is_wait(self) -> bool {
        matches!(self, ToolBreach::CallWait(_) | ToolBreach::TotalWait(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_above_its_maximum_or_zero_is_named() {
        let asked = ToolLimitsRequest {
            calls: Some(100_001),
            ..Default::default()
        };
        assert_eq!(asked.resolve(), Err(("calls", 100_000)));
        let zero = ToolLimitsRequest {
            tool_timeout_ms: Some(0),
            ..Default::default()
        };
        assert_eq!(zero.resolve().unwrap_err().0, "tool_timeout_ms");
        assert_eq!(
            ToolLimitsRequest::default().resolve(),
            Ok(ToolLimits::DEFAULT)
        );
    }
}
