//! E2B's control plane (`E2B_API_URL`): sandboxes created, listed, described, timed,
//! refreshed, connected to, paused, resumed, forked and killed, each onto a Vivarium
//! session.
//!
//! A sandbox's `timeout` (a refresh's `duration`) is its session's deadline
//! (`Session::set_deadline`): it ends then, used or idle, and never later than
//! `--session-lifetime-secs`. Pause hibernates the session; resume and connect wake it.
//! Logs are not served (501): Vivarium's are the audit log; metrics are `metrics.rs`'s.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::network::{self, E2bNetwork};
use super::{
    AccessToken, DoorState, E2bError, E2bJson, ENVD_VERSION, HOME, contexts_follow, open_session,
};
use crate::server::api::types::VolumeMountRequest;
use crate::server::bracket::{Bracket, outcome_of};
use crate::server::error::OnWire as _;
use crate::server::request_context::{Caller, RequestContext};
use crate::server::routing::naming_session;
use crate::supervisor::SupervisorError;
use crate::supervisor::audit::Action;
use crate::supervisor::intake::{self, OpeningExtras, SetUp};
use crate::supervisor::session::{Labels, SessionInfo, SessionState};
use crate::vocabulary::Template;

/// E2B's default sandbox timeout, seconds.
const DEFAULT_TIMEOUT_SECS: u64 = 300;

pub fn routes() -> axum::Router<DoorState> {
    axum::Router::new()
        .route("/sandboxes", post(create).get(list))
        .route("/v2/sandboxes", post(create).get(list))
        .route("/sandboxes/{id}", get(info).delete(kill))
        .route("/sandboxes/{id}/timeout", post(timeout))
        .route("/sandboxes/{id}/refreshes", post(refresh))
        .route("/sandboxes/{id}/connect", post(wake))
        .route("/v2/sandboxes/{id}/connect", post(wake))
        .route("/sandboxes/{id}/pause", post(pause))
        .route("/sandboxes/{id}/resume", post(wake))
        .route("/sandboxes/{id}/fork", post(fork))
        .route("/sandboxes/{id}/logs", get(not_served))
        .route("/v2/sandboxes/{id}/logs", get(not_served))
        .fallback(unknown)
}

/// `POST /sandboxes` and `/v2/sandboxes`: E2B's `NewSandbox`. A field Vivarium has no
/// counterpart for is refused when set (not ignored): `mcp`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewSandbox {
    #[serde(rename = "templateID")]
    template_id: String,
    #[serde(default, deserialize_with = "seconds")]
    timeout: Option<u64>,
    #[serde(default)]
    metadata: Option<BTreeMap<String, String>>,
    #[serde(default)]
    env_vars: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "allow_internet_access", alias = "allowInternetAccess")]
    allow_internet_access: Option<bool>,
    #[serde(default)]
    network: Option<E2bNetwork>,
    #[serde(default)]
    mcp: Option<Value>,
    #[serde(default)]
    volume_mounts: Option<Vec<E2bVolumeMount>>,
}

/// One of `NewSandbox`'s `volumeMounts`: a volume of the caller's (its `volumeID` is its
/// name, `api/e2b/volumes.rs`) at a path, writable (E2B's mounts are).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct E2bVolumeMount {
    name: String,
    path: String,
}

/// Forks one fork request may ask for (E2B's own bound).
const MAX_FORKS: u64 = 20;

/// The body of timeout, connect, resume and fork.
#[derive(Debug, Default, Deserialize)]
struct Timeout {
    /// `fork`'s: how many.
    #[serde(default)]
    count: Option<u64>,
    #[serde(default, deserialize_with = "seconds")]
    timeout: Option<u64>,
    /// `refreshes`' field.
    #[serde(default, deserialize_with = "seconds")]
    duration: Option<u64>,
}

/// A timeout in seconds: a whole number, however large (it saturates at the session's
/// lifetime, `Session::set_deadline`), also when written as a float (`1e300`); a negative
/// or fractional one is refused, naming it.
fn seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    if let Some(secs) = n.as_u64() {
        return Ok(Some(secs));
    }
    match n.as_f64() {
        // `as` saturates: 1e300 is u64::MAX seconds, as long as any.
        Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(Some(f as u64)),
        _ => Err(serde::de::Error::custom(format!(
            "a timeout is a whole number of seconds, at least 1: {n} is not"
        ))),
    }
}

