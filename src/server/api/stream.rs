//! Streaming: `POST /v1/execute` with `Accept: text/event-stream` answers with server-sent
//! events while the code runs: `stdout` and `stderr` events (`{"text": "..."}`) with each
//! chunk as the guest writes it, then one `result` event with the whole result (the same JSON
//! as the plain response). A request that fails before it runs (bad JSON, a limit above the
//! maximum) gets the usual JSON error instead of a stream; one refused later (admission, the
//! `deny` policy, a checker failure) ends the stream with an `error` event carrying the usual
//! error body.
//!
//! The guest thread never waits for the client: the output observer hands chunks to a
//! bounded channel with `try_send` and drops what does not fit (a `dropped` event then says
//! how many bytes; the final result still has the whole captured output). A client that hangs
//! up drops the stream, which aborts the task and so cancels the run.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::types::{ExecuteResponse, PolicyDeniedBody, denied_body, open_execution};
use crate::report::StreamKind;
use crate::server::AppState;
use crate::server::bracket::run_outcome;
use crate::server::error::{ApiError, OnWire};
use crate::server::request_context::Caller;
use crate::server::routing::naming_execution;
use crate::supervisor::Executed;
use crate::supervisor::executions::{Finished, Stop};
use crate::supervisor::intake::{self, Prepared};
use crate::supervisor::metrics::RunKind;
use crate::supervisor::runner::LiveText;
use crate::supervisor::{SupervisorError, SupervisorResult};

/// Chunks buffered between the guest and a slow client before chunks are dropped.
const CHANNEL_CHUNKS: usize = 512;

/// Whether the client asked for server-sent events.
pub fn wants_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"))
}

enum Msg {
    Chunk(StreamKind, String),
    /// Says how many bytes were dropped; comes just before `Final`.
    Dropped(Event),
    /// `result` or `error`: the last event.
    Final(Event),
    /// Any other event (code mode's `tool_call`).
    Event(Event),
}

/// The last event of a run's stream: `result`, or `error` with the usual error body.
fn final_event(state: &AppState, id: &str, result: SupervisorResult<Executed>) -> Event {
    let event = match result {
        Ok(Executed::Ran { report, findings }) => Event::default()
            .event("result")
            .json_data(ExecuteResponse::new(id, *report, findings)),
        Ok(Executed::Denied(findings)) => Event::default()
            .event("error")
            .json_data::<PolicyDeniedBody>(denied_body(findings)),
        Err(e) => {
            // As every JSON error of the HTTP API is (error_scrub.rs): no secret in it.
            let mut body = ApiError::from(e).body();
            if let Some(m) = state.runner.scrub_error_message(&body.error.message) {
                body.error.message = m;
            }
            Event::default().event("error").json_data(body)
        }
    };
    event.unwrap_or_else(|e| {
        Event::default()
            .event("error")
            .data(format!("could not encode the result: {e}"))
    })
}

/// Aborts the run's task when the response stream is dropped (the client went away).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Forgets a streamed code-mode execution when its stream goes (ended, or the client left):
/// a streamed execution is never kept past its stream.
struct ForgetOnDrop(AppState, String);

impl Drop for ForgetOnDrop {
    fn drop(&mut self) {
        let (state, id) = (self.0.clone(), std::mem::take(&mut self.1));
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { state.runner.end_execution(&id).await });
        }
    }
}

