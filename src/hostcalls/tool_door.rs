//! A run's tools as its store holds them (code mode): the schemas compiled, the limits, who
//! answers, and what the run has used so far. The door's round is `tools.rs`.

use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use crate::tools::{ToolCall, ToolLimits, Toolbox, ToolboxError, Validators};

/// The largest round a guest may send, whatever its limits (its calls' arguments and names).
pub const MAX_ROUND_BYTES: usize = 16 << 20;

/// Hands a round of calls to whoever answers them and returns where the answers will come (a
/// JSON list of answers, any order). Called on the guest thread: it must not block.
pub type ToolAsker = Arc<dyn Fn(Vec<ToolCall>) -> Receiver<String> + Send + Sync>;

/// A run's tools in its store: the schemas compiled, the limits, and what the run has used.
pub struct ToolDoor {
    pub(super) validators: Validators,
    pub(super) limits: ToolLimits,
    pub(super) ask: ToolAsker,
    pub(super) calls: u32,
    pub(super) waited: Duration,
}

impl ToolDoor {
    /// The door for `toolbox`'s tools, answered by `ask`.
    pub fn new(toolbox: &Toolbox, ask: ToolAsker) -> Result<ToolDoor, ToolboxError> {
        Ok(ToolDoor {
            validators: toolbox.compile()?,
            limits: toolbox.limits,
            ask,
            calls: 0,
            waited: Duration::ZERO,
        })
    }
}
