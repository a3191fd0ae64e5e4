//! Finding a session for a request: live here, hibernated here, or, on a node that does
//! not hold it, brought back from its own snapshot in the store. With `--cluster`, every
//! lookup reads the session's lease first (`supervisor/cluster.rs` has the rule), so a node
//! serves a session only while the lease names it, takes one over only as the rule allows,
//! and says clearly why it cannot (`session_elsewhere`, `session_moving`, `session_lost`).
//!
//! A session is its owner's alone (the API key that opened it): for any other key, every
//! lookup answers 404 before anything else is read or moved, on the node that holds it and
//! on every other.

use std::sync::Arc;

use super::Runner;
use crate::snapshot::SnapshotId;
use crate::supervisor::cluster::{Cluster, Holder, Lease, Seen};
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::metrics::CloseReason;
use crate::supervisor::session::{Session, is_session_id, may_use};
use crate::sync::lock;

impl Runner {
    /// The live session `id`; or, when this process does not hold it but the store has its
    /// own snapshot (a durable session after a crash, any session after a graceful restart,
    /// one whose node went away), the session brought back from it, under the same id, at
    /// its last completed turn. One session comes back once: concurrent requests for it
    /// wait for the first (requests for other sessions do not). Only for its owner `key`.
    pub async fn session(&self, id: &str, key: Option<&str>) -> SupervisorResult<Arc<Session>> {
        self.check_owner(id, key).await?;
        let here = self.sessions.get(id);
        let Some(cluster) = self.cluster.clone() else {
            return match here {
                Err(SupervisorError::SessionNotFound(_)) if is_session_id(id) => {
                    self.resume(id, key, None).await
                }
                other => other,
            };
        };
        match here {
            Ok(s) => {
                let seen = cluster.seen(id).await?;
                match seen.holder {
                    Holder::Me => return Ok(s),
                    // Every session live in a cluster node has a lease: none now means
                    // another node closed it.
                    Holder::Nobody => {
                        self.give_up(&s, &seen.holder);
                        return Err(SupervisorError::SessionNotFound(id.to_string()));
                    }
                    _ => self.give_up(&s, &seen.holder),
                }
            }
            Err(SupervisorError::SessionNotFound(_)) if is_session_id(id) => {}
            Err(e) => return Err(e),
        }
        self.resume(id, key, Some(&cluster)).await
    }

    /// 404 unless `key` may use session `id` ([`may_use`]), as far as anything can tell:
    /// this process's registry (live, hibernated or expired here), else the session's lease
    /// (`--cluster`), else its own snapshot's header. An id known nowhere passes: whoever
    /// looks it up answers for it.
    pub(super) async fn check_owner(&self, id: &str, key: Option<&str>) -> SupervisorResult<()> {
        let mut owner = self.sessions.owner_of(id);
        if owner.is_none() && is_session_id(id) {
            if let Some(c) = &self.cluster {
                owner = c.seen(id).await?.lease.map(|l| l.owner);
            }
            if owner.is_none() {
                owner = self
                    .snapshots
                    .own_owner(&SnapshotId::for_session(id))
                    .await?;
            }
        }
        match owner {
            Some(owner) if !may_use(owner.as_deref(), key) => {
                Err(SupervisorError::SessionNotFound(id.to_string()))
            }
            _ => Ok(()),
        }
    }

    /// Drops this node's copy of a session another node holds now, or closed (unwritten:
    /// the store has the other node's state, or nothing).
    pub(super) fn give_up(&self, s: &Arc<Session>, holder: &Holder) {
        tracing::warn!(session = %s.id, ?holder, "the lease no longer names this node; the copy here is dropped");
        let _ = self.sessions.remove(&s.id);
        self.metrics.session_closed(CloseReason::Moved);
        s.close().release();
    }

