//! A node's folder of a volume as a replica of the shared store's (`--cluster`): the store
//! holds the truth, the node's folder is what its sandboxes mount and its HTTP calls read.
//!
//! - **Pull** (before a mount, a read, a listing of files, a write): the node's folder is
//!   brought up to the store's: a file whose object changed (or that is new) is fetched whole
//!   and renamed into place; one whose object went is removed; a volume deleted elsewhere is
//!   removed here; one made elsewhere is made here. A file that did not change since it was
//!   last synced is not read, so a mount on a node that has the volume reads only the
//!   listing.
//! - **Push** (after a writable mount's run, after each turn of a session that mounts it
//!   writable, when its interpreter goes, after an HTTP write): every file changed here
//!   since it was last synced is written to the store, every one removed here is removed
//!   there. A run's answer is sent after its push, so a file closed in a run is in the store
//!   when the run's caller hears of it.
//!
//! What was synced is each volume's `synced.json` (next to `files/`): each file's object
//! version and its size and time here when it was synced, so a change here is its size or
//! time moving. A change here that was not pushed yet is never undone by a pull (two nodes
//! writing one file: the last push wins). One pull or push runs at a time per volume.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::shared::{Remote, SharedVolumes};
use super::store::{Meta, Replicated, VolumeInfo, VolumeStore};
use super::{VolumeError, VolumeName};
use crate::sync::lock;

const SYNCED: &str = "synced.json";

/// A file as it was when last synced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Synced {
    version: String,
    here: Here,
}

/// A file's size and time on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Here {
    size: u64,
    mtime_ns: i64,
}

type Manifest = BTreeMap<String, Synced>;

/// The shared store's volumes and this node's replicas of them.
pub struct Replica {
    shared: SharedVolumes,
    /// One pull or push at a time per volume folder.
    busy: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

impl Replica {
    pub fn new(shared: SharedVolumes) -> Self {
        Replica {
            shared,
            busy: Mutex::default(),
        }
    }

    async fn hold(&self, dir: &Path) -> tokio::sync::OwnedMutexGuard<()> {
        let one = {
            let mut busy = lock(&self.busy);
            busy.retain(|_, m| Arc::strong_count(m) > 1);
            busy.entry(dir.to_path_buf()).or_default().clone()
        };
        one.lock_owned().await
    }

    /// Makes volume `name` of `tenant` in the store and here (the store decides between two
    /// nodes making one name).
    pub async fn create(
        &self,
        local: &Arc<VolumeStore>,
        tenant: &str,
        name: &VolumeName,
    ) -> Result<VolumeInfo, VolumeError> {
        let t = local.tenant_folder(tenant);
        let names = self.shared.names(&t).await?;
        let limit = local.limits().volumes;
        if names.len() as u64 >= limit && !names.iter().any(|n| n == name.as_str()) {
            return Err(VolumeError::TooMany(limit));
        }
        // What this node still holds of volumes deleted elsewhere goes first.
        let here = blocking(local, {
            let tenant = tenant.to_string();
            move |s| s.local_names(&tenant)
        })
        .await?;
        for gone in here
            .iter()
            .filter(|n| !names.iter().any(|r| r == n.as_str()))
        {
            let dir = local.folder_of(tenant, gone);
            let _held = self.hold(&dir).await;
            forget(local, dir).await?;
        }
        let dir = local.folder_of(tenant, name);
        let _held = self.hold(&dir).await;
        let made = blocking(local, {
            let (tenant, name) = (tenant.to_string(), name.clone());
            move |s| s.create(&tenant, &name)
        })
        .await?;
        let record = std::fs::read(dir.join(super::store::META))
            .map_err(|e| VolumeError::io("reading the volume", e))?;
        if !self.shared.create(&t, name.as_str(), record).await? {
            forget(local, dir).await?;
            return Err(VolumeError::Exists(name.to_string()));
        }
        Ok(made)
    }

    /// `tenant`'s volumes as the store has them, sorted by name.
    pub async fn list(
        &self,
        local: &VolumeStore,
        tenant: &str,
    ) -> Result<Vec<VolumeInfo>, VolumeError> {
        let t = local.tenant_folder(tenant);
        let mut names = self.shared.names(&t).await?;
        names.sort();
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            if let Some(info) = self.summary(&t, &name).await? {
                out.push(info);
            }
        }
        Ok(out)
    }

