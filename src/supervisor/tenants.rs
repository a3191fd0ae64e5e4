//! Tenants: who an API key belongs to, and what each may hold at once.
//!
//! A tenant is the unit of quotas and fair shares. The keys file may group several keys
//! under one tenant (`ID@TENANT:KEY`) and give a tenant its own quotas (`tenant NAME
//! runs=8 ...`); a key of no named tenant is a tenant of its own, named after the key's id;
//! without keys, every caller is the one tenant `default`.
//!
//! Every resource a caller can hold is a [`Quota`]; a tenant's use of each is one counter,
//! taken with [`Tenant::take`] (all or nothing, atomically against the limit) and given back
//! when the [`Held`] it returns is dropped, so a count can never drift from what is held.
//! This module imports nothing of the server: error mapping lives in `error.rs`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use utoipa::ToSchema;

/// The tenant every caller is when the server has no API keys.
pub const DEFAULT_TENANT: &str = "default";

/// What a tenant may hold at once: each a per-tenant limit, each breach a named refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Quota {
    /// Executions, session turns, checks and session starts in flight or waiting for a slot.
    Runs,
    /// Sessions whose interpreter is in memory.
    ResidentSessions,
    /// Sessions written to the snapshot store, to come back on their next request.
    HibernatedSessions,
    /// Bytes in the snapshot store: snapshots, hibernated sessions, durable sessions' own and
    /// code mode's journals.
    SnapshotBytes,
    /// Open Jupyter kernel WebSockets.
    KernelSockets,
    /// Bytes of shell requests waiting on its kernel WebSockets, all of them together.
    KernelQueueBytes,
    /// MCP sessions kept by the server.
    McpSessions,
    /// Package resolutions and `.pyc` compiles in flight.
    PackageJobs,
    /// Bytes of the host's memory budget admitted for its sandboxes and resident sessions.
    MemoryBytes,
    /// Code mode: executions suspended at a round of tool calls (resident or kept in the
    /// snapshot store), and running ones that have tools.
    SuspendedExecutions,
}

impl Quota {
    /// Every quota, in the order `GET /v1/usage` lists them.
    pub const ALL: [Quota; 10] = [
        Quota::Runs,
        Quota::ResidentSessions,
        Quota::HibernatedSessions,
        Quota::SnapshotBytes,
        Quota::KernelSockets,
        Quota::KernelQueueBytes,
        Quota::McpSessions,
        Quota::PackageJobs,
        Quota::MemoryBytes,
        Quota::SuspendedExecutions,
    ];

    /// Its name in the keys file, in errors, in `GET /v1/usage` and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Quota::Runs => "runs",
            Quota::ResidentSessions => "resident_sessions",
            Quota::HibernatedSessions => "hibernated_sessions",
            Quota::SnapshotBytes => "snapshot_bytes",
            Quota::KernelSockets => "kernel_sockets",
            Quota::KernelQueueBytes => "kernel_queue_bytes",
            Quota::McpSessions => "mcp_sessions",
            Quota::PackageJobs => "package_jobs",
            Quota::MemoryBytes => "memory_bytes",
            Quota::SuspendedExecutions => "suspended_executions",
        }
    }

    fn parse(s: &str) -> Option<Quota> {
        Quota::ALL.into_iter().find(|q| q.as_str() == s)
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Whether its amounts are bytes (a number in the keys file may then carry a unit).
    fn is_bytes(self) -> bool {
        matches!(
            self,
            Quota::SnapshotBytes | Quota::MemoryBytes | Quota::KernelQueueBytes
        )
    }
}

impl fmt::Display for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A limit for each [`Quota`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas([u64; Quota::ALL.len()]);

impl Quotas {
    /// No limit on anything (each at `u64::MAX`).
    pub fn unlimited() -> Self {
        Quotas([u64::MAX; Quota::ALL.len()])
    }

    pub fn get(&self, q: Quota) -> u64 {
        self.0[q.index()]
    }

    pub fn set(&mut self, q: Quota, limit: u64) {
        self.0[q.index()] = limit;
    }
}

/// A refusal: taking `asked` more of `quota` would take `tenant` past its limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant {tenant:?} is at its {quota} quota: {used} of {limit} in use, {asked} more asked{}",
    hint(*quota)
)]
pub struct QuotaExceeded {
    pub tenant: String,
    pub quota: Quota,
    pub used: u64,
    pub limit: u64,
    pub asked: u64,
}

impl QuotaExceeded {
    /// Whether the ask alone is past the limit (413: no wait will help), not just the sum.
    pub fn too_large(&self) -> bool {
        self.asked > self.limit
    }
}

