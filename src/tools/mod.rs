//! Code mode's data: the tools a caller offers a program ([`Toolbox`]), the calls the program
//! makes ([`ToolCall`]) and the answers it gets ([`Answer`]), the limits on them
//! ([`ToolLimits`]) and the breach of one ([`ToolBreach`]).
//!
//! A leaf: it knows nothing of sandboxes or HTTP. The door (`hostcalls::tools`) checks a
//! guest's calls against a [`Toolbox`] before they leave; the supervisor carries them to the
//! caller and carries the answers back, bounded by [`ToolLimits`]. `docs/guides/code-mode.md` is the
//! user's side.

mod call;
mod limits;
mod spec;

pub use call::{Answer, AnswerError, Answered, ToolCall};
pub use limits::{ToolBreach, ToolLimits, ToolLimitsRequest};
pub use spec::{ToolSpec, Toolbox, ToolboxError, Validators, python_name};
