//! Templates: our own snapshots of the guest, taken after more start-up work than the
//! wheel's stock snapshot did, so a fresh sandbox starts with that work done.
//!
//! Both are made here, once per machine, from the plain reactor `python.wasm` with the
//! `wasmtime-wizer` crate. `python` carries the guest-side helpers (`python-wasi/guest/`:
//! rich outputs, the pre-execution checker, the per-sandbox set-up), already compiled and
//! imported with what they use (`ast`, `json`); `scientific` also has numpy, pandas and
//! matplotlib imported and warmed. The build:
//!
//! 1. instrument `python.wasm` (Wizer exports its globals and memory) and compile it with a
//!    separate, unmetered engine (Cranelift without optimisation: the module runs once, for a
//!    few seconds, so compiling fast matters more than running fast); one compiled
//!    instrumented module serves every template built by the same process;
//! 2. instantiate it under the same preopen table a sandbox gets (fd 3 `/usr/local/lib`,
//!    fd 4 mpl-data, fd 5 `/`, the last a placeholder directory) and the base environment,
//!    then call `_initialize` and the guest's own `wizer.initialize` (what the stock snapshot
//!    ran), then one `turn` running [`init_code`]: the helpers, the template's imports, a
//!    check that no descriptor is left open, and `gc.freeze()`;
//! 3. snapshot memory and globals into a new module, written atomically to
//!    `<home>/templates/<name>-<key>/python-<name>.wasm` under an exclusive lock;
//! 4. compile that to `.cwasm` through [`GuestEngine::load_module`].
//!
//! The key hashes every input: the pinned digests of `python.wasm` and the stdlib zip, the
//! init code (so the helpers' sources), the guest paths and order of the preopens, the base
//! environment, and the Wizer and Wasmtime versions. The `.cwasm` is keyed by that and our
//! engine's settings.
//!
//! What the init turn fixed is undone per sandbox by its hidden set-up turn
//! ([`setup_code`], `_vivarium.begin`): the init turn ran the guest's first-turn set-up, so
//! `os.environ`, the random generators and `tempfile`'s name sequence would be the same in
//! every sandbox. The set-up turn installs the request's environment, reseeds
//! (`_reactor._refresh`), loads what the front door asked for, and renumbers turns from 1.
//! The preopen table is captured too, which is why sandboxes keep the fixed fd order. The
//! string hash secret stays frozen, as in the stock snapshot.

use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasmtime::{Caller, Config, Engine, Instance, Linker, Module, OptLevel, Store, Val};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};
use wasmtime_wizer::{InstanceState, SnapshotVal, ValType, Wizer};

use crate::engine::{EngineError, GUEST_THREAD_STACK_BYTES, GuestEngine, WASM_STACK_BYTES};
use crate::runtime::RuntimeFiles;
use crate::runtime::lock::{Lock, STDLIB_ENTRY};
use crate::sandbox::{
    ARGV0, GUEST_MPL_DATA_DIR, GUEST_STDLIB_DIR, SandboxError, TurnLimits, guest_env,
};

/// Which snapshot a sandbox starts from.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Template {
    /// The interpreter started (as in the wheel's stock snapshot), plus Vivarium's helpers.
    #[default]
    Python,
    /// numpy, pandas and matplotlib (Agg backend) already imported.
    Scientific,
}

impl Template {
    pub const ALL: [Template; 2] = [Template::Python, Template::Scientific];

    pub fn name(self) -> &'static str {
        match self {
            Template::Python => "python",
            Template::Scientific => "scientific",
        }
    }
}

impl std::fmt::Display for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Template {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Template::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                format!("unknown template {s:?} (expected \"python\" or \"scientific\")")
            })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("building the {template} template: {message}")]
    Build { template: Template, message: String },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
}

/// The guest-side helpers every template carries, as `(module name, source)`: loaded at
/// build time, so a sandbox pays nothing to have them (see `python-wasi/guest/`).
pub const GUEST_HELPERS: [(&str, &str); 3] = [
    (
        "vivarium_display",
        include_str!("../python-wasi/guest/display.py"),
    ),
    (
        "vivarium_check",
        include_str!("../python-wasi/guest/check.py"),
    ),
    ("_vivarium", include_str!("../python-wasi/guest/setup.py")),
];

