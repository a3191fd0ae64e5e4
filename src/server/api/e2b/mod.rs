//! E2B compatibility: the E2B SDKs (`e2b`, `e2b-code-interpreter`, `@e2b/code-interpreter`),
//! unchanged, pointed at `http://HOST:PORT/e2b` with `E2B_API_URL` and `E2B_SANDBOX_URL`.
//!
//! An E2B sandbox is a Vivarium session: its limits, hibernation (pause), fork and tenancy
//! apply, and its id is the session's. Everything the SDKs send arrives under `/e2b` and is
//! routed by the `E2b-Sandbox-Port` header, as E2B's own edge routes it: none is the control
//! plane ([`control`]: create, list, info, timeout, refresh, connect, pause, resume, fork,
//! kill; [`metrics`]: `get_metrics`; [`volumes`]: `Volume` and its content API), 49999 the code interpreter ([`interpreter`]: `/execute` streamed as NDJSON,
//! contexts), 49983 envd ([`envd`]: `/files`, the Connect `filesystem.Filesystem` and
//! `process.Process` services).
//! A request to any other port is refused with 502, as E2B's edge refuses a port nothing
//! listens on.
//!
//! Keys: the control plane takes the API key as E2B's `X-API-Key`, the sandbox planes as the
//! sandbox's access token (`X-Access-Token`), which is that same key (`server/auth.rs`): a
//! sandbox is its key's alone, as a session is.

mod connect;
mod control;
mod envd;
mod filesystem;
mod interpreter;
mod metrics;
mod network;
mod process;
mod templates;
mod volumes;

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;
use tower::ServiceExt as _;

use crate::server::AppState;
use crate::server::api::types::{NetworkRequest, OpenSessionRequest, VolumeMountRequest};
use crate::server::bracket::{Bracket, turn_outcome};
use crate::server::error::{ApiError, OnWire};
use crate::server::request_context::RequestContext;
use crate::supervisor::SupervisorError;
use crate::supervisor::audit::Action;
use crate::supervisor::intake;
use crate::supervisor::intake::{OpeningExtras, Query, SetUp};
use crate::supervisor::runner::{SessionTurn, TurnDone};
use crate::supervisor::session::Session;
use crate::vocabulary::Language;

/// What the door's handlers share: the server's state. What it knows of a sandbox beyond
/// its session (its template's name, metadata, env, contexts) is the session's labels.
pub struct Door {
    app: AppState,
}

type DoorState = Arc<Door>;

/// The header E2B's edge routes a sandbox request by.
pub const PORT_HEADER: HeaderName = HeaderName::from_static("e2b-sandbox-port");
/// The header naming the sandbox a sandbox-plane request is for.
pub const SANDBOX_HEADER: HeaderName = HeaderName::from_static("e2b-sandbox-id");
/// The code interpreter's port in an E2B sandbox.
pub const INTERPRETER_PORT: u16 = 49999;
/// envd's port in an E2B sandbox.
pub const ENVD_PORT: u16 = 49983;
/// The envd version the sandboxes say they run: the SDKs switch features on by it.
pub const ENVD_VERSION: &str = "0.5.7";
/// The working directory and home of an E2B sandbox, as in E2B's own.
pub const HOME: &str = "/home/user";

pub use templates::UPLOAD_PATH;

/// Which plane a request is for.
enum Plane {
    Control,
    Interpreter,
    Envd,
}

