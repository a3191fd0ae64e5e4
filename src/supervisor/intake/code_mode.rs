//! Code mode's lifecycle, owned here rather than by the doors: a program (or a session turn)
//! with tools runs in a task of its own, which outlives the request that started it and
//! ends the request's audit line when the program ends; its stops (a round of tool calls,
//! its end) are read with [`next_stop`]; one brought back from its journal after a restart
//! replays in such a task to the round it waits on ([`resident_or_replayed`]). A door parses
//! and renders: it hands over its audit line as a [`Closer`] and never spawns or sequences.

use std::sync::Arc;

use super::execute::Prepared;
use super::resolve::files_within;
use crate::leakage::Guard;
use crate::supervisor::audit::AuditRecord;
use crate::supervisor::executions::{Execution, Finished, Stop};
use crate::supervisor::metrics::RunKind;
use crate::supervisor::runner::{CodeMode, SessionTurn, Turned};
use crate::supervisor::{Runner, SupervisorError, SupervisorResult};
use crate::tools::ToolCall;
use crate::vivarium::{Executed, RunSpec};

/// The audit line of a request whose program outlives it: the door's bracket, written once
/// when the program ends (with the door's outcome of the result).
pub trait Closer: Send + 'static {
    /// The record, for the run to fill in.
    fn record(&mut self) -> &mut AuditRecord;
    /// Ends the line with a run's result.
    fn close_run(self: Box<Self>, result: &SupervisorResult<Executed>);
    /// Ends the line with a turn's result.
    fn close_turn(self: Box<Self>, result: &SupervisorResult<Turned>);
    /// Ends the line with an error before anything ran.
    fn close_failed(self: Box<Self>, error: &SupervisorError);
}

/// The next stop of an execution, as its caller is answered.
pub enum Next {
    /// A round of tool calls waits (its journal kept).
    Suspended(Vec<ToolCall>),
    /// The program ended: the execution is forgotten.
    Finished(Finished),
}

/// Begins code mode for the prepared run (it has tools) as execution `id` of `key`, and
/// runs it in a task of its own under `closer`: an error before it runs (the tenant's
/// `suspended_executions`) closes `closer` with it. (A streamed execution's task is its
/// stream's, in the SSE door, which begins it with [`begin_streamed`].)
pub fn start_execution(
    runner: &Arc<Runner>,
    prepared: Prepared,
    id: &str,
    key: Option<&str>,
    closer: Box<dyn Closer>,
) -> SupervisorResult<Arc<Execution>> {
    let Prepared {
        mut spec,
        guard,
        packages,
    } = prepared;
    let how = CodeMode {
        id,
        key,
        packages: &packages,
        leakage: guard.policy(),
        allow_env: guard.allowed_env(),
        streaming: false,
    };
    let exec = match runner.begin_execution(&mut spec, guard.clone(), how) {
        Ok(exec) => exec,
        Err(e) => {
            closer.close_failed(&e);
            return Err(e);
        }
    };
    spawn_run(runner, &exec, spec, guard, closer);
    Ok(exec)
}

/// Begins code mode for a prepared run whose task is a stream's (the SSE door runs it and
/// forwards its stops as events): execution `id` of `key` is counted and `spec.tools`
/// answers through it.
pub fn begin_streamed(
    runner: &Runner,
    key: Option<&str>,
    id: &str,
    spec: &mut RunSpec,
    guard: &Arc<Guard>,
    packages: &[String],
) -> SupervisorResult<Arc<Execution>> {
    let how = CodeMode {
        id,
        key,
        packages,
        leakage: guard.policy(),
        allow_env: guard.allowed_env(),
        streaming: true,
    };
    runner.begin_execution(spec, guard.clone(), how)
}

