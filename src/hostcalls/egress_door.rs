//! A run's network as its store holds it: the grant, who performs its requests, what it
//! waited. The door's request is `egress.rs`.

use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use crate::egress::{EgressRequest, Network};

/// The longest meta line (`{scheme, host, port}`) before a raw request.
pub const MAX_META: usize = 1024;

/// Hands one request to whoever performs it and returns where its answer (a JSON
/// `EgressAnswer`) will come. Called on the guest thread: it must not block.
pub type EgressAsker = Arc<dyn Fn(EgressRequest) -> Receiver<String> + Send + Sync>;

/// A run's network in its store: the grant, who performs requests, what it waited.
pub struct EgressDoor {
    pub(super) network: Network,
    pub(super) ask: EgressAsker,
    pub(super) waited: Duration,
}

impl EgressDoor {
    /// The door for `network`, performed by `ask`.
    pub fn new(network: Network, ask: EgressAsker) -> EgressDoor {
        EgressDoor {
            network,
            ask,
            waited: Duration::ZERO,
        }
    }

    /// The largest door request it takes: the tag, the meta line, `request_bytes`.
    pub fn max_request(&self) -> usize {
        let body = usize::try_from(self.network.limits.request_bytes).unwrap_or(usize::MAX);
        crate::guest::EGRESS_TAG.len() + MAX_META + body.min(64 << 20)
    }
}
