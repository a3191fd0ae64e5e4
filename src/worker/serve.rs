//! A worker's side of the seam: the interpreters it holds, and each [`Job`] done against
//! its [`Vivarium`]. The same code serves a worker process (`child.rs`) and the supervisor's
//! own process when it runs without workers (`Local`, in `mod.rs`). Every job runs on a guest
//! thread; a session's turn is [`Vivarium::turn`], the worker only keeps the interpreter.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::job::{Event, ExecuteJob, Handle, Job, JobError, Reply, TurnJob};
use crate::check::CheckError;
use crate::hostcalls::egress::EgressAsker;
use crate::hostcalls::input::InputAsker;
use crate::hostcalls::tools::ToolAsker;
use crate::sandbox::output::{OutputObserver, StreamKind};
use crate::sandbox::workdir::{HOLD_ABOVE_BYTES, WorkdirError};
use crate::sandbox::{CaptureError, Interpreter, RestoreError, SandboxError, WriteError};
use crate::snapshot::SessionImage;
use crate::sync::lock;
use crate::template::Template;
use crate::vivarium::{ExecError, RunSpec, TurnError, TurnSpec, Turned, Vivarium};

/// Where a running job's [`Event`]s go, and where `input()`'s answers come from.
pub trait Events: Send + Sync {
    /// Sends `event`; for a question ([`Event::is_question`]), the answer comes on the
    /// returned receiver.
    fn send(&self, event: Event) -> Option<std::sync::mpsc::Receiver<String>>;
}

/// One interpreter of this worker: there, or out for a job.
struct Slot {
    interp: Option<Interpreter>,
    /// Its template, for a rollback, a restart, a query or a capture: the session's jobs do
    /// not carry it.
    template: Template,
    /// The user template's layer it was opened from, for a restart.
    layer: Option<crate::template::LayerRef>,
    /// The interpreter's cancel flag, reachable while a job has it out (an interrupt).
    cancel: Arc<AtomicBool>,
    /// The highest interrupt generation received for it.
    interrupted: AtomicU64,
}

/// A worker: its runtime and the interpreters of the sessions placed on it.
pub struct Worker {
    host: Arc<Vivarium>,
    slots: Mutex<HashMap<Handle, Slot>>,
    next: AtomicU64,
    /// Set by shutdown: every run in progress and every later one is cancelled.
    cancel_all: AtomicBool,
}

impl Worker {
    /// A worker over `host`, holding no interpreter yet. Its sandboxes hold large returned
    /// files on disk for the supervisor (`held.rs`), which claims each from every reply.
    pub fn new(host: Arc<Vivarium>) -> Self {
        crate::sandbox::workdir::hold_returned_files(host.scratch_root());
        Worker {
            host,
            slots: Mutex::default(),
            next: AtomicU64::new(1),
            cancel_all: AtomicBool::new(false),
        }
    }

    /// Its scratch root (where its held files wait).
    pub fn scratch_root(&self) -> &std::path::Path {
        self.host.scratch_root()
    }

    /// Instances in its engine's pool now.
    pub fn pooled_instances(&self) -> u64 {
        self.host.pooled_instances().unwrap_or(0)
    }

