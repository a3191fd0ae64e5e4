//! Templates: our own snapshots of the guest, taken after more start-up work than the
//! wheel's stock snapshot did, so a fresh sandbox starts with that work done.
//!
//! Both are made here, once per machine, from the plain reactor `python.wasm` with the
//! `wasmtime-wizer` crate. `python` carries the guest-side helpers (`python-wasi/guest/`:
//! rich outputs, the pre-execution checker, the per-sandbox set-up), already compiled and
//! imported with what they use (`ast`, `json`); `scientific`, the default, also has the
//! scientific stack imported and warmed ([`SCIENTIFIC_IMPORTS`]: numpy, pandas, matplotlib,
//! scipy, scikit-learn, statsmodels, seaborn). The build:
//!
//! 1. instrument `python.wasm` (Wizer exports its globals and memory) and compile it with a
//!    separate, unmetered engine (Cranelift without optimisation: the module runs once, for a
//!    few seconds, so compiling fast matters more than running fast); one compiled
//!    instrumented module serves every template built by the same process;
//! 2. instantiate it under the same preopen table a sandbox gets (fd 3 `/usr/local/lib`,
//!    fd 4 mpl-data, fd 5 `/` on a placeholder directory, fd 6 the packages on an empty one)
//!    and the base environment, then call `_initialize` and the guest's own `wizer.initialize` (what the stock snapshot
//!    ran), then the two turns of [`init_turns`]: the helpers and the template's imports;
//!    then a check that no descriptor is left open, every object the template holds made
//!    immortal through the build's own door (`immortal.rs`), its free space filled, and
//!    `gc.freeze()`;
//! 3. snapshot memory and globals into a new module, export its mutable globals (so a
//!    session's state can be captured: `crate::sandbox::capture`), written atomically to
//!    `<home>/templates/<name>-<key>/python-<name>.wasm` under an exclusive lock;
//! 4. compile that to `.cwasm` through [`GuestEngine::load_module`].
//!
//! The key hashes every input: the pinned digests of `python.wasm` and the stdlib zip, the
//! init turns (so the helpers' sources), the guest paths and order of the preopens, the base
//! environment, and the Wizer and Wasmtime versions. The `.cwasm` is keyed by that and our
//! engine's settings.
//!
//! What the init turns fixed is undone per sandbox by its hidden set-up turn
//! ([`setup_code`], `_vivarium.begin`): the first init turn ran the guest's first-turn set-up, so
//! `os.environ`, the random generators and `tempfile`'s name sequence would be the same in
//! every sandbox. The set-up turn installs the request's environment, reseeds
//! (`_reactor._refresh`), loads what the front door asked for, and renumbers turns from 1.
//! The preopen table is captured too, which is why sandboxes keep the fixed fd order. The
//! string hash secret stays frozen, as in the stock snapshot.

mod build;
mod exports;
mod immortal;

pub use exports::GLOBAL_EXPORT_PREFIX;

/// The Wasmtime and Wizer versions this binary was built with (from `Cargo.lock`, by
/// `build.rs`): a template built by another version is another template.
const WASMTIME_VERSION: &str = concat!("wasmtime ", env!("VIVARIUM_WASMTIME_VERSION"));
const WIZER_VERSION: &str = concat!("wasmtime-wizer ", env!("VIVARIUM_WIZER_VERSION"));

use crate::path_io::PathIoError;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Module;

use crate::engine::{EngineError, GuestEngine};
use crate::guest::{self, ARGV0, GUEST_HELPERS, PREOPENS, SCIENTIFIC_IMPORTS, SNAPSHOT_READY};
use crate::runtime::lock::{Lock, STDLIB_ENTRY};
use crate::runtime::{RuntimeError, RuntimeFiles};

pub use crate::vocabulary::Template;

/// Where a user template's layer is (`sandbox::Layer`): its content id and its file under
/// the runtime's home, which workers read (read-only) and keep decoded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LayerRef {
    /// The template's content id (a hex SHA-256 of its inputs).
    pub id: String,
    /// The layer's file: a snapshot image bound to the built-in template it lies over.
    pub path: PathBuf,
    /// What its memory adds to the built-in template's (what admission reserves besides).
    pub extra_bytes: u64,
    /// The template's environment: a sandbox's own variables are laid over it.
    pub env: Vec<(String, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error(transparent)]
    Io(#[from] PathIoError),
    #[error("building the {template} template: {message}")]
    Build { template: Template, message: String },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

/// The init turns of `template`: the helpers as modules, the template's imports; then
/// [`SNAPSHOT_READY`]. Part of the template's cache key, so changing any of it rebuilds.
///
/// Two turns, because a turn's source, its code object and the helpers' sources among its
/// constants (over 1 MB since the shell) live until the turn ends: freed inside the turn
/// that fills the free space, they would be holes a sandbox's first allocations reuse.
pub fn init_turns(template: Template) -> [String; 2] {
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
    // The HTTP clients go through the door in every sandbox, from the snapshot on: a run
    // with network pays nothing to have them, one without gets "network access is off".
    code.push_str(guest::NETWORK_INSTALL);
    [code, SNAPSHOT_READY.to_string()]
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
        build::build_locked(
            template,
            files,
            &home.join("templates"),
            &path,
            &init_turns(template),
            others_missing,
        )?;
    }
    Ok((path, key))
}

/// A template's cache key: every input of its build. A session snapshot is bound to it.
pub fn key(template: Template, files: &RuntimeFiles) -> Result<String, TemplateError> {
    cache_key(template, files, &init_turns(template))
}

/// Where a template's wasm is (or will be), and its key.
fn wasm_path(
    template: Template,
    files: &RuntimeFiles,
    home: &Path,
) -> Result<(PathBuf, String), TemplateError> {
    let key = cache_key(template, files, &init_turns(template))?;
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
    init: &[String; 2],
) -> Result<String, TemplateError> {
    let lock = Lock::embedded()?;
    let mut h = Sha256::new();
    for part in [
        "vivarium-template-v2",
        template.name(),
        &files.plain_sha256,
        lock.pin(STDLIB_ENTRY)?,
        &files.python_version,
        &init[0],
        &init[1],
    ] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    // The preopen table the snapshot captures, in order.
    for p in PREOPENS {
        h.update(p.guest_path.as_bytes());
        h.update([0u8]);
    }
    for part in [ARGV0, WIZER_VERSION, WASMTIME_VERSION] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    for (k, v) in guest::guest_env(&[]).map_err(|e| build_err(template, e))? {
        h.update(format!("{k}={v}\0").as_bytes());
    }
    Ok(hex::encode(h.finalize()))
}

pub(crate) fn build_err(template: Template, e: impl std::fmt::Display) -> TemplateError {
    TemplateError::Build {
        template,
        message: format!("{e:#}"),
    }
}

pub(crate) fn io_err(
    what: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> TemplateError + use<> {
    PathIoError::at(what, path)
}
