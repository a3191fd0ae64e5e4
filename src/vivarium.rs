//! The only way into a sandbox: the process-wide [`Vivarium`] holds the verified runtime, the
//! engine with the compiled templates, the scratch root and the limit policy, and turns a
//! [`RunSpec`] into an [`Executed`] run, opens an [`Interpreter`] for a session, or checks
//! code. Front doors reach it through the server's runner (or, in the CLI, directly).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use wasmtime::InstancePre;

use crate::budget::HostBudget;
use crate::check::{self, CheckError, CheckResult, Finding, Policy};
use crate::engine::{EngineError, EngineOptions, GuestEngine};
use crate::guest::{GuestSetup, Language};
use crate::hostcalls::egress::{EgressAsker, EgressDoor};
use crate::hostcalls::input::InputAsker;
use crate::hostcalls::state::GuestState;
use crate::hostcalls::tools::{ToolAsker, ToolDoor};
use crate::limits::TurnLimits;
use crate::limits::{LimitError, Limits, LimitsRequest};
use crate::packages::{
    PackageEnv, PackageError, PackageOptions, PackagePin, PackageSource, Packages,
};
use crate::report::Report;
use crate::runtime::{
    self, BuiltinPackage, RuntimeError, RuntimeFiles, RuntimeOptions, missing_module_hint,
};
use crate::sandbox::guest_threads;
use crate::sandbox::output::OutputObserver;
use crate::sandbox::workdir::{ScratchRoot, WorkdirError};
use crate::sandbox::{
    Baseline, CaptureError, Checker, Checkers, EndReason, GuestLayout, GuestStore, HostShare,
    Interpreter, RestoreError, Sandbox, SandboxError, SandboxSpec, TurnOutcome, WriteError,
    run_on_guest_thread,
};
use crate::snapshot::{Binding, SessionImage};
use crate::sync::lock;
use crate::template::{self, Template, TemplateError};
use crate::tools::Toolbox;

pub use crate::sandbox::workdir::InputFile;
pub use layers::{BuildError, BuildProgram, BuildStep, Built, StepLog};

mod layers;

/// How to set up a [`Vivarium`].
#[derive(Debug, Clone)]
pub struct VivariumOptions {
    /// Where the runtime is kept and how it is fetched.
    pub runtime: RuntimeOptions,
    /// How the engine is sized (instance slots, memory cap).
    pub engine: EngineOptions,
    /// Under which each process makes its scratch root (`<base>/<pid>`).
    pub scratch_base: PathBuf,
    /// What a request gets for the limits it leaves out.
    pub defaults: Limits,
    /// What a request may ask for at most.
    pub maximum: Limits,
    /// What every sandbox's memory (and tmpfs files) is charged to: the server's budget;
    /// unlimited for the CLI.
    pub budget: Arc<HostBudget>,
    /// Where extra packages come from, and their cache and bounds.
    pub packages: PackageOptions,
}

impl VivariumOptions {
    /// Defaults, with the runtime's home from the environment (`VIVARIUM_HOME`, ...) and the
    /// scratch base `VIVARIUM_SCRATCH`, else `default_scratch_base`.
    pub fn from_env() -> Self {
        let scratch_base = std::env::var_os("VIVARIUM_SCRATCH")
            .map(PathBuf::from)
            .unwrap_or_else(default_scratch_base);
        let mut engine = EngineOptions::default();
        // A tuning knob for operators: how much of each freed pool slot stays resident.
        if let Some(bytes) = std::env::var("VIVARIUM_KEEP_RESIDENT_BYTES")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            engine.keep_resident_bytes = bytes;
        }
        let runtime = RuntimeOptions::from_env();
        let mut packages = PackageOptions::new(&runtime.home);
        packages.python = runtime.python.clone();
        if let Ok(url) = std::env::var("VIVARIUM_PACKAGE_INDEX") {
            packages.source = PackageSource::Index(url);
        }
        if std::env::var("VIVARIUM_PACKAGES").is_ok_and(|v| v == "off") {
            packages.source = PackageSource::Off;
        }
        VivariumOptions {
            runtime,
            packages,
            engine,
            scratch_base,
            defaults: Limits::DEFAULT,
            maximum: Limits::MAXIMUM,
            budget: HostBudget::unlimited(),
        }
    }
}

/// What [`Vivarium::starting_bytes`] takes for a template not compiled yet: at least either
/// template's image (40 MiB for `python`, 167 MiB for `scientific`).
pub const UNKNOWN_START_BYTES: u64 = 192 << 20;

/// Where sandbox directories go unless configured: `/dev/shm/vivarium-scratch` when
/// `/dev/shm` is a writable tmpfs with at least [`MIN_SHM_FREE_BYTES`] free (a container's
/// 64 MiB default is too small), else `<tmp>/vivarium-scratch`. Making and removing a
/// sandbox's six directories on a journaling disk filesystem costs about 0.8 ms, a third of a
/// hello world; on tmpfs it costs microseconds. What a sandbox writes there is RAM, so it
/// is charged to the server's memory budget as it is written (`hostcalls::fs_guard`).
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
    rustix::fs::statfs(path).is_ok_and(|st| crate::report::is_memory_fs(&st))
}

/// See [`default_scratch_base`].
pub const MIN_SHM_FREE_BYTES: u64 = 1 << 30;

fn free_bytes(path: &Path) -> u64 {
    rustix::fs::statvfs(path).map_or(0, |st| st.f_bavail.saturating_mul(st.f_frsize))
}

fn writable(dir: &Path) -> bool {
    use rustix::fs::{Access, access};
    access(dir, Access::WRITE_OK | Access::EXEC_OK).is_ok()
}

/// Why [`Vivarium::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The runtime could not be fetched, verified or unpacked.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The engine could not be configured or the guest compiled.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The scratch root could not be made.
    #[error(transparent)]
    Scratch(#[from] WorkdirError),
    /// A template could not be built or loaded.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The package cache's folders could not be made.
    #[error("making the package cache: {0}")]
    Packages(String),
}

