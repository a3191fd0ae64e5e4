//! [`Sandbox`]: a fresh interpreter whose set-up turn has run, and none of the caller's code.
//! It runs one program ([`Sandbox::run`], consuming it) or becomes an [`Interpreter`].

use std::time::Instant;

use wasmtime::InstancePre;

use super::interpreter::Interpreter;
use super::live::Live;
use super::store::GuestStore;
use super::workdir::ScratchRoot;
use super::{GuestLayout, SandboxError, SandboxSpec, guest_threads, rich};
use crate::engine::GuestEngine;
use crate::guest::{self, FLUSH_LIMITS, FLUSH_OPEN_FILES, Language, SHOW_OPEN_FIGURES, guest_env};
use crate::hostcalls::fs_guard;
use crate::hostcalls::state::GuestState;
use crate::hostcalls::tools::ToolDoor;
use crate::limits::TurnLimits;
use crate::report::{Report, Status};

/// A fresh interpreter that has run none of the caller's code yet (only its set-up turn).
pub struct Sandbox {
    live: Live,
    /// The pre-execution checker's verdict (JSON), when the set-up asked for a check.
    check_verdict: Option<String>,
    /// The set-up loaded the rich-output helpers: outputs are collected after the run.
    rich: bool,
    /// The set-up installed a kept interpreter's hooks (`GuestSetup::session`).
    session: bool,
    /// Code mode: the tools' specs as the guest reads them, once [`Sandbox::offer_tools`]
    /// gave the run its tools.
    tools: Option<String>,
    /// The user template whose folder a run that leaves it as laid keeps for the next run
    /// (see `kept_dirs`): set when it has no input file and no volume.
    keeps_for: Option<String>,
}

impl Sandbox {
    /// Makes the working directory, the WASI context and the store, instantiates the
    /// template, and runs its hidden set-up turn (see [`guest::setup_code`]).
    pub fn prepare(
        engine: &GuestEngine,
        python: &InstancePre<GuestState>,
        layout: &GuestLayout<'_>,
        scratch: &ScratchRoot,
        mut spec: SandboxSpec,
    ) -> Result<Sandbox, SandboxError> {
        let limits = spec.limits;
        let setup = std::mem::take(&mut spec.setup);
        let layer = spec.layer.take();
        // The set-up turn installs the same environment the WASI context gets.
        let env = guest_env(&spec.env)?;
        // The compile sandbox (a writable environment) never has the modules on its path:
        // nothing of them can be imported, so nothing of them runs, where it could write.
        let on_path = !spec.packages.is_empty() && !spec.packages.writable;
        let setup_code = guest::setup_code(&env, &setup, on_path);
        let keeps_for = layer
            .as_ref()
            .filter(|_| spec.files.is_empty() && spec.volumes.is_empty())
            .map(|layer| layer.id.clone());
        let kept = keeps_for
            .as_deref()
            .and_then(|id| super::workdir::WorkDir::reuse(scratch, id));
        let now = Instant::now();
        let guest = GuestStore::with_env(engine, layout, scratch, spec, &env, now, kept)?;
        let mut live = Live::start(guest, python, limits, 0)?;
        if let Some(layer) = &layer {
            layer.lay_onto(&mut live)?;
        }
        let outcome = live.turn(&setup_code, &guest::SETUP_LIMITS, false);
        if outcome.report.status != Status::Ok {
            let r = outcome.report;
            return Err(SandboxError::Setup {
                status: r.status,
                detail: r.detail.unwrap_or(r.stderr),
            });
        }
        live.turns_run = 0;
        live.program = setup.program;
        Ok(Sandbox {
            live,
            check_verdict: outcome.result,
            rich: setup.rich,
            session: setup.session,
            tools: None,
            keeps_for,
        })
    }

    /// The pre-execution checker's verdict (its JSON, untrusted: see `crate::check`), when
    /// the set-up asked for a check.
    pub fn check_verdict(&self) -> Option<&str> {
        self.check_verdict.as_deref()
    }

