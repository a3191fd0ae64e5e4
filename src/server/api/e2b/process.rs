//! envd's `process.Process` service: `commands.run`. A command line runs through Vivarium's
//! shell (`vivarium_shell`, in the guest: never a host process) in the sandbox's session,
//! with E2B's semantics: each command starts afresh, as a new process would, in its `cwd`
//! (relative to `/home/user`) or `/home/user`, with its `envs` over the sandbox's; a `cd`
//! or `export` in one command does not carry to the next (the shell's `persist=False`; the
//! variables are the turn's own, undone after it). Its output is streamed, its exit status
//! bash's (127 for a command not found; 130 when interrupted, 137 when a limit stopped it).
//! A command line that is only `pip install NAME…` (or `python -m pip install`) adds the
//! packages to the session on the host, as `POST /v1/sessions/{id}/packages` does.
//!
//! A command is audited as a turn whose code is the command line (the caller's code), not
//! the door's wrapper around it. Commands run to their end: no background processes, so
//! `List` is empty and signals, input and `Connect` find no process.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::connect::{Code, ConnectError, end_stream, envelope, stream_headers, unwrap_request};
use super::{DoorState, HOME, SandboxHeader, run_turn, scrubbed};
use crate::report::Status;
use crate::report::StreamKind;
use crate::server::bracket::{Bracket, outcome_of};
use crate::server::error::OnWire;
use crate::server::request_context::{Caller, RequestContext};
use crate::supervisor::audit::Action;
use crate::supervisor::intake;
use crate::supervisor::runner::{SessionTurn, TextSink};
use crate::vocabulary::Language;

/// A keepalive at least this often while a command runs (the SDKs ask for one every 50 s).
const KEEPALIVE: Duration = Duration::from_secs(20);

/// The command line of a Start request: `bash -l -c LINE` (what the SDKs send) is LINE.
fn command_line(cmd: &str, args: &[String]) -> String {
    let shell = matches!(
        cmd.rsplit('/').next().unwrap_or(cmd),
        "bash" | "sh" | "zsh" | "dash"
    );
    if shell && let Some(i) = args.iter().position(|a| a == "-c") {
        return args.get(i + 1).cloned().unwrap_or_default();
    }
    std::iter::once(cmd.to_string())
        .chain(args.iter().cloned())
        .map(|w| shlex::try_quote(&w).map(|q| q.into_owned()).unwrap_or(w))
        .collect::<Vec<_>>()
        .join(" ")
}

static PIDS: AtomicU32 = AtomicU32::new(1000);

/// `POST /process.Process/{method}`.
pub async fn call(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
    Path(method): Path<String>,
    body: Bytes,
) -> Response {
    match method.as_str() {
        "Start" => start(door, ctx, sandbox, body).await,
        "List" => Json(json!({"processes": []})).into_response(),
        "SendSignal" | "SendInput" | "CloseStdin" | "Update" => ConnectError::new(
            Code::NotFound,
            "no such process: commands run to their end here, none in the background",
        )
        .into_response(),
        other => ConnectError::new(
            Code::Unimplemented,
            format!("process.Process/{other} is not served by Vivarium: commands run to their end"),
        )
        .into_response(),
    }
}

fn data(kind: StreamKind, text: &[u8]) -> Bytes {
    let field = match kind {
        StreamKind::Stdout => "stdout",
        StreamKind::Stderr => "stderr",
    };
    envelope(&json!({"event": {"data": {field: STANDARD.encode(text)}}}))
}

fn end(code: i32, error: Option<String>) -> Bytes {
    let mut end =
        json!({"exitCode": code, "exited": true, "status": format!("exit status {code}")});
    if let Some(e) = error {
        end["error"] = json!(e);
    }
    envelope(&json!({"event": {"end": end}}))
}

