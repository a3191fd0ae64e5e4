//! Many nodes, one snapshot store, no coordinator (`--cluster`): which node holds a session
//! live is agreed through two kinds of record in the shared store, each replaced only by
//! compare-and-swap (`snapshot::RecordStore`).
//!
//! - A session's **lease** names the node that holds it live and a count of hand-overs
//!   (`epoch`). The node that opens a session creates it; a node that brings a session back
//!   from its own snapshot first takes the lease over, at the version it read; a node that
//!   drains marks its leases `released` after writing each session's snapshot.
//! - A node's **heartbeat**, rewritten every quarter of `--node-ttl-ms`, says it is alive
//!   (and whether it is draining). A lease whose node has not beaten for a whole TTL is a
//!   dead node's.
//!
//! The rule: a node serves a session only while the lease names it, and reads the lease on
//! every request for the session; a node takes a session over only when it is released, its
//! holder is dead, or its holder is alive and the session is durable (its own snapshot is
//! its state: the proxy's ring moved it). So no session is served by two nodes: the loser
//! of a race finds the lease changed and gives its copy up. Clocks are compared (the
//! heartbeat's time against the reader's), so nodes need synchronised clocks (NTP) to well
//! under the TTL.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::error::{SupervisorError, SupervisorResult};
use crate::snapshot::{Expect, RecordName, SnapshotId, SnapshotStore, StoreError, Version};

/// The longest record read back: anything larger is not one of ours.
const MAX_RECORD_BYTES: usize = 4096;

/// A session's lease, as stored (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lease {
    /// The session.
    pub session: String,
    /// The node that holds it (or held it last, when `released`).
    pub node: String,
    /// How many times it changed hands.
    pub epoch: u64,
    /// Its own snapshot holds every completed turn (`"durable": true`).
    pub durable: bool,
    /// Its node wrote its snapshot and let it go (a drain): any node may take it.
    pub released: bool,
    /// The id of the API key it belongs to ([`crate::supervisor::session::Session::owner`]),
    /// so any node can refuse another key before it moves anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The session's own snapshot as its holder last committed it (an id in the store):
    /// each write goes to a new object and becomes the session's state only when this
    /// field names it, by compare-and-swap on the lease the writer read, so a write that
    /// lands after another node took the session over is never the state anyone loads.
    /// `None`: the object named after the session (`SnapshotId::for_session`), as written
    /// without `--cluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

impl Lease {
    /// The own snapshot to load for this lease's session (a lease read back names a valid
    /// id or none: [`Cluster::seen`] refuses others).
    pub fn own_snapshot(&self) -> SnapshotId {
        self.snapshot
            .as_deref()
            .and_then(SnapshotId::parse)
            .unwrap_or_else(|| SnapshotId::for_session(&self.session))
    }
}

/// A node's heartbeat, as stored (JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Heartbeat {
    node: String,
    /// Milliseconds since the Unix epoch, by the node's clock.
    at_ms: u64,
    draining: bool,
}

/// Who holds a session, as this node sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// No lease: a session of before `--cluster`, or none at all.
    Nobody,
    /// This node.
    Me,
    /// Its node wrote it and let it go.
    Released,
    /// Another node, alive and serving.
    Live(String),
    /// Another node, alive and draining: it will release the session shortly.
    Draining(String),
    /// Another node that stopped beating.
    Dead(String),
}

/// A lease read back, with the version a take-over must replace.
#[derive(Debug, Clone)]
pub struct Seen {
    /// What the lease says (`None`: there is none).
    pub lease: Option<Lease>,
    version: Option<Version>,
    /// What that means here.
    pub holder: Holder,
}

/// This node's part in the cluster.
pub struct Cluster {
    node: String,
    store: Arc<dyn SnapshotStore>,
    ttl: Duration,
    draining: AtomicBool,
    /// The heartbeat's version after this node's last write of it.
    beat_version: tokio::sync::Mutex<Option<Version>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn store_error(e: StoreError) -> SupervisorError {
    SupervisorError::SnapshotStore(e.to_string())
}

/// Parses a record another node wrote: bounded, typed, or a store error naming it.
fn parse<T: serde::de::DeserializeOwned>(name: &RecordName, bytes: &[u8]) -> SupervisorResult<T> {
    if bytes.len() > MAX_RECORD_BYTES {
        return Err(SupervisorError::SnapshotStore(format!(
            "the record {} is {} bytes, more than any node writes",
            name.as_str(),
            bytes.len()
        )));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        SupervisorError::SnapshotStore(format!("the record {} is unreadable: {e}", name.as_str()))
    })
}

