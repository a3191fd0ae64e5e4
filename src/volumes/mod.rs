//! Volumes: named folders of files that outlive every sandbox, each its tenant's, kept under
//! the server's home (`<home>/volumes`, `--volume-dir`).
//!
//! - `names.rs`: what a volume's name and a path inside it may be (no `..`, no absolute
//!   escape, no NUL, bounded lengths), checked before anything touches the disk.
//! - `store.rs`: the volumes on disk, reached only through `cap-std` directories (a symlink
//!   never leads out of a volume), their usage against [`VolumeLimits`], writes landing by
//!   rename (a reader sees a file whole, before or after; two writers of one file, the last
//!   to finish wins).
//! - `mount.rs`: a volume mounted into a run as the caller names it ([`VolumeMount`]); what
//!   the host lends the sandbox for it is [`VolumeStore::lend`]'s `guest::Lent`.
//! - `shared.rs`: the volumes in a cluster's shared object store (the same store as its
//!   snapshots), one object per file; `replica.rs`: a node's folders kept as replicas of
//!   them (pulled before a use, pushed after a change).
//! - `error.rs`: why a volume operation was refused or failed, as domain causes.
//!
//! Nothing here knows HTTP or tenants' keys: the supervisor names the tenant
//! (`supervisor/volumes.rs`), and `server/error.rs` maps each [`VolumeError`] to its status.

mod error;
mod mount;
mod names;
mod replica;
mod shared;
mod store;

pub use error::VolumeError;
pub use mount::VolumeMount;
pub use names::{VolumeName, VolumePath};
pub use replica::Replica;
pub use shared::SharedVolumes;
pub use store::{
    Lease, Upload, VolumeEntry, VolumeEntryKind, VolumeInfo, VolumeLimits, VolumeStore,
};
