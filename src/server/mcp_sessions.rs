//! How many MCP sessions (the streamable HTTP transport's, one per `initialize`) each caller
//! holds, against two caps: the server's total and each caller's own. An `initialize` past
//! either is refused with 429 (`mcp_session_quota_exceeded` for the caller's own cap,
//! `too_many_mcp_sessions` for the server's), never by ending a session: a caller can neither
//! push another caller's sessions out nor, by flooding, silently end its own that an agent
//! is still using. Sessions leave the count when they are closed (`DELETE /mcp`) or sit
//! idle for `--mcp-session-idle-secs` (rmcp's keep-alive, set from the same limits).
//!
//! A caller is the API key's id (without keys, everyone together): the one place that says
//! so is [`Caller::of`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::error::ApiError;
use super::request_context::RequestContext;
use crate::sync::lock;

/// The caps, from `--max-mcp-sessions`, `--max-mcp-sessions-per-tenant` and
/// `--mcp-session-idle-secs`.
#[derive(Debug, Clone, Copy)]
pub struct McpSessionLimits {
    /// MCP sessions the server keeps at most, every caller together.
    pub max_total: usize,
    /// MCP sessions one caller keeps at most.
    pub max_per_caller: usize,
    /// A session with no request for this long is ended.
    pub idle: Duration,
}

/// Who an MCP session is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Caller(Option<String>);

impl Caller {
    /// The caller of a request: its API key's id.
    pub fn of(ctx: &RequestContext) -> Caller {
        Caller(ctx.key_id.clone())
    }

    /// Everyone, when no key is required (and the stdio transport).
    pub fn anonymous() -> Caller {
        Caller(None)
    }

    fn describe(&self) -> String {
        match &self.0 {
            Some(id) => format!("API key {id}"),
            None => "this server's caller (no API keys)".to_string(),
        }
    }
}

/// The sessions held, by caller; cheap to clone (one shared count).
#[derive(Clone)]
pub struct McpSessions {
    limits: McpSessionLimits,
    held: Arc<Mutex<Held>>,
}

#[derive(Default)]
struct Held {
    /// Sessions counted, reserved ones included.
    total: usize,
    by_caller: HashMap<Caller, Use>,
    owner: HashMap<Arc<str>, Caller>,
}

#[derive(Default)]
struct Use {
    /// Sessions counted for this caller, reserved ones included.
    count: usize,
    /// Each open session, with when it was last used.
    last_used: HashMap<Arc<str>, Instant>,
}

/// One session's place in the count, taken before the session is made: bound to its id
/// once made, given back when dropped unbound.
pub struct Reservation {
    sessions: McpSessions,
    caller: Caller,
    bound: bool,
}

impl McpSessions {
    pub fn new(limits: McpSessionLimits) -> McpSessions {
        McpSessions {
            limits,
            held: Arc::new(Mutex::new(Held::default())),
        }
    }

    /// Sessions `caller` holds now.
    #[cfg(test)]
    pub fn held_by(&self, caller: &Caller) -> usize {
        lock(&self.held)
            .by_caller
            .get(caller)
            .map_or(0, |u| u.count)
    }

    /// A place for one more session of `caller`, or the 429 that refuses it.
    pub fn reserve(&self, caller: &Caller) -> Result<Reservation, ApiError> {
        let mut held = lock(&self.held);
        let now = Instant::now();
        let mine = held.by_caller.get(caller);
        let count = mine.map_or(0, |u| u.count);
        if count >= self.limits.max_per_caller {
            // The caller's least recently used session is the first to expire.
            let oldest = mine
                .and_then(|u| u.last_used.values().min().copied())
                .map_or(Duration::ZERO, |t| now.duration_since(t));
            let wait = self.limits.idle.saturating_sub(oldest).as_secs().max(1);
            return Err(ApiError::McpSessionQuota {
                message: format!(
                    "{} holds {count} MCP sessions, its quota (--max-mcp-sessions-per-tenant \
                     {}): end one (DELETE /mcp with its Mcp-Session-Id) or let one sit idle \
                     {} s, then initialize again",
                    caller.describe(),
                    self.limits.max_per_caller,
                    self.limits.idle.as_secs()
                ),
                retry_after_secs: wait,
            });
        }
        if held.total >= self.limits.max_total {
            return Err(ApiError::TooManyMcpSessions {
                message: format!(
                    "the server holds {} MCP sessions, its most (--max-mcp-sessions {}); \
                     retry later",
                    held.total, self.limits.max_total
                ),
                retry_after_secs: 5,
            });
        }
        held.total += 1;
        held.by_caller.entry(caller.clone()).or_default().count += 1;
        Ok(Reservation {
            sessions: self.clone(),
            caller: caller.clone(),
            bound: false,
        })
    }

