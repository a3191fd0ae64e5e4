//! User templates: environments a tenant builds (packages, files, shell steps, set-up code,
//! imports, variables) and names, so its sandboxes start with that work done. Each is a
//! layer over a built-in template (`sandbox::Layer`): the state its build left, kept as a
//! snapshot image in `<home>/user-templates/layers/<id>.layer`, which workers read and keep
//! decoded. This module holds the records (`records/<tenant>.json`, one file a tenant, read
//! at start), the names, ids and quotas; building one is the runner's
//! (`runner/templates.rs`), what a request asks is the intake's (`intake/template.rs`).
//!
//! A template is its tenant's: another tenant's name is not found. Its id hashes every
//! input with the tenant, so identical inputs of one tenant give one id and one build, and
//! no tenant learns of another's builds. Rebuilding a name with other inputs makes a new
//! version; the old version's layer stays while runs may be using it, then goes.

mod record;
mod shared;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub use record::{BuildFailure, TemplateInfo, TemplateStatus};
pub use shared::SharedTemplates;

use crate::sync::lock;
use crate::template::{LayerRef, Template};

/// Why a template could not be had.
#[derive(Debug, thiserror::Error)]
pub enum UserTemplateError {
    /// No template by that name in the caller's tenant (never built, deleted, another's).
    #[error(
        "no template {0:?} (the built-in ones are \"python\" and \"scientific\"; GET /v1/templates lists yours)"
    )]
    NotFound(String),
    /// The name is being built; its build must end first.
    #[error("template {0:?} is being built; wait for its build to end (GET /v1/templates/{0})")]
    Building(String),
    /// Its last build failed: it cannot be used until a build succeeds.
    #[error("template {name:?} cannot be used: its build failed at {step}: {reason}")]
    Failed {
        name: String,
        step: String,
        reason: String,
    },
    /// The tenant has as many templates as it may.
    #[error(
        "a tenant has at most {0} templates (--templates-per-tenant): delete one first (DELETE /v1/templates/{{name}})"
    )]
    TooMany(u64),
    /// The tenant has as many builds in flight as it may.
    #[error("a tenant builds at most {0} templates at once: wait for a build to end")]
    TooManyBuilds(u64),
    /// An upload for a build that is not expected (an unknown or spent link).
    #[error("no upload is expected at this link (it was used, or it expired)")]
    NoUpload,
    /// The uploads waiting for builds hold as much as the server keeps.
    #[error(
        "the server holds {0} bytes of uploads waiting for builds: start those builds, or retry later"
    )]
    UploadsFull(usize),
    /// A name that cannot be a template's.
    #[error("invalid template name {name:?}: {why}")]
    InvalidName { name: String, why: &'static str },
    /// Reading or writing the records or a layer failed.
    #[error("template storage: {0}")]
    Io(String),
    /// The cluster's shared store failed; nothing of the request happened there: retry.
    #[error("the shared store, {0}")]
    Store(String),
}

/// Checks a template name: a tenant's name for a thing it keeps
/// (`vocabulary::check_name`), and not a built-in template's.
pub fn check_name(name: &str) -> Result<(), UserTemplateError> {
    let bad = |why| UserTemplateError::InvalidName {
        name: name.chars().take(80).collect(),
        why,
    };
    crate::vocabulary::check_name(name).map_err(bad)?;
    if name.parse::<Template>().is_ok() {
        return Err(bad("that is a built-in template's name"));
    }
    Ok(())
}

/// One template as kept: what the API shows, and what a sandbox from it needs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Kept {
    /// What the API shows, but its build's log (`info.log` stays empty here: a run from
    /// the template does not copy it).
    pub info: TemplateInfo,
    /// Its build's log, shown by `GET /v1/templates/{name}` alone.
    #[serde(default)]
    pub log: Vec<crate::vivarium::StepLog>,
    /// Its environment (the values are not shown by the API).
    pub env: Vec<(String, String)>,
    /// The package specifiers its sandboxes get (its own and those of what it was built
    /// from), pinned to what the build resolved.
    pub packages: Vec<String>,
    /// The linear memory its sandboxes start with.
    pub memory_bytes: u64,
}