/// The part of the scientific template's init turn past the helpers. Imports happen inside a
/// function so the user's `__main__` starts empty; the warm-ups load what `describe()` and a
/// PNG import lazily; the font cache is cleared so no font file stays open in the snapshot (a
/// descriptor would not exist at run time).
const SCIENTIFIC_IMPORTS: &str = "\
def __vivarium_template():
    import io
    import numpy, pandas, matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    str(pandas.DataFrame({'a': [1, 2, 3]}).describe())
    fig, ax = plt.subplots()
    ax.plot(numpy.arange(10), numpy.arange(10))
    fig.savefig(io.BytesIO(), format='png')
    plt.close('all')
    del fig, ax
    import matplotlib.font_manager as fm
    fm._get_font.cache_clear()
__vivarium_template()
del __vivarium_template
";

/// The end of every init turn: no descriptor beyond the preopens may be open (it would not
/// exist at run time), and `gc.freeze()` keeps the collector from walking (and dirtying) the
/// template's objects in every sandbox.
const SNAPSHOT_READY: &str = "\
def __vivarium_ready():
    import gc, os
    gc.collect()
    for fd in range(6, 256):
        try:
            os.fstat(fd)
        except OSError:
            continue
        raise RuntimeError(f'descriptor {fd} is still open at snapshot time')
    gc.collect()
    gc.freeze()
__vivarium_ready()
del __vivarium_ready
";

/// The init turn of `template`: the helpers as modules, the template's imports, then
/// [`SNAPSHOT_READY`]. Part of the template's cache key, so changing any of it rebuilds.
pub fn init_code(template: Template) -> String {
    let mut code =
        String::from("def __vivarium_helpers():\n    import sys, types\n    for name, src in (\n");
    for (name, source) in GUEST_HELPERS {
        // A JSON string is a valid Python string literal.
        let src = serde_json::to_string(source).expect("a string serialises");
        code.push_str(&format!("        ({name:?}, {src}),\n"));
    }
    code.push_str(
        "    ):
        m = types.ModuleType(name)
        m.__file__ = '<' + name + '>'
        sys.modules[name] = m
        exec(compile(src, m.__file__, 'exec'), m.__dict__)
__vivarium_helpers()
del __vivarium_helpers
",
    );
    if template == Template::Scientific {
        code.push_str(SCIENTIFIC_IMPORTS);
    }
    code.push_str(SNAPSHOT_READY);
    code
}

/// Limits of the hidden set-up turn of every sandbox (the checker runs in it).
pub const SETUP_LIMITS: TurnLimits = TurnLimits {
    timeout_ms: 10_000,
    fuel: 50_000_000_000,
    output_bytes: 64 << 10,
};

/// What the hidden first turn of a sandbox does besides giving it its own environment and
/// randomness (see `python-wasi/guest/setup.py`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestSetup {
    /// `display()` and `plt.show()` produce rich outputs.
    pub rich: bool,
    /// stdout and stderr flush at each newline, so streamed chunks leave as printed.
    pub line_buffered: bool,
    /// Run the pre-execution checker on this source first; its verdict (JSON) is the set-up
    /// turn's result.
    pub check: Option<String>,
}

/// The hidden first turn of a sandbox: `_vivarium.begin(...)` with the sandbox's environment.
pub fn setup_code(env: &[(String, String)], setup: &GuestSetup) -> String {
    let map: serde_json::Map<String, serde_json::Value> = env
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    // JSON objects of strings, strings and `null` read the same as Python literals once
    // `null` is `None` (serde_json escapes only `"`, `\` and control characters, each in a
    // form Python reads the same way).
    let env = serde_json::Value::Object(map).to_string();
    let check = match &setup.check {
        Some(src) => serde_json::to_string(src).expect("a string serialises"),
        None => "None".into(),
    };
    let py_bool = |b: bool| if b { "True" } else { "False" };
    format!(
        "__import__('_vivarium').begin({env}, {}, {}, {check})\n",
        py_bool(setup.rich),
        py_bool(setup.line_buffered)
    )
}

