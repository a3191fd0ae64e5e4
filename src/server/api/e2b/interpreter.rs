//! E2B's code interpreter (port 49999): `POST /execute` runs a cell in the sandbox's session
//! (or one of its contexts) and streams it as NDJSON, one JSON object a line, as it happens:
//! `stdout`/`stderr` (`text`, an ISO 8601 `timestamp`), each rich output and the
//! final value as a `result` (`text`, `html`, `png`, `svg`, `is_main_result`), an `error`
//! (`name`, `value`, `traceback`), `number_of_executions` and `end_of_execution`. A client
//! that hangs up interrupts its cell. Contexts are sessions of their own, tied to the
//! sandbox (`/contexts`). A cell is Python (notebook syntax translated), or with `language`
//! `bash` (`sh`) a script for the sandbox's shell, whose `cd` and `export` stay in its
//! session; a context made for bash runs its cells so.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::control::{check_env, invalid, set_up_in};
use super::network;
use super::{
    DoorState, E2bError, HOME, SandboxHeader, contexts_follow, json_or_default, open_session,
    run_turn, scrubbed, set_up,
};
use crate::report::StreamKind;
use crate::server::api::types::{Cell, Failure, VolumeMountRequest};
use crate::server::bracket::{Bracket, outcome_of};
use crate::server::error::{ApiError, OnWire};
use crate::server::request_context::{Caller, RequestContext};
use crate::supervisor::SupervisorError;
use crate::supervisor::audit::Action;
use crate::supervisor::intake::OpeningExtras;
use crate::supervisor::runner::{SessionTurn, TextSink};
use crate::supervisor::session::{Labels, MAX_CONTEXTS};
use crate::vocabulary::Language;

pub fn routes() -> axum::Router<DoorState> {
    axum::Router::new()
        .route("/execute", post(execute))
        .route("/contexts", post(create_context).get(list_contexts))
        .route("/contexts/{id}", delete(remove_context))
        .route("/contexts/{id}/restart", post(restart_context))
        .route("/health", get(|| async { StatusCode::OK }))
        .fallback(|req: axum::extract::Request| async move {
            super::plain(
                StatusCode::NOT_FOUND,
                format!(
                    "{} {} is not part of the code interpreter Vivarium serves",
                    req.method(),
                    req.uri().path()
                ),
            )
        })
}

#[derive(Debug, Deserialize)]
struct ExecuteBody {
    code: String,
    #[serde(default)]
    context_id: Option<String>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    env_vars: Option<BTreeMap<String, String>>,
}

/// The language a cell or context names: Python (the default) or bash; nothing else runs.
fn check_language(language: Option<&str>) -> Result<Option<Language>, E2bError> {
    match language {
        None | Some("") => Ok(None),
        Some("python" | "python3") => Ok(Some(Language::Python)),
        Some("bash" | "sh") => Ok(Some(Language::Bash)),
        Some(other) => Err(invalid(format!(
            "language {other:?} is not available: Vivarium runs Python and bash (sh)"
        ))),
    }
}

/// The session a cell or context request is for, and its language when the cell names
/// none: the sandbox's own (Python), or one of its contexts (Python, or bash for one made
/// for bash); another sandbox's context is not found.
async fn target(
    door: &DoorState,
    key: Option<&str>,
    sandbox: &str,
    context: Option<&str>,
) -> Result<(String, Language), E2bError> {
    let c = match context {
        None => return Ok((sandbox.to_string(), Language::Python)),
        Some(c) if c == sandbox => return Ok((c.to_string(), Language::Python)),
        Some(c) => c,
    };
    let (_, labels) = door.app.runner.session_labelled(sandbox, key).await?;
    match labels.context(c) {
        Some(found) if found.bash => Ok((c.to_string(), Language::Bash)),
        Some(_) => Ok((c.to_string(), Language::Python)),
        None => Err(E2bError(
            SupervisorError::SessionNotFound(c.to_string()).into(),
        )),
    }
}

/// Now, as the code interpreter stamps its output (ISO 8601).
fn now() -> String {
    crate::supervisor::time::rfc3339_now()
}

/// One NDJSON line, ASCII only (a client that decodes each network chunk on its own, as
/// the JS SDK does, would garble a character split between two).
fn line(v: Value) -> Bytes {
    use std::fmt::Write as _;
    let mut s = String::new();
    for c in v.to_string().chars() {
        if c.is_ascii() {
            s.push(c);
        } else {
            // Only inside strings: JSON has no other place for it.
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(s, "\\u{u:04x}");
            }
        }
    }
    s.push('\n');
    Bytes::from(s)
}

