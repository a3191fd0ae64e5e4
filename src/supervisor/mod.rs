//! The control plane, with no HTTP: admission and fair shares, tenants and their quotas, the
//! session registry, runs and turns, residency (hibernate, wake, pressure, drain),
//! durability, user snapshots, placement and the cluster, the audit log and the metrics.
//!
//! Every front door (`server::api`) parses its wire format. A run, a session's opening, a
//! turn or a query of a session goes to [`intake`], where a request becomes a run
//! (readiness, limits, files, packages, the leakage guard, tools and network worked out
//! once for every door alike); other calls go straight to [`Runner`], the one seam the
//! intake calls too. What goes wrong comes back as a [`SupervisorError`] of domain causes,
//! which `server/error.rs` alone turns into HTTP.

pub(crate) mod admission;
pub(crate) mod audit;
pub(crate) mod cluster;
pub(crate) mod egress;
mod error;
pub(crate) mod events;
pub(crate) mod executions;
pub(crate) mod fair;
pub(crate) mod housekeeping;
pub(crate) mod intake;
pub(crate) mod metrics;
pub(crate) mod registry;
pub(crate) mod runner;
pub(crate) mod session;
mod settings;
pub(crate) mod snapshots;
pub(crate) mod templates;
pub(crate) mod tenants;
pub(crate) mod time;
pub(crate) mod volumes;

/// How a fresh run ended (it ran, with its report and findings; or the check denied it):
/// the answer the doors render, whatever ran it.
pub use crate::vivarium::Executed;
pub use error::{ErrorCode, SupervisorError, SupervisorResult};
pub use runner::Runner;
pub use settings::{LeakageConfig, Settings};
