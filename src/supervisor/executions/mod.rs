//! Code mode's executions: the ones this node drives (resident: their program is running or
//! waits in its worker for answers), and the ones kept only as a journal in the snapshot
//! store (evicted after `resident_for`, or left by a restart), each counted against its
//! tenant's `suspended_executions` quota and the server's cap.
//!
//! A suspended execution's journal is written before the response that says it is
//! suspended leaves, so it survives the server's `kill -9`; bringing it back replays it
//! (`journal.rs`). Journals are kept as snapshots are ([`Snapshots::put_at`]): each write
//! reserved first in its tenant's `snapshot_bytes` quota (a rewrite asks only for its
//! growth), the bytes given back when the journal is deleted. An execution that ends, is
//! cancelled, or expires (`ttl` after its last suspension) is forgotten, its journal
//! deleted.

mod execution;
mod journal;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use execution::{Execution, Finished, Progress, Stop, shown};
pub use journal::Journal;

use super::error::{SupervisorError, SupervisorResult};
use super::snapshots::Snapshots;
use super::tenants::{Held, Quota, Tenant};
use super::time::now_secs;
use crate::snapshot::SnapshotId;
use crate::sync::lock;

/// How long executions stay, and how many.
#[derive(Debug, Clone, Copy)]
pub struct ExecutionSettings {
    /// Executions this node counts at most (resident or kept).
    pub max: usize,
    /// How long a suspended execution stays resident before only its journal is kept.
    pub resident_for: Duration,
    /// How long after its last suspension an unanswered execution is kept.
    pub ttl: Duration,
}

struct Entry {
    /// Its place in its tenant's quota (and its tenant, whose `snapshot_bytes` its journal
    /// counts against).
    held: Held,
    owner: Option<String>,
    resident: Option<Arc<Execution>>,
    /// Its journal is in the store.
    stored: bool,
    expires_at: u64,
}

/// See the module documentation.
pub struct Executions {
    /// The store the journals are kept in, and what each tenant keeps there.
    snapshots: Snapshots,
    settings: ExecutionSettings,
    entries: Mutex<HashMap<String, Entry>>,
}

impl Executions {
    /// None yet, journals kept among `snapshots` (counted with them).
    pub fn new(snapshots: Snapshots, settings: ExecutionSettings) -> Self {
        Executions {
            snapshots,
            settings,
            entries: Mutex::default(),
        }
    }

    /// When a journal written now expires.
    pub fn expiry(&self) -> u64 {
        now_secs() + self.settings.ttl.as_secs()
    }

    /// Counts `exec` (of `tenant`) as resident here: a place in the tenant's quota and the
    /// server's cap, or the refusal.
    pub fn admit(&self, tenant: &Arc<Tenant>, exec: Arc<Execution>) -> SupervisorResult<()> {
        let mut entries = lock(&self.entries);
        if let Some(e) = entries.get_mut(&exec.id) {
            // Another request brings it back already: one program per execution.
            if e.resident.is_some() {
                return Err(SupervisorError::ExecutionBusy(exec.id.clone()));
            }
            // Brought back while counted here (evicted): the same place.
            e.resident = Some(exec);
            return Ok(());
        }
        let entry = self.place(
            entries.len(),
            tenant,
            exec.owner.clone(),
            Some(exec.clone()),
        )?;
        entries.insert(exec.id.clone(), entry);
        Ok(())
    }

    /// Counts a journal kept in the store (a fork) for `tenant`.
    pub fn admit_stored(&self, tenant: &Arc<Tenant>, journal: &Journal) -> SupervisorResult<()> {
        let mut entries = lock(&self.entries);
        let entry = self.place(entries.len(), tenant, journal.owner.clone(), None)?;
        entries.insert(
            journal.id.clone(),
            Entry {
                stored: true,
                expires_at: journal.expires_at,
                ..entry
            },
        );
        Ok(())
    }

    /// A new entry's place, `counted` being counted already: under the server's cap and in
    /// the tenant's `suspended_executions`.
    fn place(
        &self,
        counted: usize,
        tenant: &Arc<Tenant>,
        owner: Option<String>,
        resident: Option<Arc<Execution>>,
    ) -> SupervisorResult<Entry> {
        if counted >= self.settings.max {
            return Err(SupervisorError::Overloaded {
                message: format!(
                    "this server keeps {} code-mode executions at most; answer or cancel some",
                    self.settings.max
                ),
                retry_after_secs: 1,
            });
        }
        Ok(Entry {
            held: tenant.take(Quota::SuspendedExecutions, 1)?,
            owner,
            resident,
            stored: false,
            expires_at: self.expiry(),
        })
    }

    /// Execution `id` if it is resident here and `owner`'s.
    pub fn resident(&self, id: &str, owner: Option<&str>) -> Option<Arc<Execution>> {
        let entries = lock(&self.entries);
        let e = entries.get(id)?;
        (e.owner.as_deref() == owner)
            .then(|| e.resident.clone())
            .flatten()
    }

