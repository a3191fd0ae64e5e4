//! A session's own snapshot: written after every turn of a durable session and for every
//! session at shutdown, through the cluster's lease when there is one; forgotten when the
//! session ends; looked for before a session id is called unknown.

use std::sync::Arc;

use super::Runner;
use super::capture::{binding, capture, encode_now, record_of};
use crate::snapshot::{SessionImage, SnapshotId};
use crate::supervisor::cluster::{Cluster, Holder, Seen};
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::session::{PutBack, Session, is_session_id};
use crate::supervisor::snapshots::Snapshots;
use crate::vivarium::Vivarium;

impl Runner {
    /// Writes `image` as `session`'s own snapshot: encoded on a blocking thread, stored in
    /// the background, off the response path; with `--cluster`, before the response (a
    /// durable turn answered is a turn another node can bring back), committed through the
    /// session's lease ([`Cluster::commit`]). Writes of one session land in the order they
    /// were taken (an older one finishing late is dropped), and each replaces the previous
    /// in one step, so the store always holds a whole, recent snapshot.
    ///
    /// With `--cluster`, a session whose lease another node took meanwhile (a turn ran here
    /// while the proxy sent the session elsewhere, even during this write) is given up, and
    /// this is an error: what ran here is not the session's state, so it must not be
    /// answered as done (the new node has the state of the last turn committed).
    #[tracing::instrument(name = "snapshot.write_own", skip_all, fields(session = %session.id))]
    pub(super) async fn keep_own_snapshot(
        &self,
        session: &Arc<Session>,
        state: SessionImage,
    ) -> SupervisorResult<()> {
        let Some(host) = self.loaded_host().cloned() else {
            return Ok(());
        };
        let taken = session.next_own_generation();
        let turns = session.turns();
        let Some(c) = self.cluster.clone() else {
            let (snapshots, s) = (self.snapshots.clone(), session.clone());
            tokio::spawn(async move {
                if let Err(e) =
                    write_own(&host, &snapshots, None, &s, state, turns, taken, false).await
                {
                    tracing::warn!(session = %s.id, error = %e, "could not store the session's snapshot");
                }
            });
            return Ok(());
        };
        let written = write_own(
            &host,
            &self.snapshots,
            Some(&c),
            session,
            state,
            turns,
            taken,
            false,
        );
        match written.await {
            Ok(_) => Ok(()),
            Err(e @ SupervisorError::SessionNotFound(_)) => {
                self.give_up(session, &Holder::Nobody);
                Err(e)
            }
            Err(SupervisorError::SessionElsewhere { node, .. }) => {
                self.give_up(session, &Holder::Live(node.clone()));
                Err(SupervisorError::SessionMoving {
                    id: session.id.clone(),
                    why: format!(
                        "node {node} took it over while this ran here, so what ran here was not kept"
                    ),
                })
            }
            // The lease was released, or changed while the snapshot was written: the write
            // is nobody's state, so neither is this copy.
            Err(e @ SupervisorError::SessionMoving { .. }) => {
                self.give_up(session, &Holder::Released);
                Err(e)
            }
            Err(e) => {
                // A store error: the state is still here, and the lease is this node's: the
                // turn stands.
                tracing::warn!(session = %session.id, error = %e, "could not store the session's snapshot");
                Ok(())
            }
        }
    }

    /// Removes session `id`'s own snapshot (it was closed or expired), in the background.
    /// With `--cluster`, only while this node holds its lease (another node may have taken
    /// the session over: its snapshot is that node's now), and the lease goes too.
    pub(super) fn forget_own_snapshot(&self, id: &str) {
        tokio::spawn(self.forgetting_own_snapshot(id));
    }

    /// [`Runner::forget_own_snapshot`], waited for: where an answer must not leave before the
    /// snapshot is gone (a close, whose 204 is the session's end; a hibernation that lost to
    /// a close), since a session not live here comes back from its own snapshot on its next
    /// request. A task of its own, so a caller that goes away does not stop it halfway.
    pub(super) async fn forget_own_snapshot_before_answering(&self, id: &str) {
        let _ = tokio::spawn(self.forgetting_own_snapshot(id)).await;
    }

    fn forgetting_own_snapshot(
        &self,
        id: &str,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let snapshots = self.snapshots.clone();
        let own = SnapshotId::for_session(id);
        let cluster = self.cluster.clone();
        let id = id.to_string();
        async move {
            if let Some(c) = cluster {
                let Ok(seen) = c.seen(&id).await else {
                    return;
                };
                if !matches!(seen.holder, Holder::Me | Holder::Nobody) {
                    return;
                }
                let _ = c.forget(&id, &seen).await;
                if let Some(committed) = seen.lease.map(|l| l.own_snapshot()) {
                    let _ = snapshots.delete_own(&committed).await;
                }
            }
            let _ = snapshots.delete_own(&own).await;
        }
    }

