//! Session runs: opening an interpreter, a turn in it, its files, closing it.
//!
//! The interpreter is taken out of its session for the length of a turn or file operation
//! (which run on a guest thread) and put back after, unless the turn ended it or the session
//! was closed meanwhile (`server::sessions`).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::snapshots::OwnState;
use super::{LiveText, Runner, TextSink, withhold_if_denied};
use crate::check::{Finding, Policy};
use crate::hostcalls::input::InputAsker;
use crate::leakage::LeakPolicy;
use crate::limits::{Limits, TurnLimits, TurnLimitsRequest};
use crate::packages::{PackageEnv, PackagePin};
use crate::report::Report;
use crate::sandbox::{Interpreter, WriteError};
use crate::server::admission::{MemoryNeed, RESERVE_BYTES};
use crate::server::audit::AuditRecord;
use crate::server::error::{ApiError, ApiResult};
use crate::server::metrics::Rejection;
use crate::server::metrics::{CloseReason, RunKind, SessionEvent};
use crate::server::sessions::{BusyGuard, EndInfo, Session, SessionInfo, SessionSettings};
use crate::template::Template;
use crate::vivarium::{InputFile, Vivarium};

/// One turn as a front door asks for it.
pub struct SessionTurn {
    /// Python source; a final expression's value is the turn's result.
    pub code: String,
    /// What the turn reads on stdin.
    pub stdin: Vec<u8>,
    /// Written into the working directory before the code runs.
    pub files: Vec<InputFile>,
    /// Per-turn limits; each left out is the session's.
    pub limits: TurnLimitsRequest,
    /// The pre-execution check, in a fresh sandbox of its own (the session is not touched).
    pub policy: Policy,
    /// The leakage policy of this turn; `None` is the session's.
    pub leakage: Option<LeakPolicy>,
    /// Sees the turn's output as it is written, under the same leakage policy (a kernel's
    /// `stream` messages). A final value's echo and an uncaught exception's traceback are
    /// not shown live: they are the result's `result` and `error`.
    pub live: Option<TextSink>,
    /// Answers the turn's `input()` calls (a kernel's `input_request`); without it `input()`
    /// reads `stdin`.
    pub input: Option<InputAsker>,
}

/// What a turn that ran did.
pub struct TurnDone {
    /// What it did.
    pub report: Report,
    /// `repr` of its final expression's value, if any.
    pub result: Option<String>,
    /// Set when this turn ended the session.
    pub ended: Option<EndInfo>,
    /// A limit or trap stopped the turn and the session went back to its state before it.
    pub rolled_back: bool,
    /// The session's turn count after this one.
    pub turn: u64,
    /// What the check found (`None` with policy `off`).
    pub findings: Option<Vec<Finding>>,
}

/// How a turn ended, when not with an error.
pub enum Turned {
    /// The turn ran.
    Ran(Box<TurnDone>),
    /// The policy is `deny` and the check found these: nothing ran.
    Denied(Vec<Finding>),
}

impl Runner {
    /// Opens a session from `template` under `limits` (already resolved): a place under the
    /// resident cap, its reserve in the memory budget for its whole life, then the interpreter.
    /// `leakage` is its turns' and file reads' policy unless a turn names its own.
    /// A durable session (`durable`) snapshots every completed turn to the store.
    pub async fn open_session(
        &self,
        limits: Limits,
        template: Template,
        leakage: Option<LeakPolicy>,
        durable: bool,
        packages: Arc<PackageEnv>,
        record: &mut AuditRecord,
    ) -> ApiResult<Arc<Session>> {
        let leakage = self.leak_policy(leakage)?;
        let settings = SessionSettings {
            limits,
            template,
            leakage,
            turns: 0,
            durable,
            resumed: None,
        };
        let (session, first) = self
            .admit_session_with(settings, record, None, move |host, cancel| {
                let interp = host
                    .open_interpreter(limits, template, cancel, packages)
                    .map_err(ApiError::from_sandbox)?;
                let first = if durable {
                    interp.checkpoint_image()
                } else {
                    None
                };
                Ok((interp, first))
            })
            .await?;
        if let Some(image) = first {
            self.keep_own_snapshot(&session, OwnState::Image(image));
        }
        Ok(session)
    }