    /// A fresh cancel flag for a job about to run (set already once shutdown began).
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(self.cancel_all.load(Ordering::Relaxed)))
    }

    /// Stops session `handle`'s running turn (a notebook's interrupt), the session's
    /// `generation`th: one that arrives before its turn stops the turn when it comes.
    pub fn interrupt(&self, handle: Handle, generation: u64) {
        if let Some(slot) = lock(&self.slots).get(&handle) {
            slot.interrupted.fetch_max(generation, Ordering::AcqRel);
            slot.cancel.store(true, Ordering::Release);
        }
    }

    /// Before a turn is dispatched, in the order jobs arrive: what an interrupt of an
    /// earlier turn set no longer stands; one asked after the turn began stands, whether it
    /// arrived before the turn or after.
    pub fn arm(&self, job: &Job) {
        if let Job::Turn(t) = job
            && let Some(slot) = lock(&self.slots).get(&t.handle)
        {
            let asked = slot.interrupted.load(Ordering::Acquire) > t.interrupts_seen;
            slot.cancel.store(
                asked || self.cancel_all.load(Ordering::Relaxed),
                Ordering::Release,
            );
        }
    }

    /// Cancels everything running and everything later (shutdown).
    pub fn cancel_everything(&self) {
        self.cancel_all.store(true, Ordering::Relaxed);
        for slot in lock(&self.slots).values() {
            slot.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Does `job` on this thread (a guest thread). `cancel` stops an execution or a check;
    /// a session's jobs use the session's own flag.
    pub fn handle(
        &self,
        job: Job,
        cancel: Arc<AtomicBool>,
        events: Arc<dyn Events>,
    ) -> Result<Reply, JobError> {
        match job {
            Job::Execute(e) => self.execute(*e, cancel, events),
            Job::Check { code } => self
                .host
                .check(&code, cancel)
                .map(Reply::Checked)
                .map_err(from_check),
            Job::Open {
                limits,
                template,
                packages,
                want_image,
                volumes,
                layer,
            } => {
                let interp = self
                    .host
                    .open_interpreter(
                        limits,
                        template,
                        self.cancel_flag(),
                        packages.env(),
                        volumes,
                        layer.as_deref(),
                    )
                    .map_err(from_sandbox)?;
                let image = if want_image {
                    interp.checkpoint_image().map(Box::new)
                } else {
                    None
                };
                Ok(Reply::Opened {
                    handle: self.keep(interp, template, layer.map(|l| *l)),
                    image,
                })
            }
            Job::Restore {
                template,
                image,
                packages,
                volumes,
            } => {
                let interp = self
                    .host
                    .restore_interpreter_with(
                        template,
                        *image,
                        self.cancel_flag(),
                        packages.env(),
                        volumes,
                    )
                    .map_err(from_restore)?;
                Ok(Reply::Opened {
                    handle: self.keep(interp, template, None),
                    image: None,
                })
            }
            Job::Turn(t) => self.turn(*t, cancel, events),
            Job::Query {
                handle,
                code,
                limits,
                effect,
            } => self.with(handle, |interp, template| {
                self.host
                    .session_query(interp, template, &code, &limits, effect)
                    .map(Reply::Answer)
                    .map_err(|e| {
                        JobError::InvalidRequest(format!("the session could not answer: {e}"))
                    })
            }),
            Job::Build { program, packages } => Ok(Reply::Built(Box::new(self.host.build_layer(
                *program,
                packages.env(),
                cancel,
            )))),
            Job::Restart { handle } => {
                let layer = lock(&self.slots).get(&handle).and_then(|s| s.layer.clone());
                self.with(handle, |interp, template| {
                    let fresh = self
                        .host
                        .open_interpreter(
                            *interp.limits(),
                            template,
                            interp.cancel_flag(),
                            interp.packages(),
                            interp.volumes(),
                            layer.as_ref(),
                        )
                        .map_err(from_sandbox)?;
                    let old = std::mem::replace(interp, fresh);
                    crate::sandbox::guest_threads::defer_drop(old);
                    Ok(Reply::Done)
                })
            }
            Job::AddPackages { handle, packages } => self.with(handle, |interp, template| {
                self.host
                    .add_packages(interp, template, packages.env())
                    .map_err(|e| JobError::Internal(format!("adding packages: {e}")))?;
                Ok(Reply::Done)
            }),
            Job::ListFiles { handle } => self.with(handle, |interp, _| {
                Ok(Reply::Files(interp.workdir().list_files()))
            }),
            Job::ReadFile { handle, path } => self.with(handle, |interp, _| {
                let max = interp.limits().disk_bytes;
                let workdir = interp.workdir();
                // A large file goes as a copy on disk (the kernel copies it), never read here.
                if workdir.holds()
                    && workdir
                        .file_len(&path)
                        .is_some_and(|n| n > HOLD_ABOVE_BYTES && n <= max)
                {
                    return match workdir.hold_copy(&path, max) {
                        Ok(Some((name, size))) => Ok(Reply::HeldFile {
                            size,
                            held: crate::report::Held { name, file: None },
                        }),
                        Ok(None) => Ok(Reply::File(None)),
                        Err(e) => Err(from_workdir("path", e)),
                    };
                }
                match workdir.read_file(&path, max) {
                    Ok(bytes) => Ok(Reply::File(bytes.map(serde_bytes::ByteBuf::from))),
                    Err(e) => Err(from_workdir("path", e)),
                }
            }),
            Job::WriteFile {
                handle,
                path,
                bytes,
            } => self.with(handle, |interp, _| {
                match interp.write_files(&[(&path, &bytes)]) {
                    Ok(()) => {
                        // An upload is part of the state a later rollback returns to.
                        interp.refresh_checkpoint();
                        Ok(Reply::Wrote(bytes.len() as u64))
                    }
                    Err(e) => Err(from_write(e, "the file", |_| "path".to_string())),
                }
            }),
            Job::Fork {
                handle,
                packages,
                volumes,
                turn,
                current,
            } => {
                let (mut interp, template) = self.take(handle)?;
                interp.name_state(current);
                let image = match turn {
                    None => self.image_of(&mut interp, template),
                    Some(turn) => interp
                        .checkpoint_view_at(turn)
                        .map(|v| v.into_image())
                        .ok_or(JobError::NotKept(turn)),
                };
                self.put_back(handle, interp);
                let image = image?;
                let forked = self
                    .host
                    .restore_interpreter_with(
                        template,
                        image,
                        self.cancel_flag(),
                        packages.env(),
                        volumes,
                    )
                    .map_err(from_restore)?;
                Ok(Reply::Opened {
                    handle: self.keep(forked, template, None),
                    image: None,
                })
            }
            Job::Turns { handle, current } => self.with(handle, |interp, _| {
                interp.name_state(current);
                Ok(Reply::Turns(interp.kept_turns()))
            }),
            Job::Rollback {
                handle,
                turn,
                current,
                want_image,
            } => self.with(handle, |interp, template| {
                interp.name_state(current);
                self.host
                    .roll_back_to(interp, template, turn)
                    .map_err(|e| match e {
                        None => JobError::NotKept(turn),
                        Some(e) => from_restore(e),
                    })?;
                let image = want_image
                    .then(|| interp.checkpoint_view().map(|v| Box::new(v.into_image())))
                    .flatten();
                Ok(Reply::RolledBack(image))
            }),
            Job::Capture { handle } => self.with(handle, |interp, template| {
                Ok(Reply::Image(Box::new(self.image_of(interp, template)?)))
            }),
            Job::Close { handle } => {
                let slot = lock(&self.slots).remove(&handle);
                if let Some(mut slot) = slot {
                    slot.cancel.store(true, Ordering::Relaxed);
                    // What it left open in a volume is in place before the reply (the
                    // supervisor's push of a writable volume follows it).
                    if let Some(interp) = &mut slot.interp {
                        interp.close_volume_files();
                    }
                    // Its directory goes after the reply has left.
                    crate::sandbox::guest_threads::defer_drop(slot.interp);
                }
                Ok(Reply::Done)
            }
            #[cfg(debug_assertions)]
            Job::Fault(f) => {
                let root = self.host.scratch_root();
                let base = root.parent().unwrap_or(root);
                super::fault::inflict(f, base, &self.host.runtime_files().plain_wasm)
                    .map(Reply::Probed)
                    .map_err(JobError::Internal)
            }
        }
    }

    fn execute(
        &self,
        e: ExecuteJob,
        cancel: Arc<AtomicBool>,
        events: Arc<dyn Events>,
    ) -> Result<Reply, JobError> {
        let observer: Option<OutputObserver> = e.observe.then(|| observer_of(events.clone()));
        let tools = e
            .program
            .tools
            .is_some()
            .then(|| tools_asker_of(events.clone()));
        let egress = e.program.network.is_some().then(|| egress_asker_of(events));
        let spec = RunSpec {
            program: e.program,
            observer,
            packages: e.packages.env(),
            tools,
            egress,
            secrets: Default::default(),
            volumes: e.volumes,
        };
        self.host
            .run(spec, cancel)
            .map(Reply::Executed)
            .map_err(from_exec)
    }

    fn turn(
        &self,
        t: TurnJob,
        cancel: Arc<AtomicBool>,
        events: Arc<dyn Events>,
    ) -> Result<Reply, JobError> {
        let TurnJob {
            handle,
            turn,
            observe,
            ask_input,
            want_image,
            interrupts_seen: _,
        } = t;
        let spec = TurnSpec {
            observer: observe.then(|| observer_of(events.clone())),
            input: ask_input.then(|| asker_of(events.clone())),
            tools: turn.tools.is_some().then(|| tools_asker_of(events.clone())),
            egress: turn.network.is_some().then(|| egress_asker_of(events)),
            turn,
        };
        let (mut interp, template) = self.take(handle)?;
        match self.host.turn(&mut interp, template, spec, cancel) {
            Ok(Turned::Denied(refused)) => {
                self.put_back(handle, interp);
                Ok(Reply::TurnDenied(refused))
            }
            Ok(Turned::Ran { outcome, findings }) => {
                let outcome = *outcome;
                let unkept = interp.last_turn_unkept();
                let image = if want_image && outcome.ended.is_none() {
                    interp.checkpoint_view().map(|v| Box::new(v.into_image()))
                } else {
                    None
                };
                if outcome.ended.is_some() {
                    // Dead: it goes after the reply (this removes its directory).
                    lock(&self.slots).remove(&handle);
                    crate::sandbox::guest_threads::defer_drop(interp);
                } else {
                    self.put_back(handle, interp);
                }
                Ok(Reply::Turned(super::job::TurnReply {
                    report: Box::new(outcome.report),
                    result: outcome.result,
                    ended: outcome.ended,
                    rolled_back: outcome.rolled_back,
                    image,
                    findings,
                    unkept,
                }))
            }
            Err(TurnError::Ended(reason)) => {
                lock(&self.slots).remove(&handle);
                crate::sandbox::guest_threads::defer_drop(interp);
                Err(JobError::Ended(reason))
            }
            Err(e) => {
                self.put_back(handle, interp);
                Err(from_turn(e))
            }
        }
    }

    /// How many interpreters it keeps for sessions now.
    #[cfg(test)]
    pub fn interpreters(&self) -> usize {
        lock(&self.slots).len()
    }

    /// `interp`'s state now: its checkpoint's image when it keeps one, else a capture.
    fn image_of(
        &self,
        interp: &mut Interpreter,
        template: Template,
    ) -> Result<SessionImage, JobError> {
        match interp.checkpoint_image() {
            Some(image) => Ok(image),
            None => self.host.capture(interp, template).map_err(from_capture),
        }
    }

    /// Registers `interp`; its handle.
    fn keep(
        &self,
        interp: Interpreter,
        template: Template,
        layer: Option<crate::template::LayerRef>,
    ) -> Handle {
        let handle = self.next.fetch_add(1, Ordering::Relaxed);
        let cancel = interp.cancel_flag();
        lock(&self.slots).insert(
            handle,
            Slot {
                interp: Some(interp),
                template,
                layer,
                cancel,
                interrupted: AtomicU64::new(0),
            },
        );
        handle
    }

    /// Interpreter `handle`, out of its slot, and its template.
    fn take(&self, handle: Handle) -> Result<(Interpreter, Template), JobError> {
        lock(&self.slots)
            .get_mut(&handle)
            .and_then(|s| Some((s.interp.take()?, s.template)))
            .ok_or(JobError::NoSuchHandle(handle))
    }

    fn put_back(&self, handle: Handle, interp: Interpreter) {
        let mut slots = lock(&self.slots);
        match slots.get_mut(&handle) {
            Some(slot) => slot.interp = Some(interp),
            // Closed while it was out: let it go.
            None => crate::sandbox::guest_threads::defer_drop(interp),
        }
    }

    /// Runs `f` on interpreter `handle`, out of its slot meanwhile.
    fn with(
        &self,
        handle: Handle,
        f: impl FnOnce(&mut Interpreter, Template) -> Result<Reply, JobError>,
    ) -> Result<Reply, JobError> {
        let (mut interp, template) = self.take(handle)?;
        let done = f(&mut interp, template);
        self.put_back(handle, interp);
        done
    }
}

fn observer_of(events: Arc<dyn Events>) -> OutputObserver {
    Arc::new(move |kind: StreamKind, bytes: &[u8]| {
        events.send(Event::Output {
            stderr: kind == StreamKind::Stderr,
            bytes: serde_bytes::ByteBuf::from(bytes.to_vec()),
        });
    })
}

/// Code mode: a program's rounds of tool calls go out as [`Event::ToolCalls`]; their answers
/// come back as one line of JSON.
fn tools_asker_of(events: Arc<dyn Events>) -> ToolAsker {
    Arc::new(move |calls| {
        events
            .send(Event::ToolCalls { calls })
            .unwrap_or_else(|| std::sync::mpsc::channel().1)
    })
}

/// Network by exception: a program's HTTP requests go out as [`Event::Egress`] (a worker
/// has no network); each answer comes back as one line of JSON.
fn egress_asker_of(events: Arc<dyn Events>) -> EgressAsker {
    Arc::new(move |request| {
        events
            .send(Event::Egress {
                request: Box::new(request),
            })
            .unwrap_or_else(|| std::sync::mpsc::channel().1)
    })
}

fn asker_of(events: Arc<dyn Events>) -> InputAsker {
    Arc::new(move |prompt: String| {
        events
            .send(Event::Input { prompt })
            .unwrap_or_else(|| std::sync::mpsc::channel().1)
    })
}

fn from_workdir(field: &str, e: WorkdirError) -> JobError {
    match e {
        WorkdirError::BadPath { .. } => JobError::InvalidPath {
            field: field.to_string(),
            message: e.to_string(),
        },
        WorkdirError::TooManyFiles { .. } | WorkdirError::InputsTooLarge { .. } => {
            JobError::InvalidRequest(e.to_string())
        }
        WorkdirError::Io(_) => JobError::Internal(e.to_string()),
    }
}

fn from_sandbox(e: SandboxError) -> JobError {
    match e {
        SandboxError::Workdir(w) => from_workdir("files", w),
        SandboxError::BadEnv(..) => JobError::InvalidRequest(e.to_string()),
        // Lost the race for the last of the budget between admission and instantiation.
        SandboxError::HostBudget => JobError::HostBudget(e.to_string()),
        other => JobError::Internal(other.to_string()),
    }
}

fn from_check(e: CheckError) -> JobError {
    match e {
        CheckError::Sandbox(s) => from_sandbox(s),
        other => JobError::Internal(format!("pre-execution check failed: {other}")),
    }
}

fn from_turn(e: TurnError) -> JobError {
    match e {
        TurnError::Check(c) => from_check(c),
        TurnError::Tools(m) => JobError::InvalidRequest(m),
        TurnError::Files(w) => from_write(w, "the files", |i| format!("files[{i}].path")),
        TurnError::Env(m) => JobError::Internal(format!("setting the turn's variables: {m}")),
        TurnError::Ended(reason) => JobError::Ended(reason),
    }
}

fn from_exec(e: ExecError) -> JobError {
    match e {
        ExecError::Sandbox(s) => from_sandbox(s),
        ExecError::Check(c) => from_check(c),
        ExecError::Packages(p) => JobError::Package(p),
        other => JobError::Internal(other.to_string()),
    }
}

fn from_restore(e: RestoreError) -> JobError {
    match e {
        RestoreError::Sandbox(SandboxError::HostBudget) => from_sandbox(SandboxError::HostBudget),
        RestoreError::Packages(p) => JobError::Package(p),
        e => JobError::Incompatible(e.to_string()),
    }
}

fn from_capture(e: CaptureError) -> JobError {
    match e {
        e if e.is_refusal() => JobError::CaptureRefused(e.to_string()),
        other => JobError::Internal(format!("capturing the session: {other}")),
    }
}

/// `what` is "the files" or "the file"; `field` names the request field of file `i`.
fn from_write(e: WriteError, what: &str, field: impl Fn(usize) -> String) -> JobError {
    match e {
        WriteError::OverQuota { limit } => JobError::InvalidRequest(format!(
            "{what} would take the session past its disk limit of {limit} bytes"
        )),
        WriteError::Workdir { index, source } => from_workdir(&field(index), source),
        e @ WriteError::Volume { .. } => JobError::InvalidRequest(format!("{what}: {e}")),
        e @ WriteError::HostBudget => JobError::HostBudget(e.to_string()),
    }
}