/// The router nested at `/e2b`: each request goes to its plane's router by its
/// `E2b-Sandbox-Port` header.
pub fn router(app: AppState) -> Router {
    let door = Arc::new(Door { app });
    let control = control::routes()
        .merge(metrics::routes())
        .merge(volumes::routes())
        .merge(templates::routes())
        .with_state(door.clone());
    let interpreter = interpreter::routes().with_state(door.clone());
    let envd = envd::routes().with_state(door);
    Router::new().fallback(move |req: Request| {
        let plane = match req.headers().get(PORT_HEADER) {
            None => Ok(Plane::Control),
            Some(v) => match v.to_str().ok().and_then(|s| s.trim().parse::<u16>().ok()) {
                Some(INTERPRETER_PORT) => Ok(Plane::Interpreter),
                Some(ENVD_PORT) => Ok(Plane::Envd),
                other => Err(other),
            },
        };
        let (control, interpreter, envd) = (control.clone(), interpreter.clone(), envd.clone());
        async move {
            let router = match plane {
                Ok(Plane::Control) => control,
                Ok(Plane::Interpreter) => interpreter,
                Ok(Plane::Envd) => envd,
                Err(port) => {
                    let port = port.map_or("that".to_string(), |p| p.to_string());
                    return plain(
                        StatusCode::BAD_GATEWAY,
                        format!(
                            "port {port} is not served in a Vivarium sandbox: only the code \
                             interpreter ({INTERPRETER_PORT}) and envd ({ENVD_PORT}) are"
                        ),
                    );
                }
            };
            match router.oneshot(req).await {
                Ok(resp) => resp,
                Err(never) => match never {},
            }
        }
    })
}

/// An error as the control plane and the code interpreter answer one: E2B's
/// `{"code": status, "message": "…"}`, the message led by Vivarium's stable code.
pub struct E2bError(pub ApiError);

impl<E: Into<ApiError>> From<E> for E2bError {
    fn from(e: E) -> Self {
        E2bError(e.into())
    }
}

impl IntoResponse for E2bError {
    fn into_response(self) -> Response {
        // An ended sandbox is not found, as E2B says of one (the SDKs' `kill()` is then
        // `false`, `connect()` a NotFoundException); Vivarium's 410 is for its own API.
        let status = match self.0.status() {
            StatusCode::GONE => StatusCode::NOT_FOUND,
            other => other,
        };
        let body = json!({
            "code": status.as_u16(),
            "message": format!("{}: {}", self.0.code().as_str(), self.0),
        });
        // Vivarium's own response (its Retry-After), with E2B's status and body.
        let mut resp = self.0.into_response();
        *resp.status_mut() = status;
        *resp.body_mut() = axum::body::Body::from(body.to_string());
        resp
    }
}

/// A plain-text refusal (what E2B's edge answers for a port nothing serves).
fn plain(status: StatusCode, message: String) -> Response {
    (
        status,
        axum::Json(json!({"code": status.as_u16(), "message": message})),
    )
        .into_response()
}

/// The sandbox a sandbox-plane request is for: its `E2b-Sandbox-Id` header, trimmed. Taking
/// it never fails; [`SandboxHeader::id`] refuses a request without one, when the handler
/// comes to it (after what E2B checks first).
pub(super) struct SandboxHeader(Option<String>);

impl SandboxHeader {
    pub fn id(&self) -> Result<String, ApiError> {
        self.0.clone().ok_or_else(|| {
            SupervisorError::InvalidRequest("the E2b-Sandbox-Id header names no sandbox".into())
                .into()
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SandboxHeader {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let value = parts
            .headers
            .get(SANDBOX_HEADER)
            .and_then(|v| v.to_str().ok());
        let id = value.map(str::trim).filter(|s| !s.is_empty());
        Ok(SandboxHeader(id.map(str::to_string)))
    }
}

/// The access token a sandbox this call makes or shows is given: the call's `X-API-Key` (the
/// key it was created with; the sandbox planes take it as `X-Access-Token`), `None` on a
/// server without keys.
pub(super) struct AccessToken(pub Option<String>);

impl FromRequestParts<DoorState> for AccessToken {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        door: &DoorState,
    ) -> Result<Self, Self::Rejection> {
        let key = parts.headers.get("x-api-key").and_then(|v| v.to_str().ok());
        Ok(AccessToken(
            door.app.keys.as_ref().and(key).map(str::to_string),
        ))
    }
}

/// A control-plane JSON body, by [`json_or_default`].
pub(super) struct E2bJson<T>(pub T);

impl<T: DeserializeOwned + Default, S: Send + Sync> FromRequest<S> for E2bJson<T> {
    type Rejection = E2bError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let body = Bytes::from_request(req, state).await?;
        json_or_default(&body).map(E2bJson)
    }
}

/// The E2B door's rule for an optional JSON body: empty (or white space) is `T::default()`;
/// one that does not parse is a 400 naming why.
fn json_or_default<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, E2bError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body)
        .map_err(|e| SupervisorError::InvalidRequest(format!("the body: {e}")).into())
}