impl Kept {
    /// Its layer, when it is ready; `base_bytes` is its built-in template's starting memory.
    pub fn layer(&self, store: &UserTemplates, base_bytes: u64) -> Option<LayerRef> {
        (self.info.status == TemplateStatus::Ready).then(|| LayerRef {
            id: self.info.id.clone(),
            path: store.layer_path(&self.info.id),
            extra_bytes: self.memory_bytes.saturating_sub(base_bytes),
            env: self.env.clone(),
        })
    }
}

/// What a run's `template` names, resolved for its tenant.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// The built-in template at the bottom.
    pub template: Template,
    /// The user template's layer over it, with its environment (`None`: the built-in as
    /// it is).
    pub layer: Option<LayerRef>,
    /// Its packages: a request's own are added to them.
    pub packages: Vec<String>,
}

impl Chosen {
    /// A built-in template as it is.
    pub fn builtin(template: Template) -> Self {
        Chosen {
            template,
            layer: None,
            packages: Vec::new(),
        }
    }
}

/// Where templates are kept and what each tenant may hold.
#[derive(Clone)]
pub struct TemplateSettings {
    /// Their records and layers (workers read the layers).
    pub dir: PathBuf,
    pub limits: TemplateLimits,
    /// In a cluster, the store every node keeps them in (`dir` then holds this node's
    /// copies).
    pub shared: Option<Arc<SharedTemplates>>,
}

impl std::fmt::Debug for TemplateSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemplateSettings")
            .field("dir", &self.dir)
            .field("limits", &self.limits)
            .field("shared", &self.shared.is_some())
            .finish()
    }
}

/// How long a node trusts what it last read of a tenant's templates in the shared store.
const SYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// A build the store still says runs after this long ran on a node that stopped.
const BUILD_LOST_AFTER_SECS: u64 = 3600;

/// What a tenant may hold of templates (`--max-templates`, `--template-bytes`,
/// `--max-template-builds`: each tenant's).
#[derive(Debug, Clone, Copy)]
pub struct TemplateLimits {
    /// Templates (built, building or failed).
    pub templates: u64,
    /// Bytes of their images.
    pub bytes: u64,
    /// Builds in flight.
    pub builds: u64,
}

impl Default for TemplateLimits {
    fn default() -> Self {
        TemplateLimits {
            templates: 32,
            bytes: 2 << 30,
            builds: 2,
        }
    }
}

/// Every tenant's templates on this node.
pub struct UserTemplates {
    dir: PathBuf,
    /// In a cluster, the store the records and layers are kept in.
    shared: Option<Arc<SharedTemplates>>,
    /// Per tenant, when its records were last read from the shared store.
    synced: Mutex<BTreeMap<String, std::time::Instant>>,
    pub limits: TemplateLimits,
    /// Per tenant, per name.
    records: Mutex<BTreeMap<String, BTreeMap<String, Kept>>>,
    /// Per tenant, its builds in flight.
    building: Arc<Mutex<BTreeMap<String, u64>>>,
    /// Files uploaded for builds (E2B's COPY steps), until a build takes them.
    uploads: Mutex<Uploads>,
    /// Each template's packages' environment by template id, once resolved: a run from it
    /// that adds none is given this one without a lookup (and the cache keeps it while the
    /// template is here).
    envs: Mutex<BTreeMap<String, Arc<crate::packages::PackageEnv>>>,
}

/// A place among a tenant's builds in flight, given back when dropped.
pub struct BuildPlace {
    tenant: String,
    building: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl Drop for BuildPlace {
    fn drop(&mut self) {
        let mut building = lock(&self.building);
        if let Some(n) = building.get_mut(&self.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                building.remove(&self.tenant);
            }
        }
    }
}

