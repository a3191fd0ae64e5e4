//! [`Interpreter`]: a long-lived interpreter (a session) whose turns share state.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::live::Live;
use super::outcome::{EndReason, TurnOutcome};
use super::rich;
use super::workdir::WorkDir;
use crate::hostcalls::fs_guard;
use crate::limits::{Limits, TurnLimits};

/// A long-lived interpreter (a session): turns share variables, imports and files.
pub struct Interpreter {
    pub(super) live: Live,
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

    /// Why the interpreter takes no more turns; `None` while it still does.
    pub fn ended(&self) -> Option<&EndReason> {
        self.live.ended.as_ref()
    }

    /// The session's working directory, to list or read its files between turns.
    pub fn workdir(&self) -> &WorkDir {
        &self.live.workdir
    }

    /// The working directory, to write files into between turns; the caller checks the
    /// disk limit (`WorkDir::write_file` does not).
    pub fn workdir_mut(&mut self) -> &mut WorkDir {
        &mut self.live.workdir
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