    /// Network by exception: the program's HTTP requests go through `door` (the template
    /// patched the clients: `guest::NETWORK_INSTALL`).
    pub fn offer_egress(&mut self, door: crate::hostcalls::egress::EgressDoor) {
        self.live.store.data_mut().egress = Some(door);
    }

    /// Code mode: the program may call `door`'s tools (`tools` is their specs as the guest
    /// reads them, `Toolbox::guest_json`), and runs with top-level `await` allowed.
    pub fn offer_tools(&mut self, door: ToolDoor, tools: String) {
        self.live.store.data_mut().tools = Some(door);
        self.tools = Some(tools);
    }

    /// Runs `code` as a program, as `python -c` would, and reports. Files the code created or
    /// changed come back in the report.
    pub fn run(self, code: &str) -> Report {
        self.run_as(code, Language::Python)
    }

    /// [`Sandbox::run`] of code in `language`: a shell script runs through the guest's shell,
    /// a notebook cell through its translation (`guest::guest_source`).
    pub fn run_as(mut self, code: &str, language: Language) -> Report {
        let program = match guest::guest_source(code, language, self.tools.as_deref(), false) {
            Some(program) => program,
            // `turn` echoes a final expression like the REPL; a program does not. A trailing
            // `pass` makes the last statement a non-expression without moving any line.
            None => format!("{code}\npass\n"),
        };
        let limits = TurnLimits::from(&self.live.limits);
        let opens_before = self.live.store.data().fs.opens;
        let mut outcome = self.live.turn(&program, &limits, false);
        // Only a file the program opened can hold an unflushed buffer (preview1 has no `dup`;
        // the guest flushes its own stdout and stderr after every turn).
        let opened_files = self.live.store.data().fs.opens != opens_before;
        // A figure left open comes back as a notebook would show it (under the program's
        // own limits: drawing it is the program's work).
        if self.rich && self.live.ended.is_none() && self.live.take_figure_made() {
            self.live
                .follow_up(SHOW_OPEN_FIGURES, &limits, &mut outcome);
        }
        if self.live.ended.is_none() && opened_files {
            self.live.turn(FLUSH_OPEN_FILES, &FLUSH_LIMITS, false);
        }
        // What the program left open in a volume is put in place before the answer, so the
        // caller (and, in a cluster, the push after the run) sees it.
        self.live.store.data_mut().fs.mounts.close_all();
        let budget = self.live.limits.disk_bytes;
        // Measured after the flush, so flushed buffers count.
        outcome.report.usage.disk_bytes = fs_guard::measure_dir(self.live.workdir.path());
        outcome.report.files = self.live.workdir.changed_files(budget);
        if self.rich {
            outcome.report.outputs = rich::take_outputs(self.live.workdir.path());
        }
        // A folder the run opened nothing in and changed nothing of is the next run's.
        let fs = &mut self.live.store.data_mut().fs;
        if let Some(layer) = self.keeps_for
            && fs.opens == 0
            && !fs.changed
        {
            let charge = fs.host.take();
            self.live.workdir.keep_for(layer, charge);
        }
        // The server tears the sandbox down after its response left (see `guest_threads`).
        guest_threads::defer_drop(self.live);
        outcome.report
    }

    /// The interpreter as it is, without a kept interpreter's hooks (a template build's:
    /// `sandbox::Layer`): its turns are hidden ones, it reports no values.
    pub fn into_bare_interpreter(self) -> Interpreter {
        Interpreter {
            line_buffered: false,
            checkpoint: None,
            live: self.live,
        }
    }

    /// Keeps the interpreter for turns that share state, with the hooks that report each
    /// turn's final value (see `hostcalls::door`): installed by the set-up turn of a sandbox
    /// prepared with `GuestSetup::session` (a session's, a checker's), else by a hidden turn
    /// now, which does not count (the user's first turn is `<turn 1>`).
    pub fn into_interpreter(mut self) -> Interpreter {
        if !self.session {
            self.live.turn(guest::SESSION_HOOKS, &FLUSH_LIMITS, false);
            self.live.turns_run = self.live.turns_run.saturating_sub(1);
        }
        Interpreter {
            line_buffered: false,
            checkpoint: None,
            live: self.live,
        }
    }
}
