//! What a store's failure is, for snapshots and records alike.

/// A store's failure (I/O, the network): the snapshot's fate is unknown, so the caller
/// answers 503 and keeps the session.
#[derive(Debug, thiserror::Error)]
#[error("the snapshot store ({store}): {message}")]
pub struct StoreError {
    /// Which store.
    pub store: String,
    /// What went wrong.
    pub message: String,
}