async fn execute(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, E2bError> {
    let sandbox = sandbox.id()?;
    let body = body?;
    let cell: ExecuteBody = serde_json::from_slice(&body)
        .map_err(|e| invalid(format!("the body is not an execute request: {e}")))?;
    let language = check_language(cell.language.as_deref())?;
    let env = cell.env_vars.unwrap_or_default();
    check_env(&env)?;
    let key = ctx.key_id.as_deref();
    let (id, own) = target(&door, key, &sandbox, cell.context_id.as_deref()).await?;
    // A context made for bash runs its cells as shell unless told otherwise.
    let language = language.unwrap_or(own);
    // Not found, another key's or ended: an HTTP error, before the stream begins.
    door.app.runner.session(&id, ctx.key_id.as_deref()).await?;
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    tokio::spawn(run_cell(door, ctx, id, cell.code, language, env, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx))
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Runs one cell and sends its lines; a client gone interrupts it. The channel is
/// unbounded: the cell's live text is bounded by its output limit, the rest by the caps on
/// rich outputs.
async fn run_cell(
    door: DoorState,
    ctx: RequestContext,
    id: String,
    code: String,
    language: Language,
    env: BTreeMap<String, String>,
    tx: mpsc::UnboundedSender<Bytes>,
) {
    let sink: TextSink = {
        let tx = tx.clone();
        std::sync::Arc::new(move |kind, text| {
            let kind = match kind {
                StreamKind::Stdout => "stdout",
                StreamKind::Stderr => "stderr",
            };
            let _ = tx.send(line(
                json!({"type": kind, "text": text, "timestamp": now()}),
            ));
        })
    };
    // The cell's `env_vars` are its own: set and undone around it in the same turn.
    let env = env.into_iter().collect();
    let audited = code.clone();
    let turn = SessionTurn {
        env,
        language,
        ..SessionTurn::cell(code, Some(sink))
    };
    let done = tokio::select! {
        done = run_turn(&door, &ctx, &id, Some((&audited, language)), turn) => done,
        _ = tx.closed() => {
            // The client hung up: its cell stops (the session goes back to its state
            // before it, as after any interrupted cell).
            let _ = door.app.runner.interrupt_session(&id, ctx.key_id.as_deref());
            return;
        }
    };
    let scrub = |m: String| scrubbed(&door, m);
    for l in cell_lines(done, language, scrub) {
        if tx.send(l).is_err() {
            return;
        }
    }
}

/// The lines after a cell's live text: its results, error, count and end.
/// An error's message goes through `scrub` (the leakage rules, as every error response's does).
fn cell_lines(
    done: Result<crate::supervisor::runner::TurnDone, ApiError>,
    language: Language,
    scrub: impl Fn(String) -> String,
) -> Vec<Bytes> {
    let mut out = Vec::new();
    let done = match done {
        Ok(done) => done,
        Err(e) => {
            // Refused before it ran (busy, over a quota): the cell's error, named by
            // Vivarium's code.
            let value = scrub(e.to_string());
            out.push(line(json!({
                "type": "error",
                "name": e.code().as_str(),
                "traceback": format!("{}: {value}", e.code().as_str()),
                "value": value,
            })));
            out.push(line(json!({"type": "end_of_execution"})));
            return out;
        }
    };
    // A shell cell that ended by itself with a status other than 0: that status is its
    // error (a limit or an interrupt is named as for Python).
    let exited = match (language, done.report.status, done.report.exit_code) {
        (Language::Bash, crate::report::Status::Error, Some(code)) if code != 0 => Some(code),
        _ => None,
    };
    let mut cell = Cell::of(done);
    if let Some(code) = exited {
        cell.failure = Some(Failure {
            name: "ExitStatus".into(),
            value: code.to_string(),
            traceback: vec![format!("exit status {code}")],
        });
    }
    for name in &cell.truncated {
        out.push(line(json!({
            "type": "stderr",
            "text": format!("\n[{name} truncated at the output limit]\n"),
            "timestamp": now(),
        })));
    }
    for o in cell.displays {
        let field = match o.mime.as_str() {
            "image/png" => "png",
            "image/svg+xml" => "svg",
            "text/html" => "html",
            _ => "text",
        };
        out.push(line(
            json!({"type": "result", field: o.data, "is_main_result": false}),
        ));
    }
    if let Some(main) = cell.main {
        let mut r = json!({"type": "result", "text": main.text, "is_main_result": true});
        if let Some(html) = main.html {
            r["html"] = json!(html);
        }
        out.push(line(r));
    }
    if let Some(f) = cell.failure {
        out.push(line(json!({
            "type": "error",
            "name": f.name,
            "value": f.value,
            "traceback": f.traceback.join("\n"),
        })));
    }
    out.push(line(
        json!({"type": "number_of_executions", "execution_count": cell.turn}),
    ));
    out.push(line(json!({"type": "end_of_execution"})));
    out
}

#[derive(Debug, Default, Deserialize)]
struct NewContext {
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    cwd: Option<String>,
}

fn context_body(id: &str, cwd: &str, language: Language) -> Value {
    json!({"id": id, "language": language.as_str(), "cwd": cwd})
}

async fn create_context(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, E2bError> {
    let sandbox = sandbox.id()?;
    let new: NewContext = json_or_default(&body?)?;
    let language = check_language(new.language.as_deref())?.unwrap_or_default();
    let cwd = new.cwd.unwrap_or_else(|| HOME.to_string());
    if !cwd.starts_with('/') || cwd.contains('\0') || cwd.len() > 1024 {
        return Err(invalid(format!("cwd {cwd:?} must be an absolute path")));
    }
    let key = ctx.key_id.as_deref();
    let owner = door.app.runner.session(&sandbox, key).await?;
    let labels = owner.labels();
    if labels.contexts.len() >= MAX_CONTEXTS {
        return Err(invalid(format!(
            "this sandbox has {MAX_CONTEXTS} contexts already: remove one first"
        )));
    }
    // The sandbox's network, whatever it is (none, the operator's, narrowed); its env, set
    // up in the context's own working directory.
    let network = network::of_session(&owner);
    let extras = OpeningExtras {
        labels: Labels {
            context_of: Some(sandbox.clone()),
            ..Labels::default()
        },
        deadline: None,
        set_up: Some(set_up_in(&labels.env, &cwd)),
    };
    // And its volumes, where they are mounted in it.
    let volumes = owner
        .volumes
        .iter()
        .map(|m| VolumeMountRequest {
            name: m.volume.to_string(),
            path: m.at.as_str().to_string(),
            read_only: m.read_only,
        })
        .collect();
    // A context starts from its sandbox's template, a user template included.
    let template = labels
        .template_id
        .as_deref()
        .map_or_else(|| owner.template.to_string(), super::control::template_of);
    let id = open_session(&door, &ctx, template, network, volumes, extras)
        .await
        .map_err(|why| {
            invalid(format!(
                "the context's cwd {cwd:?} could not be made: {why}"
            ))
        })?;
    let bash = language == Language::Bash;
    let added = door
        .app
        .runner
        .relabel(&sandbox, key, |l| l.add_context(&id, bash, &cwd))
        .await;
    if let Err(e) = added {
        let _ = door.app.runner.close_session(&id, key).await;
        return Err(e.into());
    }
    // Added first, then given the sandbox's deadline: a timeout set meanwhile reaches it
    // one way or the other.
    contexts_follow(&door, key, &owner).await;
    Ok(Json(context_body(&id, &cwd, language)))
}

async fn list_contexts(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
) -> Result<Json<Value>, E2bError> {
    let sandbox = sandbox.id()?;
    let (_, labels) = door
        .app
        .runner
        .session_labelled(&sandbox, ctx.key_id.as_deref())
        .await?;
    let contexts = std::iter::once(context_body(&sandbox, HOME, Language::Python))
        .chain(labels.contexts.iter().map(|c| {
            let language = if c.bash {
                Language::Bash
            } else {
                Language::Python
            };
            context_body(&c.id, c.cwd.as_deref().unwrap_or(HOME), language)
        }))
        .collect();
    Ok(Json(Value::Array(contexts)))
}

async fn remove_context(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
    Path(context): Path<String>,
) -> Result<StatusCode, E2bError> {
    let sandbox = sandbox.id()?;
    if context == sandbox {
        return Err(invalid(
            "the sandbox's default context cannot be removed (kill the sandbox)".into(),
        ));
    }
    let key = ctx.key_id.as_deref();
    let (id, _) = target(&door, key, &sandbox, Some(&context)).await?;
    let bracket = Bracket::open(&door.app, &ctx, Action::SessionClose).session(&id);
    let closed = door.app.runner.close_session(&id, key).await;
    bracket.close(outcome_of(&closed, 204));
    door.app
        .runner
        .relabel(&sandbox, key, |l| {
            l.contexts.retain(|c| c.id != id);
            Ok(())
        })
        .await?;
    closed?;
    Ok(StatusCode::NO_CONTENT)
}

async fn restart_context(
    Caller { state: door, ctx }: Caller<DoorState>,
    sandbox: SandboxHeader,
    Path(context): Path<String>,
) -> Result<StatusCode, E2bError> {
    let sandbox = sandbox.id()?;
    let key = ctx.key_id.as_deref();
    let (id, _) = target(&door, key, &sandbox, Some(&context)).await?;
    door.app.runner.restart_session(&id, key).await?;
    // A fresh interpreter: its set-up again (the working directory it was made in, the
    // sandbox's env).
    let (_, labels) = door.app.runner.session_labelled(&sandbox, key).await?;
    let cwd = labels.context(&id).and_then(|c| c.cwd.clone());
    set_up(
        &door,
        &ctx,
        &id,
        set_up_in(&labels.env, cwd.as_deref().unwrap_or(HOME)),
    )
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
