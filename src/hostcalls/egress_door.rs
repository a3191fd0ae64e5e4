//! A run's network as its store holds it: the grant and who performs its requests. The
//! door's request is `egress.rs`.

use std::sync::Arc;
use std::sync::mpsc::Receiver;

use crate::egress::{EgressRequest, Network};

/// The longest meta line (`{scheme, host, port}`) before a raw request.
pub const MAX_META: usize = 1024;

/// Hands one request to whoever performs it and returns where its answer (a JSON
/// `EgressAnswer`) will come. Called on the guest thread: it must not block.
pub type EgressAsker = Arc<dyn Fn(EgressRequest) -> Receiver<String> + Send + Sync>;

/// A run's network in its store: the grant and who performs requests (the times are the
/// supervisor's to count).
pub struct EgressDoor {
    pub(super) network: Network,
    pub(super) ask: EgressAsker,
}

impl EgressDoor {
    /// The door for `network`, performed by `ask`.
    pub fn new(network: Network, ask: EgressAsker) -> EgressDoor {
        EgressDoor { network, ask }
    }

    /// The largest door request it takes: the tag, the meta line, `request_bytes`.
    pub fn max_request(&self) -> usize {
        let body = usize::try_from(self.network.limits.request_bytes).unwrap_or(usize::MAX);
        crate::guest::EGRESS_TAG.len() + MAX_META + body.min(64 << 20)
    }
}
