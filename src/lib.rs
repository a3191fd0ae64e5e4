//! Vivarium runs untrusted Python: CPython compiled to WASI, embedded through Wasmtime in
//! jailed worker processes, one fresh sandbox per execution (or a kept-alive interpreter per
//! session), every limit enforced by the host.
//!
//! Data flows one way, and so do imports (see `ARCHITECTURE.md`, "Layers"):
//!
//! ```text
//! front door (CLI, server::api) -> supervisor::intake -> supervisor::runner -> worker
//!   -> Vivarium -> Sandbox -> Report
//! ```
//!
//! * [`Vivarium`] is the only way into a sandbox: execute a [`RunSpec`], open an
//!   interpreter, check code.
//! * [`server`] serves it over HTTP (and SSE), MCP, Jupyter's kernel protocol, Piston's API
//!   and the E2B API; [`cli`] is the command line.
//! * [`Limits`] names every limit with its default and maximum; [`Report`] is what a run did.
//!
//! The modules below the public API are private; [`testing`] re-exports the internals the
//! integration tests, benchmarks and fuzzers drive directly.

#![warn(missing_docs)]

mod budget;
mod check;
mod egress;
mod engine;
mod guest;
mod hostcalls;
mod leakage;
mod limits;
mod packages;
mod path_io;
mod report;
mod runtime;
mod sandbox;
mod snapshot;
mod sync;
mod template;
mod tools;
mod vivarium;
mod vocabulary;
mod volumes;
mod worker;

pub mod cli;
pub mod server;
mod supervisor;

pub use check::{CheckResult, Finding, Policy, Severity};
pub use leakage::{GITLEAKS_VERSION, LeakPolicy, RuleError, Scanner};
pub use limits::{Limits, LimitsRequest, TurnLimits};
pub use packages::{
    PackageEnv, PackageError, PackageErrorKind, PackageOptions, PackagePin, PackageSource,
};
pub use report::{
    ErrorField, FileOut, Leak, LeakPlace, LeakStream, PyError, Report, RichOutput, Status,
    Truncated, Usage,
};
pub use template::Template;
pub use tools::{
    Answer, AnswerError, Answered, ToolBreach, ToolCall, ToolLimits, ToolLimitsRequest, ToolSpec,
    Toolbox, python_name,
};
pub use vivarium::{
    ExecError, ExecRequest, Executed, InputFile, OpenError, Program, RunSpec, Vivarium,
    VivariumOptions,
};
pub use vocabulary::TurnHistory;

/// Internals for the integration tests, benchmarks and fuzzers; not a stable API.
#[doc(hidden)]
pub mod testing {
    pub use crate::engine::{EngineOptions, GUEST_THREAD_STACK_BYTES};
    pub use crate::guest::GuestSetup;
    pub use crate::hostcalls::fs_guard::measure_dir;
    pub use crate::hostcalls::limiter::MAX_TABLE_ELEMENTS;
    pub use crate::hostcalls::state::Interrupted;
    pub use crate::hostcalls::tools::ToolAsker;
    pub use crate::leakage::{Guard, StreamFilter};
    pub use crate::limits::TurnLimits;
    pub use crate::sandbox::guest_threads::{defer_drop, spawn_deferring};
    pub use crate::sandbox::output::{OutputObserver, StreamKind};
    pub use crate::sandbox::{
        EndReason, GuestStore, HostShare, Interpreter, Rewound, Sandbox, SandboxSpec,
        run_on_guest_thread,
    };
    pub use crate::snapshot::{Provenance, SnapshotId, decode, encode, open_store};
    pub use crate::template::ensure_wasm;
    pub use crate::vivarium::is_memory_backed;
}
