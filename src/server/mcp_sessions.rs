//! How many MCP sessions (the streamable HTTP transport's, one per `initialize`) the server
//! keeps, against two caps: each tenant's `mcp_sessions` quota (`--max-mcp-sessions-per-tenant`,
//! or the keys file's `tenant NAME mcp_sessions=N`) and the server's total
//! (`--max-mcp-sessions`). An `initialize` past either is refused with 429 (`quota_exceeded`
//! naming `mcp_sessions`, or `too_many_mcp_sessions`), never by ending a session: a caller can
//! neither push another tenant's sessions out nor, by flooding, silently end its own that an
//! agent is still using. Sessions leave the count when they are closed (`DELETE /mcp`) or
//! sit idle for `--mcp-session-idle-secs` (rmcp's keep-alive, set from the same limits).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::error::ApiError;
use crate::supervisor::SupervisorError;
use crate::supervisor::tenants::{Held, Quota, Tenant};
use crate::sync::lock;

/// The server's cap and the idle expiry, from `--max-mcp-sessions` and
/// `--mcp-session-idle-secs` (each tenant's own cap is its `mcp_sessions` quota).
#[derive(Debug, Clone, Copy)]
pub struct McpSessionLimits {
    /// MCP sessions the server keeps at most, every tenant together.
    pub max_total: usize,
    /// A session with no request for this long is ended.
    pub idle: Duration,
}

/// The sessions kept; cheap to clone (one shared count).
#[derive(Clone)]
pub struct McpSessions {
    limits: McpSessionLimits,
    kept: Arc<Mutex<Kept>>,
}

#[derive(Default)]
struct Kept {
    /// Sessions counted, reserved ones included.
    total: usize,
    /// Each session made: its tenant's place (given back when dropped).
    by_id: HashMap<Arc<str>, Held>,
    /// Each tenant's sessions with when each was last used: which expires first.
    last_used: HashMap<String, HashMap<Arc<str>, Instant>>,
}

/// One session's place, taken before the session is made: bound to its id once made, given
/// back (to the tenant and the server) when dropped unbound.
pub struct Reservation {
    sessions: McpSessions,
    held: Option<Held>,
}

impl McpSessions {
    pub fn new(limits: McpSessionLimits) -> McpSessions {
        McpSessions {
            limits,
            kept: Arc::new(Mutex::new(Kept::default())),
        }
    }

    /// A place for one more session of `tenant`, or the 429 that refuses it with the seconds
    /// until a place should free (`Retry-After`).
    pub fn reserve(&self, tenant: &Arc<Tenant>) -> Result<Reservation, (ApiError, u64)> {
        let mut kept = lock(&self.kept);
        let held = match tenant.take(Quota::McpSessions, 1) {
            Ok(held) => held,
            Err(e) => {
                // The tenant's least recently used session is the first to expire.
                let now = Instant::now();
                let oldest = kept
                    .last_used
                    .get(tenant.id())
                    .and_then(|m| m.values().min().copied())
                    .map_or(Duration::ZERO, |t| now.duration_since(t));
                let wait = self.limits.idle.saturating_sub(oldest).as_secs().max(1);
                return Err((ApiError::from(SupervisorError::from(e)), wait));
            }
        };
        if kept.total >= self.limits.max_total {
            return Err((
                ApiError::TooManyMcpSessions(format!(
                    "the server keeps {} MCP sessions, its most (--max-mcp-sessions {}); retry \
                     later",
                    kept.total, self.limits.max_total
                )),
                5,
            ));
        }
        kept.total += 1;
        Ok(Reservation {
            sessions: self.clone(),
            held: Some(held),
        })
    }

    /// Session `id` was used (a request, a stream): its tenant's oldest may be another now.
    pub fn touch(&self, id: &str) {
        let mut kept = lock(&self.kept);
        let Some(tenant) = kept.by_id.get(id).map(|h| h.tenant().id().to_string()) else {
            return;
        };
        if let Some(t) = kept.last_used.get_mut(&tenant).and_then(|m| m.get_mut(id)) {
            *t = Instant::now();
        }
    }

    /// Session `id` ended (closed, or idle too long): its place is free. Twice is once.
    pub fn release(&self, id: &str) {
        let mut kept = lock(&self.kept);
        let Some(held) = kept.by_id.remove(id) else {
            return;
        };
        kept.total -= 1;
        let tenant = held.tenant().id();
        if let Some(m) = kept.last_used.get_mut(tenant) {
            m.remove(id);
            if m.is_empty() {
                kept.last_used.remove(tenant);
            }
        }
    }
}

impl Reservation {
    /// The session is made, as `id`: it counts until [`McpSessions::release`].
    pub fn bind(mut self, id: &str) {
        let id: Arc<str> = Arc::from(id);
        let Some(held) = self.held.take() else {
            return;
        };
        let mut kept = lock(&self.sessions.kept);
        kept.last_used
            .entry(held.tenant().id().to_string())
            .or_default()
            .insert(id.clone(), Instant::now());
        kept.by_id.insert(id, held);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.held.take().is_some() {
            lock(&self.sessions.kept).total -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::error::OnWire;
    use crate::supervisor::tenants::Quotas;

    fn sessions(total: usize) -> McpSessions {
        McpSessions::new(McpSessionLimits {
            max_total: total,
            idle: Duration::from_secs(60),
        })
    }

    fn tenant(id: &str, mcp_sessions: u64) -> Arc<Tenant> {
        let mut q = Quotas::unlimited();
        q.set(Quota::McpSessions, mcp_sessions);
        Tenant::new(id, q)
    }

    #[test]
    fn a_tenant_at_its_quota_is_refused_and_others_are_not() {
        let s = sessions(10);
        let (a, b) = (tenant("a", 2), tenant("b", 2));
        s.reserve(&a).ok().unwrap().bind("s1");
        s.reserve(&a).ok().unwrap().bind("s2");
        let (e, wait) = s.reserve(&a).err().unwrap();
        assert_eq!(e.code().as_str(), "quota_exceeded");
        assert!(e.to_string().contains("mcp_sessions"), "{e}");
        assert!((59..=60).contains(&wait), "{wait}");
        s.reserve(&b).ok().unwrap().bind("s3");
        s.release("s1");
        s.release("s1");
        assert_eq!(a.used(Quota::McpSessions), 1);
        s.reserve(&a).ok().unwrap().bind("s4");
    }

    #[test]
    fn the_total_cap_holds_and_an_unbound_reservation_gives_its_place_back() {
        let s = sessions(2);
        let (a, b, c) = (tenant("a", 2), tenant("b", 2), tenant("c", 2));
        let r = s.reserve(&a).ok().unwrap();
        s.reserve(&b).ok().unwrap().bind("s1");
        let (e, _) = s.reserve(&c).err().unwrap();
        assert_eq!(e.code().as_str(), "too_many_mcp_sessions");
        assert_eq!(c.used(Quota::McpSessions), 0);
        drop(r);
        assert_eq!(a.used(Quota::McpSessions), 0);
        s.reserve(&c).ok().unwrap().bind("s2");
    }
}