async fn start(
    door: DoorState,
    ctx: RequestContext,
    sandbox: SandboxHeader,
    body: Bytes,
) -> Response {
    let parsed = unwrap_request(&body).and_then(|request| {
        let process = &request["process"];
        let cmd = process["cmd"].as_str().unwrap_or_default().to_string();
        let args: Vec<String> = process["args"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let env = environment(&process["envs"])?;
        let cwd = working_directory(process["cwd"].as_str())?;
        let id = sandbox.id().map_err(ConnectError::from)?;
        Ok((id, command_line(&cmd, &args), env, cwd))
    });
    let (id, line, env, cwd) = match parsed {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    // Not found or another key's: the call's error, before the stream.
    let labels = match door
        .app
        .runner
        .session_labelled(&id, ctx.key_id.as_deref())
        .await
    {
        Ok((_, labels)) => labels,
        Err(e) => return ConnectError::from(e).into_response(),
    };
    // No `cwd`: the sandbox's template's working folder, else HOME.
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => {
            super::control::start_dir(&door, ctx.key_id.as_deref(), labels.template_id.as_deref())
                .await
        }
    };
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let _ = tx.send(envelope(
        &json!({"event": {"start": {"pid": PIDS.fetch_add(1, Ordering::Relaxed)}}}),
    ));
    tokio::spawn(run(door, ctx, id, line, env, cwd, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx))
    });
    (stream_headers(), Body::from_stream(stream)).into_response()
}

/// A command's variables, its `envs` (checked as a cell's are), on top of the sandbox's
/// (its `HOME` is `/home/user`, as E2B's user's is).
fn environment(envs: &Value) -> Result<Vec<(String, String)>, ConnectError> {
    let invalid = |why: String| ConnectError::new(Code::InvalidArgument, why);
    let mut env = Vec::new();
    if let Some(map) = envs.as_object() {
        for (k, v) in map {
            let v = v
                .as_str()
                .ok_or_else(|| invalid("envs: values must be strings".into()))?;
            env.push((k.clone(), v.to_string()));
        }
    }
    crate::vocabulary::check_env(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| invalid(format!("envs: {e}")))?;
    Ok(env)
}

/// Where a command starts: its `cwd` (relative to `/home/user`), or `None` when it names
/// none (the sandbox's own start: its template's working folder, or `/home/user`).
fn working_directory(cwd: Option<&str>) -> Result<Option<String>, ConnectError> {
    let cwd = match cwd.filter(|c| !c.is_empty()) {
        None => return Ok(None),
        Some(c) if c.starts_with('/') => c.to_string(),
        Some(c) => format!("{HOME}/{c}"),
    };
    if cwd.contains('\0') || cwd.len() > 4096 {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            "cwd: a path without NUL, at most 4096 bytes",
        ));
    }
    Ok(Some(cwd))
}

/// Runs the command and sends its events, keepalives while it runs, and the end of the
/// stream; a client gone interrupts it.
async fn run(
    door: DoorState,
    ctx: RequestContext,
    id: String,
    line: String,
    env: Vec<(String, String)>,
    cwd: String,
    tx: mpsc::UnboundedSender<Bytes>,
) {
    let work = async {
        match intake::packages_to_install(&line) {
            Some(names) => pip_install(&door, &ctx, &id, names, &tx).await,
            None => shell(&door, &ctx, &id, line, env, cwd, &tx).await,
        }
    };
    let mut ticks = tokio::time::interval(KEEPALIVE);
    ticks.tick().await;
    tokio::pin!(work);
    let (code, error) = loop {
        tokio::select! {
            done = &mut work => break done,
            _ = ticks.tick() => {
                let _ = tx.send(envelope(&json!({"event": {"keepalive": {}}})));
            }
            _ = tx.closed() => {
                let _ = door.app.runner.interrupt_session(&id, ctx.key_id.as_deref());
                return;
            }
        }
    };
    let _ = tx.send(end(code, error));
    let _ = tx.send(end_stream(None));
}