    /// Whether the store holds session `id`'s own snapshot (a session not live here): with
    /// `--cluster`, the one its lease names, starting from `seen` when the caller has just
    /// read it. (A commit replaces that object and removes the one before: when the named
    /// one is gone, the lease is read again, in case it moved on.)
    pub(super) async fn has_own_snapshot(&self, id: &str, mut seen: Option<Seen>) -> bool {
        if !is_session_id(id) {
            return false;
        }
        let Some(c) = &self.cluster else {
            return self
                .snapshots
                .exists(&SnapshotId::for_session(id))
                .await
                .unwrap_or(false);
        };
        let mut named = None;
        for _ in 0..4 {
            let seen = match seen.take() {
                Some(s) => s,
                None => match c.seen(id).await {
                    Ok(s) => s,
                    Err(_) => return false,
                },
            };
            let own = seen
                .lease
                .map_or_else(|| SnapshotId::for_session(id), |l| l.own_snapshot());
            if named.as_ref() == Some(&own) {
                return false;
            }
            if self.snapshots.exists(&own).await.unwrap_or(false) {
                return true;
            }
            named = Some(own);
        }
        false
    }

    pub(super) async fn keep_on_shutdown(
        &self,
        host: &Arc<Vivarium>,
        s: &Arc<Session>,
    ) -> SupervisorResult<()> {
        let busy = s.begin()?;
        let (busy, image) = capture(self, busy).await?;
        busy.finish(PutBack::Same);
        self.write_own_now(host, s, image?).await.map(drop)
    }

    /// Stores `image` as `s`'s own snapshot now, as its newest generation, and, with
    /// `--cluster`, lets its lease go in the same commit (hibernation, the drain: any node
    /// may take it from here); the bytes written.
    pub(super) async fn write_own_now(
        &self,
        host: &Vivarium,
        s: &Arc<Session>,
        image: SessionImage,
    ) -> SupervisorResult<u64> {
        let taken = s.next_own_generation();
        let turns = s.turns();
        let cluster = self.cluster.as_deref();
        write_own(host, &self.snapshots, cluster, s, image, turns, taken, true).await
    }
}

/// Encodes and stores `session`'s own snapshot number `taken`, unless a newer one is
/// already stored; the bytes written.
///
/// Without a cluster, under the name derived from the session's id, replacing the last.
/// With one (`cluster`), as a new object that becomes the session's state only through
/// [`Cluster::commit`] on the lease read here, under the session's write lock (so its own
/// writes never race each other's commits): a lease this node no longer holds is the error
/// that says why (`session_elsewhere`, `session_moving`, `session_not_found` when it was
/// closed), and the object is removed. `release` lets the lease go in the same commit.
#[allow(clippy::too_many_arguments)]
async fn write_own(
    host: &Vivarium,
    snapshots: &Snapshots,
    cluster: Option<&Cluster>,
    session: &Arc<Session>,
    state: SessionImage,
    turns: u64,
    taken: u64,
    release: bool,
) -> SupervisorResult<u64> {
    let mut written = session.durable_written.lock().await;
    if taken <= *written {
        return Ok(0);
    }
    let binding = binding(host, session.template)?;
    let record = Some(record_of(session));
    let bytes = encode_now(state, binding, session.owner.clone(), turns, record).await?;
    let size = bytes.len() as u64;
    let Some(c) = cluster else {
        snapshots
            .put_at(
                &SnapshotId::for_session(&session.id),
                bytes,
                &session.tenant,
            )
            .await?;
        *written = taken;
        return Ok(size);
    };
    let seen = c.seen(&session.id).await?;
    not_mine(&session.id, &seen.holder)?;
    let object = SnapshotId::random();
    snapshots.put_at(&object, bytes, &session.tenant).await?;
    debug_commit_delay().await;
    if !c.commit(&session.id, &seen, &object, release).await? {
        let _ = snapshots.delete_own(&object).await;
        let now = c.seen(&session.id).await?;
        not_mine(&session.id, &now.holder)?;
        return Err(SupervisorError::SessionMoving {
            id: session.id.clone(),
            why: "its lease changed while its snapshot was written".into(),
        });
    }
    // The object the lease named before is nobody's state now.
    let before = seen.lease.as_ref().map(|l| l.own_snapshot());
    if let Some(before) = before.filter(|b| *b != object) {
        let snapshots = snapshots.clone();
        tokio::spawn(async move {
            let _ = snapshots.delete_own(&before).await;
        });
    }
    *written = taken;
    Ok(size)
}

/// The error for a session whose lease, as read, is not this node's (`Ok` when it is).
fn not_mine(id: &str, holder: &Holder) -> SupervisorResult<()> {
    let id = id.to_string();
    match holder {
        Holder::Me => Ok(()),
        // Its lease is gone: another node closed it.
        Holder::Nobody => Err(SupervisorError::SessionNotFound(id)),
        Holder::Live(node) | Holder::Draining(node) | Holder::Dead(node) => {
            Err(SupervisorError::SessionElsewhere {
                id,
                node: node.clone(),
            })
        }
        Holder::Released => Err(SupervisorError::SessionMoving {
            id,
            why: "it was released to the other nodes".into(),
        }),
    }
}

/// Debug builds only, for the tests of the commit's race: waits
/// `VIVARIUM_DEBUG_COMMIT_DELAY_MS` between writing a session's snapshot and committing it.
async fn debug_commit_delay() {
    #[cfg(debug_assertions)]
    {
        use std::time::Duration;
        static DELAY: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
        let delay = DELAY.get_or_init(|| {
            std::env::var("VIVARIUM_DEBUG_COMMIT_DELAY_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map(Duration::from_millis)
        });
        if let Some(d) = delay {
            tokio::time::sleep(*d).await;
        }
    }
}
