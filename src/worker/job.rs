//! What crosses the runner seam: a [`Job`] goes to a worker, a [`Reply`] (or a [`JobError`])
//! comes back. These are plain data (no closures, no `Arc`s): a job runs the same way in a
//! worker process and in the supervisor's own process (`--workers 0`).
//!
//! Sessions live in the worker that opened them; a [`Handle`] names one there. A handle means
//! nothing outside its worker, and a worker answers for no other worker's handles.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::check::{CheckResult, Finding};
use crate::limits::{Limits, TurnLimits};
use crate::packages::{PackageEnv, PackageError, PackagePin};
use crate::report::{Held, Report};
use crate::sandbox::EndReason;
use crate::snapshot::SessionImage;
use crate::template::Template;
use crate::vivarium::{Executed, Program, TurnProgram};

/// A session's interpreter in its worker.
pub type Handle = u64;

/// A package environment by its parts: the supervisor resolved and unpacked it, and keeps it
/// from eviction while a worker uses it; the worker only reads its folder.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackageRef {
    /// The environment's cache key.
    pub key: String,
    /// The folder a sandbox sees at `guest::PACKAGES_DIR`.
    pub site: PathBuf,
    /// Its wheels.
    pub pins: Vec<PackagePin>,
    /// Bytes unpacked.
    pub bytes: u64,
}

impl PackageRef {
    /// The parts of `env`.
    pub fn of(env: &PackageEnv) -> Self {
        PackageRef {
            key: env.key.clone(),
            site: env.site.clone(),
            pins: env.pins.clone(),
            bytes: env.bytes,
        }
    }

    /// The environment again, on the worker's side.
    pub fn env(self) -> Arc<PackageEnv> {
        PackageEnv::resolved_elsewhere(self.key, self.site, self.pins, self.bytes)
    }
}

/// One execution in a fresh sandbox: `crate::vivarium::RunSpec` as data, its observer a
/// flag and its packages' environment a reference.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecuteJob {
    /// What runs, as the supervisor admitted it.
    pub program: Program,
    /// Output goes back as [`Event::Output`] while it runs.
    pub observe: bool,
    /// The extra packages it sees.
    pub packages: PackageRef,
    /// The volumes lent to it, mounted as `program.volumes` asked.
    #[serde(default)]
    pub volumes: Vec<crate::guest::Lent>,
}

/// One turn in a kept interpreter: `crate::vivarium::TurnSpec` as data, its sinks flags.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TurnJob {
    /// The session's interpreter.
    pub handle: Handle,
    /// The session's interrupts asked before the turn began: one numbered past it stops the
    /// turn even if it reached the worker first (`Worker::arm`).
    pub interrupts_seen: u64,
    /// What runs, as the supervisor admitted it (its check by a checker of this worker's
    /// first: a checked turn costs one round trip to its worker, not two).
    pub turn: TurnProgram,
    /// Output goes back as [`Event::Output`] while it runs.
    pub observe: bool,
    /// `input()` asks through [`Event::Input`] (else it reads the turn's stdin).
    pub ask_input: bool,
    /// Send the state after the turn back (a durable session's own snapshot).
    pub want_image: bool,
}

impl Job {
    /// Gives a job that makes an interpreter (an open, a restore, a fork) the volumes lent
    /// to it; other jobs mount nothing.
    pub fn lend(&mut self, lent: Vec<crate::guest::Lent>) {
        match self {
            Job::Open { volumes, .. }
            | Job::Restore { volumes, .. }
            | Job::Fork { volumes, .. } => {
                *volumes = lent;
            }
            _ => debug_assert!(
                lent.is_empty(),
                "only an interpreter's making mounts volumes"
            ),
        }
    }
}

