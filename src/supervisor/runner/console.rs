//! What the operator console shows (`GET /v1/console/state`, and its stream): the server's
//! gauges, its counters, every tenant's use of its quotas and the newest audit lines, read
//! in one go. Only an operator's key gets it (the door checks).

use serde::Serialize;

use super::Runner;
use crate::supervisor::metrics::ConsoleCounters;
use crate::supervisor::tenants::QuotaUse;
use crate::supervisor::time::rfc3339_now;

/// One reading of the server for the console.
#[derive(Debug, Serialize)]
pub struct ConsoleState {
    /// When it was read (RFC 3339).
    pub at: String,
    /// Whether the runtime is loaded and runs are taken.
    pub ready: bool,
    /// Sessions resident and hibernated now.
    pub live_sessions: usize,
    pub hibernated_sessions: usize,
    /// Runs waiting for a slot, and running.
    pub queue_depth: usize,
    pub running: usize,
    /// The memory budget and what is charged to it now.
    pub memory_charged_bytes: u64,
    pub memory_budget_bytes: u64,
    /// Worker processes alive, and the pool's size.
    pub workers: usize,
    pub workers_configured: usize,
    pub counters: ConsoleCounters,
    /// Every tenant's use of each quota.
    pub tenants: Vec<TenantState>,
    /// The newest audit lines, oldest first.
    pub audit: Vec<String>,
}

/// A tenant, as the console shows it.
#[derive(Debug, Serialize)]
pub struct TenantState {
    pub tenant: String,
    pub quotas: Vec<QuotaUse>,
}

impl Runner {
    /// The console's reading of the server now.
    pub fn console_state(&self) -> ConsoleState {
        let g = self.gauges();
        let mut tenants: Vec<TenantState> = self
            .tenants()
            .into_iter()
            .map(|t| TenantState {
                tenant: t.id().to_string(),
                quotas: t.usage(),
            })
            .collect();
        tenants.sort_by(|a, b| a.tenant.cmp(&b.tenant));
        ConsoleState {
            at: rfc3339_now(),
            ready: g.ready,
            live_sessions: g.live_sessions,
            hibernated_sessions: g.hibernated_sessions,
            queue_depth: g.queue_depth,
            running: g.running,
            memory_charged_bytes: g.memory_charged_bytes,
            memory_budget_bytes: g.memory_budget_bytes,
            workers: g.workers,
            workers_configured: g.workers_configured,
            counters: self.metrics.console(),
            tenants,
            audit: self.audit.recent(),
        }
    }
}
