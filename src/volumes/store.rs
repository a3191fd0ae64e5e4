//! The volumes on one node's disk: `<root>/<tenant>/<name>/` holds `volume.json` (the name
//! and when it was made), `files/` (the volume's own files) and `incoming/` (uploads being
//! written, renamed into `files/` whole when complete). `<tenant>` is a hash of the tenant's
//! id, so an id is never a path.
//!
//! Every path inside a volume is reached through a `cap-std` [`Dir`] opened on its `files/`:
//! a symlink, `..` or an absolute link can never lead out of it, whatever a guest left
//! there. Usage (bytes and entries) is measured once per volume, at its first use since the
//! server started, and kept up to date by every change made here under one lock; a writable
//! mount's changes, made elsewhere, are measured again when its loan ends.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use sha2::Digest;
use utoipa::ToSchema;

use super::error::VolumeLimit;
use super::{VolumeError, VolumeMount, VolumeName, VolumePath};
use crate::guest::Lent;
use crate::sync::lock;

pub(super) const FILES: &str = "files";
pub(super) const INCOMING: &str = "incoming";
pub(super) const META: &str = "volume.json";
/// A volume of at most this many entries is measured again where its writable loan ends,
/// without a hop to a blocking thread.
const SMALL_VOLUME_ENTRIES: u64 = 64;
const TRASH: &str = ".trash";

/// What each tenant may keep in volumes (`--volume-*`).
#[derive(Debug, Clone, Copy)]
pub struct VolumeLimits {
    /// Volumes a tenant may have.
    pub volumes: u64,
    /// Bytes one volume may hold.
    pub volume_bytes: u64,
    /// Bytes all of a tenant's volumes may hold together.
    pub tenant_bytes: u64,
    /// Files and folders one volume may hold.
    pub files: u64,
}

/// A volume as listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VolumeInfo {
    pub name: String,
    /// When it was made (Unix seconds).
    pub created_at: u64,
    /// Bytes of its files.
    pub bytes: u64,
    /// Its files and folders.
    pub files: u64,
}

/// What a path in a volume is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VolumeEntryKind {
    File,
    Dir,
    /// A symbolic link (left by a guest): listed, never followed out of the volume.
    Symlink,
}

/// One entry of a volume.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VolumeEntry {
    /// Relative to the volume's top.
    pub path: String,
    pub kind: VolumeEntryKind,
    /// Bytes (0 for a folder).
    pub size: u64,
    /// Last modified (Unix seconds).
    pub modified: u64,
}

/// One of a volume's limits and what it holds against it: every change that adds bytes or
/// entries is admitted by each it touches.
#[derive(Debug, Clone, Copy)]
struct Room {
    what: VolumeLimit,
    limit: u64,
    used: u64,
}

impl Room {
    /// Admits `add` more, or refuses it naming the limit (adding nothing is always admitted).
    fn admit(&self, add: u64) -> Result<(), VolumeError> {
        if add > 0 && self.used.saturating_add(add) > self.limit {
            return Err(VolumeError::Full {
                what: self.what,
                limit: self.limit,
                used: self.used,
            });
        }
        Ok(())
    }
}

/// A volume's record (`volume.json`, and its object in the shared store).
#[derive(Serialize, Deserialize)]
pub(super) struct Meta {
    pub name: String,
    pub created_at: u64,
}

impl Meta {
    pub fn parse(bytes: &[u8]) -> Result<Meta, VolumeError> {
        serde_json::from_slice(bytes).map_err(|e| VolumeError::Io(format!("its record: {e}")))
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    bytes: u64,
    files: u64,
}

/// A cluster's shared store of volumes as this node's store and the supervisor use it: made,
/// listed and deleted there; a node's copy pulled before a use and pushed after a change.
/// `replica::Replica` is the one there is (a trait here so that this file, which its
/// [`Lease`]s push through, does not import it).
pub trait Replicated: Send + Sync {
    fn create<'a>(
        &'a self,
        local: &'a Arc<VolumeStore>,
        tenant: &'a str,
        name: &'a VolumeName,
    ) -> BoxFuture<'a, Result<VolumeInfo, VolumeError>>;
    fn list<'a>(
        &'a self,
        local: &'a VolumeStore,
        tenant: &'a str,
    ) -> BoxFuture<'a, Result<Vec<VolumeInfo>, VolumeError>>;
    fn info<'a>(
        &'a self,
        local: &'a VolumeStore,
        tenant: &'a str,
        name: &'a VolumeName,
    ) -> BoxFuture<'a, Result<VolumeInfo, VolumeError>>;
    fn delete<'a>(
        &'a self,
        local: &'a Arc<VolumeStore>,
        tenant: &'a str,
        name: &'a VolumeName,
    ) -> BoxFuture<'a, Result<(), VolumeError>>;
    fn pull<'a>(
        &'a self,
        local: &'a Arc<VolumeStore>,
        tenant: &'a str,
        name: &'a VolumeName,
    ) -> BoxFuture<'a, Result<(), VolumeError>>;
    fn push<'a>(
        &'a self,
        local: &'a Arc<VolumeStore>,
        dir: &'a Path,
    ) -> BoxFuture<'a, Result<(), VolumeError>>;
}