async fn pip_install(
    door: &DoorState,
    ctx: &RequestContext,
    id: &str,
    names: Vec<String>,
    tx: &mpsc::UnboundedSender<Bytes>,
) -> (i32, Option<String>) {
    let mut bracket = Bracket::open(&door.app, ctx, Action::SessionPackages).session(id);
    let added = door
        .app
        .runner
        .add_packages(id, ctx.key_id.as_deref(), names, bracket.record())
        .await;
    bracket.close(outcome_of(&added, 200));
    match added {
        Ok(pins) => {
            let list: Vec<String> = pins
                .iter()
                .map(|p| format!("{}-{}", p.name, p.version))
                .collect();
            let text = format!("Successfully installed {}\n", list.join(" "));
            let _ = tx.send(data(StreamKind::Stdout, text.as_bytes()));
            (0, None)
        }
        Err(e) => {
            // Leaves as every error response does: through the leakage rules.
            let message = scrubbed(door, e.to_string());
            let text = format!("ERROR: {}: {message}\n", e.code().as_str());
            let _ = tx.send(data(StreamKind::Stderr, text.as_bytes()));
            (1, Some(message))
        }
    }
}

/// Runs `line` through the shell in session `id` (`SessionTurn::command`), its output streamed to
/// `tx`; its exit status, and why it did not end by itself.
async fn shell(
    door: &DoorState,
    ctx: &RequestContext,
    id: &str,
    line: String,
    env: Vec<(String, String)>,
    cwd: String,
    tx: &mpsc::UnboundedSender<Bytes>,
) -> (i32, Option<String>) {
    let sink: TextSink = {
        let tx = tx.clone();
        std::sync::Arc::new(move |kind, text: String| {
            let _ = tx.send(data(kind, text.as_bytes()));
        })
    };
    let turn = SessionTurn {
        env,
        ..SessionTurn::command(&line, &cwd, Some(sink))
    };
    match run_turn(door, ctx, id, Some((&line, Language::Bash)), turn).await {
        Ok(done) => match (done.report.status, done.result) {
            (Status::Ok, Some(r)) => (r.trim().parse().unwrap_or(1), None),
            (Status::Cancelled, _) => (130, Some("interrupted".into())),
            (Status::Error, _) => {
                // The shell itself failed (it answers every error of a command): say so.
                let why = done
                    .report
                    .error
                    .map(|e| format!("{}: {}", e.kind, e.message))
                    .unwrap_or_else(|| "the shell failed".into());
                let _ = tx.send(data(
                    StreamKind::Stderr,
                    format!("vivarium: {why}\n").as_bytes(),
                ));
                (1, Some(why))
            }
            (status, _) => {
                let why = done
                    .report
                    .detail
                    .unwrap_or_else(|| status.as_str().to_string());
                let _ = tx.send(data(
                    StreamKind::Stderr,
                    format!("vivarium: {why}\n").as_bytes(),
                ));
                (137, Some(why))
            }
        },
        Err(e) => {
            let message = scrubbed(door, e.to_string());
            let why = format!("{}: {message}", e.code().as_str());
            let _ = tx.send(data(
                StreamKind::Stderr,
                format!("vivarium: {why}\n").as_bytes(),
            ));
            (1, Some(why))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shells_command_line_is_its_c_argument() {
        assert_eq!(
            command_line("/bin/bash", &["-l".into(), "-c".into(), "ls -la".into()]),
            "ls -la"
        );
    }

    #[test]
    fn a_command_starts_at_home_with_its_own_variables() {
        assert_eq!(working_directory(None).unwrap(), None);
        assert_eq!(working_directory(Some("")).unwrap(), None);
        assert_eq!(working_directory(Some("/tmp")).unwrap().unwrap(), "/tmp");
        assert_eq!(
            working_directory(Some("sub")).unwrap().unwrap(),
            format!("{HOME}/sub")
        );
        assert!(working_directory(Some("a\0b")).is_err());
        let env = environment(&json!({"A": "1", "HOME": "/tmp"})).unwrap();
        assert_eq!(
            env,
            vec![("A".into(), "1".into()), ("HOME".into(), "/tmp".into())]
        );
        assert_eq!(environment(&Value::Null).unwrap(), vec![]);
        assert!(environment(&json!({"A": 1})).is_err());
        assert!(environment(&json!({"A=B": "1"})).is_err());
    }
}
