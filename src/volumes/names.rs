//! What a volume's name and a path inside a volume may be: checked as data, before any file
//! is touched, so a hostile name or path is a named refusal, never a lookup.

use std::fmt;

use super::VolumeError;

/// The longest path inside a volume, in bytes.
pub const MAX_PATH: usize = 1024;
/// The longest component of a path, in bytes (the usual file systems' limit).
pub const MAX_COMPONENT: usize = 255;

/// A volume's name: 1 to 63 of `A-Z a-z 0-9 . _ -`, starting with a letter or a digit (so it
/// is never `.`, `..` or hidden), and a folder name on every file system as it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct VolumeName(String);

impl TryFrom<String> for VolumeName {
    type Error = VolumeError;
    fn try_from(s: String) -> Result<Self, VolumeError> {
        VolumeName::parse(&s)
    }
}

impl From<VolumeName> for String {
    fn from(n: VolumeName) -> String {
        n.0
    }
}

impl VolumeName {
    pub fn parse(name: &str) -> Result<Self, VolumeError> {
        crate::vocabulary::check_name(name).map_err(|why| VolumeError::InvalidName {
            name: name.chars().take(80).collect(),
            why,
        })?;
        Ok(VolumeName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for VolumeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A path inside a volume, relative to its top, as `/`-separated components, none of them
/// empty, `.` or `..`, none holding NUL; one leading `/` is allowed and means the top. The
/// top itself (`""` or `/`) is a path too, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumePath(String);

impl VolumePath {
    pub fn parse(path: &str) -> Result<Self, VolumeError> {
        let bad = |why| VolumeError::InvalidPath {
            path: path.chars().take(200).collect(),
            why,
        };
        if path.len() > MAX_PATH {
            return Err(bad("a path is at most 1,024 bytes"));
        }
        if path.contains('\0') {
            return Err(bad("a path holds no NUL"));
        }
        let rel = path.strip_prefix('/').unwrap_or(path);
        let rel = rel.strip_suffix('/').unwrap_or(rel);
        if rel.is_empty() {
            return Ok(VolumePath(String::new()));
        }
        for c in rel.split('/') {
            match c {
                "" => return Err(bad("a path has no empty component ('//')")),
                "." | ".." => return Err(bad("a path has no '.' or '..' component")),
                c if c.len() > MAX_COMPONENT => {
                    return Err(bad("a path's component is at most 255 bytes"));
                }
                _ => {}
            }
        }
        Ok(VolumePath(rel.to_string()))
    }

    /// Relative to the volume's top; `""` for the top.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_top(&self) -> bool {
        self.0.is_empty()
    }

    /// The folder holding it (`None` for the top, `""` for a top-level entry).
    pub fn parent(&self) -> Option<&str> {
        if self.is_top() {
            return None;
        }
        Some(self.0.rsplit_once('/').map_or("", |(p, _)| p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_folder_names() {
        for ok in ["data", "a", "Team-1.v2_x", &"a".repeat(63)] {
            assert!(VolumeName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "-x",
            "a/b",
            "a\\b",
            "a b",
            "é",
            &"a".repeat(64),
        ] {
            assert!(VolumeName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn paths_stay_inside_the_volume() {
        assert_eq!(VolumePath::parse("/a/b.csv").unwrap().as_str(), "a/b.csv");
        assert_eq!(VolumePath::parse("a/b/").unwrap().as_str(), "a/b");
        assert!(VolumePath::parse("/").unwrap().is_top());
        assert!(VolumePath::parse("").unwrap().is_top());
        assert_eq!(VolumePath::parse("a/b").unwrap().parent(), Some("a"));
        assert_eq!(VolumePath::parse("b").unwrap().parent(), Some(""));
        for bad in [
            "..",
            "../x",
            "a/../../x",
            "a/./b",
            "a//b",
            "//etc/passwd",
            "a\0b",
            &"x".repeat(256),
            &"a/".repeat(600),
        ] {
            assert!(VolumePath::parse(bad).is_err(), "{bad:?}");
        }
    }
}