/// Every tenant's volumes on this node.
pub struct VolumeStore {
    root: PathBuf,
    limits: VolumeLimits,
    /// Usage of each volume measured so far (by its folder); under this lock every change
    /// of a volume's files is checked and made, so two writers cannot both pass a limit.
    usage: Mutex<HashMap<PathBuf, Usage>>,
    /// Bytes received by uploads not yet committed, by volume folder (taken after `usage`'s
    /// lock when checked against a limit).
    receiving: Mutex<HashMap<PathBuf, u64>>,
    /// In a cluster: the shared store these folders replicate (`replica.rs`).
    replica: Option<Arc<dyn Replicated>>,
    /// Each tenant's volume names as last read from its folder (by the tenant's folder),
    /// forgotten by every change of the set: a writable loan counts the tenant's volumes
    /// without reading the folder each time.
    names: Mutex<HashMap<PathBuf, Vec<VolumeName>>>,
    /// Writable loans ended so far: a measure taken while one ended may have missed what
    /// it wrote, so it is not kept (`remeasure_if_unknown`).
    loans_ended: std::sync::atomic::AtomicU64,
}

/// An upload being received ([`VolumeStore::begin_upload`]): its bytes count against the
/// volume's and the tenant's room until it is committed or dropped; dropped uncommitted,
/// what it received is removed.
pub struct Upload {
    store: Arc<VolumeStore>,
    tenant_dir: PathBuf,
    dir: PathBuf,
    /// The size of the file it would replace (free room once it is replaced).
    replaced: u64,
    taken: u64,
    incoming: PathBuf,
    file: Option<std::fs::File>,
    committed: bool,
}

impl Upload {
    /// The file the body is written into (taken once).
    pub fn file(&mut self) -> std::fs::File {
        self.file.take().expect("an upload's file is taken once")
    }

    /// Admits `n` more bytes, or refuses them with the limit they would pass.
    pub fn take(&mut self, n: u64) -> Result<(), VolumeError> {
        let store = &self.store;
        let usage = lock(&store.usage);
        let mut receiving = lock(&store.receiving);
        let own = usage.get(&self.dir).map_or(0, |u| u.bytes)
            + receiving.get(&self.dir).copied().unwrap_or(0);
        let all = usage
            .iter()
            .filter(|(d, _)| d.starts_with(&self.tenant_dir))
            .map(|(_, u)| u.bytes)
            .sum::<u64>()
            + receiving
                .iter()
                .filter(|(d, _)| d.starts_with(&self.tenant_dir))
                .map(|(_, n)| *n)
                .sum::<u64>();
        let replaced = self.replaced;
        store
            .room(VolumeLimit::VolumeBytes, own.saturating_sub(replaced))
            .admit(n)?;
        store
            .room(VolumeLimit::TenantBytes, all.saturating_sub(replaced))
            .admit(n)?;
        *receiving.entry(self.dir.clone()).or_default() += n;
        self.taken += n;
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        {
            let mut receiving = lock(&self.store.receiving);
            if let Some(n) = receiving.get_mut(&self.dir) {
                *n = n.saturating_sub(self.taken);
                if *n == 0 {
                    receiving.remove(&self.dir);
                }
            }
        }
        self.file.take();
        if !self.committed {
            let _ = std::fs::remove_file(&self.incoming);
        }
    }
}

/// A volume lent to a sandbox ([`VolumeStore::lend`]): for a writable mount, the room
/// reserved for what the sandbox may add, counted against the volume's and the tenant's
/// limits as an upload's bytes are. Dropped when the sandbox is done: the reservation goes
/// and the volume is measured again (the sandbox changed it elsewhere), on a blocking thread
/// right away, so the next loan finds it measured.
pub struct Lease {
    store: Arc<VolumeStore>,
    dir: PathBuf,
    reserved: u64,
    writable: bool,
    /// Its changes were pushed to the shared store ([`Lease::settle`]).
    settled: bool,
}

impl Lease {
    /// Ends the loan once the sandbox is done, after pushing what it changed to the shared
    /// store (in a cluster, for a writable mount): a failed push is logged and left for the
    /// volume's next push (the node keeps the change).
    pub async fn settle(mut self) {
        self.settled = true;
        if let (true, Some(replica)) = (self.writable, &self.store.replica)
            && let Err(e) = replica.push(&self.store, &self.dir).await
        {
            tracing::warn!(error = %e, "a volume's changes stay on this node until its next push");
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.writable {
            return;
        }
        // A loan that ends without settling (a session's interpreter closed or hibernated,
        // a run whose caller went away) still pushes, after the fact.
        if let (false, Some(replica), Ok(rt)) = (
            self.settled,
            self.store.replica.clone(),
            tokio::runtime::Handle::try_current(),
        ) {
            let (store, dir) = (self.store.clone(), self.dir.clone());
            rt.spawn(async move {
                if let Err(e) = replica.push(&store, &dir).await {
                    tracing::warn!(error = %e, "a volume's changes stay on this node until its next push");
                }
            });
        }
        let mut usage = lock(&self.store.usage);
        let mut receiving = lock(&self.store.receiving);
        if let Some(n) = receiving.get_mut(&self.dir) {
            *n = n.saturating_sub(self.reserved);
            if *n == 0 {
                receiving.remove(&self.dir);
            }
        }
        usage.remove(&self.dir);
        self.store
            .loans_ended
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        drop((usage, receiving));
        // Measured again now, so the next loan finds it measured: here when it is small
        // (a hop to a blocking thread costs more than a few entries), else on one.
        if self
            .store
            .remeasure_if_unknown(&self.dir, SMALL_VOLUME_ENTRIES)
        {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (store, dir) = (self.store.clone(), self.dir.clone());
            rt.spawn_blocking(move || store.remeasure_if_unknown(&dir, u64::MAX));
        }
    }
}

impl VolumeStore {
    /// Lends `mount`'s volume of `tenant` to a sandbox: where its folders are, and for a
    /// writable mount room for up to `want` bytes more, as much as the volume and the tenant
    /// have left (reserved until the [`Lease`] is dropped), and the entries the volume has
    /// left.
    pub fn lend(
        self: &Arc<Self>,
        tenant: &str,
        mount: &VolumeMount,
        want: u64,
    ) -> Result<(Lease, Lent), VolumeError> {
        self.lend_if(tenant, mount, want, true)
            .map(|lent| lent.expect("lent when it may measure"))
    }

