//! The process-wide object every front door holds: the verified runtime, the engine with the
//! compiled guest, the scratch root and the limit policy. It turns an [`ExecRequest`] into a
//! [`Report`], or a prepared [`Sandbox`] for callers that keep interpreters (sessions).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use wasmtime::InstancePre;

use crate::engine::{EngineError, EngineOptions, GuestEngine};
use crate::limits::{LimitError, Limits, LimitsRequest};
use crate::report::Report;
use crate::runtime::{self, RuntimeError, RuntimeFiles, RuntimeOptions};
use crate::sandbox::output::OutputObserver;
use crate::sandbox::state::GuestState;
use crate::sandbox::workdir::{ScratchRoot, WorkdirError};
use crate::sandbox::{
    GuestLayout, GuestStore, Sandbox, SandboxError, SandboxSpec, run_on_guest_thread,
};
use crate::template::{self, GuestSetup, Template, TemplateError};

pub use crate::sandbox::workdir::InputFile;

/// How to set up a [`Vivarium`].
#[derive(Debug, Clone)]
pub struct VivariumOptions {
    pub runtime: RuntimeOptions,
    pub engine: EngineOptions,
    /// Under which each process makes its scratch root (`<base>/<pid>`).
    pub scratch_base: PathBuf,
    /// What a request gets for the limits it leaves out.
    pub defaults: Limits,
    /// What a request may ask for at most.
    pub maximum: Limits,
}

impl VivariumOptions {
    /// Defaults, with the runtime's home from the environment (`VIVARIUM_HOME`, ...) and the
    /// scratch base `VIVARIUM_SCRATCH`, else [`default_scratch_base`].
    pub fn from_env() -> Self {
        let scratch_base = std::env::var_os("VIVARIUM_SCRATCH")
            .map(PathBuf::from)
            .unwrap_or_else(default_scratch_base);
        VivariumOptions {
            runtime: RuntimeOptions::from_env(),
            engine: EngineOptions::default(),
            scratch_base,
            defaults: Limits::DEFAULT,
            maximum: Limits::MAXIMUM,
        }
    }
}

/// Where sandbox directories go unless configured: `/dev/shm/vivarium-scratch` when
/// `/dev/shm` is a writable tmpfs with at least [`MIN_SHM_FREE_BYTES`] free (a container's
/// 64 MiB default is too small), else `<tmp>/vivarium-scratch`. Making and removing a
/// sandbox's six directories on a journaling disk filesystem costs about 0.8 ms, a third of a
/// hello world; on tmpfs it costs microseconds. What a sandbox writes there is RAM, so it
/// counts against the server's memory budget ([`Vivarium::footprint_bytes`]).
pub fn default_scratch_base() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if is_memory_backed(shm) && writable(shm) && free_bytes(shm) >= MIN_SHM_FREE_BYTES {
        shm.join("vivarium-scratch")
    } else {
        std::env::temp_dir().join("vivarium-scratch")
    }
}

/// Whether `path` is on tmpfs (or ramfs): its contents are memory.
pub fn is_memory_backed(path: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let Some(c) = c_path(path) else {
        return false;
    };
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a zeroed out-parameter of the right type.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    let kind = st.f_type as i64;
    kind == TMPFS_MAGIC || kind == RAMFS_MAGIC
}

/// See [`default_scratch_base`].
pub const MIN_SHM_FREE_BYTES: u64 = 1 << 30;

fn free_bytes(path: &Path) -> u64 {
    let Some(c) = c_path(path) else {
        return 0;
    };
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and a zeroed out-parameter of the right type.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    (st.f_bavail as u64).saturating_mul(st.f_frsize as u64)
}

/// `path` for a libc call; `None` when it holds a NUL byte.
fn c_path(path: &Path) -> Option<std::ffi::CString> {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()
}

