//! One sandbox: a fresh instance of the guest interpreter, its own working directory, and the
//! limits it runs under.
//!
//! The lifecycle is in the types. [`Sandbox::prepare`] makes a fresh, unused interpreter; it
//! either runs one program ([`Sandbox::run`], consuming it: a sandbox never runs twice) or
//! becomes a long-lived [`Interpreter`] whose [`Interpreter::turn`]s share state, like a
//! notebook kernel. Dropping either removes the working directory.
//!
//! Everything here is synchronous and must run on a thread with a large native stack (see
//! [`run_on_guest_thread`]), never on an async executor thread.

pub mod door;
pub mod errno;
pub mod fs_guard;
pub mod guest_memory;
pub mod guest_threads;
pub mod limiter;
pub mod output;
pub mod poll;
pub mod rich;
pub mod state;
pub mod stdin;
pub mod workdir;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use wasmtime::{InstancePre, Memory, Store, Trap, TypedFunc, UpdateDeadline};
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::engine::GuestEngine;
use crate::limits::Limits;
use crate::report::{self, Report, Status, Truncated, Usage};
use crate::template::GuestSetup;
use limiter::MemoryLimiter;
use output::{CappedPipe, OutputObserver, StreamKind};
use state::{FsGuard, GuestMonotonicClock, GuestState, Interrupted, RunClock};
use stdin::GuestStdin;
use workdir::{GUEST_HOME, InputFile, ScratchRoot, WorkDir, WorkdirError};

/// `argv[0]` the reference host passes; only `sys.orig_argv[0]` shows it.
pub(crate) const ARGV0: &str = "/usr/local/bin/python.wasm";
/// Where the guest finds its standard library: a folder holding only `python315.zip`.
pub(crate) const GUEST_STDLIB_DIR: &str = "/usr/local/lib";
pub(crate) const GUEST_MPL_DATA_DIR: &str = "/usr/local/lib/python315.zip/matplotlib/mpl-data";
/// Descriptors open before the guest opens any: stdio and the three preopens.
const INITIAL_FDS: u32 = 6;
/// Caps on the environment a caller may pass.
pub const MAX_ENV_VARS: usize = 256;
pub const MAX_ENV_BYTES: usize = 64 << 10;

/// Run after a single execution's code, on the same interpreter: flushes every file object the
/// code left open, so its data reaches the host. (`turn` does not finalise the interpreter
/// the way `run` does, and a buffer that dies with the instance never reaches the disk.)
const FLUSH_OPEN_FILES: &str = "\
def __vivarium_flush():
    import gc, _io
    # `_io._IOBase`, the C base of every io class (and of Python subclasses of io.IOBase):
    # a plain type check, where the `io.IOBase` ABC's subclass hook costs ~10 ms in a
    # template whose packages define many classes.
    for o in gc.get_objects():
        try:
            if isinstance(o, _io._IOBase) and not o.closed:
                o.flush()
        except BaseException:
            pass
try:
    __vivarium_flush()
except BaseException:
    pass
";
/// The flush gets its own small budget; code that sabotaged it only loses its own files.
const FLUSH_LIMITS: TurnLimits = TurnLimits {
    timeout_ms: 2_000,
    fuel: 2_000_000_000,
    output_bytes: 0,
};

/// Where the guest runtime's read-only parts are on the host.
#[derive(Debug, Clone)]
pub struct GuestLayout<'a> {
    pub stdlib_dir: &'a Path,
    pub mpl_data_dir: &'a Path,
}

/// Everything a sandbox is made from, besides the engine.
pub struct SandboxSpec {
    pub limits: Limits,
    /// Laid over the guest's base environment (TMPDIR, HOME, PYTHONTZPATH).
    pub env: Vec<(String, String)>,
    pub files: Vec<InputFile>,
    pub stdin: Vec<u8>,
    /// Sees output live, as the guest writes it.
    pub observer: Option<OutputObserver>,
    /// Set from any thread to stop the guest within a tick.
    pub cancel: Arc<AtomicBool>,
    /// What the hidden set-up turn loads besides the environment and fresh randomness.
    pub setup: GuestSetup,
}

