//! The one Wasmtime engine of the process, the compiled-module cache, the epoch ticker, the
//! linker every guest is instantiated through, and the metering every guest store gets.
//!
//! Compiling the 100 MB guest takes minutes, so a module is compiled once per machine and
//! cached as `.cwasm`, keyed by the wasm's SHA-256, the Wasmtime version and a hash of the
//! engine settings; later processes map the cached file in milliseconds. Parallel processes
//! take an exclusive lock on the cache entry, so only one of them compiles it, and the entry
//! appears atomically (write to a temp file, then rename).
//!
//! The templates are snapshots of one module: their code is the same function for function and
//! only their data differs. Cranelift's incremental cache ([`CompileCache`], in memory) lets the
//! second template reuse every function the first one compiled, which halves a fresh
//! machine's compile time; [`GuestEngine::forget_compiled_functions`] frees it once the
//! templates a process needs are loaded.

use crate::path_io::PathIoError;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, InstancePre, Linker, Module,
    PoolingAllocationConfig, Store,
};

use crate::hostcalls::limiter::MAX_TABLE_ELEMENTS;
use crate::hostcalls::state::GuestState;
use crate::hostcalls::{door, fs_guard, poll};
use crate::limits::MAX_LINEAR_MEMORY_BYTES;
use crate::sync::lock;

/// The Wasmtime release line linked (from `Cargo.lock`, by `build.rs`); named in cache keys
/// for humans. The settings hash below covers the exact version too.
const WASMTIME_MAJOR: &str = env!("VIVARIUM_WASMTIME_MAJOR");

/// How often the epoch advances. Deadlines are checked at this granularity, so a busy loop
/// overruns its deadline by at most about one tick (plus one [`FUEL_CHECK_INTERVAL`]).
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// How much fuel a guest burns between two checks of its epoch deadline: about a millisecond
/// of guest CPU (`limits::FUEL_PER_CPU_SECOND`). The generated code carries fuel checks only;
/// each time this much is spent, the vendored Wasmtime's refill (`out_of_gas`) checks the
/// epoch deadline as epoch instrumentation would, and runs the store's deadline callback once
/// it has passed (`vendor/README.md`). One libcall a millisecond instead of an epoch load and
/// compare at every loop header and function entry.
pub const FUEL_CHECK_INTERVAL: u64 = crate::limits::FUEL_PER_CPU_SECOND / 1000;

/// The guest's wasm stack. CPython's C recursion (repr of deep structures, numpy internals)
/// needs more than Wasmtime's 512 KiB default; 8 MiB is what the reference host uses.
pub const WASM_STACK_BYTES: usize = 8 << 20;

/// Native stack of the threads guests run on: the wasm stack plus room for host frames
/// (WASI calls, Cranelift trampolines, our shadows).
pub const GUEST_THREAD_STACK_BYTES: usize = 16 << 20;

/// Settings that size the engine. They are part of the compiled-module cache key where they
/// change generated code.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Instances that may be alive at once (executions plus sessions). Each is a pooled
    /// slot of address space reserved up front.
    pub max_instances: u32,
    /// The largest linear memory of a guest: a template's image plus the most `memory_bytes`.
    pub max_memory_bytes: u64,
    /// Bytes of each pooled linear memory's dirtied pages that are reset in place (and stay
    /// resident) when the slot is freed, rather than returned to the kernel: with the
    /// PAGEMAP_SCAN ioctl, the first that many found anywhere in the memory; without it, the
    /// bottom that many bytes.
    pub keep_resident_bytes: usize,
}

/// The most instances that may be live at once (running executions plus sessions): the
/// server refuses a configuration above it.
pub const MAX_LIVE_INSTANCES: usize = 1000;

/// Instance slots beyond the live ones, for sandboxes being torn down just after their
/// response has left (`sandbox::guest_threads::defer_drop`).
pub const TEARDOWN_SLOTS: usize = 32;

/// Instance slots for the pristine instance of each template that session snapshots compare
/// memory with (`sandbox::capture::Baseline`), one per template.
pub const BASELINE_SLOTS: usize = 2;

