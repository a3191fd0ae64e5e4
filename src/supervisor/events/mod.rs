//! Lifecycle events: what happened to a tenant's sessions and runs, kept per tenant for a
//! bounded count and time (`GET /v1/events`) and delivered to its webhooks
//! ([`webhooks`]), signed as Standard Webhooks says ([`sign`]).
//!
//! Most events are read off the audit record a request closes with ([`Events::of_audit`],
//! called by `Runner::finish`, the one place every request's outcome passes): a session
//! opened, restored, forked, snapshotted, paused or killed, a run finished (with its status
//! and usage), a quota refusal. What no request causes is emitted where it happens: a
//! session hibernated or woken, or expired by the sweeper. An event never carries code,
//! output or a secret: ids, kinds, statuses and figures only.

pub mod sign;
pub mod webhooks;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::audit::{Action, AuditRecord, Door, Outcome};
use super::error::ErrorCode;
use super::time::rfc3339;
use crate::report::{Status, Usage};
use crate::sync::lock;
pub use webhooks::{WebhookInfo, WebhookRequest, WebhookSettings, Webhooks};

/// Events one tenant's log keeps; the oldest go first.
pub const MAX_EVENTS_PER_TENANT: usize = 1000;
/// How long an event is kept.
pub const MAX_EVENT_AGE: Duration = Duration::from_secs(24 * 3600);
/// Events one `GET /v1/events` returns at most.
pub const MAX_PAGE: usize = 500;
/// Characters of an event's `detail` kept.
const MAX_DETAIL_CHARS: usize = 256;

/// What happened. A closed set: its names are the wire's (`type`) and a webhook's filter's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[derive(strum::EnumString, strum::IntoStaticStr, strum::EnumIter)]
pub enum EventKind {
    /// A session (an E2B sandbox) was opened.
    #[serde(rename = "session.created")]
    #[strum(serialize = "session.created")]
    SessionCreated,
    /// A session was made from a snapshot.
    #[serde(rename = "session.restored")]
    #[strum(serialize = "session.restored")]
    SessionRestored,
    /// A session was forked: `session_id` is the source's.
    #[serde(rename = "session.forked")]
    #[strum(serialize = "session.forked")]
    SessionForked,
    /// A snapshot of a session was taken (`snapshot_id`).
    #[serde(rename = "session.snapshotted")]
    #[strum(serialize = "session.snapshotted")]
    SessionSnapshotted,
    /// Its caller paused it (E2B's pause): it hibernated.
    #[serde(rename = "session.paused")]
    #[strum(serialize = "session.paused")]
    SessionPaused,
    /// It was idle (or the coldest when the server needed room) and went to the store.
    #[serde(rename = "session.hibernated")]
    #[strum(serialize = "session.hibernated")]
    SessionHibernated,
    /// A hibernated or stored session came back.
    #[serde(rename = "session.resumed")]
    #[strum(serialize = "session.resumed")]
    SessionResumed,
    /// Its caller closed it (E2B's kill).
    #[serde(rename = "session.killed")]
    #[strum(serialize = "session.killed")]
    SessionKilled,
    /// It passed its idle time, lifetime or deadline and was closed.
    #[serde(rename = "session.expired")]
    #[strum(serialize = "session.expired")]
    SessionExpired,
    /// An execution or a session turn ran to an end (`status`, `usage`).
    #[serde(rename = "execution.finished")]
    #[strum(serialize = "execution.finished")]
    ExecutionFinished,
    /// A request was refused by one of the tenant's quotas.
    #[serde(rename = "quota.refused")]
    #[strum(serialize = "quota.refused")]
    QuotaRefused,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The event a request's audit line stands for, if any.
    fn of(action: Action, outcome: Outcome) -> Option<EventKind> {
        if let Outcome::Failed(_, ErrorCode::QuotaExceeded) = outcome {
            return Some(EventKind::QuotaRefused);
        }
        let Outcome::Ok(_) = outcome else {
            return None;
        };
        Some(match action {
            Action::SessionOpen => EventKind::SessionCreated,
            Action::SessionRestore => EventKind::SessionRestored,
            Action::SessionFork => EventKind::SessionForked,
            Action::SessionSnapshot => EventKind::SessionSnapshotted,
            Action::SessionPause => EventKind::SessionPaused,
            Action::SessionClose => EventKind::SessionKilled,
            Action::Execute | Action::SessionTurn | Action::ExecutionResume => {
                EventKind::ExecutionFinished
            }
            _ => return None,
        })
    }
}

