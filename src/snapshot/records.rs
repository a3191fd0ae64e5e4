//! Small records beside the snapshots, written with compare-and-swap: what nodes sharing one
//! store agree through (a session's lease, a node's heartbeat). The store knows them only
//! as named bytes with a version; what they mean is the server's (`supervisor/cluster.rs`).

use futures_util::future::BoxFuture;

use super::store_error::StoreError;

/// A record's name: `lease-` and 24 hex digits (from a session id), or `node-` and a node
/// id. Made only by the constructors, so a name is never a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordName(String);

impl RecordName {
    /// The lease of session `session_id` (derived from the id, as its own snapshot's is).
    pub fn lease(session_id: &str) -> Self {
        use sha2::{Digest, Sha256};
        let h = Sha256::digest(format!("vivarium-lease\0{session_id}").as_bytes());
        RecordName(format!("lease-{}", &hex::encode(h)[..24]))
    }

    /// The heartbeat of node `node` (a checked [`is_node_id`]).
    pub fn node(node: &str) -> Option<Self> {
        is_node_id(node).then(|| RecordName(format!("node-{node}")))
    }

    /// The name as stored (no separators, no dots at the start).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `s` can name a node: 1 to 63 of `A-Z a-z 0-9 . _ -`, starting with a letter or
/// digit (a host name or a pod name).
pub fn is_node_id(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// A record's version as its store gives it (a content digest, an ETag): opaque, compared
/// only for equality.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(pub(super) String);

/// A record read back: its bytes and version, or `None` when there is none.
pub type Found = Option<(Vec<u8>, Version)>;

/// What a conditional write expects to find.
#[derive(Debug, Clone, Copy)]
pub enum Expect<'a> {
    /// No record under the name.
    Absent,
    /// The record at this version.
    At(&'a Version),
}

/// Records by name, each replaced only when it is as the writer last read it.
pub trait RecordStore: Send + Sync {
    /// The record and its version, or `None`.
    fn get_record<'a>(&'a self, name: &'a RecordName) -> BoxFuture<'a, Result<Found, StoreError>>;
    /// Writes `bytes` under `name` if the record is as `expect` says: `Some(new version)`;
    /// `None` when another writer got there first (nothing was written).
    fn put_record<'a>(
        &'a self,
        name: &'a RecordName,
        bytes: Vec<u8>,
        expect: Expect<'a>,
    ) -> BoxFuture<'a, Result<Option<Version>, StoreError>>;
    /// Removes the record, whatever its version (a session that ended).
    fn delete_record<'a>(&'a self, name: &'a RecordName) -> BoxFuture<'a, Result<(), StoreError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_never_paths() {
        assert_eq!(RecordName::lease("s-1").as_str().len(), "lease-".len() + 24);
        assert_ne!(RecordName::lease("s-1"), RecordName::lease("s-2"));
        assert_eq!(
            RecordName::node("pod-7.a_b").unwrap().as_str(),
            "node-pod-7.a_b"
        );
        for bad in ["", ".", "..", "../x", "a/b", "-x", "a b", &"x".repeat(64)] {
            assert!(RecordName::node(bad).is_none(), "{bad:?}");
        }
    }
}
