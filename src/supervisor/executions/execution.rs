//! One code-mode execution in the supervisor: its program's rounds of tool calls, carried to
//! whoever drives it (a request waiting for the next stop, or an event stream) and answered
//! back, with its journal kept current.
//!
//! The run itself is a task the intake spawns (`intake/code_mode.rs`), or a streamed
//! execution's stream task (begun with `intake::begin_streamed`), calling `Runner::execute`
//! (a session turn's, `Runner::turn`) with [`Execution::asker`] as its tool asker; the task
//! ends with [`Execution::finish`].
//! Between the two, the execution is one of: running (no round waits), suspended (a round
//! waits for answers, some may have come), or replaying (brought back from its journal: each
//! round the program makes is answered from there until it reaches the round it waits on).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::mpsc;

use super::journal::{Journal, Round};
use crate::hostcalls::tools::ToolAsker;
use crate::leakage::Guard;
use crate::report::Leak;
use crate::supervisor::audit::ToolCallLine;
use crate::supervisor::error::{SupervisorError, SupervisorResult};
use crate::supervisor::session::Turned;
use crate::sync::lock;
use crate::tools::{Answer, Answered, ToolCall};
use crate::vivarium::Executed;

/// What the program did next, for whoever drives it.
pub enum Stop {
    /// It made a round of calls and waits for their answers (their arguments as they may
    /// leave: under `redact`, redacted).
    Calls(Vec<ToolCall>),
    /// It ended (or could not run).
    Done(Box<Finished>),
}

/// How the program ended: a run's result, or a session turn's.
pub enum Finished {
    /// A program in a fresh sandbox (`POST /v1/execute`).
    Run(SupervisorResult<Executed>),
    /// A session turn.
    Turn {
        /// The session.
        session: String,
        /// The turn's result.
        result: SupervisorResult<Turned>,
    },
}

impl Finished {
    /// The same end with `result` replaced by `e`.
    fn failed(self, e: SupervisorError) -> Finished {
        match self {
            Finished::Run(_) => Finished::Run(Err(e)),
            Finished::Turn { session, .. } => Finished::Turn {
                session,
                result: Err(e),
            },
        }
    }
}

/// Where a resume left the round.
pub enum Progress {
    /// Every call of the round is answered: the program runs on.
    Resumed,
    /// These calls still wait.
    Waiting(Vec<ToolCall>),
}

/// Why the program was stopped from the supervisor's side.
enum Stopped {
    /// A call's arguments held a secret under `deny`.
    Leak(Vec<Leak>),
    /// Brought back, it made other calls than it had.
    Diverged(String),
    /// The worker sent calls the toolbox does not allow (a compromised worker).
    OutOfShape(String),
}

struct LiveRound {
    calls: Vec<ToolCall>,
    answers: Vec<Option<Answer>>,
    reply: std::sync::mpsc::Sender<String>,
    /// `tool.round`, from the calls leaving to the last answer (or the run's end).
    _span: tracing::Span,
}

struct Inner {
    journal: Journal,
    /// Rounds of the journal given again so far (replaying while below its length).
    replayed: usize,
    round: Option<LiveRound>,
    stopped: Option<Stopped>,
    suspended_at: Option<Instant>,
    calls: Vec<ToolCallLine>,
    /// The run ended: its last stop waits for a driver.
    ended: bool,
}

/// See the module documentation.
pub struct Execution {
    /// `ex-…`.
    pub id: String,
    /// The key's id that started it.
    pub owner: Option<String>,
    /// Driven by an event stream (its calls leave as events, it is never kept in the store).
    pub streaming: bool,
    /// Its journal is kept in the store while it is suspended (a program of `POST
    /// /v1/execute` driven by resumes; not a session turn, whose state is its session's).
    pub kept: bool,
    guard: Arc<Guard>,
    inner: Mutex<Inner>,
    stops_tx: mpsc::UnboundedSender<Stop>,
    stops: tokio::sync::Mutex<mpsc::UnboundedReceiver<Stop>>,
    run: Mutex<Option<tokio::task::AbortHandle>>,
    /// The span it was started in (its request's): its rounds' parent.
    span: tracing::Span,
}

impl Execution {
    /// An execution of `journal`'s program (fresh: no rounds; brought back: rounds to replay).
    pub fn new(journal: Journal, guard: Arc<Guard>, streaming: bool, kept: bool) -> Arc<Execution> {
        let (stops_tx, stops) = mpsc::unbounded_channel();
        Arc::new(Execution {
            id: journal.id.clone(),
            owner: journal.owner.clone(),
            streaming,
            kept: kept && !streaming,
            guard,
            inner: Mutex::new(Inner {
                journal,
                replayed: 0,
                round: None,
                stopped: None,
                suspended_at: None,
                calls: Vec::new(),
                ended: false,
            }),
            stops_tx,
            stops: tokio::sync::Mutex::new(stops),
            run: Mutex::new(None),
            span: tracing::Span::current(),
        })
    }

