//! A volume mounted into a run, as the caller asks for it and as sessions keep it: which
//! volume, where the guest sees it, and whether it may write. The host's side of it (its
//! folders, the room lent) is `guest::Lent`, made by [`super::VolumeStore::lend`].

use serde::{Deserialize, Serialize};

use super::VolumeName;
use crate::guest::MountPoint;

/// One volume mounted at one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeMount {
    pub volume: VolumeName,
    pub at: MountPoint,
    pub read_only: bool,
}