    /// [`VolumeStore::lend`] without walking a volume: `None` when the volume or another
    /// of the tenant's would have to be measured first (the caller lends on a blocking
    /// thread then). A read-only loan never measures.
    pub fn lend_measured(
        self: &Arc<Self>,
        tenant: &str,
        mount: &VolumeMount,
        want: u64,
    ) -> Result<Option<(Lease, Lent)>, VolumeError> {
        self.lend_if(tenant, mount, want, false)
    }

    fn lend_if(
        self: &Arc<Self>,
        tenant: &str,
        mount: &VolumeMount,
        want: u64,
        may_measure: bool,
    ) -> Result<Option<(Lease, Lent)>, VolumeError> {
        let dir = self.existing(tenant, &mount.volume)?;
        let mut lent = Lent {
            name: mount.volume.to_string(),
            at: mount.at.clone(),
            files: dir.join(FILES),
            incoming: None,
            room_bytes: 0,
            room_entries: 0,
        };
        let mut lease = Lease {
            store: self.clone(),
            dir: dir.clone(),
            reserved: 0,
            writable: !mount.read_only,
            settled: false,
        };
        if mount.read_only {
            return Ok(Some((lease, lent)));
        }
        let tenant_dir = self.tenant_dir(tenant);
        let mut usage = lock(&self.usage);
        let (Some(used), Some(all)) = (
            self.usage_if(&mut usage, &dir, may_measure)?,
            self.tenant_bytes_if(&mut usage, tenant, may_measure)?,
        ) else {
            // Not measured: the lease is dropped unreserved (nothing to give back).
            lease.writable = false;
            return Ok(None);
        };
        let mut receiving = lock(&self.receiving);
        let own_in_flight = receiving.get(&dir).copied().unwrap_or(0);
        let tenant_in_flight: u64 = receiving
            .iter()
            .filter(|(d, _)| d.starts_with(&tenant_dir))
            .map(|(_, n)| *n)
            .sum();
        let left = |limit: u64, used: u64| limit.saturating_sub(used);
        let room = want
            .min(left(self.limits.volume_bytes, used.bytes + own_in_flight))
            .min(left(self.limits.tenant_bytes, all + tenant_in_flight));
        *receiving.entry(dir.clone()).or_default() += room;
        lease.reserved = room;
        lent.incoming = Some(dir.join(INCOMING));
        lent.room_bytes = room;
        lent.room_entries = left(self.limits.files, used.files);
        Ok(Some((lease, lent)))
    }

    /// The store at `root` (made if missing; what a deletion left half-removed is removed).
    /// A root that cannot be made (a read-only file system) does not stop the server: the
    /// store is returned with the error, and each operation fails naming it.
    pub fn open(root: &Path, limits: VolumeLimits) -> (Self, Option<std::io::Error>) {
        let trash = root.join(TRASH);
        let _ = std::fs::remove_dir_all(&trash);
        let made = std::fs::create_dir_all(&trash).err();
        clear_incoming(root);
        let store = VolumeStore {
            root: root.to_path_buf(),
            limits,
            usage: Mutex::new(HashMap::new()),
            receiving: Mutex::new(HashMap::new()),
            replica: None,
            names: Mutex::default(),
            loans_ended: std::sync::atomic::AtomicU64::new(0),
        };
        (store, made)
    }

    /// The store as a replica of a cluster's shared store (`replica.rs`).
    pub fn replicating(mut self, replica: Arc<dyn Replicated>) -> Self {
        self.replica = Some(replica);
        self
    }

    /// The shared store this node replicates, in a cluster.
    pub fn replica(&self) -> Option<&Arc<dyn Replicated>> {
        self.replica.as_ref()
    }

    pub fn limits(&self) -> VolumeLimits {
        self.limits
    }

    /// The folder name of `tenant`'s volumes (here and in the shared store).
    pub(super) fn tenant_folder(&self, tenant: &str) -> String {
        hex::encode(&sha2::Sha256::digest(tenant.as_bytes())[..16])
    }

    /// Where volume `name` of `tenant` lives on this node (whether it exists or not).
    pub fn folder_of(&self, tenant: &str, name: &VolumeName) -> PathBuf {
        self.volume_dir(tenant, name)
    }