/// The wasm of a template and its cache key, building it first if this machine has none.
pub fn ensure_wasm(
    template: Template,
    files: &RuntimeFiles,
    home: &Path,
) -> Result<(PathBuf, String), TemplateError> {
    let (path, key) = wasm_path(template, files, home)?;
    if !path.is_file() {
        // Keep the compiled instrumented module for the next build when another template
        // is still missing (`runtime fetch` builds them one after another).
        let mut others_missing = false;
        for other in Template::ALL.into_iter().filter(|t| *t != template) {
            others_missing |= !wasm_path(other, files, home)?.0.is_file();
        }
        build_locked(
            template,
            files,
            &home.join("templates"),
            &path,
            &init_code(template),
            others_missing,
        )?;
    }
    Ok((path, key))
}

/// Where a template's wasm is (or will be), and its key.
fn wasm_path(
    template: Template,
    files: &RuntimeFiles,
    home: &Path,
) -> Result<(PathBuf, String), TemplateError> {
    let key = cache_key(template, files, &init_code(template))?;
    let path = home
        .join("templates")
        .join(format!("{}-{}", template.name(), &key[..16]))
        .join(format!("python-{}.wasm", template.name()));
    Ok((path, key))
}

/// The compiled template, from the `.cwasm` cache when present.
pub fn load(
    template: Template,
    files: &RuntimeFiles,
    home: &Path,
    engine: &GuestEngine,
) -> Result<Module, TemplateError> {
    let (wasm, key) = ensure_wasm(template, files, home)?;
    Ok(engine.load_module(&wasm, &key, &home.join("compiled"))?)
}

fn cache_key(
    template: Template,
    files: &RuntimeFiles,
    init: &str,
) -> Result<String, TemplateError> {
    let lock = Lock::embedded()?;
    let mut h = Sha256::new();
    for part in [
        "vivarium-template-v1",
        template.name(),
        &files.plain_sha256,
        lock.pin(STDLIB_ENTRY)?,
        &files.python_version,
        init,
        GUEST_STDLIB_DIR,
        GUEST_MPL_DATA_DIR,
        "/",
        ARGV0,
        "wasmtime-wizer 48.0.8",
        "wasmtime 48.0.8",
    ] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    for (k, v) in guest_env(&[]).map_err(|e| build_err(template, e))? {
        h.update(format!("{k}={v}\0").as_bytes());
    }
    Ok(hex::encode(h.finalize()))
}

