//! Where a request becomes a run. A door parses its wire body into an ask ([`ask`]: the
//! `/v1` bodies themselves) with no state and no readiness, and calls one entry here;
//! readiness, limits and the template, files, packages, the leakage policy and guard, tools,
//! network and secrets are worked out here, once, for every door alike. The door renders
//! the answer; a [`SupervisorError`](super::SupervisorError) it maps at its edge.

mod ask;
mod code_mode;
mod execute;
mod plain;
mod query;
mod resolve;
mod session;
pub mod template;
mod unclaimed;

pub use ask::{
    ExecuteRequest, FileIn, FileOp, NetworkRequest, OpenSessionRequest, OpeningExtras, Query,
    SetUp, TurnRequest, VolumeMountRequest,
};
pub use code_mode::{
    Closer, Found, Next, begin_streamed, next_stop, resident_or_replayed, start_execution,
    start_turn,
};
pub use execute::{Prepared, execute, prepare};
pub use plain::{PlainAsk, plain};
pub use query::query;
pub use resolve::packages_to_install;
pub use session::{open, open_with, run_turn_ask, turn, turn_as, turn_of};
pub use unclaimed::Unclaimed;