    /// The tenant's folder name and the volume's name of the volume at `dir`.
    pub(super) fn names_of(&self, dir: &Path) -> Option<(String, String)> {
        let rel = dir.strip_prefix(&self.root).ok()?;
        let mut parts = rel.iter().map(|p| p.to_str());
        match (parts.next(), parts.next(), parts.next()) {
            (Some(Some(t)), Some(Some(n)), None) => Some((t.to_string(), n.to_string())),
            _ => None,
        }
    }

    /// The names of `tenant`'s volumes on this node.
    pub(super) fn local_names(&self, tenant: &str) -> Result<Vec<VolumeName>, VolumeError> {
        self.names(tenant)
    }

    /// Removes this node's folder of the volume at `dir` (deleted in the shared store).
    pub(super) fn forget(&self, dir: &Path) {
        let mut usage = lock(&self.usage);
        usage.remove(dir);
        self.names_changed(&mut usage, dir);
        let gone = self
            .root
            .join(TRASH)
            .join(format!("{:016x}", rand::random::<u64>()));
        if std::fs::rename(dir, &gone).is_ok() {
            drop(usage);
            let _ = std::fs::remove_dir_all(&gone);
        }
    }

    /// Makes this node's folder of the volume at `dir` with `record` (the shared store's),
    /// if it has none.
    pub(super) fn adopt(&self, dir: &Path, record: &[u8]) -> Result<(), VolumeError> {
        if dir.join(META).exists() {
            return Ok(());
        }
        Meta::parse(record)?;
        let mut usage = lock(&self.usage);
        self.names_changed(&mut usage, dir);
        let made = (|| {
            std::fs::create_dir_all(dir.join(FILES))?;
            std::fs::create_dir_all(dir.join(INCOMING))?;
            let tmp = dir.join(".volume.json.tmp");
            std::fs::write(&tmp, record)?;
            std::fs::rename(tmp, dir.join(META))
        })();
        made.map_err(|e| VolumeError::io("making the node's copy", e))
    }

    /// The volume at `dir` changed behind the store's back (a pull): measured again at its
    /// next use.
    pub(super) fn remeasure(&self, dir: &Path) {
        lock(&self.usage).remove(dir);
    }

    /// Limit `what` with `used` held against it.
    fn room(&self, what: VolumeLimit, used: u64) -> Room {
        let limit = match what {
            VolumeLimit::VolumeBytes => self.limits.volume_bytes,
            VolumeLimit::TenantBytes => self.limits.tenant_bytes,
            VolumeLimit::Files => self.limits.files,
        };
        Room { what, limit, used }
    }

    fn tenant_dir(&self, tenant: &str) -> PathBuf {
        self.root.join(self.tenant_folder(tenant))
    }

    fn volume_dir(&self, tenant: &str, name: &VolumeName) -> PathBuf {
        self.tenant_dir(tenant).join(name.as_str())
    }

    /// The folder of an existing volume, or `NotFound`.
    fn existing(&self, tenant: &str, name: &VolumeName) -> Result<PathBuf, VolumeError> {
        let dir = self.volume_dir(tenant, name);
        match std::fs::metadata(dir.join(META)) {
            Ok(_) => Ok(dir),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                Err(VolumeError::NotFound(name.to_string()))
            }
            Err(e) => Err(VolumeError::io("reading the volume", e)),
        }
    }

    fn files_dir(dir: &Path) -> Result<Dir, VolumeError> {
        Dir::open_ambient_dir(dir.join(FILES), ambient_authority())
            .map_err(|e| VolumeError::io("opening the volume", e))
    }