pub(super) fn invalid(message: String) -> E2bError {
    E2bError(SupervisorError::InvalidRequest(message).into())
}

/// The template an E2B `templateID` names: E2B's code interpreter (and `scientific`) is
/// the default template, `base` (and `python`) the minimal one; any other name is one of
/// the caller's own templates (a name that is none is the intake's 404).
pub(super) fn template_of(id: &str) -> String {
    match id {
        "code-interpreter-v1" | "code-interpreter" | "code-interpreter-beta" | "scientific" => {
            Template::Scientific.to_string()
        }
        "base" | "python" => Template::Python.to_string(),
        other => name_of(other).to_string(),
    }
}

/// The name a `name[:tag]` is built and found under (tags are not kept).
pub(super) fn name_of(name: &str) -> &str {
    name.split_once(':').map_or(name, |(n, _)| n)
}

/// Where a sandbox of E2B template `template_id` starts: its user template's working folder
/// (its last WORKDIR), else HOME.
pub(super) async fn start_dir(
    door: &DoorState,
    key: Option<&str>,
    template_id: Option<&str>,
) -> String {
    let Some(t) = template_id
        .map(template_of)
        .filter(|t| t.parse::<Template>().is_err())
    else {
        return HOME.to_string();
    };
    crate::supervisor::intake::template::summary(&door.app.runner, key, name_of(&t))
        .await
        .ok()
        .and_then(|t| t.workdir)
        .unwrap_or_else(|| HOME.to_string())
}

/// The sandbox's deadline from a `timeout` in seconds (E2B's default when left out); any
/// length, saturated at the session's lifetime where it is set.
fn deadline(timeout: Option<u64>) -> Result<Duration, E2bError> {
    match timeout.unwrap_or(DEFAULT_TIMEOUT_SECS) {
        0 => Err(invalid("timeout must be at least 1 second".into())),
        secs => Ok(Duration::from_secs(secs)),
    }
}

/// Environment variables as every door takes them (`guest::check_env`).
pub(super) fn check_env(env: &BTreeMap<String, String>) -> Result<(), E2bError> {
    crate::vocabulary::check_env(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| invalid(e.to_string()))
}

/// What makes a session an E2B sandbox's (or a context's, in `cwd`): `cwd` its working
/// directory, `/home/user` its `HOME`, its `envVars` in its environment.
pub(super) fn set_up_in(env: &BTreeMap<String, String>, cwd: &str) -> SetUp {
    SetUp {
        cwd: cwd.to_string(),
        home: HOME.to_string(),
        env: env.clone(),
    }
}

/// The `templateID` of a sandbox: the one it was created with, or its template's own
/// name (a session opened through another door).
fn template_id(info: &SessionInfo, labels: &Labels) -> String {
    labels
        .template_id
        .clone()
        .unwrap_or_else(|| match info.template {
            Template::Scientific => "code-interpreter-v1".into(),
            Template::Python => "base".into(),
        })
}

/// E2B's `Sandbox` (create, connect, resume).
fn sandbox_body(info: &SessionInfo, labels: &Labels, token: Option<String>) -> Value {
    json!({
        "templateID": template_id(info, labels),
        "sandboxID": info.id,
        "clientID": "vivarium",
        "envdVersion": ENVD_VERSION,
        "envdAccessToken": token,
        "domain": Value::Null,
    })
}