    /// Admits a new session under `settings` (a place under the cap, its memory reserve
    /// for its whole life, a concurrency slot while it is made), makes its interpreter with
    /// `make` on a guest thread, and registers it.
    pub(super) async fn admit_session(
        &self,
        settings: SessionSettings,
        record: &mut AuditRecord,
        starts_with: Option<u64>,
        make: impl FnOnce(&Vivarium, Arc<AtomicBool>) -> ApiResult<Interpreter> + Send + 'static,
    ) -> ApiResult<Arc<Session>> {
        let (session, ()) = self
            .admit_session_with(settings, record, starts_with, move |host, cancel| {
                Ok((make(host, cancel)?, ()))
            })
            .await?;
        Ok(session)
    }

    /// [`Runner::admit_session`] where `make` also returns something of its own.
    /// `starts_with` is the memory its interpreter starts with (a restored image's), `None`
    /// for its template's.
    async fn admit_session_with<T: Send + 'static>(
        &self,
        settings: SessionSettings,
        record: &mut AuditRecord,
        starts_with: Option<u64>,
        make: impl FnOnce(&Vivarium, Arc<AtomicBool>) -> ApiResult<(Interpreter, T)> + Send + 'static,
    ) -> ApiResult<(Arc<Session>, T)> {
        let host = self.host()?;
        let need = MemoryNeed {
            reserve: RESERVE_BYTES,
            starts_with: starts_with.unwrap_or_else(|| host.starting_bytes(settings.template, 0)),
        };
        // Full (resident sessions, or the budget): the coldest idle sessions hibernate.
        self.make_room(need.reserve + need.starts_with, true).await;
        let slot = self
            .sessions
            .reserve_slot()
            .ok_or_else(|| self.admission.reject(Rejection::TooManySessions))?;
        let memory = self.admission.reserve_memory(need)?;
        let ticket = self.admission.admit(None).await?;
        let (interp, extra) = self
            .guests
            .run(move || {
                let _ticket = ticket;
                make(&host, Arc::default())
            })
            .await??;
        let session = Session::new(
            interp,
            settings,
            memory,
            slot,
            self.sessions.idle,
            self.sessions.lifetime,
        );
        self.sessions.insert(session.clone());
        self.note_pressure();
        self.metrics.session_opened();
        record.session_id = Some(session.id.clone());
        Ok((session, extra))
    }

    /// Runs one turn in `session`: the check first (policy), then the turn's own limits, the
    /// files, and the code in the kept interpreter.
    pub async fn turn(
        &self,
        session: &Arc<Session>,
        t: SessionTurn,
        record: &mut AuditRecord,
    ) -> ApiResult<Turned> {
        let policy = self.leak_policy(t.leakage.or(Some(session.leakage)))?;
        let guard = self.leak_guard(policy, &[], &[]);
        let findings = match t.policy {
            Policy::Off => None,
            policy => {
                let c = self.check(t.code.clone()).await?;
                if policy == Policy::Deny && !c.findings.is_empty() {
                    return Ok(Turned::Denied(c.findings));
                }
                Some(c.findings)
            }
        };
        let limits = t.limits.resolve(
            &session.limits,
            &self.maximum,
            session.lifetime_left().as_millis() as u64,
        )?;
        let mut shown = session.limits;
        shown.timeout_ms = limits.timeout_ms;
        shown.fuel = limits.fuel;
        shown.output_bytes = limits.output_bytes;
        record.limits = Some(shown);
        let (session, busy) = self.begin(session).await?;
        let session = &session;
        let ticket = self.admission.admit(None).await?;
        let mut interp = session.take_interpreter(&busy)?;
        // The session's own flag: shutdown and close set it; a client hanging up does not.
        let _registered = self.guests.register_uncancelled(session.cancel_flag());
        let SessionTurn {
            code,
            stdin,
            files,
            live,
            input,
            ..
        } = t;
        let live = live.map(|sink| LiveText::new(&guard, sink));
        let host = self.host()?;
        let template = session.template;
        let durable = session.durable;
        let ran = self
            .guests
            .run(move || {
                let _ticket = ticket;
                let _busy = busy;
                if let Err(e) = write_files(&mut interp, &files) {
                    return (Some(interp), Err(e));
                }
                interp.stream_output(live.as_ref().map(LiveText::observer));
                interp.answer_input_with(input);
                let turned = host.session_turn(&mut interp, template, &code, stdin, &limits);
                interp.stream_output(None);
                interp.answer_input_with(None);
                // What the leakage filter still held (a last line without its newline); under
                // `deny`, nothing once a finding stopped the stream.
                if let Some(live) = &live {
                    for (kind, text) in live.finish() {
                        (live.sink())(kind, text);
                    }
                }
                match turned {
                    Ok(mut outcome) => {
                        // Scanned here, on the guest thread, before anything leaves.
                        let leaks = guard.apply(&mut outcome.report, outcome.result.as_mut());
                        // A durable session's state after this turn, stored once the
                        // response is on its way.
                        let own = (durable && outcome.ended.is_none())
                            .then(|| interp.checkpoint_view())
                            .flatten();
                        let outcome = (outcome, leaks, own);
                        if outcome.0.ended.is_some() {
                            // Dead: let it go here, off the executor (this removes its dir).
                            drop(interp);
                            (None, Ok(outcome))
                        } else {
                            (Some(interp), Ok(outcome))
                        }
                    }
                    Err(reason) => (
                        None,
                        Err(ApiError::SessionEnded {
                            id: String::new(),
                            reason: EndInfo::from_reason(&reason).message,
                        }),
                    ),
                }
            })
            .await;
        // Whatever became of the turn (ran, files refused, panicked): an interrupt meant for
        // it must not stop the next one.
        session.clear_interrupt();
        let (interp, outcome) = match ran {
            Ok(v) => v,
            Err(e) => {
                // The guest thread panicked: the interpreter is gone with it.
                session
                    .put_back(None, Some(EndInfo::host_error(e.to_string())), true)
                    .release();
                self.metrics.session_closed(CloseReason::Ended);
                return Err(e);
            }
        };
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                session.put_back(interp, None, false).release();
                return Err(match e {
                    ApiError::SessionEnded { reason, .. } => ApiError::SessionEnded {
                        id: session.id.clone(),
                        reason,
                    },
                    other => other,
                });
            }
        };
        let (outcome, leaks, own) = outcome;
        let ended = outcome.ended.as_ref().map(EndInfo::from_reason);
        if ended.is_some() {
            self.metrics.session_closed(CloseReason::Ended);
        }
        session.put_back(interp, ended.clone(), true).release();
        if let Some(view) = own {
            self.keep_own_snapshot(session, OwnState::View(view));
        }
        if ended.is_some() {
            self.forget_own_snapshot(&session.id);
        }
        self.metrics.executed(RunKind::SessionTurn, &outcome.report);
        if outcome.rolled_back {
            self.metrics.session_event(SessionEvent::Rollback);
        }
        record.set_report(&outcome.report);
        let (report, result, rolled_back) = (outcome.report, outcome.result, outcome.rolled_back);
        // The turn ran and the session keeps its state; under `deny` only what it returned
        // is held.
        withhold_if_denied(policy, leaks, record)?;
        Ok(Turned::Ran(Box::new(TurnDone {
            report,
            result,
            ended,
            rolled_back,
            turn: session.info().turns,
            findings,
        })))
    }

    /// Adds the packages `raw` names to session `id` (its own keep their versions: they are
    /// pinned in the resolution); returns every wheel it then has. Its state moves to a
    /// fresh instance that sees the new environment ([`Vivarium::add_packages`]); when that
    /// fails the session goes on as it was.
    pub async fn add_packages(
        &self,
        id: &str,
        raw: Vec<String>,
        record: &mut AuditRecord,
    ) -> ApiResult<Vec<PackagePin>> {
        let host = self.host()?;
        host.check_packages(&raw).map_err(ApiError::Package)?;
        let session = self.session(id).await?;
        let template = session.template;
        let current = self
            .with_interpreter(id, |interp| Ok(interp.package_pins()))
            .await?;
        let mut all: Vec<String> = current
            .iter()
            .map(|p| format!("{}=={}", p.name, p.version))
            .collect();
        all.extend(raw);
        let env = self.packages(all, record).await?;
        if env.pins == current {
            return Ok(current);
        }
        self.with_interpreter(id, move |interp| {
            host.add_packages(interp, template, env.clone())
                .map_err(|e| ApiError::Internal(format!("adding packages: {e}")))?;
            Ok(env.pins.clone())
        })
        .await
    }

    /// Runs a query of [`crate::guest::queries`] in session `id` between its turns (409
    /// while one runs) and returns the guest's answer, unparsed. It is not a turn: not
    /// numbered, counted or audited. Its limits are the session's per-turn ones, at most
    /// five seconds and the set-up turn's fuel; one they stop rolls the session back.
    pub async fn query_session(&self, id: &str, code: String) -> ApiResult<Option<String>> {
        let host = self.host()?;
        let session = self.session(id).await?;
        let template = session.template;
        let limits = TurnLimits {
            timeout_ms: session.limits.timeout_ms.min(5_000),
            fuel: session.limits.fuel.min(crate::guest::SETUP_LIMITS.fuel),
            output_bytes: 64 << 10,
        };
        self.with_interpreter(id, move |interp| {
            host.session_query(interp, template, &code, &limits)
                .map_err(|e| ApiError::InvalidRequest(format!("the session could not answer: {e}")))
        })
        .await
    }

    /// Interrupts session `id`'s running turn (it is rolled back, the session goes on);
    /// whether one was running.
    pub fn interrupt_session(&self, id: &str) -> ApiResult<bool> {
        Ok(self.sessions.get(id)?.interrupt())
    }

    /// Every session, resident or hibernated.
    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.sessions.infos()
    }

    /// Gives session `id` a fresh interpreter of its template, limits and packages (a
    /// notebook's restart): variables, imports and files are gone; the id stays.
    pub async fn restart_session(&self, id: &str) -> ApiResult<()> {
        let host = self.host()?;
        let template = self.session(id).await?.template;
        self.with_interpreter(id, move |interp| {
            let fresh = host
                .open_interpreter(
                    *interp.limits(),
                    template,
                    interp.cancel_flag(),
                    interp.packages(),
                )
                .map_err(ApiError::from_sandbox)?;
            let old = std::mem::replace(interp, fresh);
            crate::sandbox::guest_threads::defer_drop(old);
            Ok(())
        })
        .await
    }

    /// `(path, size)` of every file in session `id`'s working directory.
    pub async fn list_files(&self, id: &str) -> ApiResult<Vec<(String, u64)>> {
        self.with_interpreter(id, |interp| Ok(interp.workdir().list_files()))
            .await
    }

    /// One file of session `id`'s working directory, up to its disk limit, through the
    /// session's leakage policy (a text file is redacted; under `deny` a leak is a 422).
    pub async fn read_file(
        &self,
        id: &str,
        path: String,
        record: &mut AuditRecord,
    ) -> ApiResult<Vec<u8>> {
        let guard = self.leak_guard(self.session(id).await?.leakage, &[], &[]);
        let policy = guard.policy();
        let (bytes, leaks) = self
            .with_interpreter(id, move |interp| {
                let max = interp.limits().disk_bytes;
                match interp.workdir().read_file(&path, max) {
                    Ok(Some(mut bytes)) => {
                        let leaks = guard.apply_file(&path, &mut bytes);
                        Ok((bytes, leaks))
                    }
                    Ok(None) => Err(ApiError::FileNotFound(path)),
                    Err(e) => Err(ApiError::from_workdir("path", e)),
                }
            })
            .await?;
        withhold_if_denied(policy, leaks, record)?;
        Ok(bytes)
    }

    /// Writes one file into session `id`'s working directory, within its disk limit; returns
    /// the bytes written.
    pub async fn write_file(&self, id: &str, path: String, bytes: bytes::Bytes) -> ApiResult<u64> {
        self.with_interpreter(id, move |interp| {
            match interp.write_files(&[(&path, &bytes)]) {
                Ok(()) => {
                    // An upload is part of the state a later rollback returns to.
                    interp.refresh_checkpoint();
                    Ok(bytes.len() as u64)
                }
                Err(WriteError::OverQuota { limit }) => Err(ApiError::InvalidRequest(format!(
                    "the file would take the session past its disk limit of {limit} bytes"
                ))),
                Err(WriteError::Workdir { source, .. }) => {
                    Err(ApiError::from_workdir("path", source))
                }
                Err(e @ WriteError::HostBudget) => Err(ApiError::Overloaded {
                    message: e.to_string(),
                    retry_after_secs: 1,
                }),
            }
        })
        .await
    }

    /// Runs `f` on session `id`'s interpreter, on a guest thread, holding the session busy.
    /// Marks `session` busy for a turn or file operation. When it hibernated since the
    /// caller looked it up, it is brought back first, and that is the session to use.
    pub(super) async fn begin(
        &self,
        session: &Arc<Session>,
    ) -> ApiResult<(Arc<Session>, BusyGuard)> {
        match session.begin() {
            Err(ApiError::SessionNotFound(_)) if self.sessions.is_hibernated(&session.id) => {
                let woken = self.session(&session.id).await?;
                let busy = woken.begin()?;
                Ok((woken, busy))
            }
            other => other.map(|busy| (session.clone(), busy)),
        }
    }

    /// The info of session `id`; a hibernated one's without waking it.
    pub async fn session_info(&self, id: &str) -> ApiResult<SessionInfo> {
        if let Ok(s) = self.sessions.get(id) {
            return Ok(s.info());
        }
        if let Some(info) = self.sessions.hibernated_info(id) {
            return Ok(info);
        }
        Ok(self.session(id).await?.info())
    }

    pub(super) async fn with_interpreter<R: Send + 'static>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Interpreter) -> ApiResult<R> + Send + 'static,
    ) -> ApiResult<R> {
        let session = self.session(id).await?;
        let (session, busy) = self.begin(&session).await?;
        let mut interp = session.take_interpreter(&busy)?;
        let (interp, done) = self
            .guests
            .run(move || {
                let done = f(&mut interp);
                (interp, done)
            })
            .await
            .inspect_err(|e| {
                // A guest thread panicked while it held the interpreter: the session lost it.
                session
                    .put_back(None, Some(EndInfo::host_error(e.to_string())), false)
                    .release();
            })?;
        session.put_back(Some(interp), None, false).release();
        drop(busy);
        done
    }

    /// Closes session `id` (DELETE, MCP's `close_session`): cancels a running turn and
    /// removes its files.
    /// A session this process does not hold but the store keeps (see [`Runner::session`])
    /// is deleted from the store.
    pub async fn close_session(&self, id: &str) -> ApiResult<()> {
        if self.sessions.unhibernate(id) {
            self.metrics.session_closed(CloseReason::Deleted);
            self.forget_own_snapshot(id);
            return Ok(());
        }
        match self.sessions.remove(id) {
            Ok(s) => {
                s.close().release();
                self.metrics.session_closed(CloseReason::Deleted);
            }
            Err(ApiError::SessionNotFound(_)) if self.has_own_snapshot(id).await => {}
            Err(e) => return Err(e),
        }
        self.forget_own_snapshot(id);
        Ok(())
    }
}

/// Writes a turn's input files, refusing them all when they would pass the disk limit.
fn write_files(interp: &mut Interpreter, files: &[InputFile]) -> ApiResult<()> {
    let files: Vec<(&str, &[u8])> = files
        .iter()
        .map(|f| (f.path.as_str(), f.content.as_slice()))
        .collect();
    interp.write_files(&files).map_err(|e| match e {
        WriteError::OverQuota { limit } => ApiError::InvalidRequest(format!(
            "the files would take the session past its disk limit of {limit} bytes"
        )),
        WriteError::Workdir { index, source } => {
            ApiError::from_workdir(&format!("files[{index}].path"), source)
        }
        e @ WriteError::HostBudget => ApiError::Overloaded {
            message: e.to_string(),
            retry_after_secs: 1,
        },
    })
}