impl Cluster {
    /// Node `node` (a checked id) on `store`; a node silent for `ttl` is dead.
    pub fn new(node: String, store: Arc<dyn SnapshotStore>, ttl: Duration) -> Self {
        Cluster {
            node,
            store,
            ttl,
            draining: AtomicBool::new(false),
            beat_version: Default::default(),
        }
    }

    /// How often the heartbeat is written.
    pub fn beat_interval(&self) -> Duration {
        self.ttl / 4
    }

    /// Writes this node's heartbeat (now, and whether it drains). Another process writing
    /// the same node's heartbeat (two nodes given one id) is logged: their leases would
    /// look like one node's.
    pub async fn beat(&self) -> SupervisorResult<()> {
        let name = RecordName::node(&self.node).expect("node ids are checked at start");
        let bytes = serde_json::to_vec(&Heartbeat {
            node: self.node.clone(),
            at_ms: now_ms(),
            draining: self.draining.load(Ordering::Acquire),
        })
        .expect("a heartbeat serialises");
        let mut last = self.beat_version.lock().await;
        let expect = match last.as_ref() {
            Some(v) => Expect::At(v),
            None => Expect::Absent,
        };
        if let Some(v) = self
            .store
            .put_record(&name, bytes.clone(), expect)
            .await
            .map_err(store_error)?
        {
            *last = Some(v);
            return Ok(());
        }
        // Not as last written: this node's first beat over an earlier life's record, or
        // another process with the same id.
        let current = self.store.get_record(&name).await.map_err(store_error)?;
        if last.is_some() {
            tracing::error!(node = %self.node, "another process writes this node's heartbeat: give every node its own --node-id");
        }
        let expect = match current.as_ref() {
            Some((_, v)) => Expect::At(v),
            None => Expect::Absent,
        };
        *last = self
            .store
            .put_record(&name, bytes, expect)
            .await
            .map_err(store_error)?;
        Ok(())
    }

    /// From now on the heartbeat says this node drains (written at once).
    pub async fn start_draining(&self) {
        self.draining.store(true, Ordering::Release);
        if let Err(e) = self.beat().await {
            tracing::warn!(error = %e, "could not announce the drain");
        }
    }

    /// Reads session `id`'s lease and what it means here.
    pub async fn seen(&self, id: &str) -> SupervisorResult<Seen> {
        let name = RecordName::lease(id);
        let Some((bytes, version)) = self.store.get_record(&name).await.map_err(store_error)?
        else {
            return Ok(Seen {
                lease: None,
                version: None,
                holder: Holder::Nobody,
            });
        };
        let lease: Lease = parse(&name, &bytes)?;
        if lease.session != id {
            return Err(SupervisorError::SnapshotStore(format!(
                "the record {} names another session",
                name.as_str()
            )));
        }
        if lease
            .snapshot
            .as_deref()
            .is_some_and(|s| SnapshotId::parse(s).is_none())
        {
            return Err(SupervisorError::SnapshotStore(format!(
                "the record {} names a snapshot that is not an id",
                name.as_str()
            )));
        }
        let holder = if lease.released {
            Holder::Released
        } else if lease.node == self.node {
            Holder::Me
        } else {
            self.node_state(&lease.node).await?
        };
        Ok(Seen {
            lease: Some(lease),
            version: Some(version),
            holder,
        })
    }

    /// Another node's state from its heartbeat.
    async fn node_state(&self, node: &str) -> SupervisorResult<Holder> {
        let Some(name) = RecordName::node(node) else {
            return Ok(Holder::Dead(node.to_string()));
        };
        let Some((bytes, _)) = self.store.get_record(&name).await.map_err(store_error)? else {
            return Ok(Holder::Dead(node.to_string()));
        };
        let beat: Heartbeat = parse(&name, &bytes)?;
        let age = now_ms().saturating_sub(beat.at_ms);
        Ok(if age > self.ttl.as_millis() as u64 {
            Holder::Dead(node.to_string())
        } else if beat.draining {
            Holder::Draining(node.to_string())
        } else {
            Holder::Live(node.to_string())
        })
    }