/// One event, as `GET /v1/events` lists it and a webhook's `data` carries it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Event {
    /// `evt_` and 24 hex digits; a delivery's `webhook-id` too.
    pub id: String,
    /// Its place in its tenant's log, from 1: `GET /v1/events?after=` pages by it.
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// When (RFC 3339).
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    /// The door the request came through (none for what no request caused).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub door: Option<Door>,
    /// `execution.finished`: how the run ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// `execution.finished`: what it used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// `quota.refused`: the refusal's HTTP status and error code's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// An event before the log numbers it.
#[derive(Debug, Default)]
pub struct Draft {
    pub session_id: Option<String>,
    pub execution_id: Option<String>,
    pub snapshot_id: Option<String>,
    pub door: Option<Door>,
    pub status: Option<Status>,
    pub usage: Option<Usage>,
    pub detail: Option<String>,
}

impl Draft {
    /// About session `id`.
    pub fn session(id: &str) -> Draft {
        Draft {
            session_id: Some(id.to_string()),
            ..Default::default()
        }
    }
}

/// What `GET /v1/events` asks for.
#[derive(Debug, Default, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventQuery {
    /// Only events after this `seq` (a page's `next`).
    pub after: Option<u64>,
    /// Only this kind (`session.created`, `execution.finished`, ...).
    #[serde(rename = "type")]
    #[param(rename = "type", value_type = Option<String>)]
    pub kind: Option<String>,
    /// Only this session's.
    pub session_id: Option<String>,
    /// At most this many (default and maximum 500).
    pub limit: Option<usize>,
}

/// A page of a tenant's events, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPage {
    pub events: Vec<Event>,
    /// The `after` of the next page, when there are more.
    pub next: Option<u64>,
}

/// One tenant's kept events.
#[derive(Default)]
struct Log {
    events: VecDeque<(SystemTime, Arc<Event>)>,
    next_seq: u64,
}

impl Log {
    fn expire(&mut self, now: SystemTime) {
        while self.events.len() > MAX_EVENTS_PER_TENANT
            || self
                .events
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t).unwrap_or_default() > MAX_EVENT_AGE)
        {
            self.events.pop_front();
        }
    }
}

/// Every tenant's events and webhooks.
pub struct Events {
    logs: Mutex<HashMap<String, Log>>,
    pub webhooks: Webhooks,
}

impl Events {
    pub fn new(settings: WebhookSettings) -> Events {
        Events {
            logs: Mutex::new(HashMap::new()),
            webhooks: Webhooks::new(settings),
        }
    }

    /// Records what `tenant`'s event `kind` says, and offers it to the tenant's webhooks.
    pub fn emit(&self, tenant: &str, kind: EventKind, draft: Draft) {
        let now = SystemTime::now();
        let event = {
            let mut logs = lock(&self.logs);
            let log = logs.entry(tenant.to_string()).or_default();
            log.next_seq += 1;
            let event = Arc::new(Event {
                id: format!("evt_{:024x}", rand::random::<u128>() >> 32),
                seq: log.next_seq,
                kind,
                at: rfc3339(now),
                session_id: draft.session_id,
                execution_id: draft.execution_id,
                snapshot_id: draft.snapshot_id,
                door: draft.door,
                status: draft.status,
                usage: draft.usage,
                detail: draft
                    .detail
                    .map(|d| d.chars().take(MAX_DETAIL_CHARS).collect()),
            });
            log.events.push_back((now, event.clone()));
            log.expire(now);
            event
        };
        self.webhooks.offer(tenant, &event);
    }