impl UserTemplates {
    /// The templates kept under `dir` (made if missing); records that cannot be read are
    /// logged and skipped, a build that was running when the server stopped is failed.
    pub fn open(settings: &TemplateSettings) -> Self {
        let (dir, limits) = (settings.dir.as_path(), settings.limits);
        let mut records = BTreeMap::new();
        let _ = std::fs::create_dir_all(dir.join("layers"));
        let _ = std::fs::create_dir_all(dir.join("records"));
        if let Ok(entries) = std::fs::read_dir(dir.join("records")) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_none_or(|e| e != "json") {
                    continue;
                }
                match std::fs::read(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|b| {
                        serde_json::from_slice::<TenantFile>(&b).map_err(|e| e.to_string())
                    }) {
                    Ok(file) => {
                        let mut mine = BTreeMap::new();
                        for mut kept in file.templates {
                            if kept.info.status == TemplateStatus::Building {
                                kept.info.status = TemplateStatus::Failed;
                                kept.info.error = Some(BuildFailure {
                                    step: "build".into(),
                                    reason: "the server stopped during the build".into(),
                                });
                            }
                            mine.insert(kept.info.name.clone(), kept);
                        }
                        records.insert(file.tenant, mine);
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "template records skipped")
                    }
                }
            }
        }
        UserTemplates {
            dir: dir.to_path_buf(),
            shared: settings.shared.clone(),
            synced: Default::default(),
            limits,
            records: Mutex::new(records),
            building: Default::default(),
            uploads: Default::default(),
            envs: Default::default(),
        }
    }

    /// A place among `tenant`'s builds in flight, or `None` when it has as many as it may.
    pub fn begin_build(&self, tenant: &str) -> Option<BuildPlace> {
        let mut building = lock(&self.building);
        let n = building.entry(tenant.to_string()).or_default();
        if *n >= self.limits.builds {
            return None;
        }
        *n += 1;
        Some(BuildPlace {
            tenant: tenant.to_string(),
            building: self.building.clone(),
        })
    }

    /// Where the layer of id `id` is.
    pub fn layer_path(&self, id: &str) -> PathBuf {
        self.dir.join("layers").join(format!("{id}.layer"))
    }

    /// Whether `layer` names a layer of this store, at its place (a program brought back from
    /// a journal carries one: the store is fetched data).
    pub fn check_layer(&self, layer: &LayerRef) -> Result<(), UserTemplateError> {
        let id_ok = layer.id.len() == 64 && layer.id.bytes().all(|b| b.is_ascii_hexdigit());
        if id_ok && layer.path == self.layer_path(&layer.id) {
            Ok(())
        } else {
            Err(UserTemplateError::NotFound(
                layer.id.chars().take(80).collect(),
            ))
        }
    }

    /// Template `name` of `tenant`.
    pub fn get(&self, tenant: &str, name: &str) -> Option<Kept> {
        lock(&self.records).get(tenant)?.get(name).cloned()
    }

    /// What `f` takes of `tenant`'s template `name`, without copying the rest of it.
    pub fn read<T>(&self, tenant: &str, name: &str, f: impl FnOnce(&Kept) -> T) -> Option<T> {
        lock(&self.records).get(tenant)?.get(name).map(f)
    }

    /// `tenant`'s templates, by name (without their builds' logs).
    pub fn list(&self, tenant: &str) -> Vec<TemplateInfo> {
        lock(&self.records)
            .get(tenant)
            .map(|m| m.values().map(|k| k.info.clone()).collect())
            .unwrap_or_default()
    }

    /// How many templates `tenant` has and their bytes, leaving `name` out (what a rebuild
    /// of it replaces).
    pub fn usage(&self, tenant: &str, but: &str) -> (u64, u64) {
        lock(&self.records).get(tenant).map_or((0, 0), |m| {
            m.values()
                .filter(|k| k.info.name != but)
                .fold((0, 0), |(n, b), k| (n + 1, b + k.info.bytes))
        })
    }

    /// A ready template of `tenant` with id `id` (identical inputs built before), if any.
    pub fn ready_with_id(&self, tenant: &str, id: &str) -> Option<Kept> {
        lock(&self.records)
            .get(tenant)?
            .values()
            .find(|k| k.info.id == id && k.info.status == TemplateStatus::Ready)
            .cloned()
    }

    /// Records `kept` as `tenant`'s template of its name (replacing what was), here and in
    /// the shared store. Returns what it replaced.
    pub async fn put(&self, tenant: &str, kept: Kept) -> Result<Option<Kept>, UserTemplateError> {
        if let Some(shared) = &self.shared {
            shared.put_record(tenant, &kept).await?;
        }
        self.put_here(tenant, kept)
    }

    /// [`UserTemplates::put`] on this node alone (the store could not be written).
    pub fn put_here(&self, tenant: &str, kept: Kept) -> Result<Option<Kept>, UserTemplateError> {
        let mut records = lock(&self.records);
        let mine = records.entry(tenant.to_string()).or_default();
        let old = mine.insert(kept.info.name.clone(), kept);
        self.write(tenant, mine)?;
        Ok(old)
    }

    /// Removes `tenant`'s template `name`, here and in the shared store. Returns it.
    pub async fn remove(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Option<Kept>, UserTemplateError> {
        if let Some(shared) = &self.shared {
            shared.delete_record(tenant, name).await?;
        }
        let mut records = lock(&self.records);
        let Some(mine) = records.get_mut(tenant) else {
            return Ok(None);
        };
        let old = mine.remove(name);
        self.write(tenant, mine)?;
        Ok(old)
    }

    /// In a cluster, `tenant`'s records as the shared store has them (read again at most
    /// every [`SYNC_EVERY`]): a template built, rebuilt or deleted on another node is so
    /// here. A build the store says runs for more than an hour is taken as failed.
    pub async fn sync(&self, tenant: &str) -> Result<(), UserTemplateError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let fresh = lock(&self.synced)
            .get(tenant)
            .is_some_and(|at| at.elapsed() < SYNC_EVERY);
        if fresh {
            return Ok(());
        }
        let now = crate::supervisor::time::now_secs();
        let mut mine = BTreeMap::new();
        for mut kept in shared.records(tenant).await? {
            if kept.info.status == TemplateStatus::Building
                && now.saturating_sub(kept.info.created_at) > BUILD_LOST_AFTER_SECS
            {
                kept.info.status = TemplateStatus::Failed;
                kept.info.error = Some(BuildFailure {
                    step: "build".into(),
                    reason: "the node building it stopped".into(),
                });
            }
            mine.insert(kept.info.name.clone(), kept);
        }
        let mut records = lock(&self.records);
        self.write(tenant, &mine)?;
        records.insert(tenant.to_string(), mine);
        lock(&self.synced).insert(tenant.to_string(), std::time::Instant::now());
        Ok(())
    }

    /// In a cluster, sends the layer of id `id` (written here) to the shared store.
    pub async fn publish_layer(&self, id: &str) -> Result<(), UserTemplateError> {
        match &self.shared {
            Some(shared) => shared.put_layer(id, &self.layer_path(id)).await,
            None => Ok(()),
        }
    }

    /// In a cluster, fetches `layer` from the shared store when this node lacks it (once:
    /// then it is here), bounded by `max_bytes`.
    pub async fn ensure_layer(
        &self,
        layer: &LayerRef,
        max_bytes: u64,
    ) -> Result<(), UserTemplateError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        self.check_layer(layer)?;
        if tokio::fs::try_exists(&layer.path).await.unwrap_or(false) {
            return Ok(());
        }
        shared.fetch_layer(&layer.id, &layer.path, max_bytes).await
    }

    /// In a cluster, removes the layer of id `id` from the shared store too.
    pub async fn forget_shared_layer(&self, id: &str) {
        if let Some(shared) = &self.shared {
            shared.delete_layer(id).await;
        }
    }

    /// A link token for `tenant`'s upload of the files `hash` names (E2B's `filesHash`).
    pub fn upload_token(&self, tenant: &str, hash: &str) -> String {
        let token = hex::encode(rand::random::<[u8; 16]>());
        let mut up = lock(&self.uploads);
        up.sweep();
        if up.tokens.len() >= MAX_UPLOAD_LINKS {
            let oldest = up
                .tokens
                .iter()
                .min_by_key(|(_, t)| t.2)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                up.tokens.remove(&k);
            }
        }
        up.tokens.insert(
            token.clone(),
            (
                tenant.to_string(),
                hash.to_string(),
                std::time::Instant::now(),
            ),
        );
        token
    }

    /// Takes the upload the link `token` was made for.
    pub fn put_upload(&self, token: &str, bytes: bytes::Bytes) -> Result<(), UserTemplateError> {
        let mut up = lock(&self.uploads);
        up.sweep();
        let (tenant, hash, _) = up.tokens.remove(token).ok_or(UserTemplateError::NoUpload)?;
        let mine: usize = up
            .files
            .iter()
            .filter(|((t, _), _)| *t == tenant)
            .map(|(_, (_, b))| b.len())
            .sum();
        if up.bytes + bytes.len() > MAX_UPLOAD_BYTES {
            return Err(UserTemplateError::UploadsFull(MAX_UPLOAD_BYTES));
        }
        if mine + bytes.len() > MAX_TENANT_UPLOAD_BYTES {
            return Err(UserTemplateError::UploadsFull(MAX_TENANT_UPLOAD_BYTES));
        }
        up.bytes += bytes.len();
        let key = (tenant, hash);
        if let Some((_, old)) = up.files.insert(key, (std::time::Instant::now(), bytes)) {
            up.bytes -= old.len();
        }
        Ok(())
    }

    /// What `tenant` uploaded for the files `hash` names, if it is still kept.
    pub fn uploaded(&self, tenant: &str, hash: &str) -> Option<bytes::Bytes> {
        let mut up = lock(&self.uploads);
        up.sweep();
        up.files
            .get(&(tenant.to_string(), hash.to_string()))
            .map(|(_, b)| b.clone())
    }

    /// The packages' environment of template `id`, when known.
    pub fn env(&self, id: &str) -> Option<Arc<crate::packages::PackageEnv>> {
        lock(&self.envs).get(id).cloned()
    }

    /// Keeps `env` as template `id`'s packages' environment.
    pub fn keep_env(&self, id: &str, env: Arc<crate::packages::PackageEnv>) {
        lock(&self.envs).insert(id.to_string(), env);
    }

    /// Forgets template `id`'s environment when no record uses the id any more.
    pub fn forget_env(&self, id: &str) {
        if !self.layer_in_use(id) {
            lock(&self.envs).remove(id);
        }
    }

    /// Whether any record of any tenant still uses layer `id`.
    pub fn layer_in_use(&self, id: &str) -> bool {
        lock(&self.records)
            .values()
            .any(|m| m.values().any(|k| k.info.id == id))
    }

    /// Writes `tenant`'s records (atomically: a temporary file renamed).
    fn write(&self, tenant: &str, mine: &BTreeMap<String, Kept>) -> Result<(), UserTemplateError> {
        let file = TenantFile {
            tenant: tenant.to_string(),
            templates: mine.values().cloned().collect(),
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| UserTemplateError::Io(e.to_string()))?;
        let path = self
            .dir
            .join("records")
            .join(format!("{}.json", tenant_file(tenant)));
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| UserTemplateError::Io(format!("{}: {e}", path.display())))
    }
}

