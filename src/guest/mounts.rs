//! Volumes mounted into a sandbox, as the guest's layout sees them: where one may be mounted
//! ([`MountPoint`], checked against the guest's own folders) and what the host lends a
//! sandbox for it ([`Lent`]: its folders on the host, read-only or not, the room its writes
//! may take).
//!
//! A mount is not in the fixed preopen table (templates snapshot that): its folder is
//! preopened after the table, where wasi-libc never looks, and the host sends every path
//! the guest names below the mount point to it (`hostcalls/mounts.rs`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{HOME, STDLIB_DIR};

/// The most volumes one sandbox may mount.
pub const MAX_MOUNTS: usize = 8;
/// The longest mount point, in bytes.
pub const MAX_MOUNT_PATH: usize = 256;

/// A mount point refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mount path {path:?} is not allowed: {reason}")]
pub struct BadMount {
    /// The path (its first 200 characters).
    pub path: String,
    pub reason: &'static str,
}

/// Where a volume appears in the guest: an absolute folder path below `/`, in plain
/// components (stored without a trailing `/`), neither the top nor a folder the guest's own
/// layout needs (the standard library and packages below `/usr/local/lib`, `/tmp` and HOME).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MountPoint(String);

impl MountPoint {
    pub fn parse(path: &str) -> Result<Self, BadMount> {
        let bad = |reason| {
            Err(BadMount {
                path: path.chars().take(200).collect(),
                reason,
            })
        };
        if !path.starts_with('/') {
            return bad("must be absolute (start with '/')");
        }
        if path.len() > MAX_MOUNT_PATH {
            return bad("longer than 256 bytes");
        }
        if path.contains('\0') || path.contains('\\') {
            return bad("contains NUL or a backslash");
        }
        let mut parts = Vec::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            if part == "." || part == ".." {
                return bad("contains '.' or '..'");
            }
            parts.push(part);
        }
        if parts.is_empty() {
            return bad("is the top of the file system");
        }
        let point = MountPoint(format!("/{}", parts.join("/")));
        for (own, why) in [
            (STDLIB_DIR, "overlaps the standard library's folders"),
            ("/tmp", "is or holds /tmp, the sandbox's scratch"),
            (HOME, "is or holds HOME"),
        ] {
            let own = MountPoint(own.to_string());
            if point.holds(&own) || (own.as_str() == STDLIB_DIR && own.holds(&point)) {
                return bad(why);
            }
        }
        Ok(point)
    }

    /// The path as the guest names it (`/mnt/data`).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path below `/` (`mnt/data`): how the guest's C library hands it to the host, on
    /// the working directory's preopen.
    pub fn below_root(&self) -> &str {
        &self.0[1..]
    }

    /// Whether `other` is this folder or lies below it.
    pub fn holds(&self, other: &MountPoint) -> bool {
        other.0 == self.0
            || other
                .0
                .strip_prefix(&self.0)
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// Whether one of the two holds the other: two mounts may not.
    pub fn overlaps(&self, other: &MountPoint) -> bool {
        self.holds(other) || other.holds(self)
    }

    /// Whether the relative path `path` (of the working directory) lies at or below it.
    pub fn holds_relative(&self, path: &str) -> bool {
        below(self.below_root(), path).is_some()
    }
}

/// Where the relative path `path` (of the working directory, plain components) lies in the
/// mount at `point` (a mount point below `/`, `mnt/data`): `""` at the mount point itself,
/// the rest below it, `None` outside it. The one rule by which the host sends a path to a
/// volume, for the guest's calls and its own.
pub fn below<'a>(point: &str, path: &'a str) -> Option<&'a str> {
    match path.strip_prefix(point)? {
        "" => Some(""),
        rest => rest.strip_prefix('/'),
    }
}

impl TryFrom<String> for MountPoint {
    type Error = BadMount;
    fn try_from(s: String) -> Result<Self, BadMount> {
        MountPoint::parse(&s)
    }
}

impl From<MountPoint> for String {
    fn from(m: MountPoint) -> String {
        m.0
    }
}