    /// Makes volume `name` of `tenant`.
    pub fn create(&self, tenant: &str, name: &VolumeName) -> Result<VolumeInfo, VolumeError> {
        let mut usage = lock(&self.usage);
        let have = self.names(tenant)?.len() as u64;
        if have >= self.limits.volumes {
            return Err(VolumeError::TooMany(self.limits.volumes));
        }
        let tenant_dir = self.tenant_dir(tenant);
        std::fs::create_dir_all(&tenant_dir).map_err(|e| VolumeError::io("making it", e))?;
        let dir = tenant_dir.join(name.as_str());
        // A folder of that name without its record is what a crash mid-creation left.
        if dir.exists() && !dir.join(META).exists() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                return Err(VolumeError::Exists(name.to_string()));
            }
            Err(e) => return Err(VolumeError::io("making it", e)),
        }
        self.names_changed(&mut usage, &dir);
        let made = (|| {
            std::fs::create_dir(dir.join(FILES))?;
            std::fs::create_dir(dir.join(INCOMING))?;
            let meta = Meta {
                name: name.to_string(),
                created_at: unix_now(),
            };
            let tmp = dir.join(".volume.json.tmp");
            std::fs::write(&tmp, serde_json::to_vec(&meta).expect("plain data"))?;
            // The record lands last and whole: a volume exists once it is there.
            std::fs::rename(tmp, dir.join(META))?;
            Ok::<_, std::io::Error>(meta)
        })();
        match made {
            Ok(meta) => {
                usage.insert(dir, Usage::default());
                Ok(VolumeInfo {
                    name: meta.name,
                    created_at: meta.created_at,
                    bytes: 0,
                    files: 0,
                })
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(VolumeError::io("making it", e))
            }
        }
    }

    /// The names of `tenant`'s volumes, sorted.
    fn names(&self, tenant: &str) -> Result<Vec<VolumeName>, VolumeError> {
        let entries = match std::fs::read_dir(self.tenant_dir(tenant)) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(VolumeError::io("listing volumes", e)),
        };
        let mut names: Vec<VolumeName> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join(META).exists())
            .filter_map(|e| VolumeName::parse(e.file_name().to_str()?).ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// [`VolumeStore::names`], kept between calls: called with the usage lock held (`_held`),
    /// under which every change of the set forgets it ([`VolumeStore::names_changed`]).
    fn names_held(
        &self,
        _held: &mut HashMap<PathBuf, Usage>,
        tenant: &str,
    ) -> Result<Vec<VolumeName>, VolumeError> {
        let tenant_dir = self.tenant_dir(tenant);
        if let Some(known) = lock(&self.names).get(&tenant_dir) {
            return Ok(known.clone());
        }
        let names = self.names(tenant)?;
        lock(&self.names).insert(tenant_dir, names.clone());
        Ok(names)
    }

    /// The set of volumes in the folder holding `dir` changed (called with the usage lock
    /// held).
    fn names_changed(&self, _held: &mut HashMap<PathBuf, Usage>, dir: &Path) {
        if let Some(tenant_dir) = dir.parent() {
            lock(&self.names).remove(tenant_dir);
        }
    }

    /// `tenant`'s volumes.
    pub fn list(&self, tenant: &str) -> Result<Vec<VolumeInfo>, VolumeError> {
        self.names(tenant)?
            .iter()
            .map(|n| self.info(tenant, n))
            .collect()
    }

    /// Volume `name` of `tenant`, with its usage.
    pub fn info(&self, tenant: &str, name: &VolumeName) -> Result<VolumeInfo, VolumeError> {
        let dir = self.existing(tenant, name)?;
        let meta: Meta = std::fs::read(dir.join(META))
            .map_err(|e| VolumeError::io("reading the volume", e))
            .and_then(|b| {
                serde_json::from_slice(&b).map_err(|e| VolumeError::Io(format!("its record: {e}")))
            })?;
        let used = {
            let mut usage = lock(&self.usage);
            self.usage_of(&mut usage, &dir)?
        };
        Ok(VolumeInfo {
            name: meta.name,
            created_at: meta.created_at,
            bytes: used.bytes,
            files: used.files,
        })
    }

    /// Deletes volume `name` of `tenant` and everything in it.
    pub fn delete(&self, tenant: &str, name: &VolumeName) -> Result<(), VolumeError> {
        let mut usage = lock(&self.usage);
        let dir = self.existing(tenant, name)?;
        // Out of sight at once (a rename), then removed.
        let gone = self
            .root
            .join(TRASH)
            .join(format!("{:016x}", rand::random::<u64>()));
        std::fs::rename(&dir, &gone).map_err(|e| VolumeError::io("deleting it", e))?;
        usage.remove(&dir);
        self.names_changed(&mut usage, &dir);
        drop(usage);
        let _ = std::fs::remove_dir_all(&gone);
        Ok(())
    }

    /// The usage of the volume at `dir`, measured if it was not yet.
    fn usage_of(
        &self,
        usage: &mut HashMap<PathBuf, Usage>,
        dir: &Path,
    ) -> Result<Usage, VolumeError> {
        Ok(self.usage_if(usage, dir, true)?.expect("measured"))
    }

    /// The usage of the volume at `dir`: measured if it was not yet and `may_measure`, else
    /// `None`.
    fn usage_if(
        &self,
        usage: &mut HashMap<PathBuf, Usage>,
        dir: &Path,
        may_measure: bool,
    ) -> Result<Option<Usage>, VolumeError> {
        if let Some(u) = usage.get(dir) {
            return Ok(Some(*u));
        }
        if !may_measure {
            return Ok(None);
        }
        let measured = measure(&Self::files_dir(dir)?)
            .map_err(|e| VolumeError::io("measuring the volume", e))?;
        usage.insert(dir.to_path_buf(), measured);
        Ok(Some(measured))
    }

    /// Bytes `tenant`'s volumes hold together.
    fn tenant_bytes(
        &self,
        usage: &mut HashMap<PathBuf, Usage>,
        tenant: &str,
    ) -> Result<u64, VolumeError> {
        Ok(self
            .tenant_bytes_if(usage, tenant, true)?
            .expect("measured"))
    }

    /// [`VolumeStore::tenant_bytes`], or `None` when one of the volumes is not measured and
    /// `may_measure` is false.
    fn tenant_bytes_if(
        &self,
        usage: &mut HashMap<PathBuf, Usage>,
        tenant: &str,
        may_measure: bool,
    ) -> Result<Option<u64>, VolumeError> {
        let mut total = 0;
        for n in self.names_held(usage, tenant)? {
            match self.usage_if(usage, &self.volume_dir(tenant, &n), may_measure)? {
                Some(u) => total += u.bytes,
                None => return Ok(None),
            }
        }
        Ok(Some(total))
    }

    /// Measures the volume at `dir` again, unless a change made here measured it first (a
    /// writable loan's end: the sandbox changed it elsewhere); run off the request's path.
    /// Whether it is done: `false` when the volume has more than `max_entries` entries
    /// (nothing is kept; the caller measures it where a long walk may run).
    fn remeasure_if_unknown(&self, dir: &Path, max_entries: u64) -> bool {
        use std::sync::atomic::Ordering;
        let ended = self.loans_ended.load(Ordering::Acquire);
        if lock(&self.usage).contains_key(dir) {
            return true;
        }
        let mut budget = max_entries;
        let measured = match Self::files_dir(dir) {
            Ok(d) => measure_within(&d, &mut budget),
            Err(_) => return true,
        };
        let measured = match measured {
            Ok(Some(u)) => u,
            Ok(None) => return false,
            Err(_) => return true,
        };
        let mut usage = lock(&self.usage);
        // Another loan ended meanwhile: what it wrote may be missing (the next use measures).
        if self.loans_ended.load(Ordering::Acquire) != ended {
            return true;
        }
        // A change made meanwhile under the lock measured (and counted) it already.
        usage.entry(dir.to_path_buf()).or_insert(measured);
        true
    }

    /// Begins an upload to `path` of volume `name`: a new file in the volume's `incoming/`
    /// that the body is written into as [`Upload::take`] admits each chunk, and
    /// [`VolumeStore::commit`] puts in place. Bytes received and not yet committed count
    /// against the volume's and the tenant's room, so uploads in flight at once can never
    /// hold more disk than the tenant may keep.
    pub fn begin_upload(
        self: &Arc<Self>,
        tenant: &str,
        name: &VolumeName,
        path: &VolumePath,
    ) -> Result<Upload, VolumeError> {
        let dir = self.existing(tenant, name)?;
        let replaced = match Self::files_dir(&dir)?.symlink_metadata(path.as_str()) {
            Ok(m) if m.is_file() => m.len(),
            _ => 0,
        };
        {
            // Every volume of the tenant measured, so `take` counts without touching disk.
            let mut usage = lock(&self.usage);
            self.usage_of(&mut usage, &dir)?;
            self.tenant_bytes(&mut usage, tenant)?;
        }
        let incoming = dir
            .join(INCOMING)
            .join(format!("{:016x}", rand::random::<u64>()));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&incoming)
            .map_err(|e| VolumeError::io("receiving the file", e))?;
        Ok(Upload {
            store: self.clone(),
            tenant_dir: self.tenant_dir(tenant),
            dir,
            replaced,
            taken: 0,
            incoming,
            file: Some(file),
            committed: false,
        })
    }

    /// Puts `upload` as `path` in volume `name` (its folders made), replacing a file there,
    /// if every limit allows; what was received is removed either way (dropping `upload`).
    /// Returns its size.
    pub fn commit(
        &self,
        tenant: &str,
        name: &VolumeName,
        path: &VolumePath,
        mut upload: Upload,
    ) -> Result<u64, VolumeError> {
        drop(upload.file.take());
        let done = self.commit_inner(tenant, name, path, &upload.incoming);
        upload.committed = done.is_ok();
        done
    }

    fn commit_inner(
        &self,
        tenant: &str,
        name: &VolumeName,
        path: &VolumePath,
        incoming: &Path,
    ) -> Result<u64, VolumeError> {
        let Some(parent) = path.parent() else {
            return Err(wrong(name, path, "is the volume's top, not a file"));
        };
        let mut usage = lock(&self.usage);
        let dir = self.existing(tenant, name)?;
        let files = Self::files_dir(&dir)?;
        let size = std::fs::metadata(incoming)
            .map_err(|e| VolumeError::io("receiving the file", e))?
            .len();
        let replaced = match files.symlink_metadata(path.as_str()) {
            Ok(m) if m.is_file() => Some(m.len()),
            Ok(m) if m.is_dir() => return Err(wrong(name, path, "is a folder")),
            Ok(_) => return Err(wrong(name, path, "is a link or a special file")),
            Err(e) if is_absent(&e) => None,
            Err(e) => return Err(self.refused(name, path, e)),
        };
        let new_dirs = missing_dirs(&files, parent).map_err(|e| self.refused(name, path, e))?;
        let used = self.usage_of(&mut usage, &dir)?;
        let all = self.tenant_bytes(&mut usage, tenant)?;
        let grow = size.saturating_sub(replaced.unwrap_or(0));
        let new_entries = new_dirs + u64::from(replaced.is_none());
        self.room(VolumeLimit::VolumeBytes, used.bytes)
            .admit(grow)?;
        self.room(VolumeLimit::TenantBytes, all).admit(grow)?;
        self.room(VolumeLimit::Files, used.files)
            .admit(new_entries)?;
        if !parent.is_empty() {
            files
                .create_dir_all(parent)
                .map_err(|e| self.refused(name, path, e))?;
        }
        let incoming_dir = Dir::open_ambient_dir(dir.join(INCOMING), ambient_authority())
            .map_err(|e| VolumeError::io("receiving the file", e))?;
        let leaf = incoming
            .file_name()
            .expect("an upload's path has a file name");
        incoming_dir
            .rename(leaf, &files, path.as_str())
            .map_err(|e| self.refused(name, path, e))?;
        let after = Usage {
            bytes: used.bytes - replaced.unwrap_or(0) + size,
            files: used.files + new_entries,
        };
        usage.insert(dir, after);
        Ok(size)
    }

    /// Makes folder `path` (and those above it) in volume `name`.
    pub fn make_dir(
        &self,
        tenant: &str,
        name: &VolumeName,
        path: &VolumePath,
    ) -> Result<VolumeEntry, VolumeError> {
        if path.is_top() {
            return self.stat(tenant, name, path);
        }
        let mut usage = lock(&self.usage);
        let dir = self.existing(tenant, name)?;
        let files = Self::files_dir(&dir)?;
        let new_dirs =
            missing_dirs(&files, path.as_str()).map_err(|e| self.refused(name, path, e))?;
        let used = self.usage_of(&mut usage, &dir)?;
        self.room(VolumeLimit::Files, used.files).admit(new_dirs)?;
        files
            .create_dir_all(path.as_str())
            .map_err(|e| self.refused(name, path, e))?;
        usage.insert(
            dir,
            Usage {
                files: used.files + new_dirs,
                ..used
            },
        );
        drop(usage);
        self.stat(tenant, name, path)
    }

    /// What is at `path` in volume `name`.
    pub fn stat(
        &self,
        tenant: &str,
        name: &VolumeName,
        path: &VolumePath,
    ) -> Result<VolumeEntry, VolumeError> {
        let files = Self::files_dir(&self.existing(tenant, name)?)?;
        let m = if path.is_top() {
            files.dir_metadata()
        } else {
            files.symlink_metadata(path.as_str())
        }
        .map_err(|e| self.refused(name, path, e))?;
        Ok(entry(path.as_str().to_string(), &m))
    }

    /// Opens file `path` of volume `name` for reading: a regular file only (a folder, link or
    /// special file is refused), and its size.
    pub fn open_file(
        &self,
        tenant: &str,
        name: &VolumeName,
        path: &VolumePath,
    ) -> Result<(std::fs::File, u64), VolumeError> {
        let files = Self::files_dir(&self.existing(tenant, name)?)?;
        if path.is_top() {
            return Err(wrong(name, path, "is a folder"));
        }
        let m = files
            .symlink_metadata(path.as_str())
            .map_err(|e| self.refused(name, path, e))?;
        if m.is_dir() {
            return Err(wrong(name, path, "is a folder"));
        }
        if !m.is_file() {
            return Err(wrong(name, path, "is a link or a special file"));
        }
        let mut opts = cap_std::fs::OpenOptions::new();
        opts.read(true);
        {
            use cap_std::fs::OpenOptionsExt as _;
            // Whatever replaced it since the look above: never a link, never a FIFO's wait.
            opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
        }
        let file = files
            .open_with(path.as_str(), &opts)
            .map_err(|e| self.refused(name, path, e))?
            .into_std();
        let m = file
            .metadata()
            .map_err(|e| VolumeError::io("reading the file", e))?;
        if !m.is_file() {
            return Err(wrong(name, path, "is a link or a special file"));
        }
        Ok((file, m.len()))
    }

    /// The entries under folder `path` of volume `name`, `depth` levels down (1: its own
    /// entries), at most the volume's file limit of them, sorted by path.
    pub fn list_files(
        &self,
        tenant: &str,
        name: &VolumeName,
        path: &VolumePath,
        depth: u32,
    ) -> Result<Vec<VolumeEntry>, VolumeError> {
        let files = Self::files_dir(&self.existing(tenant, name)?)?;
        let start = if path.is_top() {
            files
        } else {
            let m = files
                .symlink_metadata(path.as_str())
                .map_err(|e| self.refused(name, path, e))?;
            if !m.is_dir() {
                return Err(wrong(name, path, "is not a folder"));
            }
            files
                .open_dir(path.as_str())
                .map_err(|e| self.refused(name, path, e))?
        };
        let mut out = Vec::new();
        let prefix = path.as_str().to_string();
        walk(&start, &prefix, depth.max(1), self.limits.files, &mut out)
            .map_err(|e| VolumeError::io("listing the volume", e))?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Removes `path` from volume `name`: a file or link, or a folder with everything in it.
    pub fn remove(
        &self,
        tenant: &str,
        name: &VolumeName,
        path: &VolumePath,
    ) -> Result<(), VolumeError> {
        if path.is_top() {
            return Err(wrong(
                name,
                path,
                "is the volume's top: delete the volume instead",
            ));
        }
        let mut usage = lock(&self.usage);
        let dir = self.existing(tenant, name)?;
        let files = Self::files_dir(&dir)?;
        let m = files
            .symlink_metadata(path.as_str())
            .map_err(|e| self.refused(name, path, e))?;
        let used = self.usage_of(&mut usage, &dir)?;
        let freed = if m.is_dir() {
            let sub = files
                .open_dir(path.as_str())
                .map_err(|e| self.refused(name, path, e))?;
            let inner = measure(&sub).map_err(|e| VolumeError::io("measuring the folder", e))?;
            files
                .remove_dir_all(path.as_str())
                .map_err(|e| self.refused(name, path, e))?;
            Usage {
                bytes: inner.bytes,
                files: inner.files + 1,
            }
        } else {
            files
                .remove_file(path.as_str())
                .map_err(|e| self.refused(name, path, e))?;
            Usage {
                bytes: if m.is_file() { m.len() } else { 0 },
                files: 1,
            }
        };
        usage.insert(
            dir,
            Usage {
                bytes: used.bytes.saturating_sub(freed.bytes),
                files: used.files.saturating_sub(freed.files),
            },
        );
        Ok(())
    }

    /// An I/O error on `path` as the caller should see it.
    fn refused(&self, name: &VolumeName, path: &VolumePath, e: std::io::Error) -> VolumeError {
        if is_absent(&e) {
            return VolumeError::FileNotFound {
                volume: name.to_string(),
                path: path.as_str().to_string(),
            };
        }
        match e.raw_os_error() {
            Some(libc::ENOTDIR) | Some(libc::EEXIST) | Some(libc::EISDIR) => {
                wrong(name, path, "is in the way of a file or a folder there")
            }
            // cap-std's refusal of a path that would leave the volume (a link out of it).
            _ if e.kind() == ErrorKind::PermissionDenied
                || e.raw_os_error() == Some(libc::ELOOP) =>
            {
                wrong(name, path, "goes through a link")
            }
            _ => VolumeError::io("the volume's disk", e),
        }
    }
}