/// Runs `exec`'s program in a task of its own under `closer`, whose line is written when
/// the program ends; the end is `exec`'s last stop.
fn spawn_run(
    runner: &Arc<Runner>,
    exec: &Arc<Execution>,
    spec: RunSpec,
    guard: Arc<Guard>,
    mut closer: Box<dyn Closer>,
) {
    let (runner, e) = (runner.clone(), exec.clone());
    let task = tokio::spawn(async move {
        let result = runner
            .execute(spec, guard, RunKind::Execute, closer.record())
            .await;
        closer.record().tool_calls = e.calls_audit();
        closer.close_run(&result);
        e.finish(Finished::Run(result));
    });
    exec.set_run(task.abort_handle());
}

/// Code mode in turn `turn_id` of session `session` (the turn has tools): the turn runs in a
/// task of its own under `closer`, which an error before it runs closes with it.
pub async fn start_turn(
    runner: &Arc<Runner>,
    session: &str,
    turn_id: &str,
    key: Option<&str>,
    mut turn: SessionTurn,
    closer: Box<dyn Closer>,
) -> SupervisorResult<Arc<Execution>> {
    let begun = async {
        let s = runner.session(session, key).await?;
        files_within(&turn.files, s.limits.disk_bytes)?;
        let policy = runner.leak_policy(turn.leakage.or(Some(s.leakage)))?;
        // The session's secrets are literals of the scan (a value already in a variable).
        let guard = runner.session_guard(&s, policy);
        let exec = runner.begin_turn_execution(turn_id, key, &s, &mut turn, guard)?;
        Ok::<_, SupervisorError>((s, exec))
    };
    let (s, exec) = match begun.await {
        Ok(v) => v,
        Err(e) => {
            closer.close_failed(&e);
            return Err(e);
        }
    };
    let (runner, e, id) = (runner.clone(), exec.clone(), session.to_string());
    let mut closer = closer;
    let task = tokio::spawn(async move {
        let result = runner.turn(&s, turn, closer.record()).await;
        closer.record().tool_calls = e.calls_audit();
        closer.close_turn(&result);
        e.finish(Finished::Turn {
            session: id,
            result,
        });
    });
    exec.set_run(task.abort_handle());
    Ok(exec)
}

/// Waits for `exec`'s next stop: a round of calls once its journal is kept, or its end
/// (then it is forgotten).
pub async fn next_stop(runner: &Runner, exec: &Arc<Execution>) -> SupervisorResult<Next> {
    match exec.next_stop().await {
        Stop::Calls(calls) => {
            runner.execution_suspended(exec).await?;
            Ok(Next::Suspended(calls))
        }
        Stop::Done(finished) => {
            runner.end_execution(&exec.id).await;
            Ok(Next::Finished(*finished))
        }
    }
}

/// What a resume finds of an execution.
pub enum Found {
    /// Its program, waiting (or ended while it waited) at its round.
    Waiting(Arc<Execution>),
    /// Brought back from its journal, its replay ran to the end instead: how it finished.
    Finished(Finished),
}

/// Execution `id` of `key` as a resume finds it: resident here, or brought back from its
/// journal, its program replayed (under the audit line `replay` makes, `execute`) to the
/// round it waits on.
pub async fn resident_or_replayed(
    runner: &Arc<Runner>,
    id: &str,
    key: Option<&str>,
    replay: impl FnOnce() -> Box<dyn Closer>,
) -> SupervisorResult<Found> {
    if let Some(exec) = runner.resident_execution(id, key) {
        return Ok(Found::Waiting(exec));
    }
    let (mut spec, guard, packages, exec) = runner.bring_back_execution(id, key).await?;
    let mut run = replay();
    spec.packages = match runner.packages(packages, run.record()).await {
        Ok(env) => env,
        Err(e) => {
            // Nothing ran: the suspension stays in the store for a later resume.
            run.close_failed(&e);
            runner.release_execution(id);
            return Err(e);
        }
    };
    spawn_run(runner, &exec, spec, guard, run);
    match exec.next_stop().await {
        Stop::Calls(_) => Ok(Found::Waiting(exec)),
        Stop::Done(finished) => {
            runner.end_execution(id).await;
            Ok(Found::Finished(*finished))
        }
    }
}