/// What a worker is asked to do. Each has one [`Reply`] variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Job {
    /// Run a program in a fresh sandbox → [`Reply::Executed`].
    Execute(Box<ExecuteJob>),
    /// Check code in a checker of the worker's (`sandbox::Checkers`) → [`Reply::Checked`].
    Check {
        /// The code.
        code: String,
    },
    /// Open an interpreter → [`Reply::Opened`].
    Open {
        /// Its limits for life.
        limits: Limits,
        /// Its template.
        template: Template,
        /// Its extra packages.
        packages: PackageRef,
        /// Send back its first state (a durable session's first snapshot).
        want_image: bool,
        /// The volumes lent to it, for its life.
        #[serde(default)]
        volumes: Vec<crate::guest::Lent>,
        /// A user template's layer over `template`.
        #[serde(default)]
        layer: Option<Box<crate::template::LayerRef>>,
    },
    /// Build a user template → [`Reply::Built`] (a failed step is a reply too).
    Build {
        /// What to build.
        program: Box<crate::vivarium::BuildProgram>,
        /// Its packages, found by the supervisor.
        packages: PackageRef,
    },
    /// Make an interpreter from an image (checked by the supervisor) → [`Reply::Opened`].
    Restore {
        /// The image's template.
        template: Template,
        /// The state.
        image: Box<SessionImage>,
        /// The image's packages, found by the supervisor.
        packages: PackageRef,
        /// The volumes the image names, lent again.
        #[serde(default)]
        volumes: Vec<crate::guest::Lent>,
    },
    /// A turn → [`Reply::Turned`] (or [`Reply::TurnDenied`]: its check under `deny` found something).
    Turn(Box<TurnJob>),
    /// A hidden query between turns → [`Reply::Answer`].
    Query {
        /// The session.
        handle: Handle,
        /// Python of `guest::queries`.
        code: String,
        /// Its limits.
        limits: TurnLimits,
        /// Whether what it changes is kept through a later rollback.
        effect: crate::guest::queries::QueryEffect,
    },
    /// A fresh interpreter of the same template, limits and packages (the worker remembers
    /// each session's template) → [`Reply::Done`].
    Restart {
        /// The session.
        handle: Handle,
    },
    /// Move the session to an instance that sees `packages` → [`Reply::Done`].
    AddPackages {
        /// The session.
        handle: Handle,
        /// A superset of its own.
        packages: PackageRef,
    },
    /// The working directory's files → [`Reply::Files`].
    ListFiles {
        /// The session.
        handle: Handle,
    },
    /// One file, up to the disk limit → [`Reply::File`] (or [`Reply::HeldFile`]).
    ReadFile {
        /// The session.
        handle: Handle,
        /// Relative path.
        path: String,
    },
    /// Write one file (kept by a later rollback) → [`Reply::Wrote`].
    WriteFile {
        /// The session.
        handle: Handle,
        /// Relative path.
        path: String,
        /// Its bytes.
        bytes: ByteBuf,
    },
    /// The session's state now → [`Reply::Image`].
    Capture {
        /// The session.
        handle: Handle,
    },
    /// A new interpreter with session `handle`'s state, made in this worker from its
    /// checkpoint (or a capture), so the image never crosses the channel → [`Reply::Opened`].
    Fork {
        /// The session forked.
        handle: Handle,
        /// Its packages (the fork has the same).
        packages: PackageRef,
        /// The volumes it mounts, lent again to the fork.
        #[serde(default)]
        volumes: Vec<crate::guest::Lent>,
        /// From this kept state (`None`: the state it is in).
        #[serde(default)]
        turn: Option<u64>,
        /// The session's turn count now (names the state it is in).
        #[serde(default)]
        current: u64,
    },
    /// The states the session keeps → [`Reply::Turns`].
    Turns {
        /// The session.
        handle: Handle,
        /// The session's turn count now (names the state it is in).
        current: u64,
    },
    /// Put the session back in its kept state `turn`, dropping the states after it →
    /// [`Reply::RolledBack`].
    Rollback {
        /// The session.
        handle: Handle,
        /// The kept state.
        turn: u64,
        /// The session's turn count now (names the state it is in).
        current: u64,
        /// Send the state back (a durable session's own snapshot).
        want_image: bool,
    },
    /// Let the interpreter go (its directory is removed) → [`Reply::Done`].
    Close {
        /// The session.
        handle: Handle,
    },
    /// Test builds only: make this worker fail in a given way → [`Reply::Probed`] or death.
    #[cfg(debug_assertions)]
    Fault(super::fault::Fault),
}