/// Empties every volume's `incoming/`: at a start no upload is in flight and no sandbox
/// writes, so what is there was left by a process that died mid-write, and no one will put
/// it in place.
fn clear_incoming(root: &Path) {
    let folders = |dir: &Path| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect::<Vec<_>>()
    };
    for tenant in folders(root) {
        for volume in folders(&tenant) {
            let incoming = volume.join(INCOMING);
            if incoming.is_dir() {
                let _ = std::fs::remove_dir_all(&incoming);
                let _ = std::fs::create_dir(&incoming);
            }
        }
    }
}

fn is_absent(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::NotFound
}

fn wrong(name: &VolumeName, path: &VolumePath, why: &'static str) -> VolumeError {
    VolumeError::WrongKind {
        volume: name.to_string(),
        path: format!("/{}", path.as_str()),
        why,
    }
}

/// How many of the folders on the way to `dir` (inclusive) do not exist yet; an error when
/// one of them is not a folder.
fn missing_dirs(files: &Dir, dir: &str) -> std::io::Result<u64> {
    if dir.is_empty() {
        return Ok(0);
    }
    let mut at = String::new();
    let parts: Vec<&str> = dir.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if !at.is_empty() {
            at.push('/');
        }
        at.push_str(part);
        match files.symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(std::io::Error::from_raw_os_error(libc::ENOTDIR)),
            Err(e) if is_absent(&e) => return Ok((parts.len() - i) as u64),
            Err(e) => return Err(e),
        }
    }
    Ok(0)
}

