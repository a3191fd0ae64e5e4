//! [`Interpreter`]: a long-lived interpreter (a session) whose turns share state.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::checkpoint::{Checkpoint, CheckpointView};
use super::live::Live;
use super::outcome::{EndReason, TurnOutcome};
use super::output::OutputObserver;
use super::rich;
use super::workdir::{WorkDir, WorkdirError};
use crate::hostcalls::fs_guard;
use crate::limits::{Limits, TurnLimits};
use crate::snapshot::SessionImage;

/// A long-lived interpreter (a session): turns share variables, imports and files.
pub struct Interpreter {
    /// Declared before `live`, so it drops first: its tracker watches `live`'s memory.
    pub(super) checkpoint: Option<Checkpoint>,
    pub(super) live: Live,
    /// Its stdout and stderr flush at each newline (set the first time someone watches its
    /// output live; a restored instance finds out again).
    pub(super) line_buffered: bool,
}

impl Interpreter {
    /// Puts in place every file of a volume it holds open for writing (its close, or its
    /// hibernation: it runs no more code).
    pub fn close_volume_files(&mut self) {
        self.live.store.data_mut().fs.mounts.close_all();
    }

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
        if let Some(cp) = &mut self.checkpoint {
            cp.note_guest_ran();
        }
        let mut outcome = self.live.turn(code, limits, true);
        // A figure left open comes back at the end of the turn, as in a notebook.
        if self.live.ended.is_none() && self.live.take_figure_made() {
            self.live
                .follow_up(crate::guest::SHOW_OPEN_FIGURES, limits, &mut outcome);
        }
        // Rich outputs are read and removed after each turn; the disk the guest is charged
        // for is measured again, since the host removed files behind its back.
        let root = self.live.workdir.path().to_path_buf();
        outcome.report.outputs = rich::take_outputs(&root);
        if !outcome.report.outputs.is_empty() {
            self.live.store.data_mut().fs.charged_bytes = fs_guard::measure_dir(&root);
        }
        Ok(outcome)
    }

    /// Runs `code` as a hidden turn (the host's, not the caller's: it is not counted in the
    /// tracebacks' numbering, on either side) under the set-up turn's limits. `Err` with what
    /// it printed when it did not complete.
    pub fn hidden_turn(&mut self, code: &str) -> Result<(), String> {
        self.hidden_query(code, &crate::guest::SETUP_LIMITS)
            .map(drop)
    }

    /// [`Interpreter::hidden_turn`] under `limits`, returning what `code` sent through the door's result
    /// channel (`_host.call(RESULT_TAG + text)`), if anything: how the host asks a session
    /// something (completions, an object's documentation). The text is the guest's: bounded
    /// by the door, to be parsed as hostile.
    pub fn hidden_query(
        &mut self,
        code: &str,
        limits: &TurnLimits,
    ) -> Result<Option<String>, String> {
        if let Some(reason) = &self.live.ended {
            return Err(format!("{reason:?}"));
        }
        self.hidden_answer(code, limits)
            .map_err(|(_, detail)| detail)
    }

    /// Runs `code` as a hidden turn under `limits`: what it sent through the door's result
    /// channel when it completed, else how it ended and what stopped it (or its stderr).
    pub(super) fn hidden_answer(
        &mut self,
        code: &str,
        limits: &TurnLimits,
    ) -> Result<Option<String>, (crate::report::Status, String)> {
        // The guest counted this turn as it began; it is put back first, so even a hidden
        // turn that fails leaves the numbering of the caller's next turn alone.
        let code = format!("__import__('_reactor')._turns -= 1\n{code}");
        if let Some(cp) = &mut self.checkpoint {
            cp.note_guest_ran();
        }
        let outcome = self.live.turn(&code, limits, false);
        self.live.turns_run = self.live.turns_run.saturating_sub(1);
        if outcome.report.status == crate::report::Status::Ok && outcome.ended.is_none() {
            Ok(outcome.result)
        } else {
            let r = outcome.report;
            Err((r.status, r.detail.unwrap_or(r.stderr)))
        }
    }

    /// Who sees this interpreter's output live from now on, turn after turn (`None`:
    /// nobody). Past a final value's echo, or once an uncaught exception's traceback
    /// begins, a turn's stream is not shown live (see `hostcalls::door`). The first time
    /// someone watches, stdout and stderr become line-buffered (one hidden turn), so what a
    /// cell prints leaves as it prints.
    pub fn stream_output(&mut self, observer: Option<OutputObserver>) {
        if observer.is_some() && !self.line_buffered {
            self.line_buffered = self.hidden_turn(crate::guest::LINE_BUFFERED).is_ok();
        }
        self.live.store.data().live_output.set(observer);
    }

    /// Code mode: the tools the next turns' code may call (`None`: none). The turn's code
    /// is then `guest::guest_source`' wrapping of the caller's.
    pub fn offer_tools(&mut self, door: Option<crate::hostcalls::tools::ToolDoor>) {
        self.live.store.data_mut().tools = door;
    }

    /// Network by exception: the next turns' HTTP requests go through `door` (`None`: no
    /// network; the clients, patched in the template, then raise "network access is off").
    pub fn offer_egress(&mut self, door: Option<crate::hostcalls::egress::EgressDoor>) {
        self.live.store.data_mut().egress = door;
    }

    /// Who answers `input()` from now on, turn after turn (`None`: nobody; `input()` reads
    /// the turn's stdin).
    pub fn answer_input_with(&mut self, asker: Option<crate::hostcalls::input::InputAsker>) {
        self.live.store.data_mut().input = asker;
    }

    /// Its package environment.
    pub fn packages(&self) -> Arc<crate::packages::PackageEnv> {
        self.live.packages.clone()
    }

    /// The volumes mounted in it (lent to it by the supervisor).
    pub fn volumes(&self) -> Vec<crate::guest::Lent> {
        self.live.volumes.clone()
    }

    /// The wheels of its package environment (none without extra packages).
    pub fn package_pins(&self) -> Vec<crate::packages::PackagePin> {
        self.live.packages.pins.clone()
    }

    /// Why the interpreter takes no more turns; `None` while it still does.
    pub fn ended(&self) -> Option<&EndReason> {
        self.live.ended.as_ref()
    }

    /// The session's working directory, to list or read its files between turns.
    pub fn workdir(&self) -> &WorkDir {
        &self.live.workdir
    }

    /// Writes `(path, content)` files into the working directory between turns, refusing
    /// them all when they would take it past the disk limit. The guest's running disk
    /// estimate is measured again afterwards, so what the host wrote counts against the
    /// guest's own next writes.
    pub fn write_files(&mut self, files: &[(&str, &[u8])]) -> Result<(), WriteError> {
        if files.is_empty() {
            return Ok(());
        }
        // A file in a mounted volume goes there, within the room the mount was lent.
        let mut own = Vec::with_capacity(files.len());
        for (index, (path, content)) in files.iter().enumerate() {
            let mounts = &mut self.live.store.data_mut().fs.mounts;
            match mounts.place(path) {
                Some((ix, rel)) => mounts
                    .put(ix, &rel, content)
                    .map_err(|why| WriteError::Volume { index, why })?,
                None => own.push((index, *path, *content)),
            }
        }
        let files = &own[..];
        if files.is_empty() {
            return Ok(());
        }
        let limit = self.live.limits.disk_bytes;
        let used = fs_guard::measure_dir(self.live.workdir.path());
        let adding: u64 = files.iter().map(|(_, _, c)| c.len() as u64).sum();
        if used.saturating_add(adding) > limit {
            return Err(WriteError::OverQuota { limit });
        }
        // On tmpfs the files are memory: the host's budget must have room for them first.
        if !self
            .live
            .store
            .data_mut()
            .fs
            .hold_on_host(used.saturating_add(adding), true)
        {
            return Err(WriteError::HostBudget);
        }
        let written = files.iter().try_for_each(|&(index, path, content)| {
            self.live
                .workdir
                .write_file(path, content)
                .map_err(|source| WriteError::Workdir { index, source })
        });
        // Also after a failed write: whatever did land is charged.
        let now = fs_guard::measure_dir(self.live.workdir.path());
        let fs = &mut self.live.store.data_mut().fs;
        fs.charged_bytes = now;
        fs.hold_on_host(now, true);
        written
    }

    /// The limits the interpreter was opened with: memory and disk for its whole life, the
    /// rest the defaults of its turns.
    pub fn limits(&self) -> &Limits {
        &self.live.limits
    }

    /// The cancel flag of the running turn, to stop it from another thread.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.live.store.data().clock.cancel.clone()
    }

    /// The largest the guest's linear memory has grown over the interpreter's life, in bytes.
    pub fn memory_peak_bytes(&self) -> u64 {
        self.live.store.data().limiter.peak_bytes as u64
    }
}