/// What a turn that ran did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TurnReply {
    /// Its report.
    pub report: Box<Report>,
    /// `repr` of its final value.
    pub result: Option<String>,
    /// Set when the turn ended the interpreter (the worker let it go).
    pub ended: Option<EndReason>,
    /// A limit stopped it and the session went back to before it.
    pub rolled_back: bool,
    /// The state after it, when asked for and the session goes on.
    pub image: Option<Box<SessionImage>>,
    /// What the check found (`None`: the policy was `off`).
    pub findings: Option<Vec<Finding>>,
    /// The turn alone changed more than the session's kept turns may hold: no state before
    /// it is kept.
    #[serde(default)]
    pub unkept: bool,
}

/// A worker's answer to one [`Job`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    /// To [`Job::Execute`].
    Executed(Executed),
    /// To [`Job::Check`].
    Checked(CheckResult),
    /// To [`Job::Open`], [`Job::Restore`] and [`Job::Fork`].
    Opened {
        /// The new interpreter.
        handle: Handle,
        /// Its first state, when asked for.
        image: Option<Box<SessionImage>>,
    },
    /// To [`Job::Turn`].
    Turned(TurnReply),
    /// To [`Job::Turn`] under `deny`, when the check found something: nothing ran, the
    /// session is as it was.
    TurnDenied(Vec<Finding>),
    /// To [`Job::Query`].
    Answer(Option<String>),
    /// To [`Job::ListFiles`].
    Files(Vec<(String, u64)>),
    /// To [`Job::ReadFile`]: `None` when there is no such file.
    File(Option<ByteBuf>),
    /// To [`Job::ReadFile`], for a file too large to carry: a copy left on disk for the
    /// supervisor (`held.rs`).
    HeldFile {
        /// Its size.
        size: u64,
        /// Where it waits.
        held: Held,
    },
    /// To [`Job::WriteFile`]: bytes written.
    Wrote(u64),
    /// To [`Job::Capture`].
    Image(Box<SessionImage>),
    /// To [`Job::Turns`]: oldest first, the state it is in last.
    Turns(Vec<crate::sandbox::KeptState>),
    /// To [`Job::Rollback`]: the state it is in now, when asked for.
    RolledBack(Option<Box<SessionImage>>),
    /// To [`Job::Build`]: the layer's image and log, or the step that failed.
    Built(Box<Result<crate::vivarium::Built, crate::vivarium::BuildError>>),
    /// To [`Job::Restart`], [`Job::AddPackages`], [`Job::Close`].
    Done,
    /// To a [`Job::Fault`] probe.
    #[cfg(debug_assertions)]
    Probed(super::fault::ProbeReport),
}

impl Reply {
    /// The run's report, when this answers one (an execution, a turn).
    pub fn report(&self) -> Option<&Report> {
        match self {
            Reply::Executed(Executed::Ran { report, .. }) => Some(report),
            Reply::Turned(t) => Some(&t.report),
            _ => None,
        }
    }
}

/// Why a job did not do what it was asked. The supervisor maps each to its HTTP error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum JobError {
    /// A path in the request is not acceptable.
    #[error("{message}")]
    InvalidPath {
        /// The request field.
        field: String,
        /// Why.
        message: String,
    },
    /// Something else in the request cannot be done (too many files, over the disk limit,
    /// a bad environment variable, a query the session could not answer).
    #[error("{0}")]
    InvalidRequest(String),
    /// The host's memory budget is full: retry.
    #[error("{0}")]
    HostBudget(String),
    /// The session's interpreter had ended before this job.
    #[error("the interpreter has ended ({0:?})")]
    Ended(EndReason),
    /// The session's state cannot be captured now (a file held open, ...).
    #[error("{0}")]
    CaptureRefused(String),
    /// An image does not fit this template or build.
    #[error("{0}")]
    Incompatible(String),
    /// The packages cannot be had.
    #[error("{0}")]
    Package(PackageError),
    /// The session does not keep the state after that turn.
    #[error("turn {0} is not kept")]
    NotKept(u64),
    /// The worker has no interpreter by that handle.
    #[error("no interpreter {0} in this worker")]
    NoSuchHandle(Handle),
    /// Anything else (a host failure, a panic on the guest thread).
    #[error("{0}")]
    Internal(String),
}