/// Why an execution could not be attempted (as opposed to how it ended, which is the
/// report's status).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// A limit was asked for above the maximum or below the minimum.
    #[error(transparent)]
    Limits(#[from] LimitError),
    /// The sandbox could not be made (bad input file, environment, instantiation).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The pre-execution check the policy asked for gave no verdict.
    #[error(transparent)]
    Check(#[from] CheckError),
    /// The guest thread panicked (its unwinding removed the sandbox).
    #[error("the host panicked while running the guest: {0}")]
    Panicked(String),
    /// The packages asked for cannot be had: nothing ran.
    #[error(transparent)]
    Packages(#[from] PackageError),
    /// The policy is `deny` and the check found these: nothing ran ([`Vivarium::execute`]
    /// only; [`Vivarium::run`] answers [`Executed::Denied`]).
    #[error(
        "the pre-execution check found {} issue(s) and the policy is \"deny\"; nothing ran",
        .0.len()
    )]
    Denied(Vec<Finding>),
}

/// One execution as an in-process caller asks for it (the CLI, tests): limits not yet
/// resolved. [`Vivarium::execute`] resolves them into a [`RunSpec`].
#[derive(Clone)]
pub struct ExecRequest {
    /// Python source, run as `python -c` would.
    pub code: String,
    /// What the program reads on stdin.
    pub stdin: Vec<u8>,
    /// Placed in the working directory before the code runs.
    pub files: Vec<InputFile>,
    /// Any left out gets the host's default.
    pub limits: LimitsRequest,
    /// Laid over the guest's base environment.
    pub env: Vec<(String, String)>,
    /// Sees output live, as the guest writes it.
    pub observer: Option<OutputObserver>,
    /// Set to stop the run early; `None` for a run only its limits stop.
    pub cancel: Option<Arc<AtomicBool>>,
    /// The snapshot the sandbox starts from; `None`: the default (`scientific`).
    pub template: Option<Template>,
    /// `display()` and `plt.show()` produce rich outputs in the report.
    pub rich: bool,
    /// Whether the code is checked first: off unless asked (the HTTP API's default is
    /// `warn`).
    pub policy: Policy,
    /// Extra packages (requirement specifiers, e.g. `tabulate>=0.9`).
    pub packages: Vec<String>,
}

impl Default for ExecRequest {
    fn default() -> Self {
        ExecRequest {
            code: String::new(),
            stdin: Vec::new(),
            files: Vec::new(),
            limits: LimitsRequest::default(),
            env: Vec::new(),
            observer: None,
            cancel: None,
            template: None,
            rich: false,
            policy: Policy::Off,
            packages: Vec::new(),
        }
    }
}

/// One program to run in a fresh sandbox, its limits resolved ([`Vivarium::resolve_limits`]):
/// the part of a run that is data. A front door builds it, the supervisor admits it, and it
/// crosses the worker seam as it is (`worker::ExecuteJob`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Program {
    /// Python source, run as a program.
    pub code: String,
    /// What the program reads on stdin.
    #[serde(with = "serde_bytes")]
    pub stdin: Vec<u8>,
    /// Placed in the working directory before the code runs.
    pub files: Vec<InputFile>,
    /// Resolved, and checked against the template.
    pub limits: Limits,
    /// Laid over the guest's base environment.
    pub env: Vec<(String, String)>,
    /// The snapshot the sandbox starts from.
    pub template: Template,
    /// `display()` and `plt.show()` produce rich outputs.
    pub rich: bool,
    /// stdout and stderr flush at each newline (streaming, interleaved output).
    pub line_buffered: bool,
    /// Whether the code is checked first, in the same sandbox, before any of it runs.
    pub policy: Policy,
    /// Code mode: the tools the code may call, as `tools.<name>(...)` (`None`: it runs as
    /// before, with no `tools` and no top-level `await`).
    #[serde(default)]
    pub tools: Option<Toolbox>,
    /// Seeds the guest's randomness (a code-mode execution, so that replaying it draws the
    /// same numbers); `None`: fresh from the host.
    #[serde(default)]
    pub seed: Option<[u8; 32]>,
    /// Network by exception: the hosts its HTTP requests may reach and their limits (`None`:
    /// no network, the default). Secrets stay with whoever performs the requests.
    #[serde(default)]
    pub network: Option<crate::egress::Network>,
    /// What `code` is written in: Python (the default; notebook syntax translated) or a
    /// shell script, run by the guest's shell.
    #[serde(default)]
    pub language: Language,
    /// Volumes mounted into the sandbox, as the caller named them (the supervisor lends
    /// them: [`RunSpec::volumes`]).
    #[serde(default)]
    pub volumes: Vec<crate::volumes::VolumeMount>,
    /// A user template's layer over `template` (`None`: the built-in template as it is).
    #[serde(default)]
    pub layer: Option<template::LayerRef>,
}

/// One execution as the core runs it: the [`Program`] and what cannot be data, the live
/// output's observer and the packages' environment.
pub struct RunSpec {
    /// What runs.
    pub program: Program,
    /// Sees output live, as the guest writes it.
    pub observer: Option<OutputObserver>,
    /// The extra packages it sees ([`Vivarium::packages`]; [`Vivarium::no_packages`]).
    pub packages: Arc<PackageEnv>,
    /// Answers the program's tool calls, when it has tools (without, each call raises).
    pub tools: Option<ToolAsker>,
    /// Performs the program's HTTP requests, when it was granted network (without, each
    /// request raises): set where the run is performed, a worker's events.
    pub egress: Option<EgressAsker>,
    /// The secrets its requests may carry: their values stay with the supervisor, which
    /// performs the requests; the program's environment has their placeholders.
    pub secrets: crate::egress::Secrets,
    /// The volumes of `program.volumes` as the supervisor lent them (their folders, the
    /// room for writes): set where the run is admitted, none before.
    pub volumes: Vec<crate::guest::Lent>,
}

/// How a run ended, when it could be attempted (and, as data, a worker's reply).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Executed {
    /// The program ran; with the check's findings unless the policy was `off`.
    Ran {
        /// What the run did.
        report: Box<Report>,
        /// What the pre-execution check found (`None` with policy `off`).
        findings: Option<Vec<Finding>>,
    },
    /// The policy is `deny` and the check found these: nothing ran.
    Denied(Vec<Finding>),
}