    /// Who answers the program's rounds: this execution.
    pub fn asker(self: &Arc<Self>) -> ToolAsker {
        let this = self.clone();
        Arc::new(move |calls| {
            let (tx, rx) = std::sync::mpsc::channel();
            this.round(calls, tx);
            rx
        })
    }

    /// The task running the program, so a cancel or an eviction can stop it.
    pub fn set_run(&self, run: tokio::task::AbortHandle) {
        *lock(&self.run) = Some(run);
    }

    /// Stops the program (cancelled, evicted to its journal, expired); a request waiting on
    /// its next stop gets `why`.
    pub fn stop_run(&self, why: SupervisorError) {
        if let Some(run) = lock(&self.run).take() {
            run.abort();
            // A request that met it just before waits on its next stop.
            let _ = self
                .stops_tx
                .send(Stop::Done(Box::new(Finished::Run(Err(why)))));
        }
    }

    /// Whether its run has ended (a tool limit, a cancel, or its end): the next stop is the
    /// result.
    pub fn ended(&self) -> bool {
        lock(&self.inner).ended
    }

    /// The largest answer a caller may give (its `tool_limits.result_bytes`).
    pub fn result_bytes(&self) -> u64 {
        let inner = lock(&self.inner);
        inner
            .journal
            .program
            .tools
            .as_ref()
            .map_or(0, |t| t.limits.result_bytes)
    }

    /// The journal as it stands (to keep it in the store, or fork it).
    pub fn journal(&self) -> Journal {
        lock(&self.inner).journal.clone()
    }

    /// Since when a round has waited, if one does.
    pub fn suspended_since(&self) -> Option<Instant> {
        lock(&self.inner).suspended_at
    }

    /// The calls made so far, for the audit line.
    pub fn calls_audit(&self) -> Vec<ToolCallLine> {
        lock(&self.inner).calls.clone()
    }

    /// The next stop: the next round of calls, or the end. One driver at a time.
    pub async fn next_stop(&self) -> Stop {
        match self.stops.lock().await.recv().await {
            Some(stop) => stop,
            None => Stop::Done(Box::new(Finished::Run(Err(SupervisorError::Internal(
                "the execution's run went away".into(),
            ))))),
        }
    }

    /// The run ended with `result` (what the supervisor stopped it for, if it did, comes
    /// first).
    pub fn finish(&self, result: Finished) {
        let stopped = {
            let mut inner = lock(&self.inner);
            inner.ended = true;
            inner.round = None;
            inner.stopped.take()
        };
        let result = match stopped {
            None => result,
            Some(Stopped::Leak(leaks)) => result.failed(SupervisorError::OutputLeak(leaks)),
            Some(Stopped::Diverged(why)) => {
                result.failed(SupervisorError::ReplayDiverged(self.id.clone(), why))
            }
            Some(Stopped::OutOfShape(why)) => result.failed(SupervisorError::Internal(why)),
        };
        let _ = self.stops_tx.send(Stop::Done(Box::new(result)));
    }

    /// `call` as it may leave (under `deny` a call with a secret never reaches this).
    fn shown(&self, call: &ToolCall) -> ToolCall {
        shown(&self.guard, call).0
    }

    /// A round from the program (through its worker: read as hostile).
    fn round(&self, calls: Vec<ToolCall>, reply: std::sync::mpsc::Sender<String>) {
        let mut inner = lock(&self.inner);
        if inner.stopped.is_some() || inner.round.is_some() {
            return;
        }
        if let Err(why) = in_shape(&inner.journal, &calls) {
            inner.stopped = Some(Stopped::OutOfShape(why));
            return;
        }
        let done = inner.replayed;
        if done < inner.journal.rounds.len() {
            let Round {
                calls: had,
                answers,
            } = &inner.journal.rounds[done];
            if *had != calls {
                let why = diverged(done + 1, had, &calls);
                inner.stopped = Some(Stopped::Diverged(why));
                return;
            }
            let _ = reply.send(Value::Array(answers.clone()).to_string());
            inner.replayed += 1;
            return;
        }
        if !inner.journal.pending.is_empty() && inner.journal.pending != calls {
            let why = diverged(done + 1, &inner.journal.pending, &calls);
            inner.stopped = Some(Stopped::Diverged(why));
            return;
        }
        // Guest output leaving for the caller: scanned like stdout.
        let (shown, leaks): (Vec<ToolCall>, Vec<Vec<Leak>>) =
            calls.iter().map(|c| shown(&self.guard, c)).unzip();
        let leaks: Vec<Leak> = leaks.into_iter().flatten().collect();
        if !leaks.is_empty() && self.guard.policy() == crate::leakage::LeakPolicy::Deny {
            inner.stopped = Some(Stopped::Leak(leaks));
            return;
        }
        let mut answers: Vec<Option<Answer>> = vec![None; calls.len()];
        let partial = std::mem::take(&mut inner.journal.partial);
        for v in &partial {
            if let Ok(a) = Answer::from_value(v.clone(), u64::MAX)
                && let Some(i) = calls.iter().position(|c| c.call_id == a.call_id)
            {
                answers[i] = Some(a);
            }
        }
        inner.journal.partial = partial;
        inner.journal.pending = calls.clone();
        let span = tracing::info_span!(
            parent: &self.span,
            "tool.round",
            execution = %self.id,
            calls = calls.len(),
        );
        inner.round = Some(LiveRound {
            calls,
            answers,
            reply,
            _span: span,
        });
        inner.suspended_at = Some(Instant::now());
        let waiting: Vec<ToolCall> = shown
            .into_iter()
            .filter(|c| inner.journal.is_waiting(&c.call_id))
            .collect();
        drop(inner);
        let _ = self.stops_tx.send(Stop::Calls(waiting));
    }