/// The bytes and entries under `dir`, links not followed.
fn measure(dir: &Dir) -> std::io::Result<Usage> {
    let mut unbounded = u64::MAX;
    Ok(measure_within(dir, &mut unbounded)?.expect("an unbounded walk ends"))
}

/// [`measure`], or `None` once more than `budget` entries were seen.
fn measure_within(dir: &Dir, budget: &mut u64) -> std::io::Result<Option<Usage>> {
    let mut u = Usage::default();
    for e in dir.entries()? {
        let e = e?;
        if *budget == 0 {
            return Ok(None);
        }
        *budget -= 1;
        let m = e.metadata()?;
        u.files += 1;
        if m.is_dir() {
            let Some(inner) = measure_within(&e.open_dir()?, budget)? else {
                return Ok(None);
            };
            u.bytes += inner.bytes;
            u.files += inner.files;
        } else if m.is_file() {
            u.bytes += m.len();
        }
    }
    Ok(Some(u))
}

fn walk(
    dir: &Dir,
    prefix: &str,
    depth: u32,
    max: u64,
    out: &mut Vec<VolumeEntry>,
) -> std::io::Result<()> {
    for e in dir.entries()? {
        if out.len() as u64 >= max {
            return Ok(());
        }
        let e = e?;
        let Some(path) = child_path(prefix, &e.file_name()) else {
            continue;
        };
        let m = e.metadata()?;
        let is_dir = m.is_dir();
        out.push(entry(path.clone(), &m));
        if is_dir && depth > 1 {
            walk(&e.open_dir()?, &path, depth - 1, max, out)?;
        }
    }
    Ok(())
}

/// `leaf`'s path below a volume's top, in the folder at `prefix` (`""`: the top); `None` for
/// a name that is not UTF-8 (not listed, not carried).
pub(super) fn child_path(prefix: &str, leaf: &std::ffi::OsStr) -> Option<String> {
    let leaf = leaf.to_str()?;
    Some(if prefix.is_empty() {
        leaf.to_string()
    } else {
        format!("{prefix}/{leaf}")
    })
}

fn entry(path: String, m: &cap_std::fs::Metadata) -> VolumeEntry {
    let kind = if m.is_dir() {
        VolumeEntryKind::Dir
    } else if m.is_symlink() {
        VolumeEntryKind::Symlink
    } else {
        VolumeEntryKind::File
    };
    VolumeEntry {
        path,
        kind,
        size: if kind == VolumeEntryKind::File {
            m.len()
        } else {
            0
        },
        modified: m
            .modified()
            .ok()
            .map(|t| t.into_std())
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs()),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