/// One turn of a session's interpreter, as data: what a worker is asked to run in the
/// interpreter it keeps ([`crate::worker::TurnJob`] carries it), the turn's counterpart of
/// [`Program`]. [`Vivarium::turn`] runs it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct TurnProgram {
    /// Python source (notebook syntax translated), or a shell script; a final expression's
    /// value is the turn's result.
    pub code: String,
    /// What the turn reads on stdin.
    #[serde(with = "serde_bytes")]
    pub stdin: Vec<u8>,
    /// Written into the working directory first (all or none, within the disk limit).
    pub files: Vec<InputFile>,
    /// This turn's limits.
    pub limits: TurnLimits,
    /// The pre-execution check of `code`, by a checker of the host's before anything else
    /// (`off`: none); under `deny`, a finding stops the turn before its files are written.
    pub policy: Policy,
    /// Code mode: the tools the turn's code may call.
    #[serde(default)]
    pub tools: Option<Toolbox>,
    /// Network by exception: what the turn's requests may reach.
    #[serde(default)]
    pub network: Option<crate::egress::Network>,
    /// Variables of this turn alone (an E2B cell's `env_vars`, the secrets' placeholders
    /// laid over them: `Secrets::lay_over`): set before its code, undone after it.
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// What `code` is written in (a shell script runs through the guest's shell, its `cd`
    /// and `export` kept for the session's next turns).
    #[serde(default)]
    pub language: Language,
    /// Its number in the session (what its kept state is named by).
    #[serde(default)]
    pub number: u64,
    /// How many of the session's last states its checkpoint keeps, within how many bytes.
    #[serde(default)]
    pub history: crate::vocabulary::TurnHistory,
}

/// One turn as the core runs it: the [`TurnProgram`] and what cannot be data (a worker
/// makes these of its events).
pub struct TurnSpec {
    /// What runs.
    pub turn: TurnProgram,
    /// Sees output live, as the guest writes it.
    pub observer: Option<OutputObserver>,
    /// Answers `input()` (without, it reads the turn's stdin).
    pub input: Option<InputAsker>,
    /// Answers the turn's tool calls, when it has tools.
    pub tools: Option<ToolAsker>,
    /// Performs the turn's HTTP requests, when it was granted network.
    pub egress: Option<EgressAsker>,
}

/// How a turn ended, when it could be attempted.
pub enum Turned {
    /// The turn ran; with the check's findings unless the policy was `off`.
    Ran {
        /// What it did (`ended`: the interpreter is gone).
        outcome: Box<TurnOutcome>,
        /// What the pre-execution check found (`None` with policy `off`).
        findings: Option<Vec<Finding>>,
    },
    /// The policy is `deny` and the check found these: nothing ran, the session is as it was.
    Denied(Vec<Finding>),
}