/// Why the host could not write files into an interpreter's working directory.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The files would take the working directory past the disk limit; none was written.
    #[error("past the disk limit of {limit} bytes")]
    OverQuota {
        /// The disk limit, in bytes.
        limit: u64,
    },
    /// The working directory is in memory (tmpfs) and the server's memory budget has no
    /// room for the files; none was written.
    #[error("the server's memory budget has no room for these files right now")]
    HostBudget,
    /// File number `index` lies in a mounted volume that cannot take it.
    #[error("file {index}: {why}")]
    Volume {
        /// Its position in the list.
        index: usize,
        /// Why (read-only, no room).
        why: &'static str,
    },
    /// Writing file number `index` failed (a bad path, an I/O error).
    #[error("file {index}: {source}")]
    Workdir {
        /// Its position in the list.
        index: usize,
        /// Why.
        #[source]
        source: WorkdirError,
    },
}

impl Interpreter {
    /// Keeps a rollback checkpoint from now on, starting from `image`: a full capture of
    /// this interpreter, or the image it was restored from.
    pub fn keep_checkpoint(&mut self, image: SessionImage) {
        self.keep(Checkpoint::new(&self.live, image));
    }

    /// Keeps `cp` as the rollback checkpoint, if the host's budget has room for it.
    pub(super) fn keep(&mut self, mut cp: Checkpoint) {
        if let Some(why) = &cp.untracked_because {
            tracing::debug!(why = %why, "no kernel dirty tracking; checkpoints compare written pages");
        }
        match cp.charge() {
            Ok(()) => self.checkpoint = Some(cp),
            Err(e) => tracing::warn!(error = %e, "no session checkpoint"),
        }
    }

