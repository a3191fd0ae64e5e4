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

mod capture;
mod checkers;
mod checkpoint;
mod dirty;
mod image_io;
mod interpreter;
mod kept_dirs;
mod kept_turns;
mod layer;
mod live;
mod open_files;
mod outcome;
mod prepared;
mod rewind;
mod store;

pub mod guest_threads;
pub mod output;
pub mod rich;
pub mod stdin;
pub mod workdir;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::budget::HostBudget;
use crate::guest::{EnvError, GuestSetup};
use crate::limits::Limits;
use crate::packages::PackageEnv;
use crate::report::Status;
use crate::template::TemplateError;
use output::OutputObserver;
use workdir::{InputFile, WorkdirError};

pub use capture::{Baseline, RestoreError};
pub use checkers::{Checker, Checkers};
pub use image_io::CaptureError;
pub use interpreter::{Interpreter, WriteError};
pub use kept_turns::KeptState;
pub use layer::Layer;
pub use outcome::{EndReason, TurnOutcome};
pub use prepared::Sandbox;
pub use rewind::Rewound;
pub use store::GuestStore;

/// Where the guest runtime's read-only parts are on the host.
#[derive(Debug, Clone)]
pub struct GuestLayout<'a> {
    pub stdlib_dir: &'a Path,
    pub mpl_data_dir: &'a Path,
}

/// Everything a sandbox is made from, besides the engine.
pub struct SandboxSpec {
    /// The resolved limits the sandbox runs under.
    pub limits: Limits,
    /// Laid over the guest's base environment (TMPDIR, HOME, PYTHONTZPATH).
    pub env: Vec<(String, String)>,
    /// Written into the working directory before the guest starts (checked first: at most
    /// `MAX_INPUT_FILES`, within the disk limit, relative paths).
    pub files: Vec<InputFile>,
    /// The guest's stdin; an interpreter's turns each bring their own instead.
    pub stdin: Vec<u8>,
    /// Sees output live, as the guest writes it.
    pub observer: Option<OutputObserver>,
    /// Set from any thread to stop the guest within a tick.
    pub cancel: Arc<AtomicBool>,
    /// What the hidden set-up turn loads besides the environment and fresh randomness.
    pub setup: GuestSetup,
    /// The host's memory budget, which the sandbox's memory (and tmpfs files) are charged to.
    pub host: HostShare,
    /// The extra packages it sees at `guest::PACKAGES_DIR` (the empty environment for none);
    /// held for the sandbox's life, so the cache does not evict it.
    pub packages: Arc<PackageEnv>,
    /// Seeds the guest's randomness (`os.urandom`, and through it `random` and numpy's
    /// generator): code mode's suspended executions are brought back by replaying, which
    /// must draw the same numbers. `None`: fresh randomness from the host.
    pub seed: Option<[u8; 32]>,
    /// Volumes lent to it by the supervisor, mounted after the fixed preopen table.
    pub volumes: Vec<crate::guest::Lent>,
    /// A user template's state, laid onto the built-in template's fresh instance before the
    /// set-up turn (`layer.rs`); `None`: the built-in template as it is.
    pub layer: Option<Arc<Layer>>,
}

/// What ties a sandbox to the host's memory budget.
#[derive(Debug, Clone)]
pub struct HostShare {
    /// Shared by every sandbox of the process.
    pub budget: Arc<HostBudget>,
    /// The working directory is on tmpfs: its bytes are memory and charged too.
    pub disk_in_memory: bool,
}

impl HostShare {
    /// No budget beyond the sandbox's own caps.
    pub fn unlimited() -> Self {
        HostShare {
            budget: HostBudget::unlimited(),
            disk_in_memory: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    Workdir(#[from] WorkdirError),
    #[error(transparent)]
    BadEnv(#[from] EnvError),
    #[error("setting up the guest's filesystem: {0}")]
    Preopen(#[source] wasmtime::Error),
    #[error("instantiating the guest: {0}")]
    Instantiate(#[source] wasmtime::Error),
    /// The host's memory budget had no room for the instance's memory.
    #[error("the server's memory budget has no room for another sandbox's memory right now")]
    HostBudget,
    #[error("the guest lacks the export {0:?}")]
    MissingExport(&'static str),
    #[error("the sandbox's set-up turn failed ({status:?}): {detail}")]
    Setup { status: Status, detail: String },
    /// A user template's layer could not be read or does not fit its built-in template.
    #[error("the user template's image: {0}")]
    Layer(String),
}

impl From<TemplateError> for SandboxError {
    fn from(e: TemplateError) -> Self {
        SandboxError::Instantiate(wasmtime::format_err!("{e}"))
    }
}

/// Runs `f` on a guest thread (pooled; its native stack holds the guest's 8 MiB wasm stack
/// plus host frames) and waits for it. A panic in `f` comes back as `Err` (its unwinding has
/// already dropped, and so removed, any sandbox it held).
pub fn run_on_guest_thread<R: Send + 'static>(
    f: impl FnOnce() -> R + Send + 'static,
) -> std::thread::Result<R> {
    guest_threads::run_blocking(f)
}