fn hint(q: Quota) -> &'static str {
    match q {
        Quota::Runs => "; wait for your runs to finish",
        Quota::ResidentSessions => {
            "; every one of your resident sessions is busy: close one, or retry when one is idle"
        }
        Quota::HibernatedSessions => "; close some of your sessions",
        Quota::SnapshotBytes => {
            "; delete snapshots (DELETE /v1/snapshots/{id}), close hibernated sessions or \
             cancel suspended executions (DELETE /v1/executions/{id})"
        }
        Quota::KernelSockets => "; close a kernel connection",
        Quota::KernelQueueBytes => "; wait for the cells queued on your kernels to run",
        Quota::McpSessions => "; end an MCP session (DELETE /mcp) or let one expire",
        Quota::PackageJobs => {
            "; your package installs in flight and the line waiting behind them are full: retry later"
        }
        Quota::MemoryBytes => "; close or shrink your sessions, or wait for your runs",
        Quota::SuspendedExecutions => {
            "; answer or cancel your suspended executions (DELETE /v1/executions/{id})"
        }
    }
}

/// One tenant: its id, its limits, and what it holds now.
pub struct Tenant {
    id: String,
    quotas: Quotas,
    used: [AtomicU64; Quota::ALL.len()],
}

impl fmt::Debug for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tenant").field("id", &self.id).finish()
    }
}

impl Tenant {
    pub fn new(id: impl Into<String>, quotas: Quotas) -> Arc<Self> {
        Arc::new(Tenant {
            id: id.into(),
            quotas,
            used: Default::default(),
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn limit(&self, q: Quota) -> u64 {
        self.quotas.get(q)
    }

    pub fn used(&self, q: Quota) -> u64 {
        self.used[q.index()].load(Ordering::Acquire)
    }

    /// Takes `amount` of `q` now, or refuses without taking anything.
    pub fn take(self: &Arc<Self>, q: Quota, amount: u64) -> Result<Held, QuotaExceeded> {
        self.add(q, amount)?;
        Ok(Held {
            tenant: self.clone(),
            quota: q,
            amount,
        })
    }

    /// Takes `amount` of `q` with no [`Held`] to give it back: for amounts whose holder is
    /// data elsewhere (a snapshot in the store); [`Tenant::give_back`] returns it.
    pub fn add(&self, q: Quota, amount: u64) -> Result<(), QuotaExceeded> {
        let limit = self.limit(q);
        self.used[q.index()]
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(amount).filter(|&n| n <= limit)
            })
            .map(drop)
            .map_err(|used| QuotaExceeded {
                tenant: self.id.clone(),
                quota: q,
                used,
                limit,
                asked: amount,
            })
    }

    /// Takes `amount` of `q` whatever the limit (what is already stored, found at start).
    pub fn add_anyway(&self, q: Quota, amount: u64) {
        self.used[q.index()].fetch_add(amount, Ordering::AcqRel);
    }

    /// Gives back what [`Tenant::add`] or [`Tenant::add_anyway`] took.
    pub fn give_back(&self, q: Quota, amount: u64) {
        let _ = self.used[q.index()].fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
            Some(u.saturating_sub(amount))
        });
    }

    /// Its use of every quota against its limit.
    pub fn usage(&self) -> Vec<QuotaUse> {
        Quota::ALL
            .into_iter()
            .map(|q| QuotaUse {
                quota: q,
                used: self.used(q),
                limit: (self.limit(q) != u64::MAX).then(|| self.limit(q)),
            })
            .collect()
    }
}

/// Some of a tenant's quota, held until dropped.
#[must_use = "a Held gives its amount back when dropped"]
pub struct Held {
    tenant: Arc<Tenant>,
    quota: Quota,
    amount: u64,
}

impl Held {
    pub fn tenant(&self) -> &Arc<Tenant> {
        &self.tenant
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Held({} {} {})", self.tenant.id, self.quota, self.amount)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.tenant.give_back(self.quota, self.amount);
    }
}

/// One line of `GET /v1/usage`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QuotaUse {
    pub quota: Quota,
    pub used: u64,
    /// `null`: no limit.
    pub limit: Option<u64>,
}

/// A tenant as the keys file declares it: its quotas that differ from the server's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantDecl {
    pub overrides: Vec<(Quota, u64)>,
}

/// Parses a `tenant NAME quota=value ...` line's words after `tenant`.
pub fn parse_tenant_line(words: &str) -> Result<(String, TenantDecl), String> {
    let mut it = words.split_whitespace();
    let name = it.next().ok_or("a tenant line names the tenant")?;
    if !is_tenant_id(name) {
        return Err(format!(
            "tenant name {name:?}: 1 to 64 of A-Z a-z 0-9 . _ -, starting with a letter or digit"
        ));
    }
    let mut decl = TenantDecl::default();
    for word in it {
        let (k, v) = word
            .split_once('=')
            .ok_or_else(|| format!("{word:?}: quotas are written NAME=VALUE"))?;
        let q = Quota::parse(k).ok_or_else(|| {
            format!(
                "{k:?} is not a quota (one of: {})",
                Quota::ALL.map(Quota::as_str).join(", ")
            )
        })?;
        let n = parse_amount(v, q.is_bytes()).ok_or_else(|| {
            format!(
                "{word:?}: not a number{}",
                if q.is_bytes() {
                    " of bytes (K, M, G, KiB, MiB, GiB allowed)"
                } else {
                    ""
                }
            )
        })?;
        decl.overrides.push((q, n));
    }
    Ok((name.to_string(), decl))
}