    /// Answers to the waiting round (any of its calls, in any order); all or none are taken.
    pub fn answer(&self, answers: Vec<Answer>) -> SupervisorResult<Progress> {
        let mut inner = lock(&self.inner);
        let Some(round) = inner.round.as_mut() else {
            return Err(SupervisorError::ExecutionBusy(self.id.clone()));
        };
        let mut at = Vec::with_capacity(answers.len());
        for a in &answers {
            let Some(i) = round.calls.iter().position(|c| c.call_id == a.call_id) else {
                return Err(SupervisorError::InvalidRequest(format!(
                    "{} is not a call this execution waits on",
                    a.call_id
                )));
            };
            if round.answers[i].is_some() || at.contains(&i) {
                return Err(SupervisorError::InvalidRequest(format!(
                    "{} was already answered",
                    a.call_id
                )));
            }
            at.push(i);
        }
        for (i, a) in at.into_iter().zip(answers) {
            round.answers[i] = Some(a);
        }
        if round.answers.iter().any(Option::is_none) {
            let partial: Vec<Value> = round
                .answers
                .iter()
                .flatten()
                .map(Answer::to_value)
                .collect();
            inner.journal.partial = partial;
            let waiting = inner.journal.waiting().map(|c| self.shown(c)).collect();
            return Ok(Progress::Waiting(waiting));
        }
        let Some(round) = inner.round.take() else {
            return Err(SupervisorError::ExecutionBusy(self.id.clone()));
        };
        let answers: Vec<Answer> = round.answers.into_iter().flatten().collect();
        let values: Vec<Value> = answers.iter().map(Answer::to_value).collect();
        for (c, a) in round.calls.iter().zip(&answers) {
            inner.calls.push(ToolCallLine {
                name: c.name.clone(),
                argument_bytes: c.argument_bytes(),
                result_bytes: a.bytes(),
                outcome: match &a.answered {
                    Answered::Result(_) => "result".into(),
                    Answered::Error(e) => format!("error:{}", e.kind),
                },
            });
        }
        inner.journal.rounds.push(Round {
            calls: round.calls,
            answers: values.clone(),
        });
        inner.replayed = inner.journal.rounds.len();
        inner.journal.pending.clear();
        inner.journal.partial.clear();
        inner.suspended_at = None;
        drop(inner);
        // The program's thread waits on the other end (gone if the run already ended).
        let _ = round.reply.send(Value::Array(values).to_string());
        Ok(Progress::Resumed)
    }
}

/// `call` as it may leave under `guard` (its arguments redacted under `redact`; `null` where
/// a redaction left no JSON, a call that `deny` stops first), and what the scan found in them.
pub fn shown(guard: &Guard, call: &ToolCall) -> (ToolCall, Vec<Leak>) {
    let (arguments, leaks) = guard.apply_arguments(&call.call_id, &call.arguments.to_string());
    let call = ToolCall {
        arguments: arguments.unwrap_or(Value::Null),
        ..call.clone()
    };
    (call, leaks)
}

/// Whether a round from the worker is one the toolbox allows: known tools, arguments within
/// their bound, ids in sequence. A worker is as hostile as its guest once compromised.
fn in_shape(journal: &Journal, calls: &[ToolCall]) -> Result<(), String> {
    let Some(toolbox) = &journal.program.tools else {
        return Err("a round of tool calls from a program given no tools".into());
    };
    if calls.is_empty() {
        return Err("an empty round of tool calls".into());
    }
    for c in calls {
        if !toolbox.tools.iter().any(|t| t.name == c.name) {
            return Err(format!("a call of an unknown tool {:?}", c.name));
        }
        let size = c.argument_bytes();
        if size > toolbox.limits.argument_bytes || !c.arguments.is_object() {
            return Err("a call's arguments out of bounds".into());
        }
        let numbered = c.call_id.strip_prefix("call_").is_some_and(|n| {
            !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit())
        });
        if !numbered {
            return Err("a call id out of shape".into());
        }
    }
    Ok(())
}

fn diverged(n: usize, had: &[ToolCall], made: &[ToolCall]) -> String {
    let names = |calls: &[ToolCall]| {
        calls
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "replayed, the program's round {n} called [{}] where it had called [{}] (with the \
         same names, other arguments): it read something a replay cannot give it again, such \
         as the clock",
        names(made),
        names(had)
    )
}
