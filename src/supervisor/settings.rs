//! What the control plane is built with: the part of `vivarium serve`'s settings
//! (`server::Config`) that admission, the session registry, snapshots, the cluster, the
//! leakage guard and code mode's executions use, and the egress performer (network by
//! exception) when the operator allows any host.

use std::time::Duration;

use crate::leakage::{LeakPolicy, Scanner};
use crate::limits::Limits;

/// The control plane's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Whether the memory budget is counted in a page the workers share (there are workers).
    pub shared_budget: bool,
    /// What every running sandbox and resident session may hold together, in bytes.
    pub memory_budget_bytes: u64,
    /// Executions and session turns running at once (at least 1).
    pub max_concurrency: usize,
    /// Requests that may wait for a free execution slot.
    pub queue_depth: usize,
    /// How long a request waits in the queue before it is refused.
    pub queue_timeout: Duration,
    /// Resident sessions at most.
    pub max_sessions: usize,
    /// Hibernated sessions at most.
    pub max_hibernated_sessions: usize,
    /// A session unused for this long is closed.
    pub session_idle: Duration,
    /// A session is closed this long after it opened, used or not.
    pub session_lifetime: Duration,
    /// What a session keeps of its last turns, unless it asks for fewer or more.
    pub turn_history: crate::vocabulary::TurnHistory,
    /// What a request may ask for: the core's maxima, memory lowered to the budget.
    pub maximum: Limits,
    /// The output-leakage rules and policies.
    pub leakage: LeakageConfig,
    /// This node's id.
    pub node_id: String,
    /// With `--cluster`: how long a silent node is still alive.
    pub cluster_ttl: Option<Duration>,
    /// How long a snapshot is kept.
    pub snapshot_retention: Duration,
    /// Code mode's executions: how many, how long resident, how long kept.
    pub executions: crate::supervisor::executions::ExecutionSettings,
    /// Network by exception: the performer, when the operator allows any host.
    pub egress: Option<std::sync::Arc<crate::supervisor::egress::Egress>>,
    /// Where webhooks may be sent.
    pub webhooks: crate::supervisor::events::WebhookSettings,
    /// Where user templates are kept (`None`: the runtime's home's `user-templates`), and
    /// what a tenant may hold of them.
    pub templates: Option<crate::supervisor::templates::TemplateSettings>,
}

/// The output-leakage settings: the rules, compiled, and the policies.
#[derive(Clone)]
pub struct LeakageConfig {
    /// Every rule: built in, and the operator's file.
    pub scanner: std::sync::Arc<Scanner>,
    /// The policy of a request that names none.
    pub default: LeakPolicy,
    /// The weakest policy a request may name.
    pub floor: LeakPolicy,
}

impl std::fmt::Debug for LeakageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeakageConfig")
            .field("rules", &self.scanner.rule_count())
            .field("default", &self.default)
            .field("floor", &self.floor)
            .finish()
    }
}
