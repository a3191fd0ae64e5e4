//! envd's `process.Process` service: `commands.run`. There is no shell and no other program
//! in a Vivarium sandbox, so a command line is split as a shell would split it and only
//! these run, in the sandbox's session (its files, its working directory; a module
//! namespace of their own, as a new process would have):
//!
//! - `python FILE [ARGS]`, `python -c CODE [ARGS]`, `python -m MODULE [ARGS]` (also
//!   `python3`, with `-u`/`-B` accepted): its output streamed, its exit status that of
//!   `SystemExit` (1 for an uncaught exception, with its traceback);
//! - `pip install NAME…` (and `python -m pip install`): the session's packages
//!   (`POST /v1/sessions/{id}/packages`).
//!
//! Anything else ends at once with exit status 127 and a message saying why; so does
//! shell syntax (pipes, redirections, `&&`). Commands run to their end: no background
//! processes, so `List` is empty and signals, input and `Connect` find no process.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::connect::{Code, ConnectError, end_stream, envelope, stream_headers, unwrap_request};
use super::{DoorState, py_str, sandbox_of, scrubbed, turn};
use crate::report::Status;
use crate::sandbox::output::StreamKind;
use crate::server::bracket::{Bracket, outcome_of};
use crate::server::error::OnWire;
use crate::server::request_context::RequestContext;
use crate::supervisor::audit::Action;
use crate::supervisor::runner::TextSink;

/// The exit status of a command that is not offered (a shell's "command not found").
const NOT_OFFERED: i32 = 127;
/// A keepalive at least this often while a command runs (the SDKs ask for one every 50 s).
const KEEPALIVE: Duration = Duration::from_secs(20);

/// What a command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    /// `python -c CODE`, `python FILE`, `python -m MODULE`, with `sys.argv`.
    Python {
        kind: Run,
        target: String,
        argv: Vec<String>,
    },
    /// `pip install NAME…`.
    PipInstall(Vec<String>),
    /// Anything else: exit 127 with this message.
    NotOffered(String),
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Run {
    Code,
    File,
    Module,
}

const OFFERED: &str = "a Vivarium sandbox runs `python FILE`, `python -c CODE`, `python -m \
                       MODULE` and `pip install NAME`: there is no shell and no other program";

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

/// What `line` asks for.
fn parse(line: &str) -> Command {
    let Some(words) = shlex::split(line) else {
        return Command::NotOffered(format!(
            "vivarium: cannot parse the command line ({OFFERED})"
        ));
    };
    const OPERATORS: [&str; 9] = ["|", "||", "&&", ";", "&", ">", ">>", "<", "2>&1"];
    if let Some(op) = words
        .iter()
        .find(|w| OPERATORS.contains(&w.as_str()) || w.starts_with('>') || w.ends_with(';'))
    {
        return Command::NotOffered(format!(
            "vivarium: `{op}`: shell syntax is not offered ({OFFERED})"
        ));
    }
    let Some(first) = words.first() else {
        return Command::NotOffered(format!("vivarium: an empty command ({OFFERED})"));
    };
    let program = first.rsplit('/').next().unwrap_or(first);
    let rest = &words[1..];
    if matches!(program, "pip" | "pip3") {
        return pip(rest);
    }
    if !(program == "python" || program.starts_with("python3")) {
        return Command::NotOffered(format!("vivarium: {first}: command not found ({OFFERED})"));
    }
    let mut i = 0;
    while rest.get(i).is_some_and(|w| w == "-u" || w == "-B") {
        i += 1;
    }
    match rest.get(i).map(String::as_str) {
        Some("-c") => match rest.get(i + 1) {
            Some(code) => Command::Python {
                kind: Run::Code,
                target: code.clone(),
                argv: std::iter::once("-c".to_string())
                    .chain(rest[i + 2..].iter().cloned())
                    .collect(),
            },
            None => Command::NotOffered("python: -c needs an argument".into()),
        },
        Some("-m") => match rest.get(i + 1).map(String::as_str) {
            Some("pip") => pip(&rest[i + 2..]),
            Some(module) => Command::Python {
                kind: Run::Module,
                target: module.to_string(),
                argv: std::iter::once(module.to_string())
                    .chain(rest[i + 2..].iter().cloned())
                    .collect(),
            },
            None => Command::NotOffered("python: -m needs an argument".into()),
        },
        Some(file) if !file.starts_with('-') => Command::Python {
            kind: Run::File,
            target: file.to_string(),
            argv: rest[i..].to_vec(),
        },
        Some(flag) => {
            Command::NotOffered(format!("python: option {flag} is not offered ({OFFERED})"))
        }
        None => Command::NotOffered(format!(
            "python: an interactive interpreter is not offered: use run_code ({OFFERED})"
        )),
    }
}

