//! A tenant's webhooks: registered with a URL, the kinds of event wanted and a secret, and
//! sent each matching event as a signed `POST` (Standard Webhooks: `webhook-id`,
//! `webhook-timestamp`, `webhook-signature`; the body `{"type", "timestamp", "data"}`).
//!
//! - **Where to**: `http` or `https` only, no credentials in the URL. Its addresses are
//!   judged as egress judges a guest's ([`AddressRules`]): a private, loopback, link-local
//!   (cloud metadata) or otherwise non-public address is refused unless the operator allows
//!   its range (`--webhook-allow-private`), at registration (a 400) and again at every
//!   delivery, whose connection goes only to the addresses checked then (no redirect, no
//!   proxy).
//! - **In order, at least once**: each webhook has one delivery task and one queue; an event
//!   is retried with backoff (0.5 s doubling to 30 s, [`ATTEMPTS`] tries) before the next is
//!   sent, so a receiver sees each sandbox's events in order. One that still fails is
//!   counted `failed` and the next goes.
//! - **Bounded**: at most [`MAX_WEBHOOKS_PER_TENANT`] webhooks a tenant, [`MAX_PENDING`]
//!   events waiting on each (past it the oldest is dropped and counted): a dead or slow
//!   receiver holds that much and costs only its own deliveries, each bounded by
//!   [`DELIVERY_TIMEOUT`].

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Notify;
use utoipa::ToSchema;

use super::sign::Secret;
use super::{Event, EventKind};
use crate::egress::AddressRules;
use crate::supervisor::SupervisorError;
use crate::supervisor::egress::CheckedResolver;
use crate::supervisor::time::rfc3339;
use crate::sync::lock;

/// Webhooks one tenant may have.
pub const MAX_WEBHOOKS_PER_TENANT: usize = 8;
/// Events waiting on one webhook at most; past it the oldest is dropped.
pub const MAX_PENDING: usize = 1000;
/// Tries of one delivery.
pub const ATTEMPTS: u32 = 6;
/// How long one try may take, connection included.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long a webhook's host may take to resolve.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest URL taken.
const MAX_URL_BYTES: usize = 2048;

/// The operator's rules for webhook addresses.
#[derive(Debug, Clone, Default)]
pub struct WebhookSettings {
    /// `--webhook-allow-private`: the non-public ranges a webhook may reach.
    pub addresses: AddressRules,
}

/// `POST /v1/webhooks`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookRequest {
    /// Where events are sent: `http` or `https`, on a public address unless the operator
    /// allows its range.
    #[schema(example = "https://hooks.example.com/vivarium")]
    pub url: String,
    /// The kinds wanted (`session.created`, `execution.finished`, ...); absent or empty:
    /// every kind.
    #[serde(default)]
    #[schema(value_type = Vec<String>)]
    pub events: Vec<String>,
    /// Its signing secret (`whsec_` and the base64 of 16 to 64 bytes); absent: the server
    /// makes one and returns it, once.
    #[serde(default)]
    pub secret: Option<String>,
}

/// What a webhook is, as `GET /v1/webhooks` lists it (never its secret).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookInfo {
    /// `wh_` and 24 hex digits.
    pub id: String,
    pub url: String,
    /// The kinds it gets (empty: every kind).
    pub events: Vec<EventKind>,
    pub created_at: String,
    /// Events waiting to be sent now.
    pub pending: usize,
    /// Events it acknowledged (a 2xx answer).
    pub delivered: u64,
    /// Events given up on after every try.
    pub failed: u64,
    /// Events dropped unsent because too many waited.
    pub dropped: u64,
    /// Why the last failed try failed.
    pub last_error: Option<String>,
    /// Only in the answer to its registration: its secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

struct Hook {
    id: String,
    url: reqwest::Url,
    events: Vec<EventKind>,
    secret: Secret,
    created_at: String,
    state: Mutex<HookState>,
    wake: Notify,
    closed: AtomicBool,
}

#[derive(Default)]
struct HookState {
    pending: VecDeque<Arc<Event>>,
    delivered: u64,
    failed: u64,
    dropped: u64,
    last_error: Option<String>,
}