    /// Takes session `id`'s lease as `seen` left it, naming `owner` (the one it named, or
    /// the session's): `Ok(true)` when this node holds it now, `Ok(false)` when another node
    /// changed it first.
    pub async fn take(
        &self,
        id: &str,
        seen: &Seen,
        durable: bool,
        owner: Option<&str>,
    ) -> SupervisorResult<bool> {
        let lease = Lease {
            session: id.to_string(),
            node: self.node.clone(),
            epoch: seen.lease.as_ref().map_or(1, |l| l.epoch + 1),
            durable,
            released: false,
            owner: owner.map(str::to_string),
            snapshot: seen.lease.as_ref().and_then(|l| l.snapshot.clone()),
        };
        self.write(id, &lease, seen.version.as_ref()).await
    }

    /// Makes `snapshot` session `id`'s state, if `seen`, the caller's reading, says this
    /// node holds it, at that reading's version; with `release`, lets the session go in
    /// the same write (a drain, a hibernation). `Ok(false)`: the lease changed since (another
    /// node took the session, or closed it), and `snapshot` is nobody's.
    pub async fn commit(
        &self,
        id: &str,
        seen: &Seen,
        snapshot: &SnapshotId,
        release: bool,
    ) -> SupervisorResult<bool> {
        let (Holder::Me, Some(lease)) = (&seen.holder, &seen.lease) else {
            return Ok(false);
        };
        let committed = Lease {
            snapshot: Some(snapshot.to_string()),
            released: release,
            ..lease.clone()
        };
        self.write(id, &committed, seen.version.as_ref()).await
    }

    /// Creates the lease of session `id` (of `owner`), new on this node.
    pub async fn create(
        &self,
        id: &str,
        durable: bool,
        owner: Option<&str>,
    ) -> SupervisorResult<()> {
        let lease = Lease {
            session: id.to_string(),
            node: self.node.clone(),
            epoch: 1,
            durable,
            released: false,
            owner: owner.map(str::to_string),
            snapshot: None,
        };
        if self.write(id, &lease, None).await? {
            Ok(())
        } else {
            Err(SupervisorError::Internal(format!(
                "session {id} already has a lease"
            )))
        }
    }

    /// Removes session `id`'s lease if `seen`, the caller's reading, says this node holds it
    /// (the session closed or expired).
    pub async fn forget(&self, id: &str, seen: &Seen) -> SupervisorResult<()> {
        if seen.holder == Holder::Me {
            self.store
                .delete_record(&RecordName::lease(id))
                .await
                .map_err(store_error)?;
        }
        Ok(())
    }