/// Why a turn could not be attempted. Only [`TurnError::Ended`] leaves the interpreter
/// unusable; after the others it is as it was.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The pre-execution check gave no verdict.
    #[error(transparent)]
    Check(#[from] CheckError),
    /// The turn's tools could not be offered (their schemas).
    #[error("the tools: {0}")]
    Tools(String),
    /// The turn's files could not be written; none was.
    #[error(transparent)]
    Files(#[from] WriteError),
    /// The turn's own variables could not be set.
    #[error("setting the turn's variables: {0}")]
    Env(String),
    /// The interpreter ended without a rollback to go back to.
    #[error("the interpreter ended: {0:?}")]
    Ended(EndReason),
}

/// The process-wide host of sandboxes; see the module documentation.
pub struct Vivarium {
    files: RuntimeFiles,
    engine: GuestEngine,
    /// The `python` template, built (once per machine) and compiled when the host opens.
    python: InstancePre<GuestState>,
    /// The scientific template, compiled (and built, once per machine) on first use.
    scientific: std::sync::OnceLock<InstancePre<GuestState>>,
    scientific_building: std::sync::Mutex<()>,
    /// A pristine instance per template, made on the first capture (`sandbox::capture`).
    baselines: [std::sync::OnceLock<std::sync::Mutex<Baseline>>; Template::ALL.len()],
    home: PathBuf,
    scratch: ScratchRoot,
    /// The scratch root is on tmpfs: what sandboxes write there is memory.
    scratch_in_memory: bool,
    /// What every sandbox is charged to.
    budget: Arc<HostBudget>,
    /// The distributions built into the guest, read from the runtime on first use (not at
    /// start: `vivarium run` would pay for reading the stdlib zip's directory every time).
    builtins: std::sync::OnceLock<Vec<BuiltinPackage>>,
    /// Extra packages: resolution and the environment cache.
    packages: Packages,
    defaults: Limits,
    maximum: Limits,
    /// Interpreters kept for checking a session's turns (`sandbox::Checkers`).
    checkers: Checkers,
    /// User templates' layers, kept decoded (`layers.rs`).
    layers: layers::Layers,
}

impl Vivarium {
    /// Prepares the runtime (fetching it, and building and compiling the `python` template,
    /// on first use), then the engine.
    pub fn open(opts: VivariumOptions) -> Result<Arc<Self>, OpenError> {
        let scratch = ScratchRoot::create(&opts.scratch_base)?;
        Self::open_in(opts, scratch)
    }

    /// [`Vivarium::open`] in a scratch root made already (a worker makes its own, then jails
    /// itself to it, before it opens the runtime).
    pub fn open_in(opts: VivariumOptions, scratch: ScratchRoot) -> Result<Arc<Self>, OpenError> {
        let files = runtime::ensure(&opts.runtime)?;
        let engine = GuestEngine::new(&opts.engine)?;
        let module = template::load(Template::Python, &files, &opts.runtime.home, &engine)?;
        let python = engine.instance_pre(&module)?;
        let scratch_in_memory = is_memory_backed(scratch.path());
        Ok(Arc::new(Vivarium {
            files,
            engine,
            python,
            scientific: std::sync::OnceLock::new(),
            scientific_building: std::sync::Mutex::new(()),
            baselines: Default::default(),
            home: opts.runtime.home.clone(),
            scratch,
            scratch_in_memory,
            budget: opts.budget.clone(),
            builtins: std::sync::OnceLock::new(),
            packages: Packages::new(opts.packages.clone()).map_err(|e| {
                OpenError::Packages(format!("{}: {e}", opts.packages.dir.display()))
            })?,
            defaults: opts.defaults,
            maximum: opts.maximum,
            checkers: Checkers::default(),
            layers: Default::default(),
        }))
    }

    /// The runtime's home (the runtime, templates, compiled modules, packages; workers read
    /// it).
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The verified runtime's files.
    pub fn runtime_files(&self) -> &RuntimeFiles {
        &self.files
    }

    /// The engine every sandbox of this process runs on.
    pub fn engine(&self) -> &GuestEngine {
        &self.engine
    }

    /// The directory under which every sandbox directory of this process lives.
    pub fn scratch_root(&self) -> &Path {
        self.scratch.path()
    }

    /// What a sandbox of this process is charged to.
    fn host_share(&self) -> HostShare {
        HostShare {
            budget: self.budget.clone(),
            disk_in_memory: self.scratch_in_memory,
        }
    }

    /// The budget every sandbox of this process is charged to.
    pub fn budget(&self) -> &Arc<HostBudget> {
        &self.budget
    }

    /// The memory a sandbox of `template` starts with, charged to the budget as it starts:
    /// the template's linear memory (the server's cost: the caller's `memory_bytes` is on top
    /// of it), plus `input_bytes` of files when the scratch root is on tmpfs. What admission
    /// makes room for. A template not compiled yet is taken at
    /// [`UNKNOWN_START_BYTES`] (compiling it here would block the caller).
    pub fn starting_bytes(&self, template: Template, input_bytes: u64) -> u64 {
        let pre = match template {
            Template::Python => Some(&self.python),
            Template::Scientific => self.scientific.get(),
        };
        let memory = pre.map_or(UNKNOWN_START_BYTES, GuestStore::template_memory_bytes);
        let disk = if self.scratch_in_memory {
            input_bytes
        } else {
            0
        };
        memory.saturating_add(disk)
    }

    /// Instances alive in the engine's pool right now (sandboxes, sessions, teardowns,
    /// baselines); `None` without a pooling allocator.
    pub fn pooled_instances(&self) -> Option<u64> {
        self.engine
            .engine()
            .pooling_allocator_metrics()
            .map(|m| m.core_instances())
    }

    /// Sandbox directories alive right now.
    pub fn live_sandbox_dirs(&self) -> usize {
        self.scratch.live_dirs()
    }

    /// What a request gets for the limits it leaves out.
    pub fn defaults(&self) -> &Limits {
        &self.defaults
    }

    /// What a request may ask for at most.
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
    /// process loads it (and on a new machine builds it: minutes; see `template/`).
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
        let _building = lock(&self.scientific_building);
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

    /// Resolves requested limits and the template: this host's defaults and maxima, and the
    /// template asked for or the default (`scientific`). Every template takes every limit:
    /// `memory_bytes` counts beyond the template's own image.
    pub fn resolve_for(
        &self,
        template: Option<Template>,
        req: &LimitsRequest,
    ) -> Result<(Template, Limits), LimitError> {
        Ok((template.unwrap_or_default(), self.resolve_limits(req)?))
    }

    /// Runs `spec` in a fresh sandbox on this thread: the pre-execution check first in its
    /// hidden set-up turn (unless the policy is `off`), then the program. Blocking; call on a
    /// guest thread ([`run_on_guest_thread`]). `cancel` stops it from any thread.
    pub fn run(&self, spec: RunSpec, cancel: Arc<AtomicBool>) -> Result<Executed, ExecError> {
        let RunSpec {
            program:
                Program {
                    code,
                    stdin,
                    files,
                    limits,
                    env,
                    template,
                    rich,
                    line_buffered,
                    policy,
                    tools,
                    seed,
                    network,
                    language,
                    volumes: _,
                    layer,
                },
            observer,
            packages,
            tools: asker,
            egress,
            secrets: _,
            volumes,
        } = spec;
        // A shell script has no Python to check: its findings are none.
        let checked = policy != Policy::Off && language == Language::Python;
        let check = checked.then(|| code.clone());
        let mounted = volumes.clone();
        let (layer, env) = self
            .layered(layer.as_ref(), template, env)
            .map_err(ExecError::Sandbox)?;
        let sandbox = self
            .prepare_with(
                SandboxSpec {
                    limits,
                    env,
                    files,
                    stdin,
                    observer,
                    cancel,
                    setup: GuestSetup {
                        rich,
                        line_buffered,
                        check,
                        program: true,
                        session: false,
                    },
                    host: self.host_share(),
                    packages,
                    seed,
                    volumes,
                    layer,
                },
                template,
            )
            .map_err(|e| match e {
                // The checker runs in the set-up turn: its failure is the checker's.
                SandboxError::Setup { .. } if policy != Policy::Off => {
                    ExecError::Check(CheckError::from_setup(e))
                }
                e => ExecError::Sandbox(e),
            })?;
        let findings = match policy {
            Policy::Off => None,
            _ if !checked => Some(Vec::new()),
            Policy::Warn | Policy::Deny => {
                let c = check::interpret(sandbox.check_verdict())?;
                let facts = check::RunFacts {
                    code: &code,
                    networked: network.is_some(),
                    mounts: &mounted,
                };
                match check::judge(c.findings, policy, facts) {
                    Ok(findings) => Some(findings),
                    Err(refused) => return Ok(Executed::Denied(refused)),
                }
            }
        };
        let mut sandbox = sandbox;
        if let (Some(toolbox), Some(asker)) = (&tools, asker) {
            let door = ToolDoor::new(toolbox, asker)
                .map_err(|e| ExecError::Panicked(format!("the tools: {e}")))?;
            sandbox.offer_tools(door, toolbox.guest_json());
        }
        if let (Some(network), Some(egress)) = (network, egress) {
            sandbox.offer_egress(EgressDoor::new(network, egress));
        }
        let mut report = sandbox.run_as(&code, language);
        match language {
            Language::Python => self.hint_missing_module(&mut report),
            // The shell prints its own messages, bash's; a Python traceback in them is a
            // `python` command's output, not the run's error.
            Language::Bash => report.error = None,
        }
        Ok(Executed::Ran {
            report: Box::new(report),
            findings,
        })
    }

    /// The distributions built into the guest (from the runtime's stdlib zip).
    pub fn builtin_packages(&self) -> &[BuiltinPackage] {
        self.builtins
            .get_or_init(|| runtime::builtin_packages(&self.files))
    }

    /// Adds a hint to an uncaught `ModuleNotFoundError`: the import name of a built-in
    /// package, native code that cannot load here, or not built in. Whether packages can be
    /// added is this host's policy: the server applies its own to what a worker (which
    /// resolves nothing itself) reported.
    pub(crate) fn hint_missing_module(&self, report: &mut Report) {
        if let Some(e) = &mut report.error
            && e.kind == "ModuleNotFoundError"
            && let Some(module) = e
                .message
                .strip_prefix("No module named '")
                .and_then(|m| m.split('\'').next())
        {
            let addable = self.packages.options().source != PackageSource::Off;
            e.hint = missing_module_hint(module, self.builtin_packages(), addable);
        }
    }

    /// Runs one program in a fresh sandbox on a guest thread of its own and reports.
    /// Blocking: call from a thread that may block (not an async executor thread).
    pub fn execute(self: &Arc<Self>, req: ExecRequest) -> Result<Report, ExecError> {
        let (template, limits) = self.resolve_for(req.template, &req.limits)?;
        let spec = RunSpec {
            program: Program {
                code: req.code,
                stdin: req.stdin,
                files: req.files,
                limits,
                env: req.env,
                template,
                rich: req.rich,
                line_buffered: false,
                policy: req.policy,
                tools: None,
                seed: None,
                network: None,
                language: Language::Python,
                volumes: Vec::new(),
                layer: None,
            },
            observer: req.observer,
            packages: self.packages(&req.packages)?,
            tools: None,
            egress: None,
            secrets: Default::default(),
            volumes: Vec::new(),
        };
        let cancel = req.cancel.unwrap_or_default();
        let this = self.clone();
        match on_guest_thread(move || this.run(spec, cancel), ExecError::Panicked)? {
            Executed::Ran { report, .. } => Ok(*report),
            Executed::Denied(findings) => Err(ExecError::Denied(findings)),
        }
    }

    /// Opens a long-lived interpreter (a session) from `template` under `limits`, with the
    /// rich-output helpers loaded. Blocking: call on a guest thread. `cancel` stops its
    /// running turn from any thread, now or later.
    pub fn open_interpreter(
        &self,
        limits: Limits,
        template: Template,
        cancel: Arc<AtomicBool>,
        packages: Arc<PackageEnv>,
        volumes: Vec<crate::guest::Lent>,
        layer: Option<&template::LayerRef>,
    ) -> Result<Interpreter, SandboxError> {
        let setup = GuestSetup {
            rich: true,
            session: true,
            ..GuestSetup::default()
        };
        let mut spec = bare_spec(limits, cancel, setup, self.host_share(), packages);
        spec.volumes = volumes;
        (spec.layer, spec.env) = self.layered(layer, template, Vec::new())?;
        let sandbox = self.prepare_with(spec, template)?;
        let mut interp = sandbox.into_interpreter();
        self.start_checkpoint(&mut interp, template);
        Ok(interp)
    }

    /// Starts `interp`'s rollback checkpoint from a full capture. Without one (the capture
    /// failed: logged) a stopped turn ends the session, as it always did.
    fn start_checkpoint(&self, interp: &mut Interpreter, template: Template) {
        let started = self
            .baseline(template)
            .map_err(CaptureError::Baseline)
            .and_then(|baseline| interp.start_checkpoint(&lock(baseline)));
        if let Err(e) = started {
            tracing::warn!(error = %e, "session has no rollback checkpoint");
        }
    }

    /// Runs `spec` as the next turn of `interp` (opened from `template`), the one rule for a
    /// session's turn: its check first, by a checker of the host's under `cancel` (whatever it
    /// says, the session is untouched); then its files, its own variables (a hidden turn,
    /// undone after it), its tools, network, live output and `input()`, each offered for this
    /// turn alone; then [`Vivarium::session_turn`]. Blocking; call on a guest thread.
    pub fn turn(
        &self,
        interp: &mut Interpreter,
        template: Template,
        spec: TurnSpec,
        cancel: Arc<AtomicBool>,
    ) -> Result<Turned, TurnError> {
        let TurnSpec {
            turn:
                TurnProgram {
                    code,
                    stdin,
                    files,
                    limits,
                    policy,
                    tools,
                    network,
                    env,
                    language,
                    number,
                    history,
                },
            observer,
            input,
            tools: tool_asker,
            egress,
        } = spec;
        let findings = match policy {
            Policy::Off => None,
            // A shell script has no Python to check.
            _ if language == Language::Bash => Some(Vec::new()),
            policy => {
                let c = self.check(&code, cancel)?;
                let facts = check::RunFacts {
                    code: &code,
                    networked: network.is_some(),
                    mounts: &interp.volumes(),
                };
                match check::judge(c.findings, policy, facts) {
                    Ok(findings) => Some(findings),
                    Err(refused) => return Ok(Turned::Denied(refused)),
                }
            }
        };
        // Code mode: the tools' door, compiled before anything is written.
        let door = match (&tools, tool_asker) {
            (Some(toolbox), Some(asker)) => {
                Some(ToolDoor::new(toolbox, asker).map_err(|e| TurnError::Tools(e.to_string()))?)
            }
            _ => None,
        };
        interp.begin_turn(number, &code, history);
        let source = crate::guest::guest_source(
            &code,
            language,
            tools.as_ref().map(|t| t.guest_json()).as_deref(),
            true,
        )
        .unwrap_or(code);
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|f| (f.path.as_str(), f.content.as_slice()))
            .collect();
        interp.write_files(&refs)?;
        if !env.is_empty() {
            interp
                .hidden_turn(&crate::guest::turn_env(&env))
                .map_err(|e| TurnError::Env(e.to_string()))?;
        }
        interp.offer_tools(door);
        if let (Some(network), Some(egress)) = (network, egress) {
            interp.offer_egress(Some(EgressDoor::new(network, egress)));
        }
        interp.stream_output(observer);
        interp.answer_input_with(input);
        let undo = (!env.is_empty()).then_some(crate::guest::UNDO_TURN_ENV);
        let turned = self.session_turn(interp, template, &source, stdin, &limits, undo);
        interp.stream_output(None);
        interp.answer_input_with(None);
        interp.offer_tools(None);
        interp.offer_egress(None);
        let mut outcome = turned.map_err(TurnError::Ended)?;
        if language == Language::Bash {
            // The shell prints bash's messages; a traceback in them is a `python` command's
            // output, not the turn's error.
            outcome.report.error = None;
        }
        Ok(Turned::Ran {
            outcome: Box::new(outcome),
            findings,
        })
    }

    /// Runs one turn of a session's interpreter (opened from `template`). A turn that a limit
    /// or a trap stops leaves the instance untrustworthy: when the interpreter keeps a
    /// checkpoint, it is replaced by a fresh instance restored from it (its state before the
    /// turn, memory and files) and the outcome says `rolled_back`; otherwise, or when the
    /// restore fails, it ends as before. After a completed turn `undo` runs as a hidden turn
    /// (what was set for this turn alone), then the checkpoint is brought up to date.
    /// Blocking; call on a guest thread.
    pub fn session_turn(
        &self,
        interp: &mut Interpreter,
        template: Template,
        code: &str,
        stdin: Vec<u8>,
        limits: &TurnLimits,
        undo: Option<&str>,
    ) -> Result<TurnOutcome, EndReason> {
        let mut outcome = interp.turn(code, stdin, limits)?;
        // What a hidden turn set for this one alone is undone before the checkpoint is
        // refreshed, so no rollback brings it back (a rolled-back turn goes back to before it).
        if let (Some(undo), None) = (undo, &outcome.ended)
            && interp.hidden_turn(undo).is_err()
        {
            outcome.ended = interp.ended().cloned();
        }
        match &outcome.ended {
            None => interp.refresh_checkpoint(),
            Some(EndReason::Stopped(_)) => {
                if self.roll_back(interp, template) {
                    outcome.ended = None;
                    outcome.rolled_back = true;
                }
            }
            // The program exited: the session ends, as the program asked.
            Some(EndReason::Quit | EndReason::Exit(_)) => {}
        }
        self.hint_missing_module(&mut outcome.report);
        Ok(outcome)
    }

    /// Asks a session's interpreter something between turns ([`crate::guest::queries`]):
    /// runs `code` as a hidden turn under `limits` and returns what it answered through the
    /// door (the guest's text: parse it as hostile). A query a limit stops rolls the session
    /// back as a turn would; it never counts as a turn. What a query that `Changes` the
    /// session did (a file operation, a sandbox's set-up) is part of the state a later
    /// rollback returns to, as an upload is; one that only `Looks` (a completion) leaves the
    /// checkpoint as it was. Blocking; call on a guest thread.
    pub fn session_query(
        &self,
        interp: &mut Interpreter,
        template: Template,
        code: &str,
        limits: &TurnLimits,
        effect: crate::guest::queries::QueryEffect,
    ) -> Result<Option<String>, String> {
        let answer = interp.hidden_query(code, limits);
        match interp.ended() {
            None if effect == crate::guest::queries::QueryEffect::Changes => {
                interp.refresh_checkpoint()
            }
            None => {}
            Some(EndReason::Stopped(_)) => {
                self.roll_back(interp, template);
            }
            Some(_) => {}
        }
        answer
    }

    /// Replaces an interpreter a limit or a trap stopped by a fresh instance restored from
    /// its checkpoint (its state before that turn, memory and files); whether it could.
    fn roll_back(&self, interp: &mut Interpreter, template: Template) -> bool {
        let Some(image) = interp.checkpoint_image() else {
            return false;
        };
        match self.restore_bare(
            template,
            &image,
            interp.cancel_flag(),
            interp.packages(),
            interp.volumes(),
        ) {
            Ok(mut fresh) => {
                fresh.adopt_checkpoint(interp);
                let old = std::mem::replace(interp, fresh);
                // Torn down after the response left, off this turn's time.
                guest_threads::defer_drop(old);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "rolling a session back failed");
                false
            }
        }
    }

    /// Puts `interp` (opened from `template`) back in its checkpoint's kept state `turn`
    /// (memory, files, globals: the shell's folder and variables with them), dropping the
    /// states after it: in place when the state's shape allows (`sandbox/rewind.rs`), else a
    /// fresh instance restored from that state takes its place; which of the two it was
    /// (`Done`: in place). `Err(None)` when that state is not kept (nothing changes);
    /// `Err(Some(_))` when the restore failed (nothing changes, unless an in-place attempt
    /// broke part way: then the interpreter is ended). Blocking; call on a guest thread.
    pub fn roll_back_to(
        &self,
        interp: &mut Interpreter,
        template: Template,
        turn: u64,
    ) -> Result<crate::sandbox::Rewound, Option<RestoreError>> {
        let in_place = match self.baseline(template) {
            Ok(baseline) => interp.rewind_in_place(turn, &lock(baseline)),
            Err(_) => crate::sandbox::Rewound::NotInPlace,
        };
        match in_place {
            crate::sandbox::Rewound::Done => return Ok(crate::sandbox::Rewound::Done),
            crate::sandbox::Rewound::NotInPlace => {}
            crate::sandbox::Rewound::Broken => interp.end_broken(),
        }
        let image = interp.checkpoint_view_at(turn).ok_or(None)?.into_image();
        let mut fresh = self
            .restore_bare(
                template,
                &image,
                interp.cancel_flag(),
                interp.packages(),
                interp.volumes(),
            )
            .map_err(Some)?;
        fresh.adopt_checkpoint_at(interp, turn);
        let old = std::mem::replace(interp, fresh);
        // Torn down after the response left.
        guest_threads::defer_drop(old);
        Ok(crate::sandbox::Rewound::NotInPlace)
    }

    /// What a snapshot of `template`'s sessions is bound to on this host: the template's
    /// key and the runtime's digest.
    pub fn binding(&self, template: Template) -> Result<Binding, TemplateError> {
        Ok(Binding {
            template: template.name().to_string(),
            template_key: template::key(template, &self.files)?,
            runtime_sha256: self.files.plain_sha256.clone(),
        })
    }

    fn baseline(&self, template: Template) -> Result<&std::sync::Mutex<Baseline>, SandboxError> {
        let cell = &self.baselines[template as usize];
        if let Some(b) = cell.get() {
            return Ok(b);
        }
        let made = Baseline::new(&self.engine, &self.template_pre(template)?)?;
        Ok(cell.get_or_init(|| std::sync::Mutex::new(made)))
    }

    /// Reads `interp`'s whole state (it came from `template`). Blocking; call on a guest
    /// thread, between turns.
    pub fn capture(
        &self,
        interp: &mut Interpreter,
        template: Template,
    ) -> Result<SessionImage, CaptureError> {
        let baseline = self.baseline(template).map_err(CaptureError::Baseline)?;
        interp.capture(&lock(baseline))
    }

    /// A new interpreter of `template` from `image` (checked by `snapshot::decode` when it
    /// came from a store; its binding is the caller's to have checked), keeping its rollback
    /// checkpoint from there. Blocking; call on a guest thread.
    pub fn restore_interpreter(
        &self,
        template: Template,
        image: SessionImage,
        cancel: Arc<AtomicBool>,
    ) -> Result<Interpreter, RestoreError> {
        let packages = self.pinned_packages(&image.packages)?;
        self.restore_interpreter_with(template, image, cancel, packages, Vec::new())
    }

    /// [`Vivarium::restore_interpreter`] with its packages already found
    /// ([`Vivarium::pinned_packages`]; a worker is handed them, it never resolves).
    pub fn restore_interpreter_with(
        &self,
        template: Template,
        image: SessionImage,
        cancel: Arc<AtomicBool>,
        packages: Arc<PackageEnv>,
        volumes: Vec<crate::guest::Lent>,
    ) -> Result<Interpreter, RestoreError> {
        let mut interp = self.restore_bare(template, &image, cancel, packages, volumes)?;
        // Its state is the image: that is its first checkpoint.
        interp.keep_checkpoint(image);
        Ok(interp)
    }

    /// The environment of exactly `pins` (an image's): from the cache, or again from the
    /// index when it serves exactly those wheels. Blocking (pip may run).
    pub fn pinned_packages(&self, pins: &[PackagePin]) -> Result<Arc<PackageEnv>, PackageError> {
        self.packages.get_pinned(pins, self.builtin_packages())
    }

    /// [`Vivarium::restore_interpreter_with`] without a checkpoint of its own.
    fn restore_bare(
        &self,
        template: Template,
        image: &SessionImage,
        cancel: Arc<AtomicBool>,
        packages: Arc<PackageEnv>,
        volumes: Vec<crate::guest::Lent>,
    ) -> Result<Interpreter, RestoreError> {
        let pre = self.template_pre(template).map_err(SandboxError::from)?;
        let baseline = self.baseline(template)?;
        Interpreter::restore(
            &self.engine,
            &pre,
            &lock(baseline),
            &self.layout(),
            &self.scratch,
            image,
            cancel,
            self.host_share(),
            packages,
            volumes,
        )
    }

    /// The environment of the extra packages `raw` names (requirement specifiers), from the
    /// cache or resolved, downloaded and unpacked now; the empty one for none. Blocking
    /// (pip runs): call off an async executor.
    pub fn packages(self: &Arc<Self>, raw: &[String]) -> Result<Arc<PackageEnv>, PackageError> {
        self.packages_held(raw, Box::new(()))
    }

    /// [`Vivarium::packages`] for a caller whose package work is counted (a tenant's
    /// resolutions and compiles in flight): it takes its place before calling and hands the
    /// guard in as `hold`, which is dropped when the resolution ends or, when the resolution
    /// started the set's `.pyc` compile, when that compile ends.
    pub fn packages_held(
        self: &Arc<Self>,
        raw: &[String],
        hold: crate::packages::PackageHold,
    ) -> Result<Arc<PackageEnv>, PackageError> {
        let specs = self.packages.parse(raw)?;
        let env = self.packages.get(&specs, self.builtin_packages())?;
        if env.take_compile() {
            self.compile_in_background(&env, hold);
        }
        Ok(env)
    }

    /// What requests for the same set share (their specifiers normalised and sorted), once
    /// `raw` is checked as [`Vivarium::check_packages`] does.
    pub fn package_key(&self, raw: &[String]) -> Result<String, PackageError> {
        self.packages.parse(raw).map(|specs| specs.key())
    }

    /// The environment of `raw` when the cache has it resolved and needs no compile started
    /// (no pip, no wait, nothing to count against a tenant's package jobs); `None` otherwise.
    pub fn cached_packages(&self, raw: &[String]) -> Result<Option<Arc<PackageEnv>>, PackageError> {
        let specs = self.packages.parse(raw)?;
        // One to compile goes the counted way, which hands the compile its place.
        Ok(self
            .packages
            .cached(&specs)?
            .filter(|env| !env.compile_pending()))
    }

    /// Compiles `env`'s modules to `.pyc` in a sandbox of the host's own (the only one that
    /// sees the folder writable; it runs `COMPILE_PACKAGES`, which reads the modules and runs
    /// none), in the background: the sandboxes of the meantime import from source; later
    /// ones skip compiling (plotly.express: 1.7 s to import from source). A failure only
    /// leaves the modules compiled on every import, as before. The compiles wait in the
    /// package service's queue (`packages::Compiles`: a few at once, in order, a bounded
    /// number waiting); when it is full the set stays uncompiled and the next request for
    /// it offers it again. `hold` goes with the compile until it ends.
    fn compile_in_background(
        self: &Arc<Self>,
        env: &Arc<PackageEnv>,
        hold: crate::packages::PackageHold,
    ) {
        let this = self.clone();
        let job_env = env.clone();
        let queued = self.packages.compiles().submit(move || {
            let _hold = hold;
            let env = job_env;
            {
                let started = std::time::Instant::now();
                let target = Packages::compile_target(&env);
                let limits = Limits {
                    timeout_ms: 300_000,
                    fuel: 300 * crate::limits::FUEL_PER_CPU_SECOND,
                    memory_bytes: 512 << 20,
                    output_bytes: 64 << 10,
                    disk_bytes: env.bytes.saturating_mul(2).saturating_add(64 << 20),
                    ..this.defaults
                };
                let (host, cancel) = (this.clone(), this.packages.compiles().cancel_flag());
                let ran = run_on_guest_thread(move || {
                    let spec = bare_spec(
                        limits,
                        cancel,
                        GuestSetup::default(),
                        host.host_share(),
                        target,
                    );
                    host.prepare(spec)
                        .map(|s| s.run(crate::guest::COMPILE_PACKAGES))
                });
                let compiled =
                    matches!(&ran, Ok(Ok(r)) if r.status == crate::report::Status::Ok);
                this.packages.compile_ended(&env, compiled);
                match ran {
                    Ok(Ok(r)) if r.status == crate::report::Status::Ok => {
                        tracing::info!(
                            target: "vivarium::packages",
                            key = %env.key,
                            ms = started.elapsed().as_millis() as u64,
                            "package environment compiled"
                        );
                    }
                    Ok(Ok(r)) => tracing::warn!(
                        target: "vivarium::packages",
                        key = %env.key,
                        status = r.status.as_str(),
                        stderr = %r.stderr,
                        "compiling a package environment failed"
                    ),
                    Ok(Err(e)) => tracing::warn!(target: "vivarium::packages", error = %e, "compiling a package environment failed"),
                    Err(_) => tracing::warn!(target: "vivarium::packages", "compiling a package environment panicked"),
                }
            }
        });
        if !queued {
            env.offer_compile_again();
            tracing::warn!(target: "vivarium::packages", key = %env.key, "no place in the compile queue (full, or closed for shutdown); this set imports from source for now");
        }
    }

    /// Stops the background compiles (`packages::Compiles::close`): what waits is dropped,
    /// what runs is cancelled; returns whether their threads ended within `wait`. Called at
    /// shutdown before the scratch root goes, which a running compile's directory is in.
    pub fn close_compiles(&self, wait: std::time::Duration) -> bool {
        self.packages.compiles().close(wait)
    }

    /// Checks `raw` against the server's package policy and bounds without resolving it:
    /// what a front door refuses before anything runs.
    pub fn check_packages(&self, raw: &[String]) -> Result<(), PackageError> {
        self.packages.parse(raw).map(drop)
    }

    /// The packages `code`'s `pip install` lines name ([`crate::guest::pip_requirements`])
    /// that this host would add for it: none when it adds no packages (the guest's pip then
    /// says it cannot install), and none built in (already importable: the guest's pip says
    /// so). A front door adds them to the run's packages, or to the session's, before the
    /// code runs, through the same resolution and quotas as named ones.
    pub fn packages_named_by(&self, code: &str, language: Language) -> Vec<String> {
        if !code.contains("pip") || self.packages.options().source == PackageSource::Off {
            return Vec::new();
        }
        let mut named = crate::guest::pip_requirements(code, language);
        if named.is_empty() {
            return named;
        }
        let builtins: Vec<String> = self
            .builtin_packages()
            .iter()
            .map(|p| crate::packages::normalize(&p.name))
            .collect();
        named.retain(|spec| {
            let end = spec
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
                .unwrap_or(spec.len());
            !builtins.contains(&crate::packages::normalize(&spec[..end]))
        });
        named
    }

    /// The package service's options (policy, bounds), for `GET /v1/packages`.
    pub fn package_options(&self) -> &PackageOptions {
        self.packages.options()
    }

    /// The environment of a sandbox without extra packages.
    pub fn no_packages(&self) -> Arc<PackageEnv> {
        self.packages.empty()
    }

    /// Gives `interp` (a session of `template`, between turns) the packages of `env` (a
    /// superset of its own): its state moves to a fresh instance that sees `env` (capture
    /// and restore: the preopen behind `guest::PACKAGES_DIR` is fixed for an instance's
    /// life), which then gets the folder on `sys.path`. Blocking; call on a guest thread.
    pub fn add_packages(
        &self,
        interp: &mut Interpreter,
        template: Template,
        env: Arc<PackageEnv>,
    ) -> Result<(), AddPackagesError> {
        let mut image = self.capture(interp, template)?;
        image.packages = env.pins.clone();
        let mut fresh = self.restore_bare(
            template,
            &image,
            interp.cancel_flag(),
            env,
            interp.volumes(),
        )?;
        fresh
            .hidden_turn(&crate::guest::packages_on_path())
            .map_err(AddPackagesError::Setup)?;
        self.start_checkpoint(&mut fresh, template);
        let old = std::mem::replace(interp, fresh);
        guest_threads::defer_drop(old);
        Ok(())
    }

    /// The limits of a sandbox that only checks (`check::checker_limits`: the set-up turn's time and fuel, 256 MiB).
    pub fn checker_limits(&self) -> Limits {
        check::checker_limits(&self.defaults, &self.maximum)
    }

    /// Runs the checker on `code` in an interpreter of the host's that runs no caller's code:
    /// a kept one ([`Checkers`]), or a fresh one when none is idle (`/v1/check`, session
    /// turns, the CLI). Blocking: call on a guest thread.
    pub fn check(&self, code: &str, cancel: Arc<AtomicBool>) -> Result<CheckResult, CheckError> {
        let limits = self.checker_limits();
        let mut checker = match self.checkers.take() {
            Some(checker) => checker,
            None => {
                let sandbox = self
                    .prepare(bare_spec(
                        limits,
                        cancel.clone(),
                        GuestSetup {
                            session: true,
                            ..GuestSetup::default()
                        },
                        self.host_share(),
                        self.no_packages(),
                    ))
                    .map_err(CheckError::from_setup)?;
                Checker::new(sandbox.into_interpreter())
            }
        };
        let verdict = checker.ask(code, &TurnLimits::from(&limits), cancel);
        self.checkers.give_back(checker);
        match verdict {
            Ok(verdict) => check::interpret(verdict.as_deref()),
            Err((status, detail)) => Err(CheckError::from_setup(SandboxError::Setup {
                status,
                detail,
            })),
        }
    }

    /// Checkers kept idle now (`sandbox::Checkers`).
    pub fn idle_checkers(&self) -> usize {
        self.checkers.idle()
    }

    /// [`Vivarium::check`] on a guest thread of its own (the CLI). Blocking.
    pub fn check_blocking(self: &Arc<Self>, code: &str) -> Result<CheckResult, CheckError> {
        let this = self.clone();
        let code = code.to_string();
        on_guest_thread(
            move || this.check(&code, Arc::default()),
            CheckError::Panicked,
        )
    }
}