/// How many upload links wait at once (the oldest goes first).
const MAX_UPLOAD_LINKS: usize = 1024;
/// How many bytes of uploads the server keeps for builds, all tenants together.
const MAX_UPLOAD_BYTES: usize = 256 << 20;
/// How many of those one tenant's uploads may take.
const MAX_TENANT_UPLOAD_BYTES: usize = 128 << 20;
/// How long an upload or a link is kept.
const UPLOAD_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// Files uploaded for builds, and the links they are uploaded at.
#[derive(Default)]
struct Uploads {
    /// By (tenant, files hash): when it came, its bytes.
    files: std::collections::HashMap<(String, String), (std::time::Instant, bytes::Bytes)>,
    /// By token: (tenant, files hash, when made).
    tokens: std::collections::HashMap<String, (String, String, std::time::Instant)>,
    bytes: usize,
}

impl Uploads {
    /// Drops what is older than [`UPLOAD_TTL`].
    fn sweep(&mut self) {
        let now = std::time::Instant::now();
        self.tokens
            .retain(|_, t| now.duration_since(t.2) < UPLOAD_TTL);
        let mut freed = 0;
        self.files.retain(|_, (at, b)| {
            let keep = now.duration_since(*at) < UPLOAD_TTL;
            if !keep {
                freed += b.len();
            }
            keep
        });
        self.bytes -= freed;
    }
}

/// One tenant's records on disk.
#[derive(serde::Serialize, serde::Deserialize)]
struct TenantFile {
    tenant: String,
    templates: Vec<Kept>,
}

/// A tenant's records' file name: a hash of its id (ids are the keys file's, any text).
pub(super) fn tenant_file(tenant: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(&Sha256::digest(tenant.as_bytes())[..16])
}
