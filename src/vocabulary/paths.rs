//! The rule of the paths a caller names inside a sandbox's working directory, and how many
//! files it may place there: checked by the doors before anything runs, and again where the
//! files are written (`sandbox/workdir.rs`).

use std::path::{Component, Path};

/// Limits on what a caller may place in a sandbox, checked before anything is written.
pub const MAX_INPUT_FILES: usize = 1000;
pub const MAX_PATH_BYTES: usize = 1024;

/// A path refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("file path {path:?} is not allowed: {reason}")]
pub struct BadPath {
    /// The path (its first 200 characters).
    pub path: String,
    pub reason: &'static str,
}

/// A path a caller may name inside the working directory: relative, made of plain
/// components, no NUL, bounded length.
pub fn check_relative_path(path: &str) -> Result<(), BadPath> {
    let bad = |reason| {
        Err(BadPath {
            path: path.chars().take(200).collect(),
            reason,
        })
    };
    if path.is_empty() {
        return bad("empty");
    }
    if path.len() > MAX_PATH_BYTES {
        return bad("longer than 1024 bytes");
    }
    if path.contains('\0') {
        return bad("contains NUL");
    }
    if path.contains('\\') {
        return bad("contains a backslash");
    }
    for c in Path::new(path).components() {
        match c {
            Component::Normal(_) => {}
            Component::RootDir | Component::Prefix(_) => return bad("must be relative"),
            Component::ParentDir => return bad("contains '..'"),
            Component::CurDir => return bad("contains '.'"),
        }
    }
    Ok(())
}

/// Whether a symbolic link at `link` (a path below the working directory) whose target is
/// `target` leads to a place inside it, as the guest's own links must
/// (`hostcalls::fs_guard`): a relative target that never climbs above the top. Checked again
/// when a link is laid from an image (a snapshot or a template's: fetched data).
pub fn link_stays_inside(link: &str, target: &str) -> bool {
    if check_relative_path(link).is_err()
        || target.is_empty()
        || target.len() > MAX_PATH_BYTES
        || target.contains('\0')
        || target.starts_with('/')
    {
        return false;
    }
    let mut depth = Path::new(link).components().count() as i64 - 1;
    for c in Path::new(target).components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

#[cfg(test)]
mod link_tests {
    use super::link_stays_inside;

    #[test]
    fn a_link_must_lead_inside() {
        assert!(link_stays_inside("app/link.py", "main.py"));
        assert!(link_stays_inside("a/b/c", "../../x"));
        assert!(link_stays_inside("a/b", "./c/../d"));
        assert!(!link_stays_inside("a/b", "../../x"), "climbs above the top");
        assert!(!link_stays_inside("link", "/etc/passwd"), "absolute");
        assert!(!link_stays_inside("link", ""));
        assert!(
            !link_stays_inside("../link", "x"),
            "the link itself outside"
        );
        assert!(!link_stays_inside("link", "a\0b"));
    }
}
