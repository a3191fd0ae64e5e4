//! The content-addressed cache of package environments, and the one way to get one:
//! [`Packages::get`]. Concurrent requests for one set wait for one resolution and one build;
//! builds and evictions hold an exclusive file lock, so processes sharing a home never build
//! one environment twice or remove one half-written.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};

use super::compile::Compiles;
use super::resolve::{self, Chosen};
use super::spec::{PackageSpecs, parse_specs};
use super::wheel;
use super::{PackageError, PackageErrorKind, PackageOptions, PackagePin, PackageSource, normalize};
use crate::runtime::BuiltinPackage;
use crate::sync::lock;

/// How long a resolution is reused for the same specifiers before pip is asked again (a
/// new release of a dependency then shows up).
const MEMO_TTL: Duration = Duration::from_secs(600);

/// Resolutions (pip processes, downloads, unpacking) running at once; more wait, served in
/// the order they came. Distinct package sets would otherwise start one pip each, outside
/// every sandbox's budget.
const MAX_BUILDS: usize = 4;

/// One resolved set of packages, unpacked; a sandbox holding it keeps it from eviction.
#[derive(Debug)]
pub struct PackageEnv {
    /// Hash of its wheels' names, versions and SHA-256 (empty for the empty set).
    pub key: String,
    /// The folder a sandbox sees at [`crate::guest::PACKAGES_DIR`].
    pub site: PathBuf,
    /// Its wheels.
    pub pins: Vec<PackagePin>,
    /// Bytes unpacked.
    pub bytes: u64,
    /// Whether a sandbox may write into it: only the host's own compile sandbox
    /// ([`Packages::compile_target`]), never a caller's.
    pub writable: bool,
    /// Set on an environment built (or found uncompiled) by this process until one caller
    /// takes the job of compiling it ([`PackageEnv::take_compile`]).
    compile_pending: std::sync::atomic::AtomicBool,
}

