//! Network by exception: the data of host-mediated egress. A run granted network sends each
//! HTTP request it makes through the host door as raw HTTP/1.1 (`vivarium_net` in the guest);
//! the host checks it against the run's [`Network`] grant and performs it itself. The guest
//! never holds a socket, never resolves a name and never sees a secret's value.
//!
//! A leaf: it knows nothing of sandboxes or HTTP servers. The pieces, in the order a request
//! meets them:
//! - [`AllowList`]: `host[:port]` patterns (`*.example.com:443`), the
//!   operator's (`--egress-allow`) and a request's narrowing (`network.allow`);
//! - [`Network`]: a run's grant (both lists, the limits), what the worker's door checks;
//! - [`raw`]: the guest's raw request parsed into an [`EgressRequest`], and a response
//!   written back as raw HTTP/1.1;
//! - [`AddressRules`]: which resolved addresses may be connected to (public ones, and the
//!   ranges the operator allows with `--egress-allow-private`);
//! - [`Secrets`]: placeholders the guest sees, the real values the host substitutes for the
//!   secret's hosts only, and masks again in every response;
//! - [`Refusal`]: every way a request is refused, each named.
//!
//! The supervisor performs requests (`supervisor::egress`); `docs/guides/network.md` is the
//! user's side and SECURITY.md the threat model.

mod address;

pub mod encoding;
mod limits;
pub mod mask;
mod message;
pub mod raw;
mod rule;
mod secret;

pub use address::AddressRules;
pub use limits::EgressLimits;
pub use message::{EgressAnswer, EgressRequest, Refusal, Refused, Scheme};
pub use rule::{AllowList, normalize_host, valid_host};
pub use secret::{SecretSource, Secrets, TooLargeWithValues};

use serde::{Deserialize, Serialize};

/// A run's network grant as the worker's door sees it: the operator's allow list, the
/// request's narrowing (a host must match both), and the limits. No secret values: those
/// stay in the supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Network {
    /// The operator's `--egress-allow`.
    pub server: AllowList,
    /// The request's `network.allow`, when it narrowed the operator's.
    pub narrowed: Option<AllowList>,
    /// Sizes, counts and times.
    pub limits: EgressLimits,
}

/// A session's network for its life: the grant and the secrets (their values: kept by the
/// supervisor only).
#[derive(Debug, Clone)]
pub struct Grant {
    /// What its turns may reach.
    pub network: Network,
    /// What its turns' requests may carry.
    pub secrets: Secrets,
}

impl Network {
    /// Whether `host:port` may be asked for at all (its addresses are checked when resolved).
    pub fn permits(&self, host: &str, port: u16) -> bool {
        self.server.permits(host, port)
            && self.narrowed.as_ref().is_none_or(|n| n.permits(host, port))
    }
}