    /// Session `id` of `key`, not live here, from its own snapshot (under a gate per id).
    async fn resume(
        &self,
        id: &str,
        key: Option<&str>,
        cluster: Option<&Arc<Cluster>>,
    ) -> SupervisorResult<Arc<Session>> {
        // Ids nobody kept are answered without waiting behind a session that comes back
        // (with `--cluster`, from one reading of the lease).
        if !self.sessions.is_hibernated(id) {
            let seen = match cluster {
                Some(c) => Some(c.seen(id).await?),
                None => None,
            };
            if !self.has_own_snapshot(id, seen.clone()).await {
                return Err(match seen {
                    Some(seen) => why_not_here(id, seen),
                    None => SupervisorError::SessionNotFound(id.to_string()),
                });
            }
        }
        let gate = lock(&self.resuming)
            .entry(id.to_string())
            .or_default()
            .clone();
        let held = gate.lock().await;
        let back = match self.sessions.get(id) {
            Ok(s) => Ok(s),
            Err(_) => match cluster {
                Some(c) => self.take_over(id, key, c).await,
                None => self.bring_back(id, key, SnapshotId::for_session(id)).await,
            },
        };
        // The last one through lets the gate go; a session that came back is in the registry
        // by now, so whoever comes later finds it there.
        {
            let mut gates = lock(&self.resuming);
            if Arc::strong_count(&gate) == 2 {
                gates.remove(id);
            }
        }
        drop(held);
        back
    }

    /// Takes session `id`'s lease as the rule allows, then brings it back (for `key`, who
    /// may use it).
    async fn take_over(
        &self,
        id: &str,
        key: Option<&str>,
        cluster: &Cluster,
    ) -> SupervisorResult<Arc<Session>> {
        let seen = cluster.seen(id).await?;
        let durable = seen.lease.as_ref().is_some_and(|l| l.durable);
        match &seen.holder {
            Holder::Me => {}
            Holder::Draining(node) => {
                return Err(SupervisorError::SessionMoving {
                    id: id.to_string(),
                    why: format!("its node {node} is draining"),
                });
            }
            Holder::Live(node) if !durable => {
                // Hibernated here once, taken since: what this node kept is stale.
                self.sessions.unhibernate(id);
                return Err(SupervisorError::SessionElsewhere {
                    id: id.to_string(),
                    node: node.clone(),
                });
            }
            // No lease and no own snapshot: closed on another node since it hibernated here.
            Holder::Nobody if !self.has_own_snapshot(id, Some(seen.clone())).await => {
                self.sessions.unhibernate(id);
                return Err(SupervisorError::SessionNotFound(id.to_string()));
            }
            Holder::Nobody | Holder::Released | Holder::Dead(_) | Holder::Live(_) => {
                // The lease keeps naming the session's owner; with no lease yet, the owner
                // its own snapshot names.
                let owner = match &seen.lease {
                    Some(lease) => lease.owner.clone(),
                    None => self
                        .snapshots
                        .own_owner(&SnapshotId::for_session(id))
                        .await?
                        .flatten(),
                };
                if !cluster.take(id, &seen, durable, owner.as_deref()).await? {
                    // Another node took it between the reading and the writing.
                    return Err(SupervisorError::SessionMoving {
                        id: id.to_string(),
                        why: "another node took it over first".into(),
                    });
                }
                tracing::info!(session = %id, from = ?seen.holder, "session taken over");
            }
        }
        let own = seen
            .lease
            .as_ref()
            .map_or_else(|| SnapshotId::for_session(id), Lease::own_snapshot);
        self.bring_back(id, key, own).await
    }
}

/// Why session `id` (no own snapshot in the store, not hibernated here) is not here.
fn why_not_here(id: &str, seen: Seen) -> SupervisorError {
    let (id, node) = (id.to_string(), seen.lease.map(|l| l.node));
    match (seen.holder, node) {
        (Holder::Live(node), _) => SupervisorError::SessionElsewhere { id, node },
        (Holder::Draining(node), _) => SupervisorError::SessionMoving {
            id,
            why: format!("its node {node} is draining"),
        },
        (Holder::Dead(node), _) => SupervisorError::SessionLost { id, node },
        // This node's earlier life held it (a restart with the same id) and did not keep it.
        (Holder::Me, Some(node)) => SupervisorError::SessionLost { id, node },
        _ => SupervisorError::SessionNotFound(id),
    }
}
