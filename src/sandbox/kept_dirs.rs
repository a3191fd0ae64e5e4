//! Template folders kept for the next run ([`KeptDirs`]): a fresh run on a user template
//! starts with the template's files laid in its folder (`layer.rs`), and laying a large
//! file costs more than the rest of the run. A run that left its folder exactly as it was
//! laid (it opened no path and made no call that can change one: `FsGuard::changed`) hands
//! the folder to the next run of the same template in the same process, which skips the
//! laying. A run that opened or changed anything leaves its folder to be removed, as ever.
//!
//! What a kept folder still tells the next run: its entries' times and inode numbers are
//! those of the first laying (the content is what was laid, byte for byte). Folders are kept
//! per template (a template is one tenant's), at most [`MAX_KEPT`] and [`MAX_KEPT_BYTES`] of
//! laid files in a process, the oldest removed first, and their bytes stay held against the
//! host's budget while kept.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::budget::Charge;

/// Folders kept at most in one process (a worker serves a few runs at once).
pub const MAX_KEPT: usize = 4;
/// Bytes of laid files kept at most in one process.
pub const MAX_KEPT_BYTES: u64 = 64 << 20;

/// A template's files as laid in a folder: each one's size and modification time.
pub type Laid = HashMap<String, (u64, SystemTime)>;

/// A folder a run left as it was laid (named `.kept-…` while kept, so it is not counted as
/// a sandbox's).
pub struct KeptDir {
    /// The template's layer id.
    pub layer: String,
    pub path: PathBuf,
    pub laid: Laid,
    /// Its bytes, held against the host's budget while kept (when on tmpfs): released
    /// when it is dropped.
    pub _charge: Option<Charge>,
}

impl KeptDir {
    fn bytes(&self) -> u64 {
        self.laid.values().map(|(len, _)| *len).sum()
    }

    /// Its files as laid, the folder (moved by the caller) no longer to be removed.
    pub fn into_laid(mut self) -> Laid {
        self.path = PathBuf::new();
        std::mem::take(&mut self.laid)
    }
}

impl Drop for KeptDir {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// One process's kept folders, newest last.
#[derive(Default)]
pub struct KeptDirs {
    dirs: Mutex<VecDeque<KeptDir>>,
}

impl KeptDirs {
    /// Keeps `dir`, removing the oldest kept folders past the bounds (or `dir` itself, when
    /// it alone is past them).
    pub fn put(&self, dir: KeptDir) {
        if dir.bytes() > MAX_KEPT_BYTES {
            return;
        }
        let mut evicted = Vec::new();
        {
            let mut dirs = crate::sync::lock(&self.dirs);
            dirs.push_back(dir);
            while dirs.len() > MAX_KEPT
                || dirs.iter().map(KeptDir::bytes).sum::<u64>() > MAX_KEPT_BYTES
            {
                evicted.extend(dirs.pop_front());
            }
        }
        // Removed outside the lock.
        drop(evicted);
    }

    /// The newest folder kept for `layer`, if any.
    pub fn take(&self, layer: &str) -> Option<KeptDir> {
        let mut dirs = crate::sync::lock(&self.dirs);
        let at = dirs.iter().rposition(|d| d.layer == layer)?;
        dirs.remove(at)
    }

    /// How many folders are kept.
    #[cfg(test)]
    pub fn count(&self) -> usize {
        crate::sync::lock(&self.dirs).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test's folder, removed when dropped.
    struct Root(std::path::PathBuf);

    impl Root {
        fn path(&self) -> &std::path::Path {
            &self.0
        }
    }

    impl Drop for Root {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A folder of `bytes` laid bytes for `layer`, made under `root`.
    fn kept(root: &std::path::Path, name: &str, layer: &str, bytes: u64) -> KeptDir {
        let path = root.join(name);
        std::fs::create_dir_all(&path).unwrap();
        let mut laid = Laid::new();
        laid.insert("f".into(), (bytes, SystemTime::UNIX_EPOCH));
        KeptDir {
            layer: layer.into(),
            path,
            laid,
            _charge: None,
        }
    }

    #[test]
    fn the_newest_of_a_template_is_taken_and_the_oldest_removed_past_the_bounds() {
        let base = std::env::temp_dir().join(format!("vivarium-kept-{}", rand::random::<u32>()));
        std::fs::create_dir_all(&base).unwrap();
        let root = Root(base);
        let dirs = KeptDirs::default();
        for i in 0..MAX_KEPT + 1 {
            dirs.put(kept(root.path(), &format!("d{i}"), ["a", "b"][i % 2], 1));
        }
        // Past the count, the oldest is gone, its folder removed.
        assert_eq!(dirs.count(), MAX_KEPT);
        assert!(!root.path().join("d0").exists());
        assert!(root.path().join("d1").exists());
        // The newest for a template; none for a template never kept.
        let newest_a = dirs.take("a").unwrap();
        assert_eq!(newest_a.path, root.path().join(format!("d{MAX_KEPT}")));
        assert!(dirs.take("c").is_none());
        // Taken, its folder is the taker's: not removed when dropped.
        let path = newest_a.path.clone();
        drop(newest_a.into_laid());
        assert!(path.exists());
        // Past the bytes, the oldest go; one alone past them is not kept at all.
        dirs.put(kept(root.path(), "big", "a", MAX_KEPT_BYTES));
        assert_eq!(dirs.count(), 1);
        dirs.put(kept(root.path(), "huge", "a", MAX_KEPT_BYTES + 1));
        assert!(!root.path().join("huge").exists());
        assert_eq!(dirs.count(), 1);
    }
}