/// E2B's `SandboxDetail` / `ListedSandbox` of session `info`.
fn detail(info: &SessionInfo, labels: &Labels, token: Option<String>) -> Value {
    let state = match (info.state, info.resident) {
        (SessionState::Ended, _) => "killed",
        (_, false) => "paused",
        (_, true) => "running",
    };
    json!({
        "templateID": template_id(info, labels),
        "sandboxID": info.id,
        "clientID": "vivarium",
        "startedAt": info.created_at,
        "endAt": info.expires_at,
        "envdVersion": ENVD_VERSION,
        "envdAccessToken": token,
        "cpuCount": 1,
        "memoryMB": info.limits.memory_bytes >> 20,
        "diskSizeMB": info.limits.disk_bytes >> 20,
        "volumeMounts": info
            .volumes
            .iter()
            .map(|m| json!({"name": m.volume.as_str(), "path": m.at.as_str()}))
            .collect::<Vec<_>>(),
        "state": state,
        "metadata": labels.metadata,
        "domain": Value::Null,
    })
}

async fn create(
    Caller { state: door, ctx }: Caller<DoorState>,
    AccessToken(token): AccessToken,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, E2bError> {
    let body = body?;
    let new: NewSandbox = serde_json::from_slice(&body)
        .map_err(|e| invalid(format!("the body is not an E2B NewSandbox: {e}")))?;
    if new.mcp.as_ref().is_some_and(|m| !m.is_null()) {
        return Err(invalid(
            "mcp: MCP servers inside a sandbox are not offered here (Vivarium is an MCP \
             server itself: /mcp)"
                .into(),
        ));
    }
    let template = template_of(&new.template_id);
    let deadline = deadline(new.timeout)?;
    let env = new.env_vars.unwrap_or_default();
    check_env(&env)?;
    let labels = Labels {
        template_id: Some(new.template_id),
        metadata: new.metadata.unwrap_or_default(),
        ..Labels::default()
    };
    labels.check().map_err(|e| invalid(e.to_string()))?;
    let network = network::requested(new.allow_internet_access, new.network)
        .map_err(|e| invalid(e.to_string()))?;
    // One call: the session, labelled, given its end and set up, or nothing.
    // A sandbox starts in its template's working folder (E2B's WORKDIR), else at HOME.
    let start = start_dir(&door, ctx.key_id.as_deref(), labels.template_id.as_deref()).await;
    let extras = OpeningExtras {
        set_up: Some(set_up_in(&env, &start)),
        labels: Labels { env, ..labels },
        deadline: Some(deadline),
    };
    let volumes = new
        .volume_mounts
        .unwrap_or_default()
        .into_iter()
        .map(|m| VolumeMountRequest {
            name: m.name,
            path: m.path,
            read_only: false,
        })
        .collect();
    let id = open_session(&door, &ctx, template, network, volumes, extras).await?;
    let (info, labels) = door
        .app
        .runner
        .session_labelled(&id, ctx.key_id.as_deref())
        .await?;
    let body = sandbox_body(&info, &labels, token);
    // Named, so a proxy in front of a cluster learns where it lives (`server/routing.rs`).
    Ok(naming_session(
        (StatusCode::CREATED, Json(body)).into_response(),
        &id,
    ))
}

/// `GET /v2/sandboxes`' query: E2B's filters and pages.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    /// `k=v&k2=v2`, url-encoded once more: sandboxes whose metadata holds every pair.
    #[serde(default)]
    metadata: Option<String>,
    /// `running`, `paused` or both, comma-separated.
    #[serde(default)]
    state: Option<String>,
    /// Only sandboxes of this `templateID`.
    #[serde(default)]
    template: Option<String>,
    /// `asc` (oldest first, the default) or `desc`, by start.
    #[serde(default)]
    order: Option<String>,
    /// Not offered: refused rather than ignored.
    #[serde(default)]
    started_after: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    /// Where the page begins (the `X-Next-Token` of the page before).
    #[serde(default)]
    next_token: Option<String>,
}

