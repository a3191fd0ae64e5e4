//! The one bracket every door wraps an audited action in: an audit record opened for the
//! request (its id, key, client and door from [`RequestContext`], the action named by the
//! door), the ids the door mints, the record lent to the work so it can add what it learns,
//! and one line written when the action ends, with its outcome.
//!
//! A bracket writes its line exactly once. Closed, with the outcome the door gives
//! ([`outcome_of`], [`run_outcome`], [`turn_outcome`]); dropped unclosed — the client hung up
//! and its request's future was dropped — as HTTP 499 `client_closed_request`, so no action a
//! caller began leaves no line behind.

use std::sync::Arc;

use super::AppState;
use super::error::OnWire;
use super::request_context::new_id;
use crate::supervisor::Executed;
use crate::supervisor::audit::{Action, AuditRecord, Outcome, RequestContext};
use crate::supervisor::intake::Closer;
use crate::supervisor::runner::Turned;
use crate::supervisor::{Runner, SupervisorError, SupervisorResult};

/// An audited action in flight; see the module docs.
pub struct Bracket {
    runner: Arc<Runner>,
    /// `None` once the line is written.
    record: Option<AuditRecord>,
}

impl Bracket {
    /// Opens the bracket of `action` for the request `ctx` describes.
    pub fn open(state: &AppState, ctx: &RequestContext, action: Action) -> Bracket {
        // The request's span (its trace) says whose it is, when the span is made at all.
        let span = tracing::Span::current();
        if !span.is_disabled() {
            span.record(
                "vivarium.tenant",
                state.runner.tenant(ctx.key_id.as_deref()).id(),
            );
        }
        Bracket {
            runner: state.runner.clone(),
            record: Some(AuditRecord::new(ctx, action)),
        }
    }

    /// Opens the bracket of a run (`Action::Execute`) and mints its execution id, `ex-…`.
    pub fn run(state: &AppState, ctx: &RequestContext) -> (Bracket, String) {
        let id = format!("ex-{}", new_id());
        let bracket = Bracket::open(state, ctx, Action::Execute).execution(&id);
        (bracket, id)
    }

    /// Opens the bracket of a turn of session `session` and mints the turn's id, `turn-…`.
    pub fn turn(state: &AppState, ctx: &RequestContext, session: &str) -> (Bracket, String) {
        let id = format!("turn-{}", new_id());
        let bracket = Bracket::open(state, ctx, Action::SessionTurn)
            .session(session)
            .execution(&id);
        (bracket, id)
    }

    /// The session the action is about.
    pub fn session(mut self, id: &str) -> Bracket {
        self.record = self.record.take().map(|r| r.session(id));
        self
    }

    /// The execution the action is.
    pub fn execution(mut self, id: &str) -> Bracket {
        self.record = self.record.take().map(|r| r.execution(id));
        self
    }

    /// The record, for the work to fill in (code digest, limits, usage, packages, leaks).
    pub fn record(&mut self) -> &mut AuditRecord {
        self.record
            .as_mut()
            .expect("written only when the bracket ends")
    }

    /// Runs `work` with the record and ends the action with its result's outcome (`ok` when
    /// it succeeded): the whole bracket of an action whose answer is one call's result.
    pub async fn around<T, E: OnWire>(
        mut self,
        ok: u16,
        work: impl AsyncFnOnce(&mut AuditRecord) -> Result<T, E>,
    ) -> Result<T, E> {
        let result = work(self.record()).await;
        self.close(outcome_of(&result, ok));
        result
    }

    /// Ends the action with `outcome` and writes its line.
    pub fn close(mut self, outcome: Outcome) {
        if let Some(record) = self.record.take() {
            self.runner.finish(record, outcome);
        }
    }
}

impl Drop for Bracket {
    fn drop(&mut self) {
        if let Some(record) = self.record.take() {
            self.runner.finish(record, Outcome::CLIENT_CLOSED);
        }
    }
}

/// A bracket handed to a program that outlives its request (code mode): the intake closes it
/// when the program ends, with the outcome the door gives its result.
impl Closer for Bracket {
    fn record(&mut self) -> &mut AuditRecord {
        Bracket::record(self)
    }

    fn close_run(self: Box<Self>, result: &SupervisorResult<Executed>) {
        self.close(run_outcome(result));
    }

    fn close_turn(self: Box<Self>, result: &SupervisorResult<Turned>) {
        self.close(turn_outcome(result));
    }

    fn close_failed(self: Box<Self>, error: &SupervisorError) {
        self.close(error.outcome());
    }
}

/// The outcome of a door's result: `ok` when it succeeded, else its error's.
pub fn outcome_of<T, E: OnWire>(result: &Result<T, E>, ok: u16) -> Outcome {
    match result {
        Ok(_) => Outcome::Ok(ok),
        Err(e) => e.outcome(),
    }
}

/// The outcome of a run: 200 when it ran (whatever the guest did), 422 `policy_denied` when
/// the policy refused it.
pub fn run_outcome<E: OnWire>(result: &Result<Executed, E>) -> Outcome {
    match result {
        Ok(Executed::Ran { .. }) => Outcome::Ok(200),
        Ok(Executed::Denied(_)) => Outcome::DENIED,
        Err(e) => e.outcome(),
    }
}

/// The outcome of a turn, as [`run_outcome`]'s.
pub fn turn_outcome<E: OnWire>(result: &Result<Turned, E>) -> Outcome {
    match result {
        Ok(Turned::Ran { .. }) => Outcome::Ok(200),
        Ok(Turned::Denied(_)) => Outcome::DENIED,
        Err(e) => e.outcome(),
    }
}