    /// Session `id` was used (a request, a stream): its caller's oldest is another now.
    pub fn touch(&self, id: &str) {
        let mut held = lock(&self.held);
        let Some(caller) = held.owner.get(id).cloned() else {
            return;
        };
        if let Some(t) = held
            .by_caller
            .get_mut(&caller)
            .and_then(|u| u.last_used.get_mut(id))
        {
            *t = Instant::now();
        }
    }

    /// Session `id` ended (closed, or idle too long): its place is free. Twice is once.
    pub fn release(&self, id: &str) {
        let mut held = lock(&self.held);
        let Some(caller) = held.owner.remove(id) else {
            return;
        };
        held.total -= 1;
        if let Some(u) = held.by_caller.get_mut(&caller) {
            u.last_used.remove(id);
            u.count -= 1;
            if u.count == 0 {
                held.by_caller.remove(&caller);
            }
        }
    }
}

impl Reservation {
    /// The session is made, as `id`: it counts until [`McpSessions::release`].
    pub fn bind(mut self, id: &str) {
        let id: Arc<str> = Arc::from(id);
        let mut held = lock(&self.sessions.held);
        held.owner.insert(id.clone(), self.caller.clone());
        held.by_caller
            .entry(self.caller.clone())
            .or_default()
            .last_used
            .insert(id, Instant::now());
        self.bound = true;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bound {
            return;
        }
        let mut held = lock(&self.sessions.held);
        held.total -= 1;
        if let Some(u) = held.by_caller.get_mut(&self.caller) {
            u.count -= 1;
            if u.count == 0 {
                held.by_caller.remove(&self.caller);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions(total: usize, per: usize) -> McpSessions {
        McpSessions::new(McpSessionLimits {
            max_total: total,
            max_per_caller: per,
            idle: Duration::from_secs(60),
        })
    }

    fn key(id: &str) -> Caller {
        Caller(Some(id.to_string()))
    }

    #[test]
    fn a_caller_at_its_cap_is_refused_and_others_are_not() {
        let s = sessions(10, 2);
        s.reserve(&key("a")).unwrap().bind("s1");
        s.reserve(&key("a")).unwrap().bind("s2");
        let e = s.reserve(&key("a")).err().unwrap();
        assert_eq!(e.code().as_str(), "mcp_session_quota_exceeded");
        assert!(e.to_string().contains("API key a holds 2"), "{e}");
        s.reserve(&key("b")).unwrap().bind("s3");
        s.release("s1");
        s.release("s1");
        assert_eq!(s.held_by(&key("a")), 1);
        s.reserve(&key("a")).unwrap().bind("s4");
    }

    #[test]
    fn the_total_cap_holds_and_an_unbound_reservation_gives_its_place_back() {
        let s = sessions(2, 2);
        let r = s.reserve(&key("a")).unwrap();
        s.reserve(&key("b")).unwrap().bind("s1");
        let e = s.reserve(&key("c")).err().unwrap();
        assert_eq!(e.code().as_str(), "too_many_mcp_sessions");
        drop(r);
        assert_eq!(s.held_by(&key("a")), 0);
        s.reserve(&key("c")).unwrap().bind("s2");
    }
}