    /// Brings the checkpoint (if kept) up to this interpreter's state, after a completed
    /// turn or host writes. A failure drops it: the session then ends on a stopped turn, as
    /// without one.
    pub fn refresh_checkpoint(&mut self) {
        if let Some(mut cp) = self.checkpoint.take() {
            match cp.refresh(&mut self.live) {
                Ok(()) => self.checkpoint = Some(cp),
                Err(e) => tracing::warn!(error = %e, "session checkpoint dropped"),
            }
        }
    }

    /// The checkpoint's state, to restore a rolled-back interpreter from; `None` without
    /// one, or while its state cannot be carried (a folder being listed, a bound of the
    /// snapshot format passed: the session then ends on a stopped turn, as without a
    /// checkpoint).
    pub fn checkpoint_image(&self) -> Option<SessionImage> {
        self.checkpoint
            .as_ref()
            .filter(|cp| cp.carriable())
            .map(Checkpoint::image)
    }

    /// [`Interpreter::checkpoint_image`] without the copy: the checkpoint's state now,
    /// sharing its pages, to be made into an image off the turn's response path.
    pub fn checkpoint_view(&self) -> Option<CheckpointView> {
        self.checkpoint
            .as_ref()
            .filter(|cp| cp.carriable())
            .map(Checkpoint::view)
    }

    /// Moves the checkpoint from `old` (rolled back) to this interpreter, restored from it.
    pub fn adopt_checkpoint(&mut self, old: &mut Interpreter) {
        if let Some(mut cp) = old.checkpoint.take() {
            cp.track(&self.live);
            self.checkpoint = Some(cp);
        }
    }

    /// Turn `number` (its `code`) is about to run, its session keeping `keep` turns: the
    /// checkpoint's refresh after it makes its kept state.
    pub fn begin_turn(&mut self, number: u64, code: &str, keep: crate::vocabulary::TurnHistory) {
        if let Some(cp) = &mut self.checkpoint {
            cp.begin_turn(number, code, keep);
        }
    }

    /// Names the checkpoint's state by the session's turn count `current`, unless a turn
    /// did (a session opened, restored or woken knows no number of its own).
    pub fn name_state(&mut self, current: u64) {
        if let Some(cp) = &mut self.checkpoint {
            cp.name_state(current);
        }
    }

    /// The states the checkpoint keeps, oldest first, the one it is in last (empty without
    /// a checkpoint).
    pub fn kept_turns(&self) -> Vec<super::KeptState> {
        self.checkpoint
            .as_ref()
            .map_or_else(Vec::new, Checkpoint::kept)
    }

    /// Whether the last turn alone was past the kept turns' byte budget (nothing before it
    /// is kept).
    pub fn last_turn_unkept(&self) -> bool {
        self.checkpoint
            .as_ref()
            .is_some_and(Checkpoint::last_turn_unkept)
    }

    /// Kept state `turn` as a view; `None` when it is not kept or cannot be carried.
    pub fn checkpoint_view_at(&self, turn: u64) -> Option<CheckpointView> {
        self.checkpoint.as_ref()?.view_at(turn)
    }

    /// Moves the checkpoint from `old` to this interpreter, restored from its kept state
    /// `turn` (see [`Interpreter::checkpoint_view_at`]): the states after it are dropped.
    pub fn adopt_checkpoint_at(&mut self, old: &mut Interpreter, turn: u64) {
        if let Some(mut cp) = old.checkpoint.take()
            && cp.rewind(turn)
        {
            cp.track(&self.live);
            self.checkpoint = Some(cp);
        }
    }

    /// Ends the interpreter: a change to it failed part way, so its state is unknown (a
    /// later restore may still replace it).
    pub fn end_broken(&mut self) {
        self.live.ended = Some(super::EndReason::Stopped(crate::report::Status::Trap));
    }

    /// Bytes the checkpoint's kept turns hold (0 without one).
    pub fn kept_turn_bytes(&self) -> u64 {
        self.checkpoint.as_ref().map_or(0, Checkpoint::kept_bytes)
    }

    /// Host memory the checkpoint holds, in bytes (0 without one).
    pub fn checkpoint_bytes(&self) -> u64 {
        self.checkpoint.as_ref().map_or(0, Checkpoint::held_bytes)
    }

    /// Whether the checkpoint has the kernel's dirty tracking: `None` without a checkpoint,
    /// `Some(None)` when tracked, `Some(Some(why))` when it compares written pages instead.
    pub fn checkpoint_untracked_because(&self) -> Option<Option<&str>> {
        self.checkpoint
            .as_ref()
            .map(|cp| cp.untracked_because.as_deref())
    }
}
