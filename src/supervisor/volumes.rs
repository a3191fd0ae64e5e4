//! Volumes as the doors see them: the request to make one, and what the store answers
//! (`crate::volumes`, re-exported here so that a door names no floor). The operations are
//! [`Runner`](super::Runner)'s (`runner/volumes.rs`): each for the caller's tenant, off the
//! async threads, audited by the door's bracket.

use serde::Deserialize;
use utoipa::ToSchema;

pub use crate::volumes::{VolumeEntry, VolumeEntryKind, VolumeInfo, VolumeMount};

/// `POST /v1/volumes`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateVolume {
    /// 1 to 63 of `A-Z a-z 0-9 . _ -`, starting with a letter or a digit; unique in the
    /// tenant.
    pub name: String,
}
