//! Why a volume operation was refused or failed.

/// Which of a tenant's volume limits a request would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum VolumeLimit {
    /// Bytes one volume may hold.
    VolumeBytes,
    /// Bytes all of a tenant's volumes may hold together.
    TenantBytes,
    /// Files and folders one volume may hold.
    Files,
}

impl VolumeLimit {
    /// Its name in errors (`volume_bytes`, ...).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    /// A name out of shape (the message says how).
    #[error("volume name {name:?}: {why}")]
    InvalidName { name: String, why: &'static str },
    /// A path inside a volume out of shape.
    #[error("path {path:?}: {why}")]
    InvalidPath { path: String, why: &'static str },
    /// No such volume for this tenant (never made, deleted, or another tenant's).
    #[error("no volume {0}")]
    NotFound(String),
    #[error("volume {0} already exists")]
    Exists(String),
    /// No file or folder at that path in the volume.
    #[error("{path} not found in volume {volume}")]
    FileNotFound { volume: String, path: String },
    /// The path names a folder where a file is wanted, or the other way round, or a
    /// special file or a link.
    #[error("{path} in volume {volume} {why}")]
    WrongKind {
        volume: String,
        path: String,
        why: &'static str,
    },
    /// The write would pass a limit; the volume is as it was.
    #[error(
        "the write would pass the {} limit of {limit} (in use: {used}); the volume is unchanged",
        what.as_str()
    )]
    Full {
        what: VolumeLimit,
        limit: u64,
        used: u64,
    },
    /// A mount a run asked for cannot be made as asked (a volume's name, the mount point,
    /// two mounts in one place, a file placed below one).
    #[error("volumes: {0}")]
    InvalidMount(String),
    /// The tenant has as many volumes as it may.
    #[error("a tenant has at most {0} volumes: delete one first")]
    TooMany(u64),
    /// The cluster's shared store did not answer or refused; nothing of the request stands.
    #[error("the shared volume store: {0}")]
    Shared(String),
    /// The disk failed under the volume; nothing of the request stands.
    #[error("volume storage: {0}")]
    Io(String),
}

impl VolumeError {
    pub(super) fn io(what: &str, e: std::io::Error) -> Self {
        VolumeError::Io(format!("{what}: {e}"))
    }
}