/// `pip install NAME…` (`-q`, `-U` and `--quiet` accepted; nothing else of pip is).
fn pip(words: &[String]) -> Command {
    if words.first().map(String::as_str) != Some("install") {
        return Command::NotOffered(format!(
            "pip: only `pip install NAME…` is offered ({OFFERED})"
        ));
    }
    let mut names = Vec::new();
    for w in &words[1..] {
        match w.as_str() {
            "-q" | "--quiet" | "-U" | "--upgrade" => {}
            flag if flag.starts_with('-') => {
                return Command::NotOffered(format!(
                    "pip install: option {flag} is not offered; name the packages"
                ));
            }
            name => names.push(name.to_string()),
        }
    }
    if names.is_empty() {
        return Command::NotOffered("pip install: name at least one package".into());
    }
    Command::PipInstall(names)
}

/// Runs a Python command in the session: `sys.argv`, the environment and the working
/// directory its own while it runs; its exit status is the turn's final value.
const RUNNER: &str = r#"
def _vivarium_e2b_run(kind, target, argv, env, cwd):
    import os, sys, runpy, traceback
    saved = (sys.argv[:], os.getcwd(), {k: os.environ.get(k) for k in env})
    sys.argv = argv
    os.environ.update(env)
    status = 0
    try:
        if cwd:
            os.chdir(cwd)
        if kind == 'code':
            exec(compile(target, '<string>', 'exec'), {'__name__': '__main__', '__builtins__': __builtins__})
        elif kind == 'module':
            runpy.run_module(target, run_name='__main__', alter_sys=True)
        else:
            runpy.run_path(target, run_name='__main__')
    except SystemExit as e:
        if e.code is None:
            status = 0
        elif isinstance(e.code, int):
            status = e.code
        else:
            print(e.code, file=sys.stderr)
            status = 1
    except Exception:
        traceback.print_exc()
        status = 1
    finally:
        sys.argv = saved[0]
        for k, v in saved[2].items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        os.chdir(saved[1])
        sys.stdout.flush()
        sys.stderr.flush()
    return status
"#;

static PIDS: AtomicU32 = AtomicU32::new(1000);

/// `POST /process.Process/{method}`.
pub async fn call(
    State(door): State<DoorState>,
    Extension(ctx): Extension<RequestContext>,
    headers: HeaderMap,
    Path(method): Path<String>,
    body: Bytes,
) -> Response {
    match method.as_str() {
        "Start" => start(door, ctx, headers, body).await,
        "List" => Json(json!({"processes": []})).into_response(),
        "SendSignal" | "SendInput" | "CloseStdin" | "Update" => ConnectError::new(
            Code::NotFound,
            "no such process: commands run to their end here, none in the background",
        )
        .into_response(),
        other => ConnectError::new(
            Code::Unimplemented,
            format!("process.Process/{other} is not served by Vivarium ({OFFERED})"),
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

async fn start(door: DoorState, ctx: RequestContext, headers: HeaderMap, body: Bytes) -> Response {
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
        let env: serde_json::Map<String, Value> =
            process["envs"].as_object().cloned().unwrap_or_default();
        if env.values().any(|v| !v.is_string()) {
            return Err(ConnectError::new(
                Code::InvalidArgument,
                "envs: values must be strings",
            ));
        }
        let cwd = process["cwd"].as_str().map(str::to_string);
        let id = sandbox_of(&headers).map_err(ConnectError::from)?;
        Ok((id, command_line(&cmd, &args), Value::Object(env), cwd))
    });
    let (id, line, env, cwd) = match parsed {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    // Not found or another key's: the call's error, before the stream.
    if let Err(e) = door.app.runner.session(&id, ctx.key_id.as_deref()).await {
        return ConnectError::from(e).into_response();
    }
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let _ = tx.send(envelope(
        &json!({"event": {"start": {"pid": PIDS.fetch_add(1, Ordering::Relaxed)}}}),
    ));
    tokio::spawn(run(door, ctx, id, parse(&line), env, cwd, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx))
    });
    (stream_headers(), Body::from_stream(stream)).into_response()
}