/// Why packages could not be added to a session: it goes on as it was.
#[derive(Debug, thiserror::Error)]
pub enum AddPackagesError {
    /// Its state could not be read.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// The fresh instance could not be made.
    #[error(transparent)]
    Restore(#[from] RestoreError),
    /// Putting the packages on `sys.path` failed.
    #[error("putting the packages on sys.path failed: {0}")]
    Setup(String),
}

/// A sandbox with no caller input (no environment, files or stdin): a session's interpreter
/// or a checker.
fn bare_spec(
    limits: Limits,
    cancel: Arc<AtomicBool>,
    setup: GuestSetup,
    host: HostShare,
    packages: Arc<PackageEnv>,
) -> SandboxSpec {
    SandboxSpec {
        limits,
        env: Vec::new(),
        files: Vec::new(),
        stdin: Vec::new(),
        observer: None,
        cancel,
        setup,
        host,
        packages,
        seed: None,
        volumes: Vec::new(),
        layer: None,
    }
}

/// Runs `f` on a guest thread and waits; a panic becomes `panicked(message)`, logged.
fn on_guest_thread<R: Send + 'static, E: Send + 'static>(
    f: impl FnOnce() -> Result<R, E> + Send + 'static,
    panicked: fn(String) -> E,
) -> Result<R, E> {
    run_on_guest_thread(f).unwrap_or_else(|panic| {
        let msg = guest_threads::panic_message(&*panic);
        tracing::error!(panic = %msg, "guest thread panicked");
        Err(panicked(msg))
    })
}