impl PackageEnv {
    /// An environment another process resolved and unpacked (a worker is told its parts by
    /// the supervisor, which holds it in its cache): read-only, never compiled here.
    pub fn resolved_elsewhere(
        key: String,
        site: PathBuf,
        pins: Vec<PackagePin>,
        bytes: u64,
    ) -> Arc<Self> {
        Arc::new(PackageEnv {
            key,
            site,
            pins,
            bytes,
            writable: false,
            compile_pending: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Whether the caller should have its modules compiled to `.pyc` (true once, for an
    /// environment without its `compiled` marker).
    pub fn take_compile(&self) -> bool {
        self.compile_pending
            .swap(false, std::sync::atomic::Ordering::AcqRel)
    }

    /// Whether its compile is still to be started (nothing taken: [`PackageEnv::take_compile`]
    /// takes it).
    pub fn compile_pending(&self) -> bool {
        self.compile_pending
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Gives the job of compiling it back (its compile could not be queued): the next
    /// caller that gets it takes it.
    pub fn offer_compile_again(&self) {
        self.compile_pending
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether it holds no package (every one asked for is built in, or none was).
    pub fn is_empty(&self) -> bool {
        self.pins.is_empty()
    }
}

/// Beside `env.json` once the environment's modules are compiled.
const COMPILED_MARKER: &str = "compiled";

/// What `env.json` says of an environment.
#[derive(serde::Serialize, serde::Deserialize)]
struct EnvRecord {
    pins: Vec<PackagePin>,
    /// What its wheels unpacked to.
    bytes: u64,
    /// Everything its folder holds once its compile ended (the `.pyc` files included), which
    /// the cache's cap counts; `None` before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    disk_bytes: Option<u64>,
}

impl EnvRecord {
    /// What it counts against the cache's cap.
    fn counted(&self) -> u64 {
        self.disk_bytes.unwrap_or(self.bytes).max(self.bytes)
    }
}

/// The package service of one host: resolution, the cache, its bounds.
pub struct Packages {
    opts: PackageOptions,
    /// The empty environment.
    empty: Arc<PackageEnv>,
    /// Environments this process has handed out, by key.
    envs: Mutex<HashMap<String, Arc<PackageEnv>>>,
    /// Specifiers → the key they resolved to, and when.
    memo: Mutex<HashMap<String, (String, Instant)>>,
    /// One lock per set of specifiers being resolved: the second request for it waits.
    flights: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// Resolutions running now, at most [`MAX_BUILDS`], and the line waiting for one.
    building: Mutex<Builds>,
    /// Signalled when one ends, and when one starts (the next in line may start too).
    built: std::sync::Condvar,
    /// The `.pyc` compiles of new environments, bounded.
    compiles: Compiles,
}

impl Packages {
    /// The service; makes `<dir>/empty` and `<dir>/envs`.
    pub fn new(opts: PackageOptions) -> std::io::Result<Packages> {
        let empty = opts.dir.join("empty");
        std::fs::create_dir_all(&empty)?;
        std::fs::create_dir_all(opts.dir.join("envs"))?;
        std::fs::create_dir_all(opts.dir.join("tmp"))?;
        remove_abandoned(&opts.dir.join("tmp"));
        Ok(Packages {
            empty: Arc::new(PackageEnv {
                key: String::new(),
                site: empty,
                pins: Vec::new(),
                bytes: 0,
                writable: false,
                compile_pending: false.into(),
            }),
            opts,
            envs: Mutex::default(),
            memo: Mutex::default(),
            flights: Mutex::default(),
            building: Mutex::default(),
            built: std::sync::Condvar::new(),
            compiles: Compiles::default(),
        })
    }

    /// The queue the compiles of new environments wait in.
    pub(crate) fn compiles(&self) -> &Compiles {
        &self.compiles
    }

    /// Records that `env`'s compile ended (`compiled`: its `.pyc` files are all written, and
    /// later processes do not compile it again): what its folder now holds is measured and
    /// counted against the cache's cap (the `.pyc` files are about as large as the sources),
    /// and the least recently used sets go past it.
    pub fn compile_ended(&self, env: &PackageEnv, compiled: bool) {
        let Some(dir) = env.site.parent() else {
            return;
        };
        if let Ok(_lock) = self.file_lock() {
            let record_path = dir.join("env.json");
            let record = std::fs::read(&record_path)
                .ok()
                .and_then(|b| serde_json::from_slice::<EnvRecord>(&b).ok());
            if let Some(mut record) = record {
                // The marker is counted too: it is written below.
                record.disk_bytes = Some(folder_bytes(dir));
                let tmp = dir.join(format!("env.json.{:016x}", rand::random::<u64>()));
                let written = std::fs::write(
                    &tmp,
                    serde_json::to_vec(&record).expect("a record serialises"),
                )
                .and_then(|()| std::fs::rename(&tmp, &record_path));
                if let Err(e) = written {
                    let _ = std::fs::remove_file(&tmp);
                    tracing::warn!(target: "vivarium::packages", error = %e, "cannot record a package environment's size");
                }
            }
            self.evict(&env.key);
        }
        if compiled {
            let _ = std::fs::write(dir.join(COMPILED_MARKER), b"");
        }
    }

    /// Its options.
    pub fn options(&self) -> &PackageOptions {
        &self.opts
    }

    /// The empty environment (what a sandbox without packages sees).
    pub fn empty(&self) -> Arc<PackageEnv> {
        self.empty.clone()
    }

    /// Checks raw specifiers against this server's bounds.
    pub fn parse(&self, raw: &[String]) -> Result<PackageSpecs, PackageError> {
        if !raw.is_empty() && self.opts.source == PackageSource::Off {
            return Err(PackageError::new(
                PackageErrorKind::Disabled,
                None,
                "this server adds no packages beyond the built-in set (see GET /v1/packages)",
            ));
        }
        parse_specs(raw, self.opts.max_requested)
    }

    /// The environment for `specs` (checked by [`Packages::parse`]), with `builtins` counted
    /// as installed: from the cache, or resolved, downloaded and unpacked now. Blocking (pip
    /// runs): call off the async executor.
    pub fn get(
        &self,
        specs: &PackageSpecs,
        builtins: &[BuiltinPackage],
    ) -> Result<Arc<PackageEnv>, PackageError> {
        if specs.is_empty() {
            return Ok(self.empty());
        }
        self.check_allowed(specs.names.iter().map(String::as_str))?;
        let key = specs.key();
        let flight = lock(&self.flights).entry(key.clone()).or_default().clone();
        let _one = lock(&flight);
        let result = self.get_in_flight(&key, specs, builtins);
        // The flight's entry goes once nobody else waits on it.
        let mut flights = lock(&self.flights);
        if Arc::strong_count(&flight) <= 2 {
            flights.remove(&key);
        }
        result
    }

    /// The environment of `specs` (checked by [`Packages::parse`]) when a resolution of the
    /// same specifiers is remembered and its set is on disk; `None` otherwise. Never runs
    /// pip, never waits for another request's resolution.
    pub fn cached(&self, specs: &PackageSpecs) -> Result<Option<Arc<PackageEnv>>, PackageError> {
        if specs.is_empty() {
            return Ok(Some(self.empty()));
        }
        self.check_allowed(specs.names.iter().map(String::as_str))?;
        Ok(self.remembered(&specs.key()))
    }

    /// The environment specifiers `key` resolved to within [`MEMO_TTL`], if still on disk.
    fn remembered(&self, key: &str) -> Option<Arc<PackageEnv>> {
        let (env_key, at) = lock(&self.memo).get(key).cloned()?;
        if at.elapsed() >= MEMO_TTL {
            return None;
        }
        if env_key.is_empty() {
            return Some(self.empty());
        }
        self.load(&env_key)
    }

    /// The environment of exactly `pins` (a snapshot's): from the cache, or resolved again
    /// as `name==version` each and accepted only when the index serves the same wheels.
    pub fn get_pinned(
        &self,
        pins: &[PackagePin],
        builtins: &[BuiltinPackage],
    ) -> Result<Arc<PackageEnv>, PackageError> {
        if pins.is_empty() {
            return Ok(self.empty());
        }
        let key = env_key(pins);
        if let Some(env) = self.load(&key) {
            return Ok(env);
        }
        let raw: Vec<String> = pins
            .iter()
            .map(|p| format!("{}=={}", p.name, p.version))
            .collect();
        let specs = parse_specs(&raw, usize::MAX)?;
        let env = self.get(&specs, builtins)?;
        if env.key != key {
            return Err(PackageError::new(
                PackageErrorKind::BadWheel,
                None,
                "the package index no longer serves the wheels this session was made with",
            ));
        }
        Ok(env)
    }

    fn get_in_flight(
        &self,
        key: &str,
        specs: &PackageSpecs,
        builtins: &[BuiltinPackage],
    ) -> Result<Arc<PackageEnv>, PackageError> {
        if let Some(env) = self.remembered(key) {
            return Ok(env);
        }
        let _slot = self.build_slot();
        let started = Instant::now();
        let work = Work::new(&self.opts.dir.join("tmp"))?;
        let placeholders = self.placeholder_dir(builtins);
        let chosen = resolve::resolve(&self.opts, specs, builtins, &placeholders, &work.0)?;
        self.check_allowed(chosen.iter().map(|c| c.name.as_str()))?;
        tracing::info!(
            target: "vivarium::packages",
            requested = %key,
            wheels = chosen.len(),
            ms = started.elapsed().as_millis() as u64,
            "packages resolved"
        );
        let env = if chosen.is_empty() {
            self.empty()
        } else {
            self.build(&chosen, &work.0)?
        };
        lock(&self.memo).insert(key.to_string(), (env.key.clone(), Instant::now()));
        Ok(env)
    }

    /// Downloads and unpacks `chosen` into a new environment, unless it is there already.
    fn build(&self, chosen: &[Chosen], work: &Path) -> Result<Arc<PackageEnv>, PackageError> {
        let known: Option<Vec<PackagePin>> = chosen
            .iter()
            .map(|c| {
                c.sha256.clone().map(|sha256| PackagePin {
                    name: c.name.clone(),
                    version: c.version.clone(),
                    sha256,
                })
            })
            .collect();
        if let Some(pins) = &known
            && let Some(env) = self.load(&env_key(pins))
        {
            return Ok(env);
        }
        let _lock = self.file_lock()?;
        if let Some(pins) = &known
            && let Some(env) = self.load(&env_key(pins))
        {
            return Ok(env);
        }
        let started = Instant::now();
        let downloaded = resolve::download(&self.opts, chosen, work)?;
        let mut pins = Vec::new();
        let site = work.join("site");
        std::fs::create_dir_all(&site).map_err(PackageError::host)?;
        let mut bytes = 0u64;
        for d in &downloaded {
            // Hashed again here, over the file we unpack: the helper's word is not enough.
            let sha256 = wheel::sha256_file(&d.path).map_err(PackageError::host)?;
            if sha256 != d.sha256 {
                return Err(PackageError::new(
                    PackageErrorKind::BadWheel,
                    Some(&d.name),
                    format!("{} changed while it was downloaded", d.filename),
                ));
            }
            wheel::unpack(&d.name, &d.path, &site, &mut bytes, self.opts.max_env_bytes)?;
            pins.push(PackagePin {
                name: d.name.clone(),
                version: d.version.clone(),
                sha256,
            });
        }
        pins.sort_by_key(|a| normalize(&a.name));
        let key = env_key(&pins);
        let dir = self.env_dir(&key);
        if !dir.exists() {
            let staged = work.join("env");
            std::fs::create_dir_all(&staged).map_err(PackageError::host)?;
            std::fs::rename(&site, staged.join("site")).map_err(PackageError::host)?;
            let record = EnvRecord {
                pins: pins.clone(),
                bytes,
                disk_bytes: None,
            };
            std::fs::write(
                staged.join("env.json"),
                serde_json::to_vec(&record).expect("a record serialises"),
            )
            .map_err(PackageError::host)?;
            std::fs::rename(&staged, &dir).map_err(PackageError::host)?;
        }
        tracing::info!(
            target: "vivarium::packages",
            key = %key,
            wheels = pins.len(),
            bytes,
            ms = started.elapsed().as_millis() as u64,
            "package environment built"
        );
        let env = self.load(&key).ok_or_else(|| {
            PackageError::host("the package environment vanished as it was built")
        })?;
        self.evict(&key);
        Ok(env)
    }

    /// `env` as the host's compile sandbox sees it: the same folder, writable. Only for
    /// the host's own code (`compileall`), which reads the modules and never runs them.
    pub fn compile_target(env: &PackageEnv) -> Arc<PackageEnv> {
        Arc::new(PackageEnv {
            key: env.key.clone(),
            site: env.site.clone(),
            pins: env.pins.clone(),
            bytes: env.bytes,
            writable: true,
            compile_pending: false.into(),
        })
    }

    /// Waits for one of the [`MAX_BUILDS`] places, after every resolution that asked before
    /// (a tenant holds at most its `package_jobs` places in this line, so tenants take turns
    /// in it); held until the returned guard drops.
    fn build_slot(&self) -> BuildSlot<'_> {
        let mut b = lock(&self.building);
        let ticket = b.next;
        b.next += 1;
        while ticket != b.serving || b.running >= MAX_BUILDS {
            b = self.built.wait(b).unwrap_or_else(|p| p.into_inner());
        }
        b.serving += 1;
        b.running += 1;
        drop(b);
        self.built.notify_all();
        BuildSlot(self)
    }

    /// The cached environment `key`, touched as just used.
    fn load(&self, key: &str) -> Option<Arc<PackageEnv>> {
        let dir = self.env_dir(key);
        let record_path = dir.join("env.json");
        // Touched for the LRU order (every process sharing the home sees it).
        let touched = File::options()
            .append(true)
            .open(&record_path)
            .and_then(|f| f.set_modified(SystemTime::now()));
        if touched.is_err() {
            lock(&self.envs).remove(key);
            return None;
        }
        if let Some(env) = lock(&self.envs).get(key) {
            return Some(env.clone());
        }
        let record: EnvRecord = serde_json::from_slice(&std::fs::read(&record_path).ok()?).ok()?;
        let env = Arc::new(PackageEnv {
            key: key.to_string(),
            site: dir.join("site"),
            pins: record.pins,
            bytes: record.bytes,
            writable: false,
            compile_pending: (!dir.join(COMPILED_MARKER).exists()).into(),
        });
        Some(
            lock(&self.envs)
                .entry(key.to_string())
                .or_insert(env)
                .clone(),
        )
    }

    /// Removes the least recently used environments (never `keep`, never one a sandbox of
    /// this process holds) until the cache is within its cap.
    fn evict(&self, keep: &str) {
        let Ok(entries) = std::fs::read_dir(self.opts.dir.join("envs")) else {
            return;
        };
        let mut all: Vec<(SystemTime, u64, String)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let key = e.file_name().to_string_lossy().into_owned();
                let record = e.path().join("env.json");
                let used = std::fs::metadata(&record).and_then(|m| m.modified()).ok()?;
                let r: EnvRecord = serde_json::from_slice(&std::fs::read(&record).ok()?).ok()?;
                Some((used, r.counted(), key))
            })
            .collect();
        let mut total: u64 = all.iter().map(|a| a.1).sum();
        all.sort();
        for (_, bytes, key) in all {
            if total <= self.opts.cache_bytes {
                break;
            }
            if key == keep {
                continue;
            }
            let mut envs = lock(&self.envs);
            if envs.get(&key).is_some_and(|e| Arc::strong_count(e) > 1) {
                continue;
            }
            envs.remove(&key);
            drop(envs);
            // Renamed first, so no reader ever sees half an environment.
            let doomed = self.opts.dir.join("tmp").join(format!("evicted-{key}"));
            if std::fs::rename(self.env_dir(&key), &doomed).is_ok() {
                let _ = std::fs::remove_dir_all(&doomed);
                total = total.saturating_sub(bytes);
                tracing::info!(target: "vivarium::packages", key = %key, bytes, "package environment evicted");
            }
        }
    }

    fn env_dir(&self, key: &str) -> PathBuf {
        self.opts.dir.join("envs").join(key)
    }

    fn file_lock(&self) -> Result<File, PackageError> {
        let f = File::create(self.opts.dir.join("envs.lock")).map_err(PackageError::host)?;
        f.lock().map_err(PackageError::host)?;
        Ok(f)
    }

    /// The folder of empty wheels standing for `builtins`, named for their list.
    fn placeholder_dir(&self, builtins: &[BuiltinPackage]) -> PathBuf {
        let mut h = Sha256::new();
        for b in builtins {
            h.update(format!("{}=={}\n", b.name, b.version));
        }
        self.opts
            .dir
            .join(format!("builtins-{}", &hex::encode(h.finalize())[..16]))
    }

    fn check_allowed<'a>(&self, names: impl Iterator<Item = &'a str>) -> Result<(), PackageError> {
        let Some(allow) = &self.opts.allowlist else {
            return Ok(());
        };
        for n in names {
            if !allow.contains(&normalize(n)) {
                return Err(PackageError::new(
                    PackageErrorKind::NotAllowed,
                    Some(n),
                    format!("{n} is not on this server's package allowlist"),
                ));
            }
        }
        Ok(())
    }
}

/// The key of a set of wheels: SHA-256 over their sorted names, versions and hashes.
fn env_key(pins: &[PackagePin]) -> String {
    let mut lines: Vec<String> = pins
        .iter()
        .map(|p| format!("{} {} {}\n", normalize(&p.name), p.version, p.sha256))
        .collect();
    lines.sort();
    let mut h = Sha256::new();
    for l in lines {
        h.update(l);
    }
    hex::encode(h.finalize())[..32].to_string()
}

/// The bytes of every file under `dir` (its folders' own entries aside).
fn folder_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => folder_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// The resolutions running, and the line for a place among them: tickets handed out in
/// order (`next`), served in order (`serving`). A waiter never leaves the line (it blocks
/// until served), so no ticket is skipped.
#[derive(Default)]
struct Builds {
    running: usize,
    next: u64,
    serving: u64,
}

/// A place among the resolutions running; given back on drop.
struct BuildSlot<'a>(&'a Packages);

impl Drop for BuildSlot<'_> {
    fn drop(&mut self) {
        lock(&self.0.building).running -= 1;
        self.0.built.notify_all();
    }
}

/// Removes what processes that died left in `tmp`: working folders named for their pid, and
/// environments renamed for removal.
fn remove_abandoned(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let dead = match name.split_once('-') {
            Some(("evicted", _)) => true,
            Some((pid, _)) => pid
                .parse::<u32>()
                .is_ok_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()),
            None => false,
        };
        if dead {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A private working folder for one resolution, removed on drop.
struct Work(PathBuf);

impl Work {
    fn new(tmp: &Path) -> Result<Work, PackageError> {
        let dir = tmp.join(format!(
            "{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).map_err(PackageError::host)?;
        Ok(Work(dir))
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