    /// Volume `name` as the store has it (its usage from the listing: nothing is fetched).
    pub async fn info(
        &self,
        local: &VolumeStore,
        tenant: &str,
        name: &VolumeName,
    ) -> Result<VolumeInfo, VolumeError> {
        let t = local.tenant_folder(tenant);
        self.summary(&t, name.as_str())
            .await?
            .ok_or_else(|| VolumeError::NotFound(name.to_string()))
    }

    async fn summary(&self, t: &str, name: &str) -> Result<Option<VolumeInfo>, VolumeError> {
        let Some(record) = self.shared.record_of(t, name).await? else {
            return Ok(None);
        };
        let meta = Meta::parse(&record)?;
        let files = self.shared.listing(t, name).await?;
        let mut folders = std::collections::BTreeSet::new();
        for f in &files {
            let mut at = f.path.as_str();
            while let Some((up, _)) = at.rsplit_once('/') {
                folders.insert(up.to_string());
                at = up;
            }
        }
        Ok(Some(VolumeInfo {
            name: meta.name,
            created_at: meta.created_at,
            bytes: files.iter().map(|f| f.size).sum(),
            files: files.len() as u64 + folders.len() as u64,
        }))
    }

    /// Deletes volume `name` from the store (for every node at once) and from here.
    pub async fn delete(
        &self,
        local: &Arc<VolumeStore>,
        tenant: &str,
        name: &VolumeName,
    ) -> Result<(), VolumeError> {
        let dir = local.folder_of(tenant, name);
        let _held = self.hold(&dir).await;
        let existed = self
            .shared
            .delete(&local.tenant_folder(tenant), name.as_str())
            .await?;
        forget(local, dir).await?;
        if !existed {
            return Err(VolumeError::NotFound(name.to_string()));
        }
        Ok(())
    }

    /// Brings this node's folder of volume `name` up to the store's (see the module's
    /// docs). A volume the store does not have is removed here (the call that follows
    /// says `volume_not_found`).
    pub async fn pull(
        &self,
        local: &Arc<VolumeStore>,
        tenant: &str,
        name: &VolumeName,
    ) -> Result<(), VolumeError> {
        let t = local.tenant_folder(tenant);
        let dir = local.folder_of(tenant, name);
        let _held = self.hold(&dir).await;
        let Some(record) = self.shared.record_of(&t, name.as_str()).await? else {
            return forget(local, dir).await;
        };
        let remote = self.shared.listing(&t, name.as_str()).await?;
        let (mut synced, here) = blocking(local, {
            let dir = dir.clone();
            move |s| {
                s.adopt(&dir, &record)?;
                Ok((read_manifest(&dir), files_here(&dir)))
            }
        })
        .await?;
        let mut fetched = false;
        for r in &remote {
            // Unchanged in the store since it was synced: this node's copy stands, changed
            // here (a push will carry it) or not.
            if synced.get(&r.path).is_some_and(|l| l.version == r.version) {
                continue;
            }
            if let Some(got) = self.fetch(&t, name, &dir, r).await? {
                synced.insert(r.path.clone(), got);
                fetched = true;
            }
        }
        let kept: std::collections::HashSet<&str> =
            remote.iter().map(|r| r.path.as_str()).collect();
        let gone: Vec<String> = synced
            .iter()
            .filter(|(p, l)| !kept.contains(p.as_str()) && here.get(*p) == Some(&l.here))
            .map(|(p, _)| p.clone())
            .collect();
        let vanished: Vec<String> = synced
            .keys()
            .filter(|p| !kept.contains(p.as_str()) && !here.contains_key(*p))
            .cloned()
            .collect();
        for p in vanished {
            synced.remove(&p);
        }
        let changed = fetched || !gone.is_empty();
        blocking(local, move |s| {
            for p in &gone {
                let _ = std::fs::remove_file(dir.join(super::store::FILES).join(p));
                synced.remove(p);
            }
            write_manifest(&dir, &synced)?;
            if changed {
                s.remeasure(&dir);
            }
            Ok(())
        })
        .await
    }

