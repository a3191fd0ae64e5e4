//! A volume mounted into a run, as the caller asks for it and as sessions keep it: which
//! volume, where the guest sees it, and whether it may write. The host's side of it (its
//! folders, the room lent) is `guest::Lent`, made by [`super::VolumeStore::lend`].

use serde::{Deserialize, Serialize};

use super::VolumeName;
use crate::guest::MountPoint;

/// One volume mounted at one place: on the wire (a session's info, a snapshot's header)
/// as a request names it, `{name, path, read_only}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VolumeMount {
    /// The volume's name.
    #[serde(rename = "name")]
    #[schema(value_type = String, example = "data")]
    pub volume: VolumeName,
    /// Where the guest sees it.
    #[serde(rename = "path")]
    #[schema(value_type = String, example = "/mnt/data")]
    pub at: MountPoint,
    /// Writes are refused (`EROFS`).
    pub read_only: bool,
}