/// Per-turn limits; memory and disk are for the sandbox's whole life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnLimits {
    pub timeout_ms: u64,
    pub fuel: u64,
    pub output_bytes: u64,
}

impl From<&Limits> for TurnLimits {
    fn from(l: &Limits) -> Self {
        TurnLimits {
            timeout_ms: l.timeout_ms,
            fuel: l.fuel,
            output_bytes: l.output_bytes,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    Workdir(#[from] WorkdirError),
    #[error("environment variable {0:?} is not allowed: {1}")]
    BadEnv(String, &'static str),
    #[error("setting up the guest's filesystem: {0}")]
    Preopen(#[source] wasmtime::Error),
    #[error("instantiating the guest: {0}")]
    Instantiate(#[source] wasmtime::Error),
    #[error("the guest lacks the export {0:?}")]
    MissingExport(&'static str),
    #[error("the sandbox's set-up turn failed ({status:?}): {detail}")]
    Setup { status: Status, detail: String },
}

/// Why an interpreter can take no more turns.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "reason", content = "detail", rename_all = "snake_case")]
pub enum EndReason {
    /// The code called `exit()` or `quit()`.
    Quit,
    /// The code called `os._exit(n)` (or the interpreter hit a fatal error).
    Exit(i32),
    /// A limit or a trap stopped the instance mid-turn; its state is not trustworthy.
    Stopped(Status),
}

/// The instance and everything around it; shared by both lifecycle types.
struct Live {
    store: Store<GuestState>,
    memory: Memory,
    turn: TypedFunc<(i32, i32), i32>,
    host_alloc: TypedFunc<i32, i32>,
    stdout: CappedPipe,
    stderr: CappedPipe,
    stdin: GuestStdin,
    workdir: WorkDir,
    limits: Limits,
    turns_run: u32,
    ended: Option<EndReason>,
}

/// A fresh interpreter that has run none of the caller's code yet (only its set-up turn).
pub struct Sandbox {
    live: Live,
    /// The pre-execution checker's verdict (JSON), when the set-up asked for a check.
    check_verdict: Option<String>,
    /// The set-up loaded the rich-output helpers: outputs are collected after the run.
    rich: bool,
}

/// A long-lived interpreter (a session): turns share variables, imports and files.
pub struct Interpreter {
    live: Live,
}

/// What one turn did, besides its report.
pub struct TurnOutcome {
    pub report: Report,
    /// The `repr` of the final expression's value, when the turn ended with one (sessions).
    pub result: Option<String>,
    /// Set when this turn ended the interpreter.
    pub ended: Option<EndReason>,
}

/// A store with everything around it, before any module is instantiated in it: the same
/// WASI context, limits and working directory for the Python guest and for any other module
/// linked against the same linker (the adversarial modules in `wasm/`).
pub struct GuestStore {
    pub store: Store<GuestState>,
    pub workdir: WorkDir,
    pub stdout: CappedPipe,
    pub stderr: CappedPipe,
    pub stdin: GuestStdin,
}

impl GuestStore {
    /// Makes the working directory, the WASI context and the store, with every limit armed.
    pub fn new(
        engine: &GuestEngine,
        layout: &GuestLayout<'_>,
        scratch: &ScratchRoot,
        spec: SandboxSpec,
    ) -> Result<GuestStore, SandboxError> {
        let env = guest_env(&spec.env)?;
        Self::with_env(engine, layout, scratch, spec, &env)
    }

    /// [`GuestStore::new`] with the guest's environment already resolved by [`guest_env`].
    fn with_env(
        engine: &GuestEngine,
        layout: &GuestLayout<'_>,
        scratch: &ScratchRoot,
        spec: SandboxSpec,
        env: &[(String, String)],
    ) -> Result<GuestStore, SandboxError> {
        let workdir = WorkDir::create(scratch, &spec.files, spec.limits.disk_bytes)?;
        let output_cap = spec.limits.output_bytes as usize;
        let stdout = CappedPipe::new(StreamKind::Stdout, output_cap, spec.observer.clone());
        let stderr = CappedPipe::new(StreamKind::Stderr, output_cap, spec.observer);
        let stdin = GuestStdin::new(spec.stdin);
        let origin = Instant::now();

        let mut wasi = WasiCtxBuilder::new();
        wasi.args(&[ARGV0])
            .envs(env)
            .stdin(stdin.clone())
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .monotonic_clock(GuestMonotonicClock(origin))
            // File I/O runs inline on the guest thread instead of hopping to a blocking pool:
            // we are already on a thread of our own.
            .allow_blocking_current_thread(true)
            // No network: preview1 has no call that creates a socket, and none is preopened;
            // these make the intent explicit should that ever change.
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        // Fixed order (fd 3, 4, 5): templates snapshot the preopen table, so it must not vary.
        wasi.preopened_dir(layout.stdlib_dir, GUEST_STDLIB_DIR, FsPerms::ReadOnly)
            .and_then(|w| {
                w.preopened_dir(layout.mpl_data_dir, GUEST_MPL_DATA_DIR, FsPerms::ReadOnly)
            })
            .and_then(|w| w.preopened_dir(workdir.path(), "/", FsPerms::ReadWrite))
            .map_err(SandboxError::Preopen)?;

        let charged_bytes = fs_guard::measure_dir(workdir.path());
        let state = GuestState {
            wasi: wasi.build_p1(),
            limiter: MemoryLimiter::new(spec.limits.memory_bytes),
            clock: RunClock {
                deadline: state::far_future(),
                cancel: spec.cancel,
                origin,
            },
            fs: FsGuard {
                root: workdir.path().to_path_buf(),
                open_fds: INITIAL_FDS,
                max_open_fds: spec.limits.open_files,
                opens: 0,
                charged_bytes,
                quota_bytes: spec.limits.disk_bytes,
                refused_disk: false,
                refused_fd: false,
            },
            last_result: None,
        };
        let mut store = Store::new(engine.engine(), state);
        store.limiter(|s| &mut s.limiter);
        // Checked every tick: the deadline and the cancel flag, so a busy loop stops within
        // one tick of either.
        store.epoch_deadline_callback(|ctx| {
            ctx.data().clock.check().map_err(wasmtime::Error::new)?;
            Ok(UpdateDeadline::Continue(1))
        });
        store.set_epoch_deadline(1);
        Ok(GuestStore {
            store,
            workdir,
            stdout,
            stderr,
            stdin,
        })
    }

    /// Arms the wall-clock deadline and the fuel for one call into the guest.
    pub fn arm(&mut self, timeout_ms: u64, fuel: u64) {
        let data = self.store.data_mut();
        data.clock.deadline = Instant::now() + std::time::Duration::from_millis(timeout_ms);
        self.store.set_epoch_deadline(1);
        // Fuel cannot be refused on a store with fuel enabled.
        let _ = self.store.set_fuel(fuel);
    }
}

impl Sandbox {
    /// Makes the working directory, the WASI context and the store, instantiates the
    /// template, and runs its hidden set-up turn (see [`crate::template::setup_code`]).
    pub fn prepare(
        engine: &GuestEngine,
        python: &InstancePre<GuestState>,
        layout: &GuestLayout<'_>,
        scratch: &ScratchRoot,
        mut spec: SandboxSpec,
    ) -> Result<Sandbox, SandboxError> {
        let limits = spec.limits;
        let setup = std::mem::take(&mut spec.setup);
        // The set-up turn installs the same environment the WASI context gets.
        let env = guest_env(&spec.env)?;
        let setup_code = crate::template::setup_code(&env, &setup);
        let GuestStore {
            mut store,
            workdir,
            stdout,
            stderr,
            stdin,
        } = GuestStore::with_env(engine, layout, scratch, spec, &env)?;
        // The snapshot runs no code at instantiation; fuel is re-armed before every turn.
        store
            .set_fuel(u64::MAX)
            .map_err(SandboxError::Instantiate)?;
        let instance = python
            .instantiate(&mut store)
            .map_err(SandboxError::Instantiate)?;
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or(SandboxError::MissingExport("memory"))?;
        let turn = instance
            .get_typed_func(&mut store, "turn")
            .map_err(|_| SandboxError::MissingExport("turn"))?;
        let host_alloc = instance
            .get_typed_func(&mut store, "host_alloc")
            .map_err(|_| SandboxError::MissingExport("host_alloc"))?;
        let mut live = Live {
            store,
            memory,
            turn,
            host_alloc,
            stdout,
            stderr,
            stdin,
            workdir,
            limits,
            turns_run: 0,
            ended: None,
        };
        let outcome = live.turn(&setup_code, &crate::template::SETUP_LIMITS, false);
        if outcome.report.status != Status::Ok {
            let r = outcome.report;
            return Err(SandboxError::Setup {
                status: r.status,
                detail: r.detail.unwrap_or(r.stderr),
            });
        }
        live.turns_run = 0;
        Ok(Sandbox {
            live,
            check_verdict: outcome.result,
            rich: setup.rich,
        })
    }

    /// The pre-execution checker's verdict (its JSON, untrusted: see `server::check`), when
    /// the set-up asked for a check.
    pub fn check_verdict(&self) -> Option<&str> {
        self.check_verdict.as_deref()
    }

    /// Runs `code` as a program, as `python -c` would, and reports. Files the code created or
    /// changed come back in the report.
    pub fn run(mut self, code: &str) -> Report {
        // `turn` echoes a final expression like the REPL; a program does not. A trailing
        // `pass` makes the last statement a non-expression without moving any line.
        let program = format!("{code}\npass\n");
        let limits = TurnLimits::from(&self.live.limits);
        let opens_before = self.live.store.data().fs.opens;
        let mut outcome = self.live.turn(&program, &limits, false);
        // Only a file the program opened can hold an unflushed buffer (preview1 has no `dup`;
        // the guest flushes its own stdout and stderr after every turn).
        let opened_files = self.live.store.data().fs.opens != opens_before;
        if self.live.ended.is_none() && opened_files {
            self.live.turn(FLUSH_OPEN_FILES, &FLUSH_LIMITS, false);
        }
        let budget = self.live.limits.disk_bytes;
        // Measured after the flush, so flushed buffers count.
        outcome.report.usage.disk_bytes = fs_guard::measure_dir(self.live.workdir.path());
        outcome.report.files = self.live.workdir.changed_files(budget);
        if self.rich {
            outcome.report.outputs = rich::take_outputs(self.live.workdir.path());
        }
        // The server tears the sandbox down after its response left (see `guest_threads`).
        guest_threads::defer_drop(self.live);
        outcome.report
    }

    /// Keeps the interpreter for turns that share state. A hidden first turn installs the
    /// displayhook that reports each turn's final value (see [`door`]); the user's turns
    /// are numbered from 2 in tracebacks (`<turn 2>`).
    pub fn into_interpreter(mut self) -> Interpreter {
        self.live.turn(door::SESSION_SETUP, &FLUSH_LIMITS, false);
        Interpreter { live: self.live }
    }
}

impl Interpreter {
    /// Runs one turn. A final expression's value is echoed to stdout, as the REPL does.
    /// Returns `Err` with the reason when the interpreter already ended.
    pub fn turn(
        &mut self,
        code: &str,
        stdin: Vec<u8>,
        limits: &TurnLimits,
    ) -> Result<TurnOutcome, EndReason> {
        if let Some(reason) = &self.live.ended {
            return Err(reason.clone());
        }
        self.live.stdin.refill(stdin);
        let mut outcome = self.live.turn(code, limits, true);
        // Rich outputs are read and removed after each turn; the disk the guest is charged
        // for is measured again, since the host removed files behind its back.
        let root = self.live.workdir.path().to_path_buf();
        outcome.report.outputs = rich::take_outputs(&root);
        if !outcome.report.outputs.is_empty() {
            self.live.store.data_mut().fs.charged_bytes = fs_guard::measure_dir(&root);
        }
        Ok(outcome)
    }

    pub fn ended(&self) -> Option<&EndReason> {
        self.live.ended.as_ref()
    }

    pub fn workdir(&self) -> &WorkDir {
        &self.live.workdir
    }

    pub fn workdir_mut(&mut self) -> &mut WorkDir {
        &mut self.live.workdir
    }

    pub fn limits(&self) -> &Limits {
        &self.live.limits
    }

    /// The cancel flag of the running turn, to stop it from another thread.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.live.store.data().clock.cancel.clone()
    }

    pub fn memory_peak_bytes(&self) -> u64 {
        self.live.store.data().limiter.peak_bytes as u64
    }
}

impl Live {
    /// Runs one turn. `measure_disk` walks the working directory for the report's
    /// `usage.disk_bytes`; hidden turns, and a program whose files are measured after its
    /// flush, skip it.
    fn turn(&mut self, code: &str, limits: &TurnLimits, measure_disk: bool) -> TurnOutcome {
        let started = Instant::now();
        let cap = limits.output_bytes as usize;
        self.stdout.take(cap);
        self.stderr.take(cap);
        {
            let data = self.store.data_mut();
            data.limiter.rearm();
            data.fs.refused_disk = false;
            data.fs.refused_fd = false;
            data.clock.deadline = started + std::time::Duration::from_millis(limits.timeout_ms);
        }
        self.store.data_mut().last_result = None;
        self.store.set_epoch_deadline(1);
        // Fuel cannot be refused on a store with fuel enabled.
        let _ = self.store.set_fuel(limits.fuel);
        self.turns_run += 1;
        let result = self.call_turn(code.as_bytes());
        let fuel_used = limits
            .fuel
            .saturating_sub(self.store.get_fuel().unwrap_or(0));
        self.store.data_mut().clock.deadline = state::far_future();

        let data = self.store.data();
        let outcome = classify(&result, data.limiter.refused);
        let detail = outcome
            .detail
            .map(|d| d.describe(limits, &self.limits))
            .or(outcome.trap_detail.clone());
        if self.ended.is_none() {
            self.ended = outcome.ended.clone();
        }
        let out = self.stdout.take(cap);
        let err = self.stderr.take(cap);
        let stderr = String::from_utf8_lossy(&err.head).into_owned();
        let error = if matches!(outcome.status, Status::Error | Status::MemoryExceeded) {
            let code_file = format!("<turn {}>", self.turns_run);
            let tail = String::from_utf8_lossy(&err.tail);
            report::parse_python_error(&stderr, &code_file)
                .or_else(|| report::parse_python_error(&tail, &code_file))
        } else {
            None
        };
        let report = Report {
            status: outcome.status,
            exit_code: outcome.exit_code,
            stdout: String::from_utf8_lossy(&out.head).into_owned(),
            stderr,
            truncated: Truncated {
                stdout: out.truncated(),
                stderr: err.truncated(),
            },
            error,
            detail,
            files: Vec::new(),
            outputs: Vec::new(),
            usage: Usage {
                wall_ms: started.elapsed().as_secs_f64() * 1e3,
                fuel: fuel_used,
                memory_peak_bytes: data.limiter.peak_bytes as u64,
                disk_bytes: if measure_disk {
                    fs_guard::measure_dir(self.workdir.path())
                } else {
                    0
                },
            },
        };
        TurnOutcome {
            report,
            result: self.store.data_mut().last_result.take(),
            ended: outcome.ended,
        }
    }

    /// Copies the source into guest memory (the guest frees it) and calls `turn`.
    fn call_turn(&mut self, src: &[u8]) -> wasmtime::Result<i32> {
        let len = i32::try_from(src.len()).map_err(|_| wasmtime::format_err!("code too large"))?;
        let mut ptr = 0;
        if len > 0 {
            let p = self.host_alloc.call(&mut self.store, len)?;
            let start = p as u32 as usize;
            // 0 (malloc failed) or out of range: pass 0, which the guest reports as
            // "MemoryError: no memory for this turn's code".
            if p != 0 && start + src.len() <= self.memory.data_size(&self.store) {
                self.memory.data_mut(&mut self.store)[start..start + src.len()]
                    .copy_from_slice(src);
                ptr = p;
            }
        }
        self.turn.call(&mut self.store, (ptr, len))
    }
}

/// Which host limit stopped a run, to be put into words with the limits in force.
#[derive(Debug, Clone, Copy)]
enum Breach {
    Timeout,
    Cancelled,
    Fuel,
    Stack,
    MemoryRefused,
    Refused,
}

impl Breach {
    fn describe(self, turn: &TurnLimits, all: &Limits) -> String {
        match self {
            Breach::Timeout => format!("wall-clock limit of {} ms reached", turn.timeout_ms),
            Breach::Cancelled => "the host cancelled the run".into(),
            Breach::Fuel => format!("fuel limit of {} units exhausted", turn.fuel),
            Breach::Stack => "the wasm stack overflowed (deep C-level recursion)".into(),
            Breach::MemoryRefused => format!(
                "linear memory growth past the limit of {} bytes was refused",
                all.memory_bytes
            ),
            Breach::Refused => "the interpreter refused the turn".into(),
        }
    }
}

struct Classified {
    status: Status,
    exit_code: Option<i32>,
    detail: Option<Breach>,
    ended: Option<EndReason>,
    trap_detail: Option<String>,
}

fn classify(result: &wasmtime::Result<i32>, memory_refused: bool) -> Classified {
    let exited = |code: i32| if code == 0 { Status::Ok } else { Status::Error };
    let stopped = |status: Status, detail: Option<Breach>| Classified {
        status,
        exit_code: None,
        detail,
        ended: Some(EndReason::Stopped(status)),
        trap_detail: None,
    };
    match result {
        Ok(-1) => stopped(Status::Trap, Some(Breach::Refused)),
        Ok(v) => {
            let code = v & 0xFF;
            let mut status = exited(code);
            let mut detail = None;
            if status == Status::Error && memory_refused {
                status = Status::MemoryExceeded;
                detail = Some(Breach::MemoryRefused);
            }
            Classified {
                status,
                exit_code: Some(code),
                detail,
                ended: (v & 256 != 0).then_some(EndReason::Quit),
                trap_detail: None,
            }
        }
        Err(e) => {
            if let Some(exit) = e.downcast_ref::<I32Exit>() {
                return Classified {
                    status: exited(exit.0),
                    exit_code: Some(exit.0),
                    detail: None,
                    ended: Some(EndReason::Exit(exit.0)),
                    trap_detail: None,
                };
            }
            match e.downcast_ref::<Interrupted>() {
                Some(Interrupted::Timeout) => {
                    return stopped(Status::Timeout, Some(Breach::Timeout));
                }
                Some(Interrupted::Cancelled) => {
                    return stopped(Status::Cancelled, Some(Breach::Cancelled));
                }
                None => {}
            }
            match e.downcast_ref::<Trap>() {
                Some(Trap::OutOfFuel) => stopped(Status::FuelExhausted, Some(Breach::Fuel)),
                Some(Trap::StackOverflow) => stopped(Status::StackOverflow, Some(Breach::Stack)),
                Some(Trap::Interrupt) => stopped(Status::Timeout, Some(Breach::Timeout)),
                _ => Classified {
                    trap_detail: Some(format!("{e:#}")),
                    ..stopped(Status::Trap, None)
                },
            }
        }
    }
}

/// The guest's environment: the base the reference host gives, then the caller's on top.
pub(crate) fn guest_env(extra: &[(String, String)]) -> Result<Vec<(String, String)>, SandboxError> {
    if extra.len() > MAX_ENV_VARS {
        return Err(SandboxError::BadEnv(
            format!("{} variables", extra.len()),
            "too many variables (at most 256)",
        ));
    }
    let total: usize = extra.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > MAX_ENV_BYTES {
        return Err(SandboxError::BadEnv(
            format!("{total} bytes"),
            "environment larger than 64 KiB",
        ));
    }
    let mut env: std::collections::BTreeMap<String, String> = [
        ("TMPDIR", "/tmp"),
        ("HOME", GUEST_HOME),
        // Empty: zoneinfo then uses the tzdata package inside the stdlib zip.
        ("PYTHONTZPATH", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in extra {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(SandboxError::BadEnv(
                k.clone(),
                "names must be non-empty, without '=' or NUL",
            ));
        }
        if v.contains('\0') {
            return Err(SandboxError::BadEnv(
                k.clone(),
                "values must not contain NUL",
            ));
        }
        env.insert(k.clone(), v.clone());
    }
    Ok(env.into_iter().collect())
}

/// Runs `f` on a guest thread (pooled; its native stack holds the guest's 8 MiB wasm stack
/// plus host frames) and waits for it. A panic in `f` comes back as `Err` (its unwinding has
/// already dropped, and so removed, any sandbox it held).
pub fn run_on_guest_thread<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> std::thread::Result<R> {
    guest_threads::run_blocking(f)
}
