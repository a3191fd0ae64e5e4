//! A sandbox's network: E2B's settings (`allow_internet_access`, `network`) as Vivarium's
//! narrowing of the operator's `--egress-allow`, and the same grant for every session the
//! sandbox opens (its code contexts).
//!
//! E2B's sandboxes reach the internet unless told not to; here the operator's allow list is
//! all a sandbox may reach. `allow_internet_access: false`, or `network.denyOut` holding all
//! traffic, is none of it; `network.allowOut` then names what is still reached (E2B: allowed
//! addresses take precedence over blocked ones), each a `host[:port]` rule that must also be
//! in the operator's list. Other `denyOut` entries are refused rather than ignored: a deny
//! list has no counterpart here. `allowPublicTraffic` and `maskRequestHost` are about
//! traffic into a sandbox's ports, which Vivarium does not serve: nothing to do.
//!
//! A sandbox's grant is its session's (forks, pauses and restarts keep a session's); a
//! context is opened with its sandbox session's grant, read from the session itself, so it
//! holds however the sandbox came to be (created here, restored, opened through `/v1`).

use serde::Deserialize;

use crate::egress::AllowList;
use crate::server::api::types::NetworkRequest;
use crate::supervisor::session::Session;

/// E2B's `denyOut` entry for all traffic (the SDKs' `ALL_TRAFFIC`).
const ALL_TRAFFIC: &str = "0.0.0.0/0";

/// E2B's `network` of a new sandbox.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct E2bNetwork {
    #[serde(default)]
    allow_out: Option<Vec<String>>,
    #[serde(default)]
    deny_out: Option<Vec<String>>,
    /// Inbound: nothing to do (no sandbox port is served).
    #[serde(default)]
    #[allow(dead_code)]
    allow_public_traffic: Option<bool>,
    /// Inbound: nothing to do.
    #[serde(default)]
    #[allow(dead_code)]
    mask_request_host: Option<String>,
}

/// Why a sandbox's `network` is refused (a 400 naming the field).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error(
        "network.denyOut {0:?}: only {ALL_TRAFFIC} (all traffic) is offered: a sandbox reaches \
         only what the operator's --egress-allow names; deny all and name what it may still \
         reach in allowOut"
    )]
    DenyList(String),
    #[error(
        "network.allowOut: {0} (host[:port] rules or IP addresses; CIDR ranges are not offered)"
    )]
    AllowRule(String),
}

/// The narrowing a new sandbox asks for: `None` is the operator's list as it is.
pub fn requested(
    allow_internet_access: Option<bool>,
    network: Option<E2bNetwork>,
) -> Result<Option<NetworkRequest>, Refused> {
    let network = network.unwrap_or_default();
    let deny = network.deny_out.unwrap_or_default();
    if let Some(other) = deny.iter().find(|d| d.trim() != ALL_TRAFFIC) {
        return Err(Refused::DenyList(other.clone()));
    }
    let allow = network.allow_out.unwrap_or_default();
    AllowList::parse(&allow).map_err(|e| Refused::AllowRule(e.to_string()))?;
    let denied = allow_internet_access == Some(false) || !deny.is_empty();
    // Without a denial, allowOut widens nothing (E2B's default is every address).
    Ok(denied.then_some(NetworkRequest { allow }))
}

/// The narrowing that gives a new session `sandbox`'s grant: none (no network), the
/// operator's list as it is, or its rules.
pub fn of_session(sandbox: &Session) -> Option<NetworkRequest> {
    match &sandbox.network {
        None => Some(NetworkRequest { allow: Vec::new() }),
        Some(grant) => grant.network.narrowed.as_ref().map(|n| NetworkRequest {
            allow: n.rules().iter().map(ToString::to_string).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(v: serde_json::Value) -> Option<E2bNetwork> {
        Some(serde_json::from_value(v).unwrap())
    }

    fn allow(r: Result<Option<NetworkRequest>, Refused>) -> Option<Vec<String>> {
        r.ok().unwrap().map(|n| n.allow)
    }

    #[test]
    fn e2b_settings_narrow_the_operators_list() {
        assert_eq!(allow(requested(None, None)), None);
        assert_eq!(allow(requested(Some(true), None)), None);
        assert_eq!(allow(requested(Some(false), None)), Some(vec![]));
        let all = net(serde_json::json!({"denyOut": ["0.0.0.0/0"]}));
        assert_eq!(allow(requested(None, all)), Some(vec![]));
        let some = net(serde_json::json!({"denyOut": ["0.0.0.0/0"], "allowOut": ["api.test"]}));
        assert_eq!(allow(requested(None, some)), Some(vec!["api.test".into()]));
        let off = net(serde_json::json!({"allowOut": ["api.test"]}));
        assert_eq!(
            allow(requested(Some(false), off)),
            Some(vec!["api.test".into()])
        );
        // allowOut without a denial leaves the operator's list as it is.
        let only = net(serde_json::json!({"allowOut": ["api.test"], "allowPublicTraffic": false}));
        assert_eq!(allow(requested(None, only)), None);
    }

    #[test]
    fn what_has_no_counterpart_is_refused() {
        let partial = net(serde_json::json!({"denyOut": ["10.0.0.0/8"]}));
        assert!(requested(None, partial).is_err());
        let cidr = net(serde_json::json!({"denyOut": ["0.0.0.0/0"], "allowOut": ["1.1.1.0/24"]}));
        assert!(requested(None, cidr).is_err());
        assert!(serde_json::from_value::<E2bNetwork>(serde_json::json!({"nope": 1})).is_err());
    }
}
