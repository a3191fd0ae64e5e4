//! Where snapshots live: one small trait, [`SnapshotStore`], and a local directory
//! ([`DirStore`]). A store holds opaque, already-encoded snapshot files by id; it trusts
//! nothing of them and is trusted with nothing (`format::decode` checks every byte read back).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::records::{Expect, Found, RecordName, RecordStore, Version};
use super::store_error::StoreError;

/// A snapshot's id: `snap-` and 24 lowercase hex digits. Parsed before any store sees it,
/// so an id is never a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SnapshotId(String);

impl SnapshotId {
    /// A new random id.
    pub fn random() -> Self {
        SnapshotId(format!("snap-{:024x}", rand::random::<u128>() >> 32))
    }

    /// The id of session `session_id`'s own snapshot (durable, or kept over a restart):
    /// derived from the session id, so any node finds it from the id alone.
    pub fn for_session(session_id: &str) -> Self {
        Self::derived("vivarium-session", session_id)
    }

    /// The id of what the store keeps for `name` of kind `kind` (a session's own snapshot, a
    /// suspended execution's journal): derived from both, so any node finds it by name.
    pub fn derived(kind: &str, name: &str) -> Self {
        use sha2::{Digest, Sha256};
        let h = Sha256::digest(format!("{kind}\0{name}").as_bytes());
        SnapshotId(format!("snap-{}", &hex::encode(h)[..24]))
    }

    /// The id, if `s` is one.
    pub fn parse(s: &str) -> Option<Self> {
        let hex = s.strip_prefix("snap-")?;
        (hex.len() == 24 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| SnapshotId(s.to_string()))
    }
}

impl std::fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Snapshot files by id. Writes are atomic: a reader sees a whole snapshot or none. Every
/// store also keeps the small compare-and-swap records that nodes sharing it agree through.
pub trait SnapshotStore: RecordStore + Send + Sync {
    /// Stores `bytes` under `id`, replacing what was there in one step (a session's own
    /// snapshot is rewritten after each turn; a reader sees the old one or the new one).
    fn put<'a>(
        &'a self,
        id: &'a SnapshotId,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The whole snapshot, or `None` when there is none under `id`.
    fn get<'a>(&'a self, id: &'a SnapshotId) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>>;
    /// Up to the first `len` bytes (for headers), or `None`.
    fn get_prefix<'a>(
        &'a self,
        id: &'a SnapshotId,
        len: usize,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>>;
    /// Removes it; `false` when there was none.
    fn delete<'a>(&'a self, id: &'a SnapshotId) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Every id in the store (names that are not ids are ignored).
    fn list(&self) -> BoxFuture<'_, Result<Vec<SnapshotId>, StoreError>>;
    /// Where it is, for logs and errors.
    fn describe(&self) -> String;
}

/// Snapshots as files `<dir>/<id>.snap`, written to a temporary name and renamed.
pub struct DirStore {
    dir: PathBuf,
}

impl DirStore {
    /// A store in `dir`, created (mode 0700) if missing.
    pub fn open(dir: &Path) -> std::io::Result<Arc<Self>> {
        std::fs::create_dir_all(dir)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        Ok(Arc::new(DirStore {
            dir: dir.to_path_buf(),
        }))
    }

    fn path(&self, id: &SnapshotId) -> PathBuf {
        self.dir.join(format!("{id}.snap"))
    }

    fn record_path(&self, name: &RecordName) -> PathBuf {
        self.dir.join(format!("{}.rec", name.as_str()))
    }

    /// Runs `f` holding the directory's record lock (`flock` on `.records.lock`), so that a
    /// compare-and-swap is one step for every process that shares the directory.
    async fn locked<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let lock = self.dir.join(".records.lock");
        self.blocking(move || {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(lock)?;
            file.lock()?;
            f()
        })
        .await
    }

    fn err(&self, what: &str, e: impl std::fmt::Display) -> StoreError {
        StoreError {
            store: self.describe(),
            message: format!("{what}: {e}"),
        }
    }

    /// Runs blocking file I/O off the async executor.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| self.err("the I/O task", e))?
            .map_err(|e| self.err("I/O", e))
    }
}

/// A record file's version: the SHA-256 of its bytes (records carry an epoch or a time, so
/// a value never comes back).
fn digest_version(bytes: &[u8]) -> Version {
    use sha2::{Digest, Sha256};
    Version(hex::encode(Sha256::digest(bytes)))
}

/// Writes `bytes` to `path` through a temporary file and a rename.
fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!(".tmp-{:016x}", rand::random::<u64>()));
    let mut f = std::fs::File::create(&tmp)?;
    let written = f.write_all(bytes).and_then(|_| f.sync_all());
    if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

impl RecordStore for DirStore {
    fn get_record<'a>(&'a self, name: &'a RecordName) -> BoxFuture<'a, Result<Found, StoreError>> {
        let path = self.record_path(name);
        Box::pin(self.blocking(move || {
            Ok(not_found_is_none(std::fs::read(path))?.map(|b| {
                let v = digest_version(&b);
                (b, v)
            }))
        }))
    }