impl Hook {
    fn info(&self) -> WebhookInfo {
        let s = lock(&self.state);
        WebhookInfo {
            id: self.id.clone(),
            url: self.url.to_string(),
            events: self.events.clone(),
            created_at: self.created_at.clone(),
            pending: s.pending.len(),
            delivered: s.delivered,
            failed: s.failed,
            dropped: s.dropped,
            last_error: s.last_error.clone(),
            secret: None,
        }
    }

    fn wants(&self, kind: EventKind) -> bool {
        self.events.is_empty() || self.events.contains(&kind)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

/// Every tenant's webhooks and the client that delivers to them.
pub struct Webhooks {
    by_tenant: Mutex<HashMap<String, Vec<Arc<Hook>>>>,
    rules: AddressRules,
    client: reqwest::Client,
}

impl Webhooks {
    pub fn new(settings: WebhookSettings) -> Webhooks {
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(DELIVERY_TIMEOUT)
            .user_agent(concat!("vivarium-webhooks/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(CheckedResolver {
                rules: settings.addresses.clone(),
                test: None,
            }))
            .build()
            .expect("a client of fixed settings builds");
        Webhooks {
            by_tenant: Mutex::new(HashMap::new()),
            rules: settings.addresses,
            client,
        }
    }

    /// Registers `req` for `tenant` and starts its deliveries; its info, with its secret.
    pub async fn register(
        &self,
        tenant: &str,
        req: WebhookRequest,
    ) -> Result<WebhookInfo, SupervisorError> {
        let bad = |m: String| SupervisorError::InvalidRequest(m);
        if req.url.len() > MAX_URL_BYTES {
            return Err(bad(format!("url: longer than {MAX_URL_BYTES} bytes")));
        }
        let url = reqwest::Url::parse(&req.url).map_err(|e| bad(format!("url: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("url: http or https only".into()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("url: no credentials in a webhook's URL".into()));
        }
        check_address(&self.rules, &url).await.map_err(bad)?;
        let mut events = Vec::new();
        for name in &req.events {
            let kind = name
                .parse::<EventKind>()
                .map_err(|_| bad(format!("events: no event kind {name:?}")))?;
            if !events.contains(&kind) {
                events.push(kind);
            }
        }
        let secret = match &req.secret {
            Some(text) => Secret::parse(text).map_err(|e| bad(format!("secret: {e}")))?,
            None => Secret::random(),
        };
        let hook = Arc::new(Hook {
            id: format!("wh_{:024x}", rand::random::<u128>() >> 32),
            url,
            events,
            secret,
            created_at: rfc3339(SystemTime::now()),
            state: Mutex::default(),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
        });
        {
            let mut all = lock(&self.by_tenant);
            let mine = all.entry(tenant.to_string()).or_default();
            if mine.len() >= MAX_WEBHOOKS_PER_TENANT {
                return Err(SupervisorError::TooManyWebhooks(MAX_WEBHOOKS_PER_TENANT));
            }
            mine.push(hook.clone());
        }
        tokio::spawn(deliver(
            hook.clone(),
            self.client.clone(),
            self.rules.clone(),
        ));
        let mut info = hook.info();
        info.secret = Some(hook.secret.text());
        Ok(info)
    }

    /// `tenant`'s webhooks.
    pub fn list(&self, tenant: &str) -> Vec<WebhookInfo> {
        lock(&self.by_tenant)
            .get(tenant)
            .map(|hooks| hooks.iter().map(|h| h.info()).collect())
            .unwrap_or_default()
    }

    /// Deletes `tenant`'s webhook `id`: what waits on it is dropped, a delivery in flight
    /// finishes. `false` when the tenant has no such webhook.
    pub fn delete(&self, tenant: &str, id: &str) -> bool {
        let mut all = lock(&self.by_tenant);
        let Some(mine) = all.get_mut(tenant) else {
            return false;
        };
        let Some(i) = mine.iter().position(|h| h.id == id) else {
            return false;
        };
        mine.remove(i).close();
        true
    }

    /// Queues `event` on each of `tenant`'s webhooks that wants its kind.
    pub fn offer(&self, tenant: &str, event: &Arc<Event>) {
        let all = lock(&self.by_tenant);
        for hook in all.get(tenant).into_iter().flatten() {
            if !hook.wants(event.kind) {
                continue;
            }
            let mut s = lock(&hook.state);
            if s.pending.len() >= MAX_PENDING {
                s.pending.pop_front();
                s.dropped += 1;
            }
            s.pending.push_back(event.clone());
            drop(s);
            hook.wake.notify_one();
        }
    }
}

/// `url`'s address when its host is an address literal: no lookup is made for one, so the
/// client's checked resolver never sees it.
fn literal(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

fn refused(ip: IpAddr) -> String {
    format!(
        "url: {ip} is not a public address (an operator allows private ranges with --webhook-allow-private)"
    )
}

/// At each delivery: an address literal judged by `rules` (a name is judged by the client's
/// checked resolver as it connects, every address it resolves to then).
fn check_literal(rules: &AddressRules, url: &reqwest::Url) -> Result<(), String> {
    match literal(url) {
        Some(ip) if !rules.permits(ip) => Err(refused(ip)),
        _ => Ok(()),
    }
}

/// At registration: `url`'s host judged by `rules`, a literal directly, a name by every
/// address it resolves to now (so a refused one is a 400, not a delivery failing later).
async fn check_address(rules: &AddressRules, url: &reqwest::Url) -> Result<(), String> {
    let host = url.host_str().ok_or("url: no host")?;
    if literal(url).is_some() {
        return check_literal(rules, url);
    }
    // A name that takes long to resolve is no name: the caller's request waits for it.
    let lookup = tokio::time::timeout(LOOKUP_TIMEOUT, tokio::net::lookup_host((host, 0))).await;
    let addrs: Vec<IpAddr> = match lookup {
        Ok(Ok(it)) => it.map(|sa| sa.ip()).collect(),
        _ => Vec::new(),
    };
    if addrs.is_empty() {
        return Err(format!("url: {host} does not resolve (within 5 s)"));
    }
    match addrs.into_iter().find(|ip| !rules.permits(*ip)) {
        Some(ip) => Err(refused(ip)),
        None => Ok(()),
    }
}

/// One webhook's delivery loop: the oldest waiting event, tried until acknowledged or out
/// of tries, then the next; ends when the webhook is deleted.
async fn deliver(hook: Arc<Hook>, client: reqwest::Client, rules: AddressRules) {
    loop {
        if hook.closed.load(Ordering::Acquire) {
            return;
        }
        let next = lock(&hook.state).pending.front().cloned();
        let Some(event) = next else {
            hook.wake.notified().await;
            continue;
        };
        let body = serde_json::to_vec(&json!({
            "type": event.kind,
            "timestamp": event.at,
            "data": &*event,
        }))
        .expect("an event serialises");
        let mut backoff = FIRST_BACKOFF;
        let mut outcome = Err(String::new());
        for attempt in 1..=ATTEMPTS {
            if hook.closed.load(Ordering::Acquire) {
                return;
            }
            outcome = send(&hook, &client, &rules, &event.id, &body).await;
            if outcome.is_ok() || attempt == ATTEMPTS {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = hook.wake.notified() => {
                    // Woken by a new event or a delete: only a delete cuts the wait short.
                    if hook.closed.load(Ordering::Acquire) {
                        return;
                    }
                    tokio::time::sleep(backoff).await;
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        let mut s = lock(&hook.state);
        // The front is still this event unless it was dropped to make room meanwhile.
        if s.pending.front().is_some_and(|e| Arc::ptr_eq(e, &event)) {
            s.pending.pop_front();
        }
        match outcome {
            Ok(()) => s.delivered += 1,
            Err(e) => {
                s.failed += 1;
                s.last_error = Some(e);
            }
        }
    }
}

/// One try: `Ok` on a 2xx answer.
async fn send(
    hook: &Hook,
    client: &reqwest::Client,
    rules: &AddressRules,
    id: &str,
    body: &[u8],
) -> Result<(), String> {
    check_literal(rules, &hook.url)?;
    let timestamp = crate::supervisor::time::now_secs();
    let answer = client
        .post(hook.url.clone())
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", hook.secret.sign(id, timestamp, body))
        .body(body.to_vec())
        .send()
        .await
        .map_err(|e| format!("{e}"))?;
    let status = answer.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("answered {}", status.as_u16()))
    }
}