    /// The event `record` (a request's audit line, ended with `outcome`) stands for, if any.
    pub fn of_audit(record: &AuditRecord, outcome: Outcome) -> Option<(EventKind, Draft)> {
        if record.door == Door::Server {
            return None;
        }
        let kind = EventKind::of(record.action, outcome)?;
        // A run that was refused before it ran (a check's `deny`) has no status: no event.
        if kind == EventKind::ExecutionFinished && record.status.is_none() {
            return None;
        }
        let detail = match outcome {
            Outcome::Failed(status, code) => {
                Some(format!("{status} {}", <&'static str>::from(code)))
            }
            Outcome::Ok(_) => None,
        };
        Some((
            kind,
            Draft {
                session_id: record.session_id.clone(),
                execution_id: record.execution_id.clone(),
                snapshot_id: record.snapshot_id.clone(),
                door: Some(record.door),
                status: record.status,
                usage: record.usage,
                detail,
            },
        ))
    }

    /// `tenant`'s events as `q` asks; a `type` that is no kind is an error naming it.
    pub fn list(&self, tenant: &str, q: &EventQuery) -> Result<EventPage, String> {
        let kind = q
            .kind
            .as_deref()
            .map(|k| {
                k.parse::<EventKind>()
                    .map_err(|_| format!("type: no event kind {k:?}"))
            })
            .transpose()?;
        let limit = q.limit.unwrap_or(MAX_PAGE).clamp(1, MAX_PAGE);
        let mut logs = lock(&self.logs);
        let Some(log) = logs.get_mut(tenant) else {
            return Ok(EventPage {
                events: Vec::new(),
                next: None,
            });
        };
        log.expire(SystemTime::now());
        let mut matching = log.events.iter().map(|(_, e)| e).filter(|e| {
            q.after.is_none_or(|a| e.seq > a)
                && kind.is_none_or(|k| e.kind == k)
                && q.session_id
                    .as_ref()
                    .is_none_or(|s| e.session_id.as_ref() == Some(s))
        });
        let events: Vec<Event> = matching
            .by_ref()
            .take(limit)
            .map(|e| (**e).clone())
            .collect();
        let next = match matching.next() {
            Some(_) => events.last().map(|e| e.seq),
            None => None,
        };
        Ok(EventPage { events, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Events {
        Events::new(WebhookSettings::default())
    }

    #[test]
    fn kinds_are_named_once_for_the_wire_and_the_filter() {
        use strum::IntoEnumIterator;
        for k in EventKind::iter() {
            let wire = serde_json::to_value(k).unwrap();
            assert_eq!(wire, k.as_str(), "{k:?}");
            assert_eq!(k.as_str().parse::<EventKind>().unwrap(), k);
        }
    }

    #[test]
    fn a_tenants_log_is_bounded_numbered_filtered_and_paged() {
        let e = events();
        for i in 0..(MAX_EVENTS_PER_TENANT + 10) {
            let kind = if i % 2 == 0 {
                EventKind::SessionCreated
            } else {
                EventKind::SessionKilled
            };
            e.emit("acme", kind, Draft::session(&format!("s-{}", i % 3)));
        }
        e.emit("other", EventKind::SessionCreated, Draft::default());
        let all = e.list("acme", &EventQuery::default()).unwrap();
        assert_eq!(all.events.len(), MAX_PAGE);
        assert_eq!(all.events[0].seq, 11, "the oldest ten went");
        let rest = e
            .list(
                "acme",
                &EventQuery {
                    after: all.next,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(rest.events.len(), MAX_PAGE);
        assert_eq!(rest.next, None);
        let killed = e
            .list(
                "acme",
                &EventQuery {
                    kind: Some("session.killed".into()),
                    session_id: Some("s-1".into()),
                    limit: Some(5),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(killed.events.len(), 5);
        assert!(killed.events.iter().all(
            |ev| ev.kind == EventKind::SessionKilled && ev.session_id.as_deref() == Some("s-1")
        ));
        assert_eq!(
            e.list("other", &EventQuery::default()).unwrap().events[0].seq,
            1
        );
        assert!(
            e.list(
                "acme",
                &EventQuery {
                    kind: Some("nope".into()),
                    ..Default::default()
                }
            )
            .unwrap_err()
            .contains("nope")
        );
    }
}