    /// Writes `journal` to the store (before a response says its execution is suspended),
    /// within its tenant's `snapshot_bytes` quota, reserved before the write. An execution
    /// forgotten meanwhile (cancelled, expired) keeps nothing.
    pub async fn keep(&self, journal: &Journal) -> SupervisorResult<()> {
        let bytes = journal.encode();
        if bytes.len() > journal::MAX_JOURNAL_BYTES {
            return Err(SupervisorError::InvalidRequest(format!(
                "the suspended execution's journal (its program's files and every answer so \
                 far) is larger than {} bytes: answer with smaller results",
                journal::MAX_JOURNAL_BYTES
            )));
        }
        let gone = || SupervisorError::ExecutionNotFound(journal.id.clone());
        let tenant = lock(&self.entries)
            .get(&journal.id)
            .map(|e| e.held.tenant().clone())
            .ok_or_else(gone)?;
        let sid = Journal::store_id(&journal.id);
        if let Err(e) = self.snapshots.put_at(&sid, bytes, &tenant).await {
            // Its first journal refused (its tenant's `snapshot_bytes` full, a store error):
            // nobody was told its id and nothing could bring it back, so it ends here
            // rather than hold its places until it expires.
            if !self.snapshots.exists(&sid).await.unwrap_or(true) {
                self.forget(&journal.id).await;
            }
            return Err(e);
        }
        let kept = match lock(&self.entries).get_mut(&journal.id) {
            Some(e) => {
                e.stored = true;
                e.expires_at = journal.expires_at;
                true
            }
            None => false,
        };
        if !kept {
            // Forgotten while it was written: its deletion may have come first.
            let _ = self.snapshots.delete_own(&sid).await;
            return Err(gone());
        }
        Ok(())
    }

    /// The journal of execution `id` from the store, if it is `owner`'s and has not expired
    /// (an expired one is deleted).
    pub async fn load(&self, id: &str, owner: Option<&str>) -> SupervisorResult<Journal> {
        let not_found = || SupervisorError::ExecutionNotFound(id.to_string());
        let sid = Journal::store_id(id);
        let bytes = self
            .snapshots
            .store()
            .get(&sid)
            .await
            .map_err(|e| SupervisorError::SnapshotStore(e.to_string()))?
            .ok_or_else(not_found)?;
        let journal = Journal::decode(id, &bytes).ok_or_else(not_found)?;
        if journal.owner.as_deref() != owner {
            return Err(not_found());
        }
        if journal.expires_at < now_secs() {
            self.forget(id).await;
            return Err(not_found());
        }
        Ok(journal)
    }

    /// Forgets execution `id`: stops its run, gives back its place, deletes its journal (and
    /// gives back its bytes).
    pub async fn forget(&self, id: &str) {
        let gone = lock(&self.entries).remove(id);
        if let Some(e) = &gone
            && let Some(exec) = &e.resident
        {
            exec.stop_run(SupervisorError::ExecutionNotFound(id.to_string()));
        }
        let _ = self.snapshots.delete_own(&Journal::store_id(id)).await;
    }

    /// Lets go of execution `id`'s program here, its journal kept in the store to bring it
    /// back (a bring-back that could not start: its packages could not be had).
    pub fn release(&self, id: &str) {
        if let Some(e) = lock(&self.entries).get_mut(id) {
            e.stored = true;
            evict(id, e);
        }
    }

    /// Evicts the executions suspended longer than `resident_for` (their journal stays and
    /// brings them back), forgets the expired ones, and deletes the expired journals among
    /// `not_snapshots` (ids the store holds that are no snapshots: journals left by a
    /// restart, which nobody here counts). Returns how many were evicted and forgotten.
    pub async fn sweep(&self, not_snapshots: Option<Vec<SnapshotId>>) -> (usize, usize) {
        let now = now_secs();
        let mut evicted = 0;
        let mut expired = Vec::new();
        {
            let mut entries = lock(&self.entries);
            for (id, e) in entries.iter_mut() {
                if e.expires_at < now {
                    expired.push(id.clone());
                    continue;
                }
                let idle = e
                    .resident
                    .as_ref()
                    .and_then(|x| (x.kept && e.stored).then(|| x.suspended_since()).flatten());
                if idle.is_some_and(|at| at.elapsed() >= self.settings.resident_for) && evict(id, e)
                {
                    evicted += 1;
                }
            }
        }
        for id in &expired {
            self.forget(id).await;
        }
        // Journals nobody here counts (left by a restart): expired ones go.
        let mut orphans = 0;
        if let Some(ids) = not_snapshots {
            let store = self.snapshots.store();
            for sid in ids {
                if let Ok(Some(prefix)) = store.get_prefix(&sid, Journal::PREFIX_BYTES).await
                    && let Some(at) = Journal::expiry(&prefix)
                    && at < now
                    && self.snapshots.delete_own(&sid).await.unwrap_or(false)
                {
                    orphans += 1;
                }
            }
        }
        (evicted, expired.len() + orphans)
    }
}

/// Stops `e`'s resident program, if it has one, keeping its place and its journal; whether it
/// had one. A request that met it just before is told to come again: it then brings the
/// program back from its journal.
fn evict(id: &str, e: &mut Entry) -> bool {
    let Some(exec) = e.resident.take() else {
        return false;
    };
    exec.stop_run(SupervisorError::ExecutionBusy(id.to_string()));
    true
}