impl EngineOptions {
    /// The pool size for `live` instances at once: those, plus [`TEARDOWN_SLOTS`] and
    /// [`BASELINE_SLOTS`].
    pub fn slots_for(live: usize) -> u32 {
        u32::try_from(live + TEARDOWN_SLOTS + BASELINE_SLOTS).unwrap_or(u32::MAX)
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_instances: Self::slots_for(MAX_LIVE_INSTANCES),
            max_memory_bytes: MAX_LINEAR_MEMORY_BYTES,
            keep_resident_bytes: KEEP_RESIDENT_BYTES,
        }
    }
}

/// See [`EngineOptions::keep_resident_bytes`]: a budget of dirtied pages, wherever they are in
/// the slot's memory, that the reset puts back in place (the vendored Wasmtime scans the whole
/// slot for them: vendor/README.md). A `scientific` hello world dirties about 430 pages
/// (1.7 MiB), so 4 MiB keeps all of them. The pages stay resident in every slot ever used
/// (slots used ≈ concurrent runs plus sessions), so this is small on purpose: 70 slots keep
/// at most 280 MiB.
pub const KEEP_RESIDENT_BYTES: usize = 4 << 20;

/// The table's share of a freed slot kept resident and reset in place: the guest's one table
/// holds a funcref per exported function (47 157, 8 bytes each), which a run fills in lazily
/// as it calls them; 1 MiB covers all of it.
pub const TABLE_KEEP_RESIDENT_BYTES: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("configuring the Wasmtime engine: {0}")]
    Config(#[source] wasmtime::Error),
    #[error("compiling {wasm}: {source}")]
    Compile {
        wasm: PathBuf,
        #[source]
        source: wasmtime::Error,
    },
    #[error("linking the guest: {0}")]
    Link(#[source] wasmtime::Error),
    #[error(transparent)]
    Io(#[from] PathIoError),
}

/// The engine and the linker that defines what a guest may import.
pub struct GuestEngine {
    engine: Engine,
    /// What guests are linked against: WASI with our shadows, plus `host::call`.
    linker: Linker<GuestState>,
    /// Compiled functions, while templates may still be compiled in this process.
    compiled: Arc<CompileCache>,
}

/// Cranelift's incremental compilation cache, in memory: each function's compiled form under
/// a key Cranelift derives from its body and every setting, so a hit is exactly what
/// compiling would have produced. `None` once forgotten: no more entries are kept.
#[derive(Debug, Default)]
struct CompileCache(Mutex<Option<HashMap<Vec<u8>, Vec<u8>>>>);

impl wasmtime::CacheStore for CompileCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        lock(&self.0)
            .as_ref()
            .and_then(|m| m.get(key).cloned().map(Cow::Owned))
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        match lock(&self.0).as_mut() {
            Some(m) => {
                m.insert(key.to_vec(), value);
                true
            }
            None => false,
        }
    }
}