/// The streaming variant of `POST /v1/execute`.
pub async fn execute_stream(caller: Caller, body: Result<Bytes, BytesRejection>) -> Response {
    let (mut bracket, id, ask) = match open_execution(&caller, body) {
        Ok(opened) => opened,
        Err(e) => return e.into_response(),
    };
    let Caller { state, ctx } = caller;
    // Prepared (packages resolved) before the stream opens: a refusal is a JSON error, not
    // an event.
    let Prepared {
        mut spec,
        guard,
        packages,
    } = match intake::prepare(&state.runner, ask, bracket.record()).await {
        Ok(prepared) => prepared,
        Err(e) => {
            bracket.close(e.outcome());
            return ApiError::from(e).into_response();
        }
    };
    // Code mode: each call leaves as a `tool_call` event, answered at
    // `/v1/executions/{id}/tool-results`; the execution's end is the `result` event.
    let exec = match spec.program.tools.is_some() {
        false => None,
        true => {
            let key = ctx.key_id.as_deref();
            match intake::begin_streamed(&state.runner, key, &id, &mut spec, &guard, &packages) {
                Ok(exec) => Some(exec),
                Err(e) => {
                    bracket.close(e.outcome());
                    return ApiError::from(e).into_response();
                }
            }
        }
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Msg>(CHANNEL_CHUNKS);
    let dropped = Arc::new(AtomicU64::new(0));
    // Under `redact` and `deny`, chunks leave through the leakage filter a line at a time.
    let live = {
        let tx = tx.clone();
        let dropped = dropped.clone();
        LiveText::new(
            &guard,
            Arc::new(move |kind: StreamKind, text: String| {
                let bytes = text.len() as u64;
                // Never block the guest: a full channel drops the chunk.
                if tx.try_send(Msg::Chunk(kind, text)).is_err() {
                    dropped.fetch_add(bytes, Ordering::Relaxed);
                }
            }),
        )
    };
    // Streamed chunks leave as printed: the guest's streams flush at each newline.
    spec.observer = Some(live.observer());
    spec.program.line_buffered = true;
    let forwarder = exec.clone().map(|exec| {
        let (tx, state, id) = (tx.clone(), state.clone(), id.clone());
        tokio::spawn(async move {
            loop {
                match exec.next_stop().await {
                    Stop::Calls(calls) => {
                        for c in calls {
                            let ev = Event::default().event("tool_call").json_data(json!({
                                "execution_id": id,
                                "call_id": c.call_id,
                                "name": c.name,
                                "arguments": c.arguments,
                            }));
                            if let Ok(ev) = ev {
                                let _ = tx.send(Msg::Event(ev)).await;
                            }
                        }
                    }
                    // The execution is forgotten when the stream goes (`ForgetOnDrop`).
                    Stop::Done(finished) => {
                        let result = match *finished {
                            Finished::Run(result) => result,
                            Finished::Turn { .. } => Err(SupervisorError::Internal(
                                "a turn's end on an execution's stream".into(),
                            )),
                        };
                        let _ = tx.send(Msg::Final(final_event(&state, &id, result))).await;
                        return;
                    }
                }
            }
        })
    });
    let (named, id_for_header) = (exec.is_some(), id.clone());
    let run_exec = exec.clone();
    let forget = exec
        .as_ref()
        .map(|_| ForgetOnDrop(state.clone(), id.clone()));
    let task = tokio::spawn(async move {
        let exec = run_exec;
        // When the client hangs up first, the task is aborted and the bracket, dropped,
        // writes the line as 499 (the run itself is cancelled by its guard).
        let result = state
            .runner
            .execute(spec, guard, RunKind::Execute, bracket.record())
            .await;
        if let Some(exec) = &exec {
            bracket.record().tool_calls = exec.calls_audit();
        }
        bracket.close(run_outcome(&result));
        if result.is_ok() {
            // What the filter held back (a last line without its newline) leaves now.
            for (kind, text) in live.finish() {
                let _ = tx.send(Msg::Chunk(kind, text)).await;
            }
        }
        let lost = dropped.load(Ordering::Relaxed);
        if lost > 0 {
            let ev = Event::default()
                .event("dropped")
                .json_data(json!({ "bytes": lost }));
            if let Ok(ev) = ev {
                let _ = tx.send(Msg::Dropped(ev)).await;
            }
        }
        match &exec {
            // Its forwarder sends the end, after every `tool_call` event.
            Some(exec) => exec.finish(Finished::Run(result)),
            None => {
                let _ = tx.send(Msg::Final(final_event(&state, &id, result))).await;
            }
        }
    });
    if let Some(exec) = &exec {
        exec.set_run(task.abort_handle());
    }
    let guard = (AbortOnDrop(task), forwarder.map(AbortOnDrop), forget);
    let stream = futures_util::stream::unfold((Some(rx), guard), |(rx, guard)| async move {
        let mut rx = rx?;
        match rx.recv().await {
            Some(Msg::Chunk(kind, text)) => {
                let name = match kind {
                    StreamKind::Stdout => "stdout",
                    StreamKind::Stderr => "stderr",
                };
                let ev = Event::default()
                    .event(name)
                    .json_data(json!({ "text": text }))
                    .unwrap_or_else(|_| Event::default().event(name));
                Some((Ok::<_, Infallible>(ev), (Some(rx), guard)))
            }
            Some(Msg::Dropped(ev) | Msg::Event(ev)) => Some((Ok(ev), (Some(rx), guard))),
            Some(Msg::Final(ev)) => Some((Ok(ev), (None, guard))),
            None => None,
        }
    });
    let response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    match named {
        // Its `tool-results` must reach this node, where its program waits.
        true => naming_execution(response, &id_for_header),
        false => response,
    }
}