    /// Fetches `r` into the volume at `dir` (into `incoming/`, then renamed into place): what
    /// was synced, or `None` when it went meanwhile or its place here is taken by a folder.
    async fn fetch(
        &self,
        t: &str,
        name: &VolumeName,
        dir: &Path,
        r: &Remote,
    ) -> Result<Option<Synced>, VolumeError> {
        let tmp = dir
            .join(super::store::INCOMING)
            .join(format!("pull-{:016x}", rand::random::<u64>()));
        if !self
            .shared
            .download(t, name.as_str(), &r.path, &tmp)
            .await?
        {
            let _ = std::fs::remove_file(&tmp);
            return Ok(None);
        }
        let to = dir.join(super::store::FILES).join(&r.path);
        let placed = (|| {
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::rename(&tmp, &to)?;
            here_of(&std::fs::symlink_metadata(&to)?)
                .ok_or_else(|| std::io::Error::other("not a file"))
        })();
        match placed {
            Ok(here) => Ok(Some(Synced {
                version: r.version.clone(),
                here,
            })),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                tracing::warn!(volume = %name, path = %r.path, error = %e,
                    "a file of the shared store has no place on this node's copy");
                Ok(None)
            }
        }
    }

    /// Writes what changed in this node's folder of the volume at `dir` to the store (see
    /// the module's docs); nothing when the volume was deleted meanwhile.
    pub async fn push(&self, local: &Arc<VolumeStore>, dir: &Path) -> Result<(), VolumeError> {
        let Some((t, name)) = local.names_of(dir) else {
            return Ok(());
        };
        let _held = self.hold(dir).await;
        if self.shared.record_of(&t, &name).await?.is_none() {
            return Ok(());
        }
        let (mut synced, here) = blocking(local, {
            let dir = dir.to_path_buf();
            move |_| Ok((read_manifest(&dir), files_here(&dir)))
        })
        .await?;
        let files = dir.join(super::store::FILES);
        let mut sent = Vec::new();
        for (path, now) in &here {
            if synced.get(path).is_some_and(|l| l.here == *now) {
                continue;
            }
            self.shared
                .upload(&t, &name, path, &files.join(path))
                .await?;
            sent.push(path);
        }
        if !sent.is_empty() {
            // Each file sent is synced at the version the store lists for it now (a listing
            // is the one place every store states versions alike); one that does not list at
            // the size sent was overwritten meanwhile: fetched by the next pull.
            let listed: HashMap<String, Remote> = self
                .shared
                .listing(&t, &name)
                .await?
                .into_iter()
                .map(|r| (r.path.clone(), r))
                .collect();
            for path in sent {
                let now = here[path];
                let version = match listed.get(path) {
                    Some(r) if r.size == now.size => r.version.clone(),
                    _ => String::new(),
                };
                synced.insert(path.clone(), Synced { version, here: now });
            }
        }
        let removed: Vec<String> = synced
            .keys()
            .filter(|p| !here.contains_key(*p))
            .cloned()
            .collect();
        for p in removed {
            self.shared.remove(&t, &name, &p).await?;
            synced.remove(&p);
        }
        let dir = dir.to_path_buf();
        blocking(local, move |_| write_manifest(&dir, &synced)).await
    }
}

/// Removes this node's copy of the volume at `dir`, off the async threads.
async fn forget(local: &Arc<VolumeStore>, dir: PathBuf) -> Result<(), VolumeError> {
    blocking(local, move |s| {
        s.forget(&dir);
        Ok(())
    })
    .await
}

impl Replicated for Replica {
    fn create<'a>(
        &'a self,
        local: &'a Arc<VolumeStore>,
        tenant: &'a str,
        name: &'a VolumeName,
    ) -> BoxFuture<'a, Result<VolumeInfo, VolumeError>> {
        Box::pin(Replica::create(self, local, tenant, name))
    }

    fn list<'a>(
        &'a self,
        local: &'a VolumeStore,
        tenant: &'a str,
    ) -> BoxFuture<'a, Result<Vec<VolumeInfo>, VolumeError>> {
        Box::pin(Replica::list(self, local, tenant))
    }

    fn info<'a>(
        &'a self,
        local: &'a VolumeStore,
        tenant: &'a str,
        name: &'a VolumeName,
    ) -> BoxFuture<'a, Result<VolumeInfo, VolumeError>> {
        Box::pin(Replica::info(self, local, tenant, name))
    }

    fn delete<'a>(
        &'a self,
        local: &'a Arc<VolumeStore>,
        tenant: &'a str,
        name: &'a VolumeName,
    ) -> BoxFuture<'a, Result<(), VolumeError>> {
        Box::pin(Replica::delete(self, local, tenant, name))
    }

    fn pull<'a>(
        &'a self,
        local: &'a Arc<VolumeStore>,
        tenant: &'a str,
        name: &'a VolumeName,
    ) -> BoxFuture<'a, Result<(), VolumeError>> {
        Box::pin(Replica::pull(self, local, tenant, name))
    }

    fn push<'a>(
        &'a self,
        local: &'a Arc<VolumeStore>,
        dir: &'a Path,
    ) -> BoxFuture<'a, Result<(), VolumeError>> {
        Box::pin(Replica::push(self, local, dir))
    }
}

