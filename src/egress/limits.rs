//! What a run's network may cost: the operator's bounds, the same for every run it grants.

use serde::{Deserialize, Serialize};

/// Sizes, counts and times of a run's outbound requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressLimits {
    /// Requests a run may make (refused ones count too).
    pub requests: u32,
    /// Bytes of one request as the guest wrote it (head and body).
    pub request_bytes: u64,
    /// Bytes of one response's body.
    pub response_bytes: u64,
    /// Milliseconds one request may take, connection and body included.
    pub request_timeout_ms: u64,
    /// Milliseconds all of a run's requests may take together.
    pub total_ms: u64,
}

impl Default for EgressLimits {
    fn default() -> Self {
        EgressLimits {
            requests: 256,
            request_bytes: 8 << 20,
            response_bytes: 16 << 20,
            request_timeout_ms: 10_000,
            total_ms: 60_000,
        }
    }
}