fn build_err(template: Template, e: impl std::fmt::Display) -> TemplateError {
    TemplateError::Build {
        template,
        message: format!("{e:#}"),
    }
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> TemplateError {
    let path = path.to_path_buf();
    move |source| TemplateError::Io { what, path, source }
}

/// Builds under an exclusive lock, so parallel processes build once; the file appears by
/// rename, so nobody reads half of it.
fn build_locked(
    template: Template,
    files: &RuntimeFiles,
    dir: &Path,
    out: &Path,
    init: &str,
    keep_instrumented: bool,
) -> Result<(), TemplateError> {
    let out_dir = out.parent().expect("template path has a parent");
    std::fs::create_dir_all(out_dir).map_err(io_err("creating", out_dir))?;
    let lock_path = dir.join(format!(
        "{}.lock",
        out_dir.file_name().unwrap().to_string_lossy()
    ));
    let lock = File::create(&lock_path).map_err(io_err("creating", &lock_path))?;
    lock.lock().map_err(io_err("locking", &lock_path))?;
    if out.is_file() {
        return Ok(());
    }
    let started = Instant::now();
    eprintln!(
        "vivarium: building the {template} template from python.wasm (once per machine; \
         one to two minutes on 2 cores, then compiling it takes as long)"
    );
    let root = out_dir.join(format!("init-root-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for stub in ["usr/local/lib", "tmp/home"] {
        std::fs::create_dir_all(root.join(stub)).map_err(io_err("creating", &root))?;
    }
    let wasm = std::fs::read(&files.plain_wasm).map_err(io_err("reading", &files.plain_wasm))?;
    let stdlib = files.stdlib_dir.clone();
    let mpl = files.mpl_data_dir.clone();
    let init = init.to_string();
    let root2 = root.clone();
    // The init turn runs guest code: it needs the big native stack, like every guest call.
    let result = std::thread::Builder::new()
        .name("vivarium-template".into())
        .stack_size(GUEST_THREAD_STACK_BYTES)
        .spawn(move || {
            snapshot(
                &wasm,
                &stdlib,
                &mpl,
                &root2,
                &init,
                started,
                keep_instrumented,
            )
        })
        .map_err(io_err("spawning a thread for", out))?
        .join()
        .map_err(|_| build_err(template, "the build thread panicked"))?;
    let _ = std::fs::remove_dir_all(&root);
    let bytes = result.map_err(|e| build_err(template, e))?;
    let tmp = out_dir.join(format!("template.wasm.tmp-{}", std::process::id()));
    std::fs::write(&tmp, &bytes).map_err(io_err("writing", &tmp))?;
    std::fs::rename(&tmp, out).map_err(io_err("renaming", out))?;
    eprintln!(
        "vivarium: {template} template snapshot written in {:.0} s ({} MB); compiling it next",
        started.elapsed().as_secs_f64(),
        bytes.len() >> 20
    );
    Ok(())
}

struct InitState {
    wasi: WasiP1Ctx,
}

/// The compiled instrumented `python.wasm` (by the digest of the instrumented bytes), kept
/// between template builds of one process while another template is still to be built.
type Instrumented = Option<([u8; 32], Engine, Module)>;
static INSTRUMENTED: std::sync::Mutex<Instrumented> = std::sync::Mutex::new(None);

fn lock_instrumented() -> std::sync::MutexGuard<'static, Instrumented> {
    INSTRUMENTED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Instrument, run the init, snapshot. Returns the new module's bytes.
fn snapshot(
    wasm: &[u8],
    stdlib: &Path,
    mpl: &Path,
    root: &Path,
    init: &str,
    started: Instant,
    keep_instrumented: bool,
) -> wasmtime::Result<Vec<u8>> {
    let mut wizer = Wizer::new();
    wizer.init_func("wizer.initialize");
    // Instrumenting is deterministic and quick; compiling its output is what takes long.
    let (cx, instrumented) = wizer.instrument(wasm)?;
    let digest: [u8; 32] = Sha256::digest(&instrumented).into();
    let (engine, module) = {
        let mut cached = lock_instrumented();
        let (engine, module) = match cached.take() {
            Some((d, engine, module)) if d == digest => (engine, module),
            _ => {
                let mut config = Config::new();
                config.wasm_exceptions(true);
                config.async_stack_size(WASM_STACK_BYTES);
                config.max_wasm_stack(WASM_STACK_BYTES);
                config.cranelift_opt_level(OptLevel::None);
                let engine = Engine::new(&config)?;
                let module = Module::new(&engine, &instrumented)?;
                (engine, module)
            }
        };
        if keep_instrumented {
            *cached = Some((digest, engine.clone(), module.clone()));
        }
        (engine, module)
    };
    drop(instrumented);
    eprintln!(
        "vivarium: compiled in {:.0} s; running the template's init (imports)",
        started.elapsed().as_secs_f64()
    );

    let stdout = MemoryOutputPipe::new(1 << 20);
    let stderr = MemoryOutputPipe::new(1 << 20);
    let mut b = WasiCtxBuilder::new();
    b.args(&[ARGV0])
        .envs(&guest_env(&[])?)
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_blocking_current_thread(true)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    // The same order and guest paths as `GuestStore::new`: the snapshot keeps this table.
    b.preopened_dir(stdlib, GUEST_STDLIB_DIR, FsPerms::ReadOnly)?;
    b.preopened_dir(mpl, GUEST_MPL_DATA_DIR, FsPerms::ReadOnly)?;
    b.preopened_dir(root, "/", FsPerms::ReadWrite)?;
    let mut store = Store::new(&engine, InitState { wasi: b.build_p1() });
    let mut linker: Linker<InitState> = Linker::new(&engine);
    wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |s: &mut InitState| &mut s.wasi)?;
    linker.func_wrap(
        "host",
        "call",
        |_: Caller<'_, InitState>, _: i32, _: i32, _: i32, _: i32| -> i32 { -1 },
    )?;
    let instance = linker.instantiate(&mut store, &module)?;
    instance
        .get_typed_func::<(), ()>(&mut store, "_initialize")?
        .call(&mut store, ())?;
    instance
        .get_typed_func::<(), ()>(&mut store, "wizer.initialize")?
        .call(&mut store, ())?;
    let host_alloc = instance.get_typed_func::<i32, i32>(&mut store, "host_alloc")?;
    let turn = instance.get_typed_func::<(i32, i32), i32>(&mut store, "turn")?;
    let memory = instance
        .get_memory(&mut store, "memory")
        .ok_or_else(|| wasmtime::format_err!("no memory export"))?;
    let src = init.as_bytes();
    let p = host_alloc.call(&mut store, src.len() as i32)?;
    memory.write(&mut store, p as u32 as usize, src)?;
    let status = turn.call(&mut store, (p, src.len() as i32));
    let out = String::from_utf8_lossy(&stdout.contents()).into_owned();
    let err = String::from_utf8_lossy(&stderr.contents()).into_owned();
    match status {
        Ok(0) => {}
        Ok(v) => wasmtime::bail!("the init turn returned {v}\nstdout: {out}\nstderr: {err}"),
        Err(e) => wasmtime::bail!("the init turn trapped: {e:#}\nstdout: {out}\nstderr: {err}"),
    }
    eprintln!(
        "vivarium: init ran ({:.0} s so far); taking the snapshot",
        started.elapsed().as_secs_f64()
    );
    block_on(wizer.snapshot(
        &cx,
        &mut Snapshotting {
            store: &mut store,
            instance,
        },
    ))
}

/// Wizer's view of our instance: exported globals and memory by name.
struct Snapshotting<'a> {
    store: &'a mut Store<InitState>,
    instance: Instance,
}