/// Runs the door's own `code` in session `id` (a sandbox's or a context's set-up: its
/// working directory, `HOME`, its `envVars`) as a query: not a turn, so neither numbered
/// (the first cell is `number_of_executions` 1) nor counted, nor audited as the caller's
/// code; what it set is kept through a later turn's rollback.
async fn set_up(
    door: &Door,
    ctx: &RequestContext,
    id: &str,
    set_up: SetUp,
) -> Result<(), ApiError> {
    let key = ctx.key_id.as_deref();
    intake::query(&door.app.runner, id, key, Query::SetUp(set_up)).await?;
    Ok(())
}

/// Runs `turn` in session `id`, audited as any turn. `caller` is what the caller sent, when
/// the turn runs it (a cell, a command line) rather than code of the door's own: the audit's
/// `code_sha256` is its, whatever the door wraps it in, and the packages its `pip install`
/// lines name are added to the session first (as the `/v1` turn adds them), so its pip
/// finds them.
async fn run_turn(
    door: &Door,
    ctx: &RequestContext,
    id: &str,
    caller: Option<(&str, Language)>,
    turn: SessionTurn,
) -> Result<TurnDone, ApiError> {
    let (mut bracket, _) = Bracket::turn(&door.app, ctx, id);
    bracket
        .record()
        .set_code(caller.map_or(turn.code.as_str(), |(code, _)| code));
    let key = ctx.key_id.as_deref();
    let ran = intake::turn_as(&door.app.runner, id, key, caller, turn, bracket.record()).await;
    bracket.close(turn_outcome(&ran));
    Ok(ran?.unchecked()?)
}

/// Opens a session for the door (a sandbox, or one of its contexts) with what the door
/// adds (`extras`: labels, deadline, set-up), audited as any session's opening; its id.
async fn open_session(
    door: &Door,
    ctx: &RequestContext,
    template: String,
    network: Option<NetworkRequest>,
    volumes: Vec<VolumeMountRequest>,
    extras: OpeningExtras,
) -> Result<String, ApiError> {
    let open = OpenSessionRequest {
        limits: None,
        template: Some(template),
        leakage: None,
        snapshot: None,
        // In a cluster a sandbox outlives its node (a kill -9, a failover), as E2B's do.
        durable: door.app.runner.in_cluster(),
        packages: Vec::new(),
        network,
        secrets: Default::default(),
        volumes,
        keep_turns: None,
    };
    let opened = Bracket::open(&door.app, ctx, Action::SessionOpen)
        .around(201, async |record| {
            intake::open_with(&door.app.runner, open, extras, record).await
        })
        .await?;
    Ok(opened.id.clone())
}

/// Gives sandbox `sandbox`'s contexts (`labels`' own) its deadline, when it has one: they end
/// when it ends by time (its timeout, its lifetime), by the supervisor's own sweep, as it
/// does, instead of at their own idle time. Called when a context is made and whenever the
/// sandbox's timeout changes (a context that hibernated wakes to take it). A sandbox killed
/// here closes its contexts itself (`control::kill`).
async fn contexts_follow(door: &Door, key: Option<&str>, sandbox: &Session) {
    for context in sandbox.labels().contexts {
        // Read again for each: waking one may take a while.
        let Some(left) = sandbox.deadline_in() else {
            return;
        };
        if let Ok(context) = door.app.runner.session(&context.id, key).await {
            context.set_deadline(left);
        }
    }
}

/// An error's message as it may leave inside a stream: through the leakage rules, as every
/// error response's does (`server/error_scrub.rs`).
fn scrubbed(door: &Door, message: String) -> String {
    door.app
        .runner
        .scrub_error_message(&message)
        .unwrap_or(message)
}
