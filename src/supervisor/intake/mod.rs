//! Where a request becomes a run. A door parses its wire body into an ask ([`ask`]: the
//! `/v1` bodies themselves) with no state and no readiness, and calls one entry here;
//! readiness, limits and the template, files, packages, the leakage policy and guard, tools,
//! network and secrets are worked out here, once, for every door alike. The door renders
//! the answer; a [`SupervisorError`](super::SupervisorError) it maps at its edge.

mod ask;
mod execute;
mod resolve;

pub use ask::{ExecuteRequest, FileIn, NetworkRequest, SecretRequest};
pub use execute::{Prepared, execute, prepare};
pub use resolve::{decode_files, files_within, network_of, no_tools_in_shell, toolbox};