impl InstanceState for Snapshotting<'_> {
    async fn global_get(&mut self, name: &str, _: ValType) -> SnapshotVal {
        let global = self
            .instance
            .get_global(&mut *self.store, name)
            .expect("Wizer asks only for globals it exported");
        match global.get(&mut *self.store) {
            Val::I32(x) => SnapshotVal::I32(x),
            Val::I64(x) => SnapshotVal::I64(x),
            Val::F32(x) => SnapshotVal::F32(x),
            Val::F64(x) => SnapshotVal::F64(x),
            Val::V128(x) => SnapshotVal::V128(x.as_u128()),
            _ => panic!("unsupported global value type"),
        }
    }

    async fn memory_contents(&mut self, name: &str, contents: impl FnOnce(&[u8]) + Send) {
        let memory = self
            .instance
            .get_memory(&mut *self.store, name)
            .expect("Wizer asks only for memories it exported");
        contents(memory.data(&*self.store))
    }
}

/// Wizer's snapshot API is async, but nothing in ours waits: poll to completion.
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

impl From<TemplateError> for SandboxError {
    fn from(e: TemplateError) -> Self {
        SandboxError::Instantiate(wasmtime::format_err!("{e}"))
    }
}

/// The least `memory_bytes` a sandbox of `template` can start with: the scientific
/// snapshot's heap is 99 MiB before the code allocates anything.
pub const SCIENTIFIC_MIN_MEMORY_BYTES: u64 = 128 << 20;

/// Refuses limits a template cannot start under (a 400 naming the field, not a failed
/// instantiation).
pub fn check_limits(
    template: Template,
    limits: &crate::limits::Limits,
) -> Result<(), crate::limits::LimitError> {
    if template == Template::Scientific && limits.memory_bytes < SCIENTIFIC_MIN_MEMORY_BYTES {
        return Err(crate::limits::LimitError::BelowMinimum {
            field: "memory_bytes",
            value: limits.memory_bytes,
            min: SCIENTIFIC_MIN_MEMORY_BYTES,
        });
    }
    Ok(())
}