impl GuestEngine {
    pub fn new(opts: &EngineOptions) -> Result<Self, EngineError> {
        let mut config = Config::new();
        // The guest is built with the standard (exnref) exception-handling proposal; it does
        // not validate without it. On by default with the `gc` feature; explicit is safer.
        config.wasm_exceptions(true);
        // CPython's C-level recursion needs a deep wasm stack; Wasmtime refuses a wasm stack
        // larger than the async stack even for sync calls, so both are set.
        config.async_stack_size(WASM_STACK_BYTES);
        config.max_wasm_stack(WASM_STACK_BYTES);
        // Fuel bounds CPU work deterministically (the same code burns the same fuel on any
        // machine); epochs bound wall time, which fuel cannot (a guest waiting in a host call
        // burns none). Only fuel is compiled in: a store's fuel checks the epoch deadline every
        // `FUEL_CHECK_INTERVAL` (`GuestEngine::store`), so the code pays for one kind of
        // check. Epoch instrumentation on top cost a CPU-bound loop +57 % over no metering
        // instead of +37 % (benches/RESULTS.md, "Zero-fault sandboxes").
        config.consume_fuel(true);
        config.epoch_interruption(false);
        // Copy-on-write memory images: a fresh instance maps the snapshot's 40 MiB heap
        // instead of copying it, which is what makes a sandbox cost microseconds.
        config.memory_init_cow(true);
        // Both templates share their code: the second compiles from the first's functions.
        let compiled = Arc::new(CompileCache(Mutex::new(Some(HashMap::new()))));
        config
            .enable_incremental_compilation(compiled.clone())
            .map_err(EngineError::Config)?;
        // The pooling allocator reserves instance, memory and table slots up front and reuses
        // them, so creating a sandbox makes no mmap/munmap calls on the hot path.
        let mut pool = PoolingAllocationConfig::new();
        pool.total_core_instances(opts.max_instances)
            // Two memories an instance: its linear memory and its store's GC heap, which
            // Wasmtime takes from the same pool (the guest module needs one: Wasmtime sets
            // `needs_gc_heap` for it). With one, the pool ran out at half its instances.
            .total_memories(opts.max_instances.saturating_mul(2))
            .total_gc_heaps(opts.max_instances)
            .total_tables(opts.max_instances)
            // No async, so no fiber stacks.
            .total_stacks(0)
            .max_memories_per_module(1)
            .max_tables_per_module(1)
            .max_memory_size(opts.max_memory_bytes as usize)
            .table_elements(MAX_TABLE_ELEMENTS)
            // The guest exports 47 157 table functions; their VMFuncRefs live in the
            // instance's vmctx, which is larger than the 1 MiB default.
            .max_core_instance_size(16 << 20);
        // A freed slot's dirtied pages, up to `keep_resident_bytes` of them, are reset in place,
        // so the next sandbox in that slot writes to them without page faults. Only with the
        // PAGEMAP_SCAN ioctl (Linux 6.7+), which finds the dirtied pages: without it the reset
        // would memset the whole range every time.
        if PoolingAllocationConfig::is_pagemap_scan_available() {
            pool.linear_memory_keep_resident(opts.keep_resident_bytes)
                .table_keep_resident(TABLE_KEEP_RESIDENT_BYTES)
                .pagemap_scan(wasmtime::Enabled::Yes);
        }
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(EngineError::Config)?;
        start_epoch_ticker(&engine);

        let mut wasi_linker = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut wasi_linker, |s: &mut GuestState| &mut s.wasi)
            .map_err(EngineError::Link)?;
        let mut linker = wasi_linker.clone();
        linker.allow_shadowing(true);
        fs_guard::add_shadows(&mut linker).map_err(EngineError::Link)?;
        linker
            .func_wrap("wasi_snapshot_preview1", "poll_oneoff", poll::poll_oneoff)
            .map_err(EngineError::Link)?;
        linker
            .func_wrap("host", "call", door::host_call)
            .map_err(EngineError::Link)?;
        linker.allow_shadowing(false);
        Ok(GuestEngine {
            engine,
            linker,
            compiled,
        })
    }

    /// Frees the compiled functions kept for later compiles (tens of MiB after a template
    /// compile); a later compile in this process then starts from nothing.
    pub fn forget_compiled_functions(&self) {
        *lock(&self.compiled.0) = None;
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// A store for one guest, metered: its fuel is refilled [`FUEL_CHECK_INTERVAL`] at a time
    /// and each refill checks the epoch deadline, so the store's epoch-deadline callback
    /// bounds wall time although the code carries no epoch checks.
    pub fn store(&self, state: GuestState) -> Store<GuestState> {
        let mut store = Store::new(&self.engine, state);
        store
            .fuel_epoch_check_interval(Some(FUEL_CHECK_INTERVAL))
            .expect("fuel is on in every guest engine and the interval is not 0");
        store
    }

    /// Resolves a module's imports once, so each sandbox costs a Store and an instantiation.
    pub fn instance_pre(&self, module: &Module) -> Result<InstancePre<GuestState>, EngineError> {
        self.linker
            .instantiate_pre(module)
            .map_err(EngineError::Link)
    }

    /// Loads `wasm` compiled for this engine from `cache_dir`, compiling and caching it first
    /// if needed. `sha256` is the wasm's (already verified) digest.
    pub fn load_module(
        &self,
        wasm: &Path,
        sha256: &str,
        cache_dir: &Path,
    ) -> Result<Module, EngineError> {
        let io = PathIoError::at::<EngineError>;
        std::fs::create_dir_all(cache_dir).map_err(io("creating", cache_dir))?;
        let stem = wasm
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "module".into());
        let key = format!(
            "{stem}-{}-wasmtime{WASMTIME_MAJOR}-{:016x}",
            &sha256[..16.min(sha256.len())],
            self.settings_hash()
        );
        let cwasm = cache_dir.join(format!("{key}.cwasm"));
        if let Some(module) = self.try_deserialize(&cwasm) {
            return Ok(module);
        }
        let lock_path = cache_dir.join(format!("{key}.lock"));
        let lock = File::create(&lock_path).map_err(io("creating", &lock_path))?;
        lock.lock().map_err(io("locking", &lock_path))?;
        // Another process may have compiled it while we waited for the lock.
        if let Some(module) = self.try_deserialize(&cwasm) {
            return Ok(module);
        }
        let bytes = std::fs::read(wasm).map_err(io("reading", wasm))?;
        let progress = CompileProgress::start(&stem);
        let module = Module::new(&self.engine, &bytes).map_err(|source| EngineError::Compile {
            wasm: wasm.to_path_buf(),
            source,
        })?;
        progress.finish();
        let serialized = module.serialize().map_err(|source| EngineError::Compile {
            wasm: wasm.to_path_buf(),
            source,
        })?;
        let tmp = cache_dir.join(format!("{key}.cwasm.tmp-{}", std::process::id()));
        std::fs::write(&tmp, &serialized).map_err(io("writing", &tmp))?;
        std::fs::rename(&tmp, &cwasm).map_err(io("renaming", &cwasm))?;
        Ok(module)
    }

    fn try_deserialize(&self, cwasm: &Path) -> Option<Module> {
        if !cwasm.exists() {
            return None;
        }
        // SAFETY: the file is one we wrote ourselves with `Module::serialize` under a key
        // that includes the engine settings, in a cache directory only we write to;
        // Wasmtime additionally checks its header against this engine's configuration.
        match unsafe { Module::deserialize_file(&self.engine, cwasm) } {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::warn!(file = %cwasm.display(), error = %e, "stale compiled module; recompiling");
                let _ = std::fs::remove_file(cwasm);
                None
            }
        }
    }

    /// A stable hash of everything in the engine's configuration that affects compiled code.
    fn settings_hash(&self) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        h.finish()
    }
}