fn parse_amount(v: &str, bytes: bool) -> Option<u64> {
    if v == "unlimited" {
        return Some(u64::MAX);
    }
    let digits = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (n, unit) = v.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let mul: u64 = match (bytes, unit) {
        (_, "") => 1,
        (true, "K" | "KiB") => 1 << 10,
        (true, "M" | "MiB") => 1 << 20,
        (true, "G" | "GiB") => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mul)
}

/// Whether `s` may name a tenant.
pub fn is_tenant_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Every tenant of this server, and which key is whose.
pub struct Tenants {
    /// Key id -> its tenant.
    by_key: HashMap<String, Arc<Tenant>>,
    /// Every tenant by id (those of the keys file, and `default`).
    by_id: HashMap<String, Arc<Tenant>>,
    /// Callers with no key (keys off), and keys this server does not know (owners named in
    /// old snapshots).
    default: Arc<Tenant>,
}

impl Tenants {
    /// Without API keys: everyone is [`DEFAULT_TENANT`], under `single` (the server-wide
    /// caps, unless a per-tenant flag was set).
    pub fn single(single: Quotas) -> Self {
        let default = Tenant::new(DEFAULT_TENANT, single);
        Tenants {
            by_key: HashMap::new(),
            by_id: HashMap::from([(DEFAULT_TENANT.to_string(), default.clone())]),
            default,
        }
    }

    /// With API keys: `keys` is each key's id and tenant, `decls` the tenants declared with
    /// their own quotas; everything not declared gets `defaults`.
    pub fn of_keys<'a>(
        keys: impl IntoIterator<Item = (&'a str, &'a str)>,
        decls: &HashMap<String, TenantDecl>,
        defaults: Quotas,
    ) -> Self {
        let mut by_id: HashMap<String, Arc<Tenant>> = HashMap::new();
        let mut make = |id: &str| {
            by_id
                .entry(id.to_string())
                .or_insert_with(|| {
                    let mut q = defaults;
                    if let Some(d) = decls.get(id) {
                        for &(quota, n) in &d.overrides {
                            q.set(quota, n);
                        }
                    }
                    Tenant::new(id, q)
                })
                .clone()
        };
        let by_key = keys
            .into_iter()
            .map(|(key, tenant)| (key.to_string(), make(tenant)))
            .collect();
        for id in decls.keys() {
            make(id);
        }
        let default = make(DEFAULT_TENANT);
        Tenants {
            by_key,
            by_id,
            default,
        }
    }

    /// The tenant of key `key` (`None`: no key, keys off).
    pub fn of(&self, key: Option<&str>) -> Arc<Tenant> {
        key.and_then(|k| self.by_key.get(k))
            .unwrap_or(&self.default)
            .clone()
    }

    /// Every tenant, by id.
    pub fn all(&self) -> Vec<Arc<Tenant>> {
        let mut v: Vec<_> = self.by_id.values().cloned().collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_is_all_or_nothing_and_given_back_on_drop() {
        let mut q = Quotas::unlimited();
        q.set(Quota::Runs, 2);
        let t = Tenant::new("a", q);
        let a = t.take(Quota::Runs, 1).unwrap();
        let _b = t.take(Quota::Runs, 1).unwrap();
        let e = t.take(Quota::Runs, 1).unwrap_err();
        assert_eq!((e.used, e.limit, e.asked), (2, 2, 1));
        assert!(e.to_string().contains("runs quota: 2 of 2 in use"));
        drop(a);
        assert_eq!(t.used(Quota::Runs), 1);
        assert!(t.take(Quota::Runs, 1).is_ok());
    }

    #[test]
    fn tenant_lines_parse_with_units_and_refuse_unknown_quotas() {
        let (name, d) = parse_tenant_line("acme runs=8 snapshot_bytes=1GiB").unwrap();
        assert_eq!(name, "acme");
        assert_eq!(
            d.overrides,
            vec![(Quota::Runs, 8), (Quota::SnapshotBytes, 1 << 30)]
        );
        assert!(
            parse_tenant_line("acme cpu=8")
                .unwrap_err()
                .contains("not a quota")
        );
        assert!(parse_tenant_line("acme runs=8G").is_err());
        assert!(parse_tenant_line("../x").is_err());
    }

    #[test]
    fn keys_share_their_tenant_and_unknown_keys_are_default() {
        let mut decls = HashMap::new();
        decls.insert(
            "acme".to_string(),
            TenantDecl {
                overrides: vec![(Quota::Runs, 3)],
            },
        );
        let mut defaults = Quotas::unlimited();
        defaults.set(Quota::Runs, 10);
        let t = Tenants::of_keys(
            [("k1", "acme"), ("k2", "acme"), ("k3", "k3")],
            &decls,
            defaults,
        );
        assert!(Arc::ptr_eq(&t.of(Some("k1")), &t.of(Some("k2"))));
        assert_eq!(t.of(Some("k1")).limit(Quota::Runs), 3);
        assert_eq!(t.of(Some("k3")).limit(Quota::Runs), 10);
        assert_eq!(t.of(Some("nobody")).id(), DEFAULT_TENANT);
    }
}
