//! `GET /api/kernels/{id}/channels`: the kernel WebSocket. Frames are hostile: each is
//! parsed into a bounded [`Incoming`] or the socket is closed with a logged reason; shell
//! requests queue and run one at a time, in order, as session turns; control requests
//! (interrupt, shutdown) are answered at once, even while a cell runs.
//!
//! What one socket may make the host hold is bounded by construction, both ways: shell
//! requests waiting (and the one running) at most [`SHELL_QUEUE`] of them and
//! [`SHELL_QUEUE_BYTES`] of what they hold (past either, a request is answered, not queued:
//! `aborted` past the count, an error naming the bound past the bytes); messages toward the
//! client at most [`OUT_QUEUE_BYTES`] (past that, the kernel waits for the client to read,
//! and a client that reads nothing for [`SLOW_CLIENT`] loses the connection). A tenant's
//! open sockets are its `kernel_sockets` quota.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::Path;
use axum::extract::ws::{CloseFrame, Message as Frame, WebSocket, WebSocketUpgrade};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use super::messages::{
    AtCursor, Channel, FrameError, Header, Incoming, MAX_FRAME_BYTES, Message, Request,
    kernel_info, status,
};
use super::queries;
use crate::leakage::Guard;
use crate::report::StreamKind;
use crate::server::AppState;
use crate::server::api::types::{Cell, Failure};
use crate::server::bracket::{Bracket, outcome_of, turn_outcome};
use crate::server::error::{ApiError, OnWire};
use crate::server::request_context::{Caller, RequestContext};
use crate::supervisor::audit::Action;
use crate::supervisor::intake;
use crate::supervisor::intake::Query;
use crate::supervisor::runner::{SessionTurn, TextSink, TurnDone, Turned};
use crate::supervisor::tenants::{Held, Quota};
use crate::supervisor::{SupervisorError, SupervisorResult};
use crate::sync::lock;
use crate::vocabulary::InputAsker;

/// Shell requests waiting for the one running.
const SHELL_QUEUE: usize = 64;

/// What the shell requests of one socket (waiting, and the one running) may hold, in bytes
/// ([`Incoming::held_bytes`]: about their code): two frames of the largest size.
pub const SHELL_QUEUE_BYTES: usize = 2 * MAX_FRAME_BYTES;

/// Bytes of messages on their way to one client (a cell's rich outputs, at most 16 MiB
/// before base64, fit).
pub const OUT_QUEUE_BYTES: usize = 32 << 20;

/// How long the kernel waits for a client to make room in [`OUT_QUEUE_BYTES`] before it
/// drops the connection.
const SLOW_CLIENT: Duration = Duration::from_secs(10);