/// The `metadata` filter's pairs.
fn metadata_filter(q: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

async fn list(
    Caller { state: door, ctx }: Caller<DoorState>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, E2bError> {
    let Query(q) = query.map_err(|e| invalid(e.body_text()))?;
    let wanted = metadata_filter(q.metadata.as_deref().unwrap_or_default());
    let states: Vec<&str> = q
        .state
        .as_deref()
        .map(|s| s.split(',').map(str::trim).collect())
        .unwrap_or_default();
    if q.started_after.is_some() {
        return Err(invalid(
            "startedAfter is not offered: filter by metadata, state or template".into(),
        ));
    }
    // Those here and those the store keeps (after a restart, a failover); a context is a
    // session but not a sandbox.
    let mut infos = door
        .app
        .runner
        .sessions_labelled(ctx.key_id.as_deref())
        .await?;
    infos.retain(|(_, labels)| labels.context_of.is_none());
    infos.sort_by(|(a, _), (b, _)| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
    match q.order.as_deref() {
        None | Some("asc") => {}
        Some("desc") => infos.reverse(),
        Some(other) => return Err(invalid(format!("order {other:?}: asc or desc"))),
    }
    let listed: Vec<Value> = infos
        .iter()
        .map(|(info, labels)| detail(info, labels, None))
        .filter(|d| {
            wanted
                .iter()
                .all(|(k, v)| d["metadata"][k].as_str() == Some(v.as_str()))
                && (states.is_empty() || states.contains(&d["state"].as_str().unwrap_or("")))
                && q.template.as_ref().is_none_or(|t| d["templateID"] == *t)
        })
        .collect();
    let start = match q.next_token.as_deref() {
        None | Some("") => 0,
        Some(t) => t
            .parse::<usize>()
            .map_err(|_| invalid(format!("nextToken {t:?} is not one this server gave")))?,
    };
    let limit = q.limit.unwrap_or(usize::MAX).max(1);
    let page: Vec<Value> = listed.iter().skip(start).take(limit).cloned().collect();
    let mut resp = Json(Value::Array(page)).into_response();
    let next = start.saturating_add(limit);
    if next < listed.len()
        && let Ok(v) = axum::http::HeaderValue::from_str(&next.to_string())
    {
        resp.headers_mut().insert("x-next-token", v);
    }
    Ok(resp)
}

async fn info(
    Caller { state: door, ctx }: Caller<DoorState>,
    AccessToken(token): AccessToken,
    Path(id): Path<String>,
) -> Result<Json<Value>, E2bError> {
    let (info, labels) = door
        .app
        .runner
        .session_labelled(&id, ctx.key_id.as_deref())
        .await?;
    Ok(Json(detail(&info, &labels, token)))
}

async fn kill(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
) -> Result<StatusCode, E2bError> {
    let key = ctx.key_id.as_deref();
    // Its contexts go with it (`Runner::close_session`).
    let bracket = Bracket::open(&door.app, &ctx, Action::SessionClose).session(&id);
    let closed = door.app.runner.close_session(&id, key).await;
    bracket.close(outcome_of(&closed, 204));
    closed?;
    Ok(StatusCode::NO_CONTENT)
}

/// Sets sandbox `id`'s deadline `secs` from now (waking it if it hibernated), and its
/// contexts' to the same end.
async fn set_timeout(
    door: &DoorState,
    ctx: &RequestContext,
    id: &str,
    secs: Option<u64>,
) -> Result<SystemTime, E2bError> {
    let after = deadline(secs)?;
    let key = ctx.key_id.as_deref();
    let session = door.app.runner.session(id, key).await?;
    let ends = session.set_deadline(after);
    contexts_follow(door, key, &session).await;
    Ok(ends)
}

async fn timeout(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
    E2bJson(t): E2bJson<Timeout>,
) -> Result<StatusCode, E2bError> {
    if t.timeout.is_none() {
        return Err(invalid("timeout: required (seconds)".into()));
    }
    set_timeout(&door, &ctx, &id, t.timeout).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn refresh(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
    E2bJson(t): E2bJson<Timeout>,
) -> Result<StatusCode, E2bError> {
    set_timeout(&door, &ctx, &id, t.duration.or(t.timeout)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Connect and resume: the sandbox, awake, with a new deadline. 200 when it was running,
/// 201 when it woke.
async fn wake(
    Caller { state: door, ctx }: Caller<DoorState>,
    AccessToken(token): AccessToken,
    Path(id): Path<String>,
    E2bJson(t): E2bJson<Timeout>,
) -> Result<Response, E2bError> {
    let key = ctx.key_id.as_deref();
    let was = door.app.runner.session_info(&id, key).await?;
    set_timeout(&door, &ctx, &id, t.timeout).await?;
    let (info, labels) = door.app.runner.session_labelled(&id, key).await?;
    let status = match was.resident {
        true => StatusCode::OK,
        false => StatusCode::CREATED,
    };
    let body = sandbox_body(&info, &labels, token);
    Ok((status, Json(body)).into_response())
}

async fn pause(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
) -> Result<Response, E2bError> {
    let (info, labels) = door
        .app
        .runner
        .session_labelled(&id, ctx.key_id.as_deref())
        .await?;
    if !info.resident {
        return Ok(super::plain(
            StatusCode::CONFLICT,
            format!("sandbox {id} is already paused"),
        ));
    }
    pause_one(&door, &ctx, &id).await?;
    // Its contexts sleep with it, as E2B's pause stops the whole machine (connect and
    // resume wake them as they give them its deadline); one busy stays awake.
    for context in labels.contexts {
        let _ = pause_one(&door, &ctx, &context.id).await;
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Hibernates session `id`, in its own audit line.
async fn pause_one(door: &DoorState, ctx: &RequestContext, id: &str) -> Result<(), E2bError> {
    let bracket = Bracket::open(&door.app, ctx, Action::SessionPause).session(id);
    let paused = door
        .app
        .runner
        .pause_session(id, ctx.key_id.as_deref())
        .await;
    bracket.close(outcome_of(&paused, 204));
    Ok(paused?)
}

/// `POST /sandboxes/{id}/fork`: `count` new sandboxes (1 by default) with the sandbox's
/// state (`Runner::fork_session`: made in its worker, without the store), each with its own
/// deadline; one result each, the sandbox or why it could not start. The source goes on.
async fn fork(
    Caller { state: door, ctx }: Caller<DoorState>,
    AccessToken(token): AccessToken,
    Path(id): Path<String>,
    E2bJson(t): E2bJson<Timeout>,
) -> Result<Response, E2bError> {
    let count = t.count.unwrap_or(1);
    if !(1..=MAX_FORKS).contains(&count) {
        return Err(invalid(format!("count must be between 1 and {MAX_FORKS}")));
    }
    let after = deadline(t.timeout)?;
    let key = ctx.key_id.as_deref();
    let mut results = Vec::new();
    // Forks made are closed if the request ends before it answers.
    let mut made = intake::Unclaimed::new(&door.app.runner, key);
    for _ in 0..count {
        let mut bracket = Bracket::open(&door.app, &ctx, Action::SessionFork).session(&id);
        let forked = door
            .app
            .runner
            .fork_session(&id, key, bracket.record())
            .await;
        bracket.close(outcome_of(&forked, 201));
        match forked {
            Ok(session) => {
                made.push(&session.id);
                session.set_deadline(after);
                // Its labels are its source's, but for the contexts (`Runner::fork_session`).
                let body = sandbox_body(&session.info(), &session.labels(), token.clone());
                results.push(json!({ "sandbox": body }));
            }
            // The first failure is the request's when nothing was forked yet (not found,
            // another key's); later ones are that fork's.
            Err(e @ SupervisorError::SessionNotFound(_)) if results.is_empty() => {
                return Err(e.into());
            }
            Err(e) => {
                let e = crate::server::error::ApiError::from(e);
                results.push(json!({"error": {
                    "code": e.status().as_u16(),
                    "message": format!("{}: {e}", e.code().as_str()),
                }}));
            }
        }
    }
    made.claim();
    Ok((StatusCode::CREATED, Json(Value::Array(results))).into_response())
}

async fn not_served() -> Response {
    super::plain(
        StatusCode::NOT_IMPLEMENTED,
        "sandbox logs are not served by Vivarium's E2B door: the server's are its audit log".into(),
    )
}

async fn unknown(req: axum::extract::Request) -> Response {
    super::plain(
        StatusCode::NOT_FOUND,
        format!(
            "{} {} is not part of the E2B control plane Vivarium serves (docs/api/e2b.md)",
            req.method(),
            req.uri().path()
        ),
    )
}