/// What a running job sends before its reply.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Event {
    /// Output as the guest wrote it: `stderr` or stdout, and the bytes.
    Output {
        /// stderr (else stdout).
        stderr: bool,
        /// The bytes.
        bytes: ByteBuf,
    },
    /// `input()` asks this; the answer comes back as a line.
    Input {
        /// The prompt.
        prompt: String,
    },
    /// Code mode: a round of tool calls, checked against their schemas; the answers come
    /// back as one line, a JSON list of answers.
    ToolCalls {
        /// The calls.
        calls: Vec<crate::tools::ToolCall>,
    },
    /// Network by exception: one outbound HTTP request, to be checked and performed by the
    /// supervisor; the answer comes back as one line, a JSON `EgressAnswer`.
    Egress {
        /// The request, parsed from the guest's raw HTTP (placeholders, never secrets).
        request: Box<crate::egress::EgressRequest>,
    },
}

impl Event {
    /// Whether the job waits for an answer to it.
    pub fn is_question(&self) -> bool {
        matches!(
            self,
            Event::Input { .. } | Event::ToolCalls { .. } | Event::Egress { .. }
        )
    }
}

/// A job's kind, kept while it runs: a reply is taken only when it is this kind's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// [`Job::Execute`].
    Execute,
    /// [`Job::Check`].
    Check,
    /// [`Job::Open`], [`Job::Restore`], [`Job::Fork`].
    Open,
    /// [`Job::Turn`].
    Turn,
    /// [`Job::Query`].
    Query,
    /// [`Job::ListFiles`].
    ListFiles,
    /// [`Job::ReadFile`].
    ReadFile,
    /// [`Job::WriteFile`].
    WriteFile,
    /// [`Job::Capture`].
    Capture,
    /// [`Job::Build`].
    Build,
    /// [`Job::Turns`].
    Turns,
    /// [`Job::Rollback`].
    Rollback,
    /// [`Job::Restart`], [`Job::AddPackages`], [`Job::Close`].
    Plain,
    /// [`Job::Fault`].
    #[cfg(debug_assertions)]
    Fault,
}

impl Job {
    /// Its kind.
    pub fn kind(&self) -> JobKind {
        match self {
            Job::Execute(_) => JobKind::Execute,
            Job::Check { .. } => JobKind::Check,
            Job::Open { .. } | Job::Restore { .. } | Job::Fork { .. } => JobKind::Open,
            Job::Turn(_) => JobKind::Turn,
            Job::Query { .. } => JobKind::Query,
            Job::ListFiles { .. } => JobKind::ListFiles,
            Job::ReadFile { .. } => JobKind::ReadFile,
            Job::WriteFile { .. } => JobKind::WriteFile,
            Job::Capture { .. } => JobKind::Capture,
            Job::Turns { .. } => JobKind::Turns,
            Job::Rollback { .. } => JobKind::Rollback,
            Job::Build { .. } => JobKind::Build,
            Job::Restart { .. } | Job::AddPackages { .. } | Job::Close { .. } => JobKind::Plain,
            #[cfg(debug_assertions)]
            Job::Fault(_) => JobKind::Fault,
        }
    }
}

impl Reply {
    /// Whether this is the kind of reply a job of `kind` has: a worker is as hostile as its
    /// guest once compromised, so a reply of another kind ends it.
    pub fn answers(&self, kind: JobKind) -> bool {
        matches!(
            (kind, self),
            (JobKind::Execute, Reply::Executed(_))
                | (JobKind::Check, Reply::Checked(_))
                | (JobKind::Open, Reply::Opened { .. })
                | (JobKind::Turn, Reply::Turned(_) | Reply::TurnDenied(_))
                | (JobKind::Query, Reply::Answer(_))
                | (JobKind::ListFiles, Reply::Files(_))
                | (JobKind::ReadFile, Reply::File(_) | Reply::HeldFile { .. })
                | (JobKind::WriteFile, Reply::Wrote(_))
                | (JobKind::Capture, Reply::Image(_))
                | (JobKind::Turns, Reply::Turns(_))
                | (JobKind::Rollback, Reply::RolledBack(_))
                | (JobKind::Build, Reply::Built(_))
                | (JobKind::Plain, Reply::Done)
        ) || self.answers_fault(kind)
    }

    #[cfg(debug_assertions)]
    fn answers_fault(&self, kind: JobKind) -> bool {
        matches!((kind, self), (JobKind::Fault, Reply::Probed(_)))
    }

    #[cfg(not(debug_assertions))]
    fn answers_fault(&self, _kind: JobKind) -> bool {
        false
    }
}