/// `f` on the node's store off the async threads.
async fn blocking<T: Send + 'static>(
    local: &Arc<VolumeStore>,
    f: impl FnOnce(&VolumeStore) -> Result<T, VolumeError> + Send + 'static,
) -> Result<T, VolumeError> {
    let local = local.clone();
    tokio::task::spawn_blocking(move || f(&local))
        .await
        .map_err(|e| VolumeError::Io(format!("a volume's sync: {e}")))?
}

fn read_manifest(dir: &Path) -> Manifest {
    std::fs::read(dir.join(SYNCED))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn write_manifest(dir: &Path, m: &Manifest) -> Result<(), VolumeError> {
    let tmp = dir.join(format!(".{SYNCED}.{:08x}", rand::random::<u32>()));
    let body = serde_json::to_vec(m).expect("plain data");
    std::fs::write(&tmp, body)
        .and_then(|()| std::fs::rename(&tmp, dir.join(SYNCED)))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            VolumeError::io("recording the volume's sync", e)
        })
}

fn here_of(m: &std::fs::Metadata) -> Option<Here> {
    use std::os::unix::fs::MetadataExt;
    m.is_file().then(|| Here {
        size: m.len(),
        mtime_ns: m
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(m.mtime_nsec()),
    })
}

/// Every regular file of the volume at `dir` (links and special files are not carried;
/// names that are not UTF-8 neither), by path below its top.
fn files_here(dir: &Path) -> BTreeMap<String, Here> {
    fn walk(at: &Path, prefix: &str, out: &mut BTreeMap<String, Here>) {
        let Ok(entries) = std::fs::read_dir(at) else {
            return;
        };
        for e in entries.flatten() {
            let Some(path) = super::store::child_path(prefix, &e.file_name()) else {
                continue;
            };
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                walk(&e.path(), &path, out);
            } else if let Some(here) = here_of(&m) {
                out.insert(path, here);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&dir.join(super::store::FILES), "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::volumes::{VolumeLimits, VolumePath};

    const LIMITS: VolumeLimits = VolumeLimits {
        volumes: 2,
        volume_bytes: 1 << 20,
        tenant_bytes: 1 << 20,
        files: 100,
    };

    /// Two nodes' stores replicating one shared directory (the `fs` backend a cluster on a
    /// shared directory uses), each with its own folder of copies.
    fn two_nodes(tag: &str) -> (PathBuf, Arc<VolumeStore>, Arc<VolumeStore>) {
        let root = std::env::temp_dir().join(format!(
            "vivarium-replica-{tag}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        let shared = root.join("shared");
        std::fs::create_dir_all(&shared).unwrap();
        let node = |n: &str| {
            let objects = ::object_store::local::LocalFileSystem::new_with_prefix(&shared).unwrap();
            let volumes = SharedVolumes::new(
                Arc::new(objects),
                ::object_store::path::Path::default(),
                "test".into(),
                LIMITS.files,
            );
            let (store, err) = VolumeStore::open(&root.join(n), LIMITS);
            assert!(err.is_none());
            Arc::new(store.replicating(Arc::new(Replica::new(volumes))))
        };
        let (a, b) = (node("a"), node("b"));
        (root, a, b)
    }

    fn put(store: &VolumeStore, name: &VolumeName, path: &str, body: &str) {
        let p = store.folder_of("t", name).join("files").join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }

    fn read(store: &VolumeStore, name: &VolumeName, path: &str) -> Option<String> {
        std::fs::read_to_string(store.folder_of("t", name).join("files").join(path)).ok()
    }

    #[tokio::test]
    async fn two_nodes_see_one_volume_through_the_shared_store() {
        let (root, a, b) = two_nodes("sync");
        let (ra, rb) = (a.replica().unwrap(), b.replica().unwrap());
        let name = VolumeName::parse("work").unwrap();
        ra.create(&a, "t", &name).await.unwrap();
        // One name, one volume: the second node to make it is told it exists.
        let e = rb.create(&b, "t", &name).await.unwrap_err();
        assert!(matches!(e, VolumeError::Exists(_)), "{e}");
        assert_eq!(rb.list(&b, "t").await.unwrap().len(), 1);

        put(&a, &name, "in/data.csv", "a,b\n");
        ra.push(&a, &a.folder_of("t", &name)).await.unwrap();
        rb.pull(&b, "t", &name).await.unwrap();
        assert_eq!(read(&b, &name, "in/data.csv").as_deref(), Some("a,b\n"));
        let info = rb.info(&b, "t", &name).await.unwrap();
        assert_eq!((info.bytes, info.files), (4, 2));

        // Changed on b, pushed: a's next pull has it.
        put(&b, &name, "in/data.csv", "a,b\n1,2\n");
        rb.push(&b, &b.folder_of("t", &name)).await.unwrap();
        ra.pull(&a, "t", &name).await.unwrap();
        assert_eq!(
            read(&a, &name, "in/data.csv").as_deref(),
            Some("a,b\n1,2\n")
        );
        // A change here not yet pushed is not undone by a pull.
        put(&a, &name, "draft.txt", "mine");
        ra.pull(&a, "t", &name).await.unwrap();
        assert_eq!(read(&a, &name, "draft.txt").as_deref(), Some("mine"));
        // Removed on a, pushed: gone from b at its next pull; what b never changed only.
        std::fs::remove_file(a.folder_of("t", &name).join("files/in/data.csv")).unwrap();
        ra.push(&a, &a.folder_of("t", &name)).await.unwrap();
        rb.pull(&b, "t", &name).await.unwrap();
        assert_eq!(read(&b, &name, "in/data.csv"), None);
        assert_eq!(read(&b, &name, "draft.txt").as_deref(), Some("mine"));
        // Through b's own store: its usage is measured again after the pull.
        let top = VolumePath::parse("/").unwrap();
        let listed = b.list_files("t", &name, &top, 3).unwrap();
        assert!(listed.iter().any(|e| e.path == "draft.txt"), "{listed:?}");

        // Deleted on b: a's next pull removes its copy, and its store says not found.
        rb.delete(&b, "t", &name).await.unwrap();
        ra.pull(&a, "t", &name).await.unwrap();
        assert!(matches!(
            a.info("t", &name).unwrap_err(),
            VolumeError::NotFound(_)
        ));
        assert!(!a.folder_of("t", &name).exists());
        assert!(ra.list(&a, "t").await.unwrap().is_empty());
        // The name is free again, and the per-tenant count is the store's.
        ra.create(&a, "t", &name).await.unwrap();
        rb.create(&b, "t", &VolumeName::parse("two").unwrap())
            .await
            .unwrap();
        let e = ra
            .create(&a, "t", &VolumeName::parse("three").unwrap())
            .await
            .unwrap_err();
        assert!(matches!(e, VolumeError::TooMany(2)), "{e}");
        let _ = std::fs::remove_dir_all(root);
    }

    /// Keys in the store are fetched data: one whose parts decode to a separator or `..` is
    /// not a file of the volume, and a pull never writes outside the volume's folder.
    #[tokio::test]
    async fn a_hostile_key_in_the_store_is_not_a_path() {
        let (root, a, b) = two_nodes("hostile");
        let (ra, rb) = (a.replica().unwrap(), b.replica().unwrap());
        let name = VolumeName::parse("work").unwrap();
        ra.create(&a, "t", &name).await.unwrap();
        let t = a.tenant_folder("t");
        let objects =
            ::object_store::local::LocalFileSystem::new_with_prefix(root.join("shared")).unwrap();
        let files = ::object_store::path::Path::from_iter(["volumes", &t, "work", "files"]);
        use ::object_store::ObjectStoreExt as _;
        for part in ["..%2F..%2F..%2Fescaped", "%2E%2E"] {
            let key = ::object_store::path::Path::parse(format!("{files}/{part}")).unwrap();
            objects.put(&key, "x".into()).await.unwrap();
        }
        let fine = files.clone().join("fine.txt");
        objects.put(&fine, "ok".into()).await.unwrap();
        rb.pull(&b, "t", &name).await.unwrap();
        assert_eq!(read(&b, &name, "fine.txt").as_deref(), Some("ok"));
        let listed: Vec<_> = std::fs::read_dir(b.folder_of("t", &name).join("files"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(listed, ["fine.txt"], "{listed:?}");
        assert!(
            !b.folder_of("t", &name)
                .parent()
                .unwrap()
                .join("escaped")
                .exists()
        );
        // A listing past the volume's limit of files is refused, not held.
        for i in 0..LIMITS.files {
            let key = files.clone().join(format!("many-{i}"));
            objects.put(&key, "m".into()).await.unwrap();
        }
        let e = rb.pull(&b, "t", &name).await.unwrap_err();
        assert!(e.to_string().contains("more than 100 files"), "{e}");
        let _ = std::fs::remove_dir_all(root);
    }
}