/// A volume lent to one sandbox by the supervisor, which found it (the caller's own), made
/// the room for its writes and keeps that room while the sandbox lives.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Lent {
    /// The volume's name (what a session's image keeps, to lend it again).
    pub name: String,
    /// Where the guest sees it.
    pub at: MountPoint,
    /// The volume's files on the host.
    pub files: PathBuf,
    /// Where a file written in the guest waits until it is closed, then renamed into
    /// `files` (on the same file system): only for a writable mount.
    pub incoming: Option<PathBuf>,
    /// Bytes the sandbox may add to the volume (0 for a read-only mount).
    pub room_bytes: u64,
    /// Files and folders it may add.
    pub room_entries: u64,
}

impl Lent {
    /// Whether the guest may change the volume.
    pub fn writable(&self) -> bool {
        self.incoming.is_some()
    }
}

/// Checks that no two of `points` overlap and that there are at most [`MAX_MOUNTS`].
pub fn check_mount_points<'a>(
    points: impl IntoIterator<Item = &'a MountPoint>,
) -> Result<(), BadMount> {
    let points: Vec<&MountPoint> = points.into_iter().collect();
    if points.len() > MAX_MOUNTS {
        return Err(BadMount {
            path: points[MAX_MOUNTS].as_str().to_string(),
            reason: "more than 8 mounts",
        });
    }
    for (i, a) in points.iter().enumerate() {
        if let Some(b) = points[..i].iter().find(|b| a.overlaps(b)) {
            return Err(BadMount {
                path: a.as_str().to_string(),
                reason: if a == b {
                    "mounted twice"
                } else {
                    "lies inside another mount, or holds one"
                },
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_point_is_a_plain_absolute_folder_outside_the_guests_own() {
        for (given, kept) in [
            ("/mnt/data", "/mnt/data"),
            ("/data/", "/data"),
            ("//mnt//x", "/mnt/x"),
            ("/usr/share/data", "/usr/share/data"),
            ("/tmp/data", "/tmp/data"),
            ("/tmp/home/data", "/tmp/home/data"),
            ("/home/user", "/home/user"),
        ] {
            assert_eq!(MountPoint::parse(given).unwrap().as_str(), kept, "{given}");
        }
        for bad in [
            "",
            "mnt/data",
            "/",
            "//",
            "/mnt/../etc",
            "/mnt/./x",
            "/usr",
            "/usr/local",
            "/usr/local/lib",
            "/usr/local/lib/python315.zip",
            "/usr/local/lib/vivarium-packages",
            "/tmp",
            "/tmp/home",
            "/a\0b",
            "/a\\b",
        ] {
            assert!(MountPoint::parse(bad).is_err(), "{bad:?}");
        }
        assert!(MountPoint::parse(&format!("/{}", "a".repeat(300))).is_err());
    }

    #[test]
    fn mounts_may_not_hold_each_other() {
        let p = |s: &str| MountPoint::parse(s).unwrap();
        assert!(check_mount_points([&p("/a"), &p("/b"), &p("/ab")]).is_ok());
        assert!(check_mount_points([&p("/a"), &p("/a/b")]).is_err());
        assert!(check_mount_points([&p("/a/b"), &p("/a")]).is_err());
        assert!(check_mount_points([&p("/a"), &p("/a/")]).is_err());
        let many: Vec<MountPoint> = (0..9).map(|i| p(&format!("/m{i}"))).collect();
        assert!(check_mount_points(&many).is_err());
        assert!(p("/mnt/data").holds_relative("mnt/data/x"));
        assert!(p("/mnt/data").holds_relative("mnt/data"));
        assert!(!p("/mnt/data").holds_relative("mnt/database"));
        assert_eq!(below("mnt/data", "mnt/data"), Some(""));
        assert_eq!(below("mnt/data", "mnt/data/a/b"), Some("a/b"));
        assert_eq!(below("mnt/data", "mnt/database"), None);
        assert_eq!(below("mnt/data", "mnt"), None);
    }
}