/// The upgrade: the kernel must exist, and its caller's tenant have a socket to spare.
pub async fn channels(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
    ws: WebSocketUpgrade,
) -> Response {
    let id = match super::session_id(&id) {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = state.runner.session_info(&id, ctx.key_id.as_deref()).await {
        return ApiError::from(e).into_response();
    }
    // Held for the socket's life (dropped with the upgrade should it fail).
    let socket = match state
        .runner
        .tenant(ctx.key_id.as_deref())
        .take(Quota::KernelSockets, 1)
    {
        Ok(held) => held,
        Err(e) => return ApiError::from(SupervisorError::from(e)).into_response(),
    };
    ws.max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .on_upgrade(move |ws| async move {
            serve(state, ctx, id, ws).await;
            drop(socket);
        })
}

/// Messages toward the client, bounded in bytes: each waits for room, and holds its bytes
/// until the writer has handed it to the socket.
#[derive(Clone)]
struct Outbox {
    tx: mpsc::UnboundedSender<(String, OwnedSemaphorePermit)>,
    room: Arc<Semaphore>,
    /// Set when the client stopped reading: the connection ends.
    gone: Arc<watch::Sender<bool>>,
}

impl Outbox {
    /// Queues `m`; `false` when the connection is over (or the client too slow: then it
    /// ends).
    async fn send(&self, m: Message) -> bool {
        let text = m.to_text();
        // A message larger than the whole bound waits for all of it.
        let n = text.len().clamp(1, OUT_QUEUE_BYTES) as u32;
        match tokio::time::timeout(SLOW_CLIENT, self.room.clone().acquire_many_owned(n)).await {
            Ok(Ok(permit)) => self.tx.send((text, permit)).is_ok(),
            Ok(Err(_)) => false,
            Err(_) => {
                tracing::warn!(
                    bytes = OUT_QUEUE_BYTES,
                    "a kernel client read nothing for {SLOW_CLIENT:?} with its queue full; dropping the connection"
                );
                self.room.close();
                let _ = self.gone.send(true);
                false
            }
        }
    }
}

/// Returns once the client is gone (see [`Outbox`]); never if the connection ends otherwise.
async fn until_gone(mut gone: watch::Receiver<bool>) {
    while !*gone.borrow_and_update() {
        if gone.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The kernel's side of one connection.
struct Kernel {
    state: AppState,
    ctx: RequestContext,
    id: String,
    /// The kernel session's id in message headers (one per connection).
    session: String,
    out: Outbox,
    /// The `input_request` a running cell waits on: its id, and where its answer goes.
    waiting_input: std::sync::Mutex<Option<(String, std::sync::mpsc::Sender<String>)>>,
}

async fn serve(state: AppState, ctx: RequestContext, id: String, socket: WebSocket) {
    let (mut sink, mut frames) = socket.split();
    let (tx, mut outgoing) = mpsc::unbounded_channel::<(String, OwnedSemaphorePermit)>();
    let (gone, gone_rx) = watch::channel(false);
    let out = Outbox {
        tx,
        room: Arc::new(Semaphore::new(OUT_QUEUE_BYTES)),
        gone: Arc::new(gone),
    };
    let (close_tx, mut close_rx) = mpsc::channel::<(u16, String)>(1);
    // The writer: every message the kernel sends, in order, then the close; nothing more
    // once the client is gone.
    let writer_gone = gone_rx.clone();
    let writer = tokio::spawn(async move {
        let mut gone = std::pin::pin!(until_gone(writer_gone));
        loop {
            let frame = tokio::select! {
                // A close first: it sends what was queued before it, then the close frame
                // (unbiased, a closed queue could win and the close frame never leave).
                biased;
                _ = &mut gone => return,
                Some((code, reason)) = close_rx.recv() => {
                    let flush = async {
                        while let Ok((text, _room)) = outgoing.try_recv() {
                            let _ = sink.send(Frame::Text(text.into())).await;
                        }
                        let _ = sink
                            .send(Frame::Close(Some(CloseFrame { code, reason: reason.into() })))
                            .await;
                    };
                    tokio::select! {
                        _ = flush => {}
                        _ = &mut gone => {}
                    }
                    return;
                }
                m = outgoing.recv() => match m {
                    Some(m) => m,
                    None => return,
                },
            };
            let (text, room) = frame;
            tokio::select! {
                sent = sink.send(Frame::Text(text.into())) => if sent.is_err() {
                    return;
                },
                _ = &mut gone => return,
            }
            // Its bytes are the socket's now.
            drop(room);
        }
    });
    let kernel = Arc::new(Kernel {
        state,
        ctx,
        id,
        session: format!("{:032x}", rand::random::<u128>()),
        out,
        waiting_input: Default::default(),
    });
    // The kernel's state as the connection opens, with no parent (as a kernel's `starting`
    // is): JupyterLab does not count the status messages of its own kernel_info requests,
    // so without this one its status stays `unknown` until a cell runs.
    kernel.announce().await;
    let held = Arc::new(AtomicUsize::new(0));
    let tenant = kernel.state.runner.tenant(kernel.key());
    // Each request with its bytes, and their place in its tenant's `kernel_queue_bytes`
    // (every socket of the tenant together), held until it ran.
    let (shell_tx, mut shell_rx) = mpsc::channel::<(Incoming, usize, Held)>(SHELL_QUEUE);
    let executor = {
        let kernel = kernel.clone();
        let held = held.clone();
        tokio::spawn(async move {
            while let Some((m, bytes, place)) = shell_rx.recv().await {
                kernel.shell(m).await;
                held.fetch_sub(bytes, Ordering::AcqRel);
                drop(place);
            }
        })
    };
    let close = |code: u16, mut reason: String| {
        tracing::warn!(kernel = %kernel.id, code, %reason, "closing a kernel WebSocket");
        // A close frame's reason is at most 123 bytes.
        let mut cut = reason.len().min(123);
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        reason.truncate(cut);
        let _ = close_tx.try_send((code, reason));
    };
    loop {
        let frame = tokio::select! {
            f = frames.next() => f,
            _ = until_gone(gone_rx.clone()) => break,
        };
        let Some(frame) = frame else { break };
        let parsed = match frame {
            // Parsed, then the frame's text is dropped: only what the request reads is kept.
            Ok(Frame::Text(t)) => Incoming::parse(t.as_str()),
            Ok(Frame::Binary(_)) => Err(FrameError::Binary),
            Ok(Frame::Close(_)) => break,
            Ok(Frame::Ping(_) | Frame::Pong(_)) => continue,
            Err(e) => {
                // Oversized frames and broken streams end here; the first get a reason
                // (1009: too big), should the client still listen.
                let error = e.into_inner();
                if let Some(tungstenite::Error::Capacity(_)) = error.downcast_ref() {
                    close(1009, format!("frames are at most {MAX_FRAME_BYTES} bytes"));
                } else {
                    tracing::warn!(kernel = %kernel.id, %error, "kernel WebSocket read failed");
                }
                break;
            }
        };
        let m = match parsed {
            Ok(m) => m,
            Err(e) => {
                // 1003: data of a type not taken; 1007: data that is not a message; 1008:
                // a message this kernel must not take (a signature it cannot check).
                let code = match e {
                    FrameError::Binary => 1003,
                    FrameError::Malformed(_) => 1007,
                    FrameError::Signed => 1008,
                };
                close(code, e.to_string());
                break;
            }
        };
        // An input_reply answers a cell that is running: taken at once, on whatever channel
        // it came (jupyter_server's gateway client names none, which reads as shell).
        if let Request::InputReply { value, parent } = &m.request {
            kernel.input_reply(value, parent.as_deref());
            continue;
        }
        match m.channel {
            Channel::Control => {
                if !kernel.control(&m).await {
                    close(1000, "the kernel was shut down".into());
                    break;
                }
            }
            Channel::Shell => {
                let bytes = m.held_bytes();
                let waiting = held.load(Ordering::Acquire);
                if waiting + bytes > SHELL_QUEUE_BYTES {
                    // Past the bytes a socket may hold: answered, not queued.
                    kernel
                        .refuse(
                            &m,
                            format!(
                                "not run: the requests waiting on this connection hold \
                                 {waiting} bytes, this one {bytes}, and at most \
                                 {SHELL_QUEUE_BYTES} may wait; send it again once they ran"
                            ),
                        )
                        .await;
                    continue;
                }
                // Past the bytes all of its tenant's sockets may hold: answered too.
                let place = match tenant.take(Quota::KernelQueueBytes, bytes as u64) {
                    Ok(place) => place,
                    Err(q) => {
                        kernel.refuse(&m, format!("not run: {q}")).await;
                        continue;
                    }
                };
                held.fetch_add(bytes, Ordering::AcqRel);
                if let Err(mpsc::error::TrySendError::Full((m, bytes, _))) =
                    shell_tx.try_send((m, bytes, place))
                {
                    held.fetch_sub(bytes, Ordering::AcqRel);
                    // A flood: answered, not queued.
                    kernel.iopub(&m, "status", status("busy")).await;
                    kernel
                        .reply(&m, Channel::Shell, json!({"status": "aborted"}))
                        .await;
                    kernel.iopub(&m, "status", status("idle")).await;
                }
            }
            // iopub is the kernel's to send.
            Channel::Stdin | Channel::Iopub => {
                tracing::debug!(kernel = %kernel.id, msg_type = %m.header.msg_type, "ignored");
            }
        }
    }
    // A cell waiting for input gets none (its `input()` raises EOFError).
    *lock(&kernel.waiting_input) = None;
    drop(shell_tx);
    // A cell still running finishes (its session keeps it); its replies have nowhere to go.
    let _ = tokio::time::timeout(Duration::from_secs(1), executor).await;
    drop(close_tx);
    drop(kernel);
    let _ = writer.await;
}

impl Kernel {
    async fn send(&self, m: Message) {
        self.out.send(m).await;
    }

    /// `status` on iopub with no parent: `busy` while a cell of the session runs, else
    /// `idle`.
    async fn announce(&self) {
        let busy = self
            .state
            .runner
            .session_info(&self.id, self.key())
            .await
            .is_ok_and(|i| i.state == crate::supervisor::session::SessionState::Busy);
        let m = Message::unprompted(
            &self.session,
            Channel::Iopub,
            "status",
            status(if busy { "busy" } else { "idle" }),
        );
        self.send(m).await;
    }

    /// `<type>_reply` to `m` on `channel`.
    async fn reply(&self, m: &Incoming, channel: Channel, content: Value) {
        let reply_type = match m.header.msg_type.strip_suffix("_request") {
            Some(base) => format!("{base}_reply"),
            None => format!("{}_reply", m.header.msg_type),
        };
        self.send(Message::reply(
            &m.header,
            &self.session,
            channel,
            &reply_type,
            content,
        ))
        .await;
    }

    async fn iopub(&self, parent: &Incoming, msg_type: &str, content: Value) {
        self.send(Message::reply(
            &parent.header,
            &self.session,
            Channel::Iopub,
            msg_type,
            content,
        ))
        .await;
    }

    /// A shell request refused because the requests waiting (on the socket, or on every
    /// socket of its tenant) already hold as many bytes as they may: `evalue` says which.
    async fn refuse(&self, m: &Incoming, evalue: String) {
        tracing::warn!(kernel = %self.id, %evalue, "a kernel's shell queue is full (bytes)");
        self.iopub(m, "status", status("busy")).await;
        self.reply(
            m,
            Channel::Shell,
            json!({"status": "error", "ename": "VivariumQueueFull", "evalue": evalue, "traceback": [], "execution_count": Value::Null}),
        )
        .await;
        self.iopub(m, "status", status("idle")).await;
    }

    /// A control request; `false` when the connection should end (shutdown).
    async fn control(&self, m: &Incoming) -> bool {
        match &m.request {
            Request::Interrupt => {
                let _ = self.state.runner.interrupt_session(&self.id, self.key());
                self.reply(m, Channel::Control, json!({"status": "ok"}))
                    .await;
                true
            }
            Request::Shutdown { restart } => self.shutdown(m, *restart, Channel::Control).await,
            Request::KernelInfo => {
                self.iopub(m, "status", status("busy")).await;
                self.kernel_info(m, Channel::Control).await;
                self.iopub(m, "status", status("idle")).await;
                true
            }
            _ => {
                self.unknown(m, Channel::Control).await;
                true
            }
        }
    }

    /// One shell request, in order, between `status: busy` and `status: idle` as every
    /// kernel brackets them (clients wait for the idle as well as the reply).
    async fn shell(self: &Arc<Self>, mut m: Incoming) {
        self.iopub(&m, "status", status("busy")).await;
        // A cell's code is moved on, not copied: it may be 16 MiB.
        let cell = match &mut m.request {
            Request::Execute(x) => Some((std::mem::take(&mut x.code), x.allow_stdin)),
            _ => None,
        };
        match &m.request {
            Request::Execute(_) => {
                let (code, allow_stdin) = cell.unwrap_or_default();
                self.execute(&m, code, allow_stdin == Some(true)).await
            }
            Request::KernelInfo => self.kernel_info(&m, Channel::Shell).await,
            Request::IsComplete(x) => {
                let code = x.code.clone();
                let asked = self.ask(Query::IsComplete { code }).await;
                self.reply(&m, Channel::Shell, queries::completeness(asked))
                    .await;
            }
            Request::Complete(x) => {
                let content = self.complete(x).await;
                self.reply(&m, Channel::Shell, content).await;
            }
            Request::Inspect(x) => {
                let content = self.inspect(x).await;
                self.reply(&m, Channel::Shell, content).await;
            }
            Request::CommInfo => {
                self.reply(&m, Channel::Shell, json!({"status": "ok", "comms": {}}))
                    .await;
            }
            Request::History => {
                self.reply(&m, Channel::Shell, json!({"status": "ok", "history": []}))
                    .await;
            }
            Request::Shutdown { restart } => {
                self.shutdown(&m, *restart, Channel::Shell).await;
            }
            Request::Malformed(why) => self.malformed(&m, why, Channel::Shell).await,
            Request::Interrupt | Request::InputReply { .. } | Request::Other => {
                self.unknown(&m, Channel::Shell).await
            }
        }
        self.iopub(&m, "status", status("idle")).await;
    }

    /// `complete_reply`: the session's completions, none that holds a secret under the
    /// session's leakage policy.
    async fn complete(&self, x: &AtCursor) -> Value {
        let guard = match self.guard().await {
            Ok(g) => g,
            Err(e) => return queries::error(e.to_string()),
        };
        let cursor = x.cursor();
        let code = x.code.clone();
        let asked = self.ask(Query::Complete { code, cursor }).await;
        queries::completions(asked, &x.code, cursor, &guard)
    }

    /// `inspect_reply`: the session's inspection, through the session's leakage policy.
    async fn inspect(&self, x: &AtCursor) -> Value {
        let guard = match self.guard().await {
            Ok(g) => g,
            Err(e) => return queries::error(e.to_string()),
        };
        let detail = x.detail_level.unwrap_or(0).min(1);
        let (code, cursor) = (x.code.clone(), x.cursor());
        let asked = self
            .ask(Query::Inspect {
                code,
                cursor,
                detail,
            })
            .await;
        queries::inspection(asked, &guard)
    }

    /// The leakage guard of the kernel's session: its policy over the server's rules, as
    /// its turns have (text sent outside a turn's report goes through it).
    async fn guard(&self) -> SupervisorResult<Arc<Guard>> {
        let runner = &self.state.runner;
        let session = runner.session(&self.id, self.key()).await?;
        let policy = runner.leak_policy(Some(session.leakage))?;
        Ok(runner.session_guard(&session, policy))
    }

    /// An `input_reply`: the line for the cell's waiting `input()`. It answers the request
    /// it names, or, naming none (jupyter_client's own clients send no parent), the one
    /// waiting; any other is dropped with a log line.
    fn input_reply(&self, value: &str, parent: Option<&str>) {
        let parent = parent.unwrap_or_default();
        let mut waiting = lock(&self.waiting_input);
        match waiting.take() {
            Some((id, answer)) if parent.is_empty() || parent == id => {
                let _ = answer.send(value.to_string());
            }
            other => {
                *waiting = other;
                tracing::info!(kernel = %self.id, parent, "an input_reply that answers nothing");
            }
        }
    }

    /// What a cell's `input()` calls: an `input_request` on the stdin channel, in order
    /// with the cell's streams, its prompt through the session's leakage `guard` as the
    /// cell's output is, and a receiver for its `input_reply`.
    fn input_asker(
        self: &Arc<Self>,
        streams: &Streams,
        parent: &Header,
        guard: Arc<Guard>,
    ) -> InputAsker {
        let kernel = self.clone();
        let out = streams.tx.clone();
        let parent = parent.clone();
        Arc::new(move |prompt: String| {
            let (answer, answered) = std::sync::mpsc::channel();
            let request = Message::reply(
                &parent,
                &kernel.session,
                Channel::Stdin,
                "input_request",
                json!({"prompt": queries::prompt(prompt, &guard), "password": false}),
            );
            *lock(&kernel.waiting_input) = Some((request.msg_id.clone(), answer));
            let _ = out.send(Out::Message(Box::new(request)));
            answered
        })
    }

    /// The id of the key the connection was opened with: the session's owner.
    fn key(&self) -> Option<&str> {
        self.ctx.key_id.as_deref()
    }

    /// Asks the kernel's session `query`; its answer as the guest sent it.
    async fn ask(&self, query: Query) -> Result<Option<String>, String> {
        intake::query(&self.state.runner, &self.id, self.key(), query)
            .await
            .map_err(|e| e.to_string())
    }

    async fn kernel_info(&self, m: &Incoming, channel: Channel) {
        let version = self
            .state
            .runner
            .host()
            .map(|h| h.runtime_files().python_version.clone())
            .unwrap_or_default();
        self.reply(m, channel, kernel_info(&version)).await;
    }

    /// A request of a type this kernel reads whose content is not the protocol's.
    async fn malformed(&self, m: &Incoming, why: &str, channel: Channel) {
        tracing::info!(kernel = %self.id, msg_type = %m.header.msg_type, why, "malformed kernel message");
        self.reply(
            m,
            channel,
            json!({"status": "error", "ename": "BadRequest", "evalue": why, "traceback": []}),
        )
        .await;
    }

    async fn unknown(&self, m: &Incoming, channel: Channel) {
        tracing::info!(kernel = %self.id, msg_type = %m.header.msg_type, "unknown kernel message type");
        self.reply(
            m,
            channel,
            json!({
                "status": "error",
                "ename": "UnknownMessageType",
                "evalue": format!("this kernel does not handle {}", m.header.msg_type),
                "traceback": [],
            }),
        )
        .await;
    }

    /// `shutdown_request`: with `restart`, a fresh interpreter under the same id; else the
    /// session is closed. Returns whether the connection goes on.
    async fn shutdown(&self, m: &Incoming, restart: bool, channel: Channel) -> bool {
        let done = if restart {
            self.state
                .runner
                .restart_session(&self.id, self.key())
                .await
        } else {
            let bracket =
                Bracket::open(&self.state, &self.ctx, Action::SessionClose).session(&self.id);
            let r = self.state.runner.close_session(&self.id, self.key()).await;
            bracket.close(outcome_of(&r, 204));
            r
        };
        let content = match &done {
            Ok(()) => json!({"status": "ok", "restart": restart}),
            Err(e) => {
                json!({"status": "error", "ename": e.code().as_str(), "evalue": e.to_string(), "traceback": []})
            }
        };
        self.reply(m, channel, content).await;
        restart
    }

    /// `execute_request`: busy, the input, the cell as a session turn, its streams, rich
    /// outputs, final value or error, the reply, idle.
    async fn execute(self: &Arc<Self>, m: &Incoming, code: String, allow_stdin: bool) {
        let streams = Streams::start(self.out.clone(), self.session.clone(), m.header.clone());
        let mut bracket =
            Bracket::open(&self.state, &self.ctx, Action::SessionTurn).session(&self.id);
        bracket.record().set_code(&code);
        let ran = async {
            let session = self.state.runner.session(&self.id, self.key()).await?;
            self.iopub(
                m,
                "execute_input",
                json!({"code": &code, "execution_count": session.info().turns + 1}),
            )
            .await;
            let mut turn = SessionTurn::cell(code, Some(streams.sink()));
            // Only for a client that said it can answer (nbclient, for one, cannot).
            if allow_stdin {
                turn.input = Some(self.input_asker(&streams, &m.header, self.guard().await?));
            }
            // Through the intake, as every door's turn: the packages its `%pip install` and
            // `!pip install` lines name are the session's first.
            intake::turn(
                &self.state.runner,
                &self.id,
                self.key(),
                turn,
                bracket.record(),
            )
            .await
        }
        .await;
        // Every stream message of the cell leaves before what follows it; an input_request
        // it left unanswered (the cell timed out waiting) is answered by nothing now.
        streams.end().await;
        *lock(&self.waiting_input) = None;
        bracket.close(turn_outcome(&ran));
        let reply = match ran.and_then(Turned::unchecked) {
            Ok(done) => self.publish(m, done).await,
            Err(e) => {
                let (ename, evalue) = (e.code().as_str().to_string(), e.to_string());
                self.iopub(
                    m,
                    "error",
                    json!({"ename": ename, "evalue": evalue, "traceback": [evalue]}),
                )
                .await;
                json!({"status": "error", "ename": ename, "evalue": evalue, "traceback": [], "execution_count": Value::Null})
            }
        };
        self.reply(m, Channel::Shell, reply).await;
    }

    /// A finished cell's broadcasts; returns the `execute_reply` content.
    async fn publish(&self, m: &Incoming, done: TurnDone) -> Value {
        let cell = Cell::of(done);
        // stdout and stderr left live, as the cell wrote them (the final value's echo and
        // the traceback excepted: they are the execute_result and the error). What went past
        // the output limit is said.
        for name in cell.truncated {
            let text = format!("\n[{name} truncated at the output limit]\n");
            self.iopub(m, "stream", json!({"name": "stderr", "text": text}))
                .await;
        }
        for o in cell.displays {
            self.iopub(
                m,
                "display_data",
                json!({"data": {o.mime: o.data}, "metadata": {}, "transient": {}}),
            )
            .await;
        }
        if let Some(main) = cell.main {
            let mut data = json!({"text/plain": main.text});
            if let Some(html) = main.html {
                data["text/html"] = json!(html);
            }
            self.iopub(
                m,
                "execute_result",
                json!({"execution_count": cell.turn, "data": data, "metadata": {}}),
            )
            .await;
        }
        let turn = cell.turn;
        match cell.failure {
            Some(Failure {
                name,
                value,
                traceback,
            }) => {
                self.iopub(
                    m,
                    "error",
                    json!({"ename": name, "evalue": value, "traceback": traceback}),
                )
                .await;
                json!({"status": "error", "execution_count": turn, "ename": name, "evalue": value, "traceback": traceback})
            }
            None => {
                json!({"status": "ok", "execution_count": turn, "user_expressions": {}, "payload": []})
            }
        }
    }
}

/// A cell's `stream` messages, as the guest writes: the runner's live text goes to an
/// unbounded channel (the guest thread never waits; a turn writes at most its output limit)
/// and a task sends it on, chunks of one stream that are already waiting joined into one
/// message.
struct Streams {
    tx: mpsc::UnboundedSender<Out>,
    task: tokio::task::JoinHandle<()>,
}

/// What goes out in a cell's order while it runs.
enum Out {
    /// Text the cell wrote.
    Text(StreamKind, String),
    /// A message of the kernel's (an `input_request`).
    Message(Box<Message>),
    /// The cell is over.
    End,
}

/// The most text joined into one `stream` message.
const STREAM_MESSAGE_BYTES: usize = 64 << 10;

impl Streams {
    fn start(out: Outbox, session: String, parent: Header) -> Streams {
        let (tx, mut rx) = mpsc::unbounded_channel::<Out>();
        let task = tokio::spawn(async move {
            let mut waiting = None;
            loop {
                let next = match waiting.take() {
                    Some(next) => next,
                    None => rx.recv().await.unwrap_or(Out::End),
                };
                let (kind, mut text) = match next {
                    Out::Text(kind, text) => (kind, text),
                    Out::Message(m) => {
                        if !out.send(*m).await {
                            return;
                        }
                        continue;
                    }
                    Out::End => return,
                };
                while text.len() < STREAM_MESSAGE_BYTES {
                    match rx.try_recv() {
                        Ok(Out::Text(k, more)) if k == kind => text.push_str(&more),
                        Ok(other) => {
                            waiting = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let name = match kind {
                    StreamKind::Stdout => "stdout",
                    StreamKind::Stderr => "stderr",
                };
                let m = Message::reply(
                    &parent,
                    &session,
                    Channel::Iopub,
                    "stream",
                    json!({"name": name, "text": text}),
                );
                if !out.send(m).await {
                    return;
                }
            }
        });
        Streams { tx, task }
    }

    /// Where the runner puts the cell's live text.
    fn sink(&self) -> TextSink {
        let tx = self.tx.clone();
        Arc::new(move |kind, text| {
            let _ = tx.send(Out::Text(kind, text));
        })
    }

    /// Once the turn is over: waits until every message is on its way.
    async fn end(self) {
        let _ = self.tx.send(Out::End);
        let _ = self.task.await;
    }
}
