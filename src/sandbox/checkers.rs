//! Kept checkers: interpreters that run the pre-execution checker and nothing else.
//!
//! A fresh execution is checked in its own sandbox's set-up turn, before any of its code
//! runs. A session's turn cannot be: the session's own interpreter has run the caller's code,
//! which may have replaced `ast` or the checker itself. So a turn (and `/v1/check`) is
//! checked in an interpreter of the host's that never runs a caller's code: it only parses
//! and walks the source it is given (`vivarium_check.verdict_json`, the same checker and the
//! same notebook translation as the set-up turn's; `guest::queries::checker`). Making one
//! costs a fresh sandbox; asking a kept one costs a hidden turn, so each process keeps a few
//! ([`MAX_IDLE`]) between checks. A checker whose function could not be defined is not kept
//! (its one check then fails, named).
//!
//! One is kept only while it can be trusted as fresh for checking: a check a limit or a
//! cancel stopped ends it, and so does growing its memory by more than [`MAX_GROWTH_BYTES`]
//! (Wasm memory never shrinks: one huge source would otherwise stay resident) or serving
//! [`MAX_USES`] checks (whatever a parse leaves behind stays bounded). Its working directory
//! is its own and empty, named apart from the sandboxes' (`workdir::CHECKER_PREFIX`, so the
//! count of sandbox directories stays theirs); its memory is charged to the host's budget as
//! any sandbox's.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use super::Interpreter;
use crate::limits::TurnLimits;
use crate::report::Status;
use crate::sync::lock;

/// Idle checkers a process keeps.
pub const MAX_IDLE: usize = 2;
/// Checks one checker serves before it is retired.
pub const MAX_USES: u32 = 1_000;
/// Growth of a checker's linear memory past which it is retired after its check.
pub const MAX_GROWTH_BYTES: u64 = 32 << 20;

/// An interpreter kept for checking ([`super::Sandbox::into_interpreter`] of a sandbox that
/// ran only its set-up turn).
pub struct Checker {
    interp: Interpreter,
    opened_bytes: u64,
    uses: u32,
    /// Its directory is named as a checker's: it may be kept.
    apart: bool,
}

impl Checker {
    /// A checker of `interp`, which must have run none of a caller's code: the checker's
    /// function defined in it (`guest::queries::checker`, once, so each check compiles only
    /// its call), its directory renamed as a checker's.
    pub fn new(mut interp: Interpreter) -> Self {
        let defined = interp.hidden_turn(&crate::guest::queries::checker());
        let apart = match interp.live.workdir.name_as_checker() {
            Ok(()) => defined.is_ok(),
            Err(e) => {
                tracing::warn!(error = %e, "a checker's directory could not be renamed: not kept");
                false
            }
        };
        Checker {
            opened_bytes: interp.memory_peak_bytes(),
            interp,
            uses: 0,
            apart,
        }
    }

    /// Runs the checker over `code` under `limits`, stopped early when `cancel` is set;
    /// its verdict as the guest sent it (to be parsed as hostile: `check::interpret`), or how
    /// the check ended and what stopped it.
    pub fn ask(
        &mut self,
        code: &str,
        limits: &TurnLimits,
        cancel: Arc<AtomicBool>,
    ) -> Result<Option<String>, (Status, String)> {
        self.uses += 1;
        self.interp.live.store.data_mut().clock.cancel = cancel;
        self.interp
            .hidden_answer(&crate::guest::queries::check_call(code), limits)
    }

    /// Whether it may check again: alive, not grown past its bound, not worn out.
    fn reusable(&self) -> bool {
        self.apart
            && self.interp.ended().is_none()
            && self.uses < MAX_USES
            && self.interp.memory_peak_bytes() <= self.opened_bytes + MAX_GROWTH_BYTES
    }
}

/// A process's idle checkers.
#[derive(Default)]
pub struct Checkers {
    idle: Mutex<Vec<Checker>>,
}

impl Checkers {
    /// An idle checker, if one is kept.
    pub fn take(&self) -> Option<Checker> {
        lock(&self.idle).pop()
    }

    /// Keeps `checker` for the next check when it is reusable and there is room; otherwise
    /// it goes (its directory with it), off this thread.
    pub fn give_back(&self, checker: Checker) {
        if checker.reusable() {
            let mut idle = lock(&self.idle);
            if idle.len() < MAX_IDLE {
                idle.push(checker);
                return;
            }
        }
        super::guest_threads::defer_drop(checker.interp);
    }

    /// How many are kept now.
    pub fn idle(&self) -> usize {
        lock(&self.idle).len()
    }
}