    async fn write(&self, id: &str, lease: &Lease, at: Option<&Version>) -> SupervisorResult<bool> {
        let bytes = serde_json::to_vec(lease).expect("a lease serialises");
        let expect = match at {
            Some(v) => Expect::At(v),
            None => Expect::Absent,
        };
        Ok(self
            .store
            .put_record(&RecordName::lease(id), bytes, expect)
            .await
            .map_err(store_error)?
            .is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::open_store;

    fn store() -> (Arc<dyn SnapshotStore>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("vivarium-cluster-{}", rand::random::<u32>()));
        (open_store(&dir, None).unwrap(), dir)
    }

    #[tokio::test]
    async fn leases_move_only_as_the_rule_says() {
        let (store, dir) = store();
        let ttl = Duration::from_millis(300);
        let a = Cluster::new("a".into(), store.clone(), ttl);
        let b = Cluster::new("b".into(), store.clone(), ttl);
        a.beat().await.unwrap();
        b.beat().await.unwrap();
        assert_eq!(a.seen("s-1").await.unwrap().holder, Holder::Nobody);
        a.create("s-1", false, None).await.unwrap();
        assert!(
            a.create("s-1", false, None).await.is_err(),
            "one lease per session"
        );
        assert_eq!(a.seen("s-1").await.unwrap().holder, Holder::Me);
        assert_eq!(
            b.seen("s-1").await.unwrap().holder,
            Holder::Live("a".into())
        );

        // Two take-overs from one reading: one wins.
        let seen = b.seen("s-1").await.unwrap();
        let c = Cluster::new("c".into(), store.clone(), ttl);
        assert!(b.take("s-1", &seen, true, None).await.unwrap());
        assert!(!c.take("s-1", &seen, true, None).await.unwrap());
        let now = a.seen("s-1").await.unwrap();
        assert_eq!(now.holder, Holder::Live("b".into()));
        assert_eq!(now.lease.as_ref().unwrap().epoch, 2);

        // A node that only forgets its own.
        a.forget("s-1", &a.seen("s-1").await.unwrap())
            .await
            .unwrap();
        assert_eq!(
            a.seen("s-1").await.unwrap().holder,
            Holder::Live("b".into())
        );

        // Draining, then released.
        b.start_draining().await;
        assert_eq!(
            a.seen("s-1").await.unwrap().holder,
            Holder::Draining("b".into())
        );
        let seen = b.seen("s-1").await.unwrap();
        assert!(
            b.commit("s-1", &seen, &SnapshotId::random(), true)
                .await
                .unwrap()
        );
        // A commit at a reading that is no longer the lease's lands nowhere.
        assert!(
            !b.commit("s-1", &seen, &SnapshotId::random(), false)
                .await
                .unwrap()
        );
        assert_eq!(a.seen("s-1").await.unwrap().holder, Holder::Released);

        // A node that stops beating is dead after the TTL.
        a.create("s-2", false, None).await.unwrap();
        tokio::time::sleep(ttl + Duration::from_millis(100)).await;
        b.beat().await.unwrap();
        assert_eq!(
            b.seen("s-2").await.unwrap().holder,
            Holder::Dead("a".into())
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_lease_names_its_owner_and_keeps_it_over_a_take_over() {
        let (store, dir) = store();
        let ttl = Duration::from_secs(5);
        let (a, b) = (
            Cluster::new("a".into(), store.clone(), ttl),
            Cluster::new("b".into(), store.clone(), ttl),
        );
        a.create("s-3", true, Some("alice")).await.unwrap();
        let seen = b.seen("s-3").await.unwrap();
        assert_eq!(seen.lease.as_ref().unwrap().owner.as_deref(), Some("alice"));
        assert!(b.take("s-3", &seen, true, Some("alice")).await.unwrap());
        let now = a.seen("s-3").await.unwrap().lease.unwrap();
        assert_eq!(
            (now.node.as_str(), now.owner.as_deref()),
            ("b", Some("alice"))
        );
        // Without keys, a lease reads as it did before owners existed.
        a.create("s-4", false, None).await.unwrap();
        let (bytes, _) = store
            .get_record(&RecordName::lease("s-4"))
            .await
            .unwrap()
            .unwrap();
        assert!(!String::from_utf8(bytes).unwrap().contains("owner"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_lease_of_the_version_before_owners_and_commits_reads_as_such() {
        let (store, dir) = store();
        let a = Cluster::new("a".into(), store.clone(), Duration::from_secs(5));
        let old = br#"{"session":"s-5","node":"a","epoch":3,"durable":true,"released":true}"#;
        store
            .put_record(&RecordName::lease("s-5"), old.to_vec(), Expect::Absent)
            .await
            .unwrap();
        let lease = a.seen("s-5").await.unwrap().lease.unwrap();
        assert_eq!(
            (lease.owner.as_deref(), lease.snapshot.as_deref()),
            (None, None)
        );
        assert_eq!(lease.own_snapshot(), SnapshotId::for_session("s-5"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn records_from_the_store_are_checked() {
        let (store, dir) = store();
        let a = Cluster::new("a".into(), store.clone(), Duration::from_secs(5));
        let name = RecordName::lease("s-9");
        for bad in [
            &b"{"[..],
            br#"{"session":"s-9","node":"a"}"#,
            // A committed snapshot that is not an id.
            br#"{"session":"s-9","node":"a","epoch":1,"durable":true,"released":false,"snapshot":"../x"}"#,
            // A field this version does not know (a newer node's lease): refused, not guessed.
            br#"{"session":"s-9","node":"a","epoch":1,"durable":false,"released":false,"fence":7}"#,
            &[b' '; 5000][..],
        ] {
            store.delete_record(&name).await.unwrap();
            store
                .put_record(&name, bad.to_vec(), Expect::Absent)
                .await
                .unwrap();
            let e = a.seen("s-9").await.unwrap_err();
            assert!(matches!(e, SupervisorError::SnapshotStore(_)), "{e}");
        }
        // A lease copied under another session's name is refused too.
        store.delete_record(&name).await.unwrap();
        let other = serde_json::to_vec(&Lease {
            session: "s-8".into(),
            node: "a".into(),
            epoch: 1,
            durable: false,
            released: false,
            owner: None,
            snapshot: None,
        })
        .unwrap();
        store
            .put_record(&name, other, Expect::Absent)
            .await
            .unwrap();
        assert!(a.seen("s-9").await.is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