/// Ticks counted by the epoch ticker beside the engine's own epoch (which Wasmtime keeps to
/// itself): a host call returning to the guest checks the deadline once per tick.
static TICKS: AtomicU64 = AtomicU64::new(0);

/// The ticks so far: a value that changes every [`EPOCH_TICK`] (or faster, with several
/// engines in one process).
pub fn current_tick() -> u64 {
    TICKS.load(Ordering::Relaxed)
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a background thread for as long as
/// the engine lives. One thread for the whole process, whatever the number of sandboxes.
fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("vivarium-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                TICKS.fetch_add(1, Ordering::Relaxed);
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch ticker thread");
}

/// Says what is happening during the one slow step a user will see: a spinner on a
/// terminal, plain lines otherwise (CI logs).
struct CompileProgress {
    bar: indicatif::ProgressBar,
    started: Instant,
}

impl CompileProgress {
    fn start(stem: &str) -> Self {
        let msg = format!(
            "compiling {stem}.wasm to native code (once per machine; about 3 minutes on 2 cores)"
        );
        let bar = indicatif::ProgressBar::new_spinner();
        if bar.is_hidden() {
            eprintln!("vivarium: {msg}");
        }
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .expect("static template"),
        );
        bar.set_message(msg);
        bar.enable_steady_tick(Duration::from_millis(200));
        CompileProgress {
            bar,
            started: Instant::now(),
        }
    }

    fn finish(self) {
        let msg = format!(
            "compiled in {:.0} s; cached for every later start",
            self.started.elapsed().as_secs_f64()
        );
        if self.bar.is_hidden() {
            eprintln!("vivarium: {msg}");
        }
        self.bar.finish_with_message(msg);
    }
}