fn writable(dir: &Path) -> bool {
    let Some(c) = c_path(dir) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Scratch(#[from] WorkdirError),
    #[error(transparent)]
    Template(#[from] TemplateError),
}

/// Why an execution could not be attempted (as opposed to how it ended, which is the
/// report's status).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Limits(#[from] LimitError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("the host panicked while running the guest: {0}")]
    Panicked(String),
}

/// One execution as a front door asks for it.
#[derive(Clone, Default)]
pub struct ExecRequest {
    pub code: String,
    pub stdin: Vec<u8>,
    pub files: Vec<InputFile>,
    pub limits: LimitsRequest,
    pub env: Vec<(String, String)>,
    pub observer: Option<OutputObserver>,
    /// Set to stop the run early; `None` for a run only its limits stop.
    pub cancel: Option<Arc<AtomicBool>>,
    /// The snapshot the sandbox starts from (`python` unless asked).
    pub template: Template,
    /// What the sandbox's hidden set-up turn loads (rich outputs, a check, ...).
    pub setup: GuestSetup,
}

pub struct Vivarium {
    files: RuntimeFiles,
    engine: GuestEngine,
    /// The `python` template, built (once per machine) and compiled when the host opens.
    python: InstancePre<GuestState>,
    /// The scientific template, compiled (and built, once per machine) on first use.
    scientific: std::sync::OnceLock<InstancePre<GuestState>>,
    scientific_building: std::sync::Mutex<()>,
    home: PathBuf,
    scratch: ScratchRoot,
    /// The scratch root is on tmpfs: what sandboxes write there is memory.
    scratch_in_memory: bool,
    defaults: Limits,
    maximum: Limits,
}

impl Vivarium {
    /// Prepares the runtime (fetching it, and building and compiling the `python` template,
    /// on first use), then the engine.
    pub fn open(opts: VivariumOptions) -> Result<Arc<Self>, OpenError> {
        let files = runtime::ensure(&opts.runtime)?;
        let engine = GuestEngine::new(&opts.engine)?;
        let module = template::load(Template::Python, &files, &opts.runtime.home, &engine)?;
        let python = engine.instance_pre(&module)?;
        let scratch = ScratchRoot::create(&opts.scratch_base)?;
        let scratch_in_memory = is_memory_backed(scratch.path());
        Ok(Arc::new(Vivarium {
            files,
            engine,
            python,
            scientific: std::sync::OnceLock::new(),
            scientific_building: std::sync::Mutex::new(()),
            home: opts.runtime.home.clone(),
            scratch,
            scratch_in_memory,
            defaults: opts.defaults,
            maximum: opts.maximum,
        }))
    }

    pub fn runtime_files(&self) -> &RuntimeFiles {
        &self.files
    }

    pub fn engine(&self) -> &GuestEngine {
        &self.engine
    }

    /// The directory under which every sandbox directory of this process lives.
    pub fn scratch_root(&self) -> &Path {
        self.scratch.path()
    }

    /// The most host memory a sandbox under `limits` can take: its linear memory, plus its
    /// disk quota when the scratch root is on tmpfs. What admission budgets.
    pub fn footprint_bytes(&self, limits: &Limits) -> u64 {
        let disk = if self.scratch_in_memory {
            limits.disk_bytes
        } else {
            0
        };
        limits.memory_bytes.saturating_add(disk)
    }

    /// Sandbox directories alive right now.
    pub fn live_sandbox_dirs(&self) -> usize {
        self.scratch.live_dirs()
    }

    pub fn defaults(&self) -> &Limits {
        &self.defaults
    }

    pub fn maximum(&self) -> &Limits {
        &self.maximum
    }

    /// Resolves requested limits against this host's defaults and maxima.
    pub fn resolve_limits(&self, req: &LimitsRequest) -> Result<Limits, LimitError> {
        req.resolve(&self.defaults, &self.maximum)
    }

    fn layout(&self) -> GuestLayout<'_> {
        GuestLayout {
            stdlib_dir: &self.files.stdlib_dir,
            mpl_data_dir: &self.files.mpl_data_dir,
        }
    }

    /// Makes a fresh sandbox from the `python` template. Call on the thread that will run it
    /// (see [`run_on_guest_thread`]).
    pub fn prepare(&self, spec: SandboxSpec) -> Result<Sandbox, SandboxError> {
        self.prepare_with(spec, Template::Python)
    }

    /// Makes a fresh sandbox from `template`. The first use of the scientific template in a
    /// process loads it (and on a new machine builds it: minutes; see `template.rs`).
    pub fn prepare_with(
        &self,
        spec: SandboxSpec,
        template: Template,
    ) -> Result<Sandbox, SandboxError> {
        let pre = self.template_pre(template)?;
        Sandbox::prepare(&self.engine, &pre, &self.layout(), &self.scratch, spec)
    }

    /// The instantiation recipe of a template, building and compiling it on first use.
    pub fn template_pre(
        &self,
        template: Template,
    ) -> Result<InstancePre<GuestState>, TemplateError> {
        if template == Template::Python {
            return Ok(self.python.clone());
        }
        if let Some(pre) = self.scientific.get() {
            return Ok(pre.clone());
        }
        let _building = self
            .scientific_building
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(pre) = self.scientific.get() {
            return Ok(pre.clone());
        }
        let module = template::load(template, &self.files, &self.home, &self.engine)?;
        let pre = self.engine.instance_pre(&module)?;
        Ok(self.scientific.get_or_init(|| pre).clone())
    }

    /// A store set up exactly as a sandbox's, for instantiating another module through the
    /// same linker (`engine().instance_pre(&module)`): the adversarial modules in `wasm/`.
    pub fn guest_store(&self, spec: SandboxSpec) -> Result<GuestStore, SandboxError> {
        GuestStore::new(&self.engine, &self.layout(), &self.scratch, spec)
    }

    /// Runs one program in a fresh sandbox on a guest thread and reports. Blocking: call
    /// from a thread that may block (not an async executor thread).
    pub fn execute(self: &Arc<Self>, req: ExecRequest) -> Result<Report, ExecError> {
        let limits = self.resolve_limits(&req.limits)?;
        template::check_limits(req.template, &limits)?;
        let this = self.clone();
        let outcome = run_on_guest_thread(move || -> Result<Report, SandboxError> {
            let sandbox = this.prepare_with(
                SandboxSpec {
                    limits,
                    env: req.env,
                    files: req.files,
                    stdin: req.stdin,
                    observer: req.observer,
                    cancel: req.cancel.unwrap_or_default(),
                    setup: req.setup,
                },
                req.template,
            )?;
            Ok(sandbox.run(&req.code))
        });
        match outcome {
            Ok(result) => Ok(result?),
            Err(panic) => {
                let msg = crate::sandbox::guest_threads::panic_message(&*panic);
                tracing::error!(panic = %msg, "guest thread panicked");
                Err(ExecError::Panicked(msg))
            }
        }
    }
}
