//! `GET /api/kernels/{id}/channels`: the kernel WebSocket. Frames are hostile: each is
//! parsed into a [`Message`] or the socket is closed with a logged reason; shell requests
//! queue (at most [`SHELL_QUEUE`]; past that they are answered `aborted`) and run one at a
//! time, in order, as session turns; control requests (interrupt, shutdown) are answered at
//! once, even while a cell runs.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message as Frame, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::messages::{Channel, FrameError, Header, MAX_FRAME_BYTES, Message, kernel_info, status};
use super::queries;
use crate::check::Policy;
use crate::hostcalls::input::InputAsker;
use crate::limits::TurnLimitsRequest;
use crate::report::{Report, Status};
use crate::sandbox::output::StreamKind;
use crate::server::AppState;
use crate::server::audit::{Action, AuditRecord, Outcome};
use crate::server::request_context::RequestContext;
use crate::server::runner::{SessionTurn, TextSink, TurnDone, Turned};
use crate::sync::lock;

/// Shell requests waiting for the one running.
const SHELL_QUEUE: usize = 64;

/// The upgrade: the kernel must exist.
pub async fn channels(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    Path(id): Path<String>,
    ws: WebSocketUpgrade,
) -> Response {
    let id = match super::session_id(&id) {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = state.runner.session_info(&id, ctx.key_id.as_deref()).await {
        return e.into_response();
    }
    ws.max_message_size(MAX_FRAME_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .on_upgrade(move |socket| serve(state, ctx, id, socket))
}

/// The kernel's side of one connection.
struct Kernel {
    state: AppState,
    ctx: RequestContext,
    id: String,
    /// The kernel session's id in message headers (one per connection).
    session: String,
    out: mpsc::Sender<Message>,
    /// The `input_request` a running cell waits on: its id, and where its answer goes.
    waiting_input: std::sync::Mutex<Option<(String, std::sync::mpsc::Sender<String>)>>,
}

async fn serve(state: AppState, ctx: RequestContext, id: String, socket: WebSocket) {
    let (mut sink, mut frames) = socket.split();
    let (out, mut outgoing) = mpsc::channel::<Message>(256);
    let (close_tx, mut close_rx) = mpsc::channel::<(u16, String)>(1);
    // The writer: every message the kernel sends, in order, then the close.
    let writer = tokio::spawn(async move {
        loop {
            tokio::select! {
                // A close first: it sends what was queued before it, then the close frame
                // (unbiased, a closed queue could win and the close frame never leave).
                biased;
                Some((code, reason)) = close_rx.recv() => {
                    while let Ok(m) = outgoing.try_recv() {
                        let _ = sink.send(Frame::Text(m.to_text().into())).await;
                    }
                    let _ = sink
                        .send(Frame::Close(Some(CloseFrame { code, reason: reason.into() })))
                        .await;
                    return;
                }
                m = outgoing.recv() => match m {
                    Some(m) => {
                        if sink.send(Frame::Text(m.to_text().into())).await.is_err() {
                            return;
                        }
                    }
                    None => return,
                },
            }
        }
    });
    let kernel = std::sync::Arc::new(Kernel {
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
    let (shell_tx, mut shell_rx) = mpsc::channel::<Message>(SHELL_QUEUE);
    let executor = {
        let kernel = kernel.clone();
        tokio::spawn(async move {
            while let Some(m) = shell_rx.recv().await {
                kernel.shell(m).await;
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
    while let Some(frame) = frames.next().await {
        let parsed = match frame {
            Ok(Frame::Text(t)) => Message::parse(t.as_str()),
            Ok(Frame::Binary(_)) => Err(FrameError::Binary),
            Ok(Frame::Close(_)) => break,
            Ok(Frame::Ping(_) | Frame::Pong(_)) => continue,
            Err(e) => {
                // Oversized frames and broken streams end here; the first get a reason
                // (1009: too big), should the client still listen.
                let error = e.to_string();
                if error.contains("too long") || error.contains("Space limit") {
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
        if m.header.msg_type == "input_reply" {
            kernel.input_reply(&m);
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
                if let Err(mpsc::error::TrySendError::Full(m)) = shell_tx.try_send(m) {
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
        let _ = self.out.send(m).await;
    }

    /// `status` on iopub with no parent: `busy` while a cell of the session runs, else
    /// `idle`.
    async fn announce(&self) {
        let busy = self
            .state
            .runner
            .session_info(&self.id, self.key())
            .await
            .is_ok_and(|i| i.state == crate::server::sessions::SessionState::Busy);
        let m = Message::unprompted(
            &self.session,
            Channel::Iopub,
            "status",
            status(if busy { "busy" } else { "idle" }),
        );
        self.send(m).await;
    }

    /// `<type>_reply` to `m` on `channel`.
    async fn reply(&self, m: &Message, channel: Channel, content: Value) {
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

    async fn iopub(&self, parent: &Message, msg_type: &str, content: Value) {
        self.send(Message::reply(
            &parent.header,
            &self.session,
            Channel::Iopub,
            msg_type,
            content,
        ))
        .await;
    }

    /// A control request; `false` when the connection should end (shutdown).
    async fn control(&self, m: &Message) -> bool {
        match m.header.msg_type.as_str() {
            "interrupt_request" => {
                let _ = self.state.runner.interrupt_session(&self.id, self.key());
                self.reply(m, Channel::Control, json!({"status": "ok"}))
                    .await;
                true
            }
            "shutdown_request" => self.shutdown(m, Channel::Control).await,
            "kernel_info_request" => {
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
    async fn shell(self: &Arc<Self>, m: Message) {
        self.iopub(&m, "status", status("busy")).await;
        let code = m.content["code"].as_str().unwrap_or_default();
        let cursor = m.content["cursor_pos"]
            .as_u64()
            .map_or(code.chars().count(), |c| c as usize);
        match m.header.msg_type.as_str() {
            "execute_request" => self.execute(&m).await,
            "kernel_info_request" => self.kernel_info(&m, Channel::Shell).await,
            "is_complete_request" => {
                let asked = self.ask(queries::is_complete(code)).await;
                self.reply(&m, Channel::Shell, queries::completeness(asked))
                    .await;
            }
            "complete_request" => {
                let asked = self.ask(queries::complete(code, cursor)).await;
                let content = queries::completions(asked, code, cursor);
                self.reply(&m, Channel::Shell, content).await;
            }
            "inspect_request" => {
                let detail = m.content["detail_level"].as_u64().unwrap_or(0).min(1) as u8;
                let asked = self.ask(queries::inspect(code, cursor, detail)).await;
                self.reply(&m, Channel::Shell, queries::inspection(asked))
                    .await;
            }
            "comm_info_request" => {
                self.reply(&m, Channel::Shell, json!({"status": "ok", "comms": {}}))
                    .await;
            }
            "history_request" => {
                self.reply(&m, Channel::Shell, json!({"status": "ok", "history": []}))
                    .await;
            }
            "shutdown_request" => {
                self.shutdown(&m, Channel::Shell).await;
            }
            _ => self.unknown(&m, Channel::Shell).await,
        }
        self.iopub(&m, "status", status("idle")).await;
    }

    /// An `input_reply`: the line for the cell's waiting `input()`. It answers the request
    /// it names, or, naming none (jupyter_client's own clients send no parent), the one
    /// waiting; any other is dropped with a log line.
    fn input_reply(&self, m: &Message) {
        let parent = m.parent_header["msg_id"].as_str().unwrap_or_default();
        let mut waiting = lock(&self.waiting_input);
        match waiting.take() {
            Some((id, answer)) if parent.is_empty() || parent == id => {
                let value = m.content["value"].as_str().unwrap_or_default();
                let _ = answer.send(value.to_string());
            }
            other => {
                *waiting = other;
                tracing::info!(kernel = %self.id, parent, "an input_reply that answers nothing");
            }
        }
    }

    /// What a cell's `input()` calls: an `input_request` on the stdin channel, in order
    /// with the cell's streams, and a receiver for its `input_reply`.
    fn input_asker(self: &Arc<Self>, streams: &Streams, parent: &Header) -> InputAsker {
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
                json!({"prompt": prompt, "password": false}),
            );
            *lock(&kernel.waiting_input) = Some((request.header.msg_id.clone(), answer));
            let _ = out.send(Out::Message(Box::new(request)));
            answered
        })
    }

    /// The id of the key the connection was opened with: the session's owner.
    fn key(&self) -> Option<&str> {
        self.ctx.key_id.as_deref()
    }

    /// Runs a query in the kernel's session; its answer as the guest sent it.
    async fn ask(&self, code: String) -> Result<Option<String>, String> {
        self.state
            .runner
            .query_session(&self.id, self.key(), code)
            .await
            .map_err(|e| e.to_string())
    }

    async fn kernel_info(&self, m: &Message, channel: Channel) {
        let version = self
            .state
            .runner
            .host()
            .map(|h| h.runtime_files().python_version.clone())
            .unwrap_or_default();
        self.reply(m, channel, kernel_info(&version)).await;
    }

    async fn unknown(&self, m: &Message, channel: Channel) {
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
    async fn shutdown(&self, m: &Message, channel: Channel) -> bool {
        let restart = m.content["restart"].as_bool().unwrap_or(false);
        let done = if restart {
            self.state
                .runner
                .restart_session(&self.id, self.key())
                .await
        } else {
            let record = AuditRecord::new(&self.ctx, Action::SessionClose).session(&self.id);
            let r = self.state.runner.close_session(&self.id, self.key()).await;
            self.state.runner.finish(record, Outcome::of(&r, 204));
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
    async fn execute(self: &Arc<Self>, m: &Message) {
        let code = m.content["code"].as_str().unwrap_or_default().to_string();
        let streams = Streams::start(self.out.clone(), self.session.clone(), m.header.clone());
        let mut record = AuditRecord::new(&self.ctx, Action::SessionTurn).session(&self.id);
        record.set_code(&code);
        let ran = async {
            let session = self.state.runner.session(&self.id, self.key()).await?;
            self.iopub(
                m,
                "execute_input",
                json!({"code": code, "execution_count": session.info().turns + 1}),
            )
            .await;
            let turn = SessionTurn {
                code: code.clone(),
                stdin: Vec::new(),
                files: Vec::new(),
                limits: TurnLimitsRequest::default(),
                // A notebook has nowhere to show findings; the sandbox is the boundary.
                policy: Policy::Off,
                leakage: None,
                live: Some(streams.sink()),
                // Only for a client that said it can answer (nbclient, for one, cannot).
                input: (m.content["allow_stdin"] == json!(true))
                    .then(|| self.input_asker(&streams, &m.header)),
            };
            self.state.runner.turn(&session, turn, &mut record).await
        }
        .await;
        // Every stream message of the cell leaves before what follows it; an input_request
        // it left unanswered (the cell timed out waiting) is answered by nothing now.
        streams.end().await;
        *lock(&self.waiting_input) = None;
        let outcome = match &ran {
            Ok(Turned::Ran(_)) => Outcome::Ok(200),
            Ok(Turned::Denied(_)) => Outcome::DENIED,
            Err(e) => Outcome::failed(e),
        };
        self.state.runner.finish(record, outcome);
        let reply = match ran {
            Ok(Turned::Ran(done)) => self.publish(m, *done).await,
            Ok(Turned::Denied(_)) => unreachable!("policy off"),
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
    async fn publish(&self, m: &Message, done: TurnDone) -> Value {
        let TurnDone {
            report,
            result,
            rolled_back,
            turn,
            ..
        } = done;
        let Report {
            mut outputs,
            error,
            status: st,
            detail,
            truncated,
            ..
        } = report;
        // stdout and stderr left live, as the cell wrote them (the final value's echo and
        // the traceback excepted: they are the execute_result and the error). What went past
        // the output limit is said.
        for (name, cut) in [("stdout", truncated.stdout), ("stderr", truncated.stderr)] {
            if cut {
                let text = format!("\n[{name} truncated at the output limit]\n");
                self.iopub(m, "stream", json!({"name": "stderr", "text": text}))
                    .await;
            }
        }
        // A final value with HTML (a DataFrame) came last among the outputs.
        let result_html = match (&result, outputs.last()) {
            (Some(_), Some(o)) if o.mime == "text/html" => outputs.pop().map(|o| o.data),
            _ => None,
        };
        for o in outputs {
            self.iopub(
                m,
                "display_data",
                json!({"data": {o.mime: o.data}, "metadata": {}, "transient": {}}),
            )
            .await;
        }
        if let Some(r) = &result {
            let mut data = json!({"text/plain": r});
            if let Some(html) = result_html {
                data["text/html"] = json!(html);
            }
            self.iopub(
                m,
                "execute_result",
                json!({"execution_count": turn, "data": data, "metadata": {}}),
            )
            .await;
        }
        let failure = if let Some(e) = error {
            Some((
                e.kind,
                e.message,
                e.traceback.lines().map(str::to_string).collect::<Vec<_>>(),
            ))
        } else if st != Status::Ok {
            // A limit or an interrupt stopped the cell; the session went back to its state
            // after the previous cell.
            let ename = match st {
                Status::Cancelled => "KeyboardInterrupt".to_string(),
                other => format!("Vivarium{}", camel(other.as_str())),
            };
            let mut evalue = match st {
                Status::Cancelled => "interrupted".to_string(),
                other => detail.unwrap_or_else(|| other.as_str().to_string()),
            };
            if rolled_back {
                evalue.push_str("; the kernel's state is as it was after the last completed cell");
            }
            Some((
                ename.clone(),
                evalue.clone(),
                vec![format!("{ename}: {evalue}")],
            ))
        } else {
            None
        };
        match failure {
            Some((ename, evalue, traceback)) => {
                self.iopub(
                    m,
                    "error",
                    json!({"ename": ename, "evalue": evalue, "traceback": traceback}),
                )
                .await;
                json!({"status": "error", "execution_count": turn, "ename": ename, "evalue": evalue, "traceback": traceback})
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
    fn start(out: mpsc::Sender<Message>, session: String, parent: Header) -> Streams {
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
                        if out.send(*m).await.is_err() {
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
                if out.send(m).await.is_err() {
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

/// `fuel_exhausted` → `FuelExhausted`.
fn camel(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}