/// Runs the command and sends its events, keepalives while it runs, and the end of the
/// stream; a client gone interrupts it.
async fn run(
    door: DoorState,
    ctx: RequestContext,
    id: String,
    command: Command,
    env: Value,
    cwd: Option<String>,
    tx: mpsc::UnboundedSender<Bytes>,
) {
    let work = async {
        match command {
            Command::NotOffered(why) => {
                let _ = tx.send(data(StreamKind::Stderr, format!("{why}\n").as_bytes()));
                (NOT_OFFERED, Some(why))
            }
            Command::PipInstall(names) => pip_install(&door, &ctx, &id, names, &tx).await,
            Command::Python { kind, target, argv } => {
                python(&door, &ctx, &id, kind, target, argv, env, cwd, &tx).await
            }
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

#[allow(clippy::too_many_arguments)]
async fn python(
    door: &DoorState,
    ctx: &RequestContext,
    id: &str,
    kind: Run,
    target: String,
    argv: Vec<String>,
    env: Value,
    cwd: Option<String>,
    tx: &mpsc::UnboundedSender<Bytes>,
) -> (i32, Option<String>) {
    let sink: TextSink = {
        let tx = tx.clone();
        std::sync::Arc::new(move |kind, text: String| {
            let _ = tx.send(data(kind, text.as_bytes()));
        })
    };
    let kind = match kind {
        Run::Code => "code",
        Run::File => "file",
        Run::Module => "module",
    };
    let argv = serde_json::to_string(&argv).expect("strings serialize");
    let code = format!(
        "{RUNNER}(_vivarium_e2b_run({kind}, {target}, __import__('json').loads({argv}), \
         __import__('json').loads({env}), {cwd}), globals().pop('_vivarium_e2b_run'))[0]\n",
        kind = py_str(kind),
        target = py_str(&target),
        argv = py_str(&argv),
        env = py_str(&env.to_string()),
        cwd = cwd.as_deref().map_or("None".to_string(), py_str),
    );
    match turn(door, ctx, id, code, Some(sink)).await {
        Ok(done) => match (done.report.status, done.result) {
            (Status::Ok, Some(r)) => (r.trim().parse().unwrap_or(1), None),
            (Status::Cancelled, _) => (130, Some("interrupted".into())),
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

    fn python(kind: Run, target: &str, argv: &[&str]) -> Command {
        Command::Python {
            kind,
            target: target.into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn command_lines_are_split_as_a_shell_would() {
        assert_eq!(
            parse("python -c \"print(1)\""),
            python(Run::Code, "print(1)", &["-c"])
        );
        assert_eq!(
            parse("python3 -u script.py a 'b c'"),
            python(Run::File, "script.py", &["script.py", "a", "b c"])
        );
        assert_eq!(
            parse("python -m json.tool x.json"),
            python(Run::Module, "json.tool", &["json.tool", "x.json"])
        );
        assert_eq!(
            parse("pip install -q tabulate six"),
            Command::PipInstall(vec!["tabulate".into(), "six".into()])
        );
        assert_eq!(
            parse("python -m pip install tabulate"),
            Command::PipInstall(vec!["tabulate".into()])
        );
        assert_eq!(
            command_line("/bin/bash", &["-l".into(), "-c".into(), "ls -la".into()]),
            "ls -la"
        );
    }

    #[test]
    fn everything_else_is_not_offered() {
        for line in [
            "ls -la",
            "python a.py | grep x",
            "python a.py > out.txt",
            "echo hi && python a.py",
            "python",
            "pip uninstall x",
            "pip install -r requirements.txt",
            "curl http://example.com",
            "python -c 'unclosed",
        ] {
            assert!(
                matches!(parse(line), Command::NotOffered(_)),
                "{line} was offered"
            );
        }
    }
}