    fn put_record<'a>(
        &'a self,
        name: &'a RecordName,
        bytes: Vec<u8>,
        expect: Expect<'a>,
    ) -> BoxFuture<'a, Result<Option<Version>, StoreError>> {
        let (dir, path) = (self.dir.clone(), self.record_path(name));
        let expected = match expect {
            Expect::Absent => None,
            Expect::At(v) => Some(v.clone()),
        };
        Box::pin(self.locked(move || {
            let now = not_found_is_none(std::fs::read(&path))?.map(|b| digest_version(&b));
            if now != expected {
                return Ok(None);
            }
            write_atomically(&dir, &path, &bytes)?;
            Ok(Some(digest_version(&bytes)))
        }))
    }

    fn delete_record<'a>(&'a self, name: &'a RecordName) -> BoxFuture<'a, Result<(), StoreError>> {
        let path = self.record_path(name);
        Box::pin(self.locked(move || not_found_is_none(std::fs::remove_file(path)).map(drop)))
    }
}

fn not_found_is_none<T>(r: std::io::Result<T>) -> std::io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl SnapshotStore for DirStore {
    fn put<'a>(
        &'a self,
        id: &'a SnapshotId,
        bytes: Vec<u8>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let (dir, path) = (self.dir.clone(), self.path(id));
        Box::pin(self.blocking(move || write_atomically(&dir, &path, &bytes)))
    }

    fn get<'a>(&'a self, id: &'a SnapshotId) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        let path = self.path(id);
        Box::pin(self.blocking(move || not_found_is_none(std::fs::read(path))))
    }

    fn get_prefix<'a>(
        &'a self,
        id: &'a SnapshotId,
        len: usize,
    ) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        let path = self.path(id);
        Box::pin(self.blocking(move || {
            use std::io::Read;
            not_found_is_none(std::fs::File::open(path)).and_then(|f| {
                f.map(|f| {
                    let mut buf = Vec::new();
                    f.take(len as u64).read_to_end(&mut buf).map(|_| buf)
                })
                .transpose()
            })
        }))
    }

    fn delete<'a>(&'a self, id: &'a SnapshotId) -> BoxFuture<'a, Result<bool, StoreError>> {
        let path = self.path(id);
        Box::pin(
            self.blocking(move || {
                not_found_is_none(std::fs::remove_file(path)).map(|r| r.is_some())
            }),
        )
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<SnapshotId>, StoreError>> {
        let dir = self.dir.clone();
        Box::pin(self.blocking(move || {
            let mut ids = Vec::new();
            for entry in std::fs::read_dir(dir)? {
                let name = entry?.file_name();
                if let Some(id) = name
                    .to_str()
                    .and_then(|n| n.strip_suffix(".snap"))
                    .and_then(SnapshotId::parse)
                {
                    ids.push(id);
                }
            }
            ids.sort();
            Ok(ids)
        }))
    }

    fn describe(&self) -> String {
        format!("directory {}", self.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_parsed_never_paths() {
        let id = SnapshotId::random();
        assert_eq!(SnapshotId::parse(&id.to_string()), Some(id));
        for bad in [
            "snap-",
            "snap-../../etc/passwd",
            "snap-0123456789abcdef0123456X",
            "snap-0123456789ABCDEF01234567",
            "x-0123456789abcdef01234567",
        ] {
            assert_eq!(SnapshotId::parse(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn a_directory_store_keeps_and_forgets() {
        let dir = std::env::temp_dir().join(format!("vivarium-snaps-{}", rand::random::<u32>()));
        let store = DirStore::open(&dir).unwrap();
        let id = SnapshotId::random();
        assert_eq!(store.get(&id).await.unwrap(), None);
        store.put(&id, b"hello".to_vec()).await.unwrap();
        assert_eq!(
            store.get(&id).await.unwrap().as_deref(),
            Some(&b"hello"[..])
        );
        assert_eq!(
            store.get_prefix(&id, 2).await.unwrap().as_deref(),
            Some(&b"he"[..])
        );
        std::fs::write(dir.join("junk.snap"), b"x").unwrap();
        assert_eq!(store.list().await.unwrap(), vec![id.clone()]);
        assert!(store.delete(&id).await.unwrap());
        assert!(!store.delete(&id).await.unwrap());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_record_is_replaced_only_as_it_was_read() {
        let dir = std::env::temp_dir().join(format!("vivarium-recs-{}", rand::random::<u32>()));
        let store = DirStore::open(&dir).unwrap();
        let name = RecordName::lease("s-x");
        assert_eq!(store.get_record(&name).await.unwrap(), None);
        let v1 = store
            .put_record(&name, b"one".to_vec(), Expect::Absent)
            .await
            .unwrap()
            .unwrap();
        // A second creator loses; so does a writer holding a stale version.
        assert!(
            store
                .put_record(&name, b"two".to_vec(), Expect::Absent)
                .await
                .unwrap()
                .is_none()
        );
        let v2 = store
            .put_record(&name, b"two".to_vec(), Expect::At(&v1))
            .await
            .unwrap()
            .unwrap();
        assert!(
            store
                .put_record(&name, b"three".to_vec(), Expect::At(&v1))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            store.get_record(&name).await.unwrap(),
            Some((b"two".to_vec(), v2))
        );
        // Records are not snapshots.
        assert_eq!(store.list().await.unwrap(), Vec::<SnapshotId>::new());
        store.delete_record(&name).await.unwrap();
        store.delete_record(&name).await.unwrap();
        assert_eq!(store.get_record(&name).await.unwrap(), None);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
