//! Jupyter's kernel gateway API: Vivarium sessions as Jupyter kernels, for JupyterLab and
//! Jupyter Server (`--gateway-url`), nbclient and the agent frameworks that drive a kernel.
//! A kernel is a session (the same limits, expiry, hibernation, audit and metrics; its id
//! is the session's); its kernelspecs are the templates. The REST side is here; the
//! WebSocket that carries the messaging protocol is `channels.rs`.

mod channels;
mod messages;
mod queries;

pub use channels::channels;

use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::server::bracket::{Bracket, outcome_of};
use crate::server::error::{ApiError, ApiResult};
use crate::server::request_context::Caller;
use crate::server::routing::naming_session;
use crate::supervisor::Runner;
use crate::supervisor::SupervisorError;
use crate::supervisor::audit::Action;
use crate::supervisor::intake::{self, OpenSessionRequest};
use crate::supervisor::session::{SessionInfo, SessionState};
use crate::supervisor::templates::{TemplateInfo, TemplateStatus};
use crate::vocabulary::Template;

/// A session's id as a kernel id: the same 128 bits, in the UUID form Jupyter Server's routes
/// require (`s-0a1b…` ↔ `0a1b…-…`).
fn kernel_id(session_id: &str) -> String {
    let h = session_id.strip_prefix("s-").unwrap_or(session_id);
    if h.len() != 32 {
        return h.to_string();
    }
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The session a kernel id names; a 404 for anything else.
fn session_id(kernel_id: &str) -> ApiResult<String> {
    let h: String = kernel_id.chars().filter(|c| *c != '-').collect();
    let id = format!("s-{h}");
    if kernel_id.len() == 36 && crate::supervisor::session::is_session_id(&id) {
        Ok(id)
    } else {
        Err(ApiError::from(SupervisorError::SessionNotFound(
            kernel_id.to_string(),
        )))
    }
}

/// A template's kernelspec name (a built-in one's, or one of the caller's: `vivarium-NAME`).
fn spec_name(t: &str) -> String {
    format!("vivarium-{t}")
}

/// The template a kernelspec name stands for: a built-in one, or a ready one of the
/// caller's.
async fn template_of(runner: &Runner, key: Option<&str>, name: &str) -> Option<TemplateInfo> {
    let t = name.strip_prefix("vivarium-")?;
    intake::template::summary(runner, key, t)
        .await
        .ok()
        .filter(|i| i.status == TemplateStatus::Ready)
}

/// One kernelspec, as `GET /api/kernelspecs` lists it.
fn kernelspec(t: &TemplateInfo) -> Value {
    let what = match (t.builtin, t.base) {
        (true, Template::Scientific) => "numpy, pandas, matplotlib, scipy, scikit-learn ready",
        (true, Template::Python) => "minimal",
        (false, _) => "your template",
    };
    let name = spec_name(&t.name);
    json!({
        "name": name,
        "spec": {
            "argv": [],
            "display_name": format!("Python 3.15 (Vivarium, {})", t.name),
            "language": "python",
            "interrupt_mode": "message",
            "env": {},
            "metadata": {"vivarium": {"template": t.name, "description": what}},
        },
        "resources": {
            "logo-64x64": format!("/kernelspecs/{name}/{LOGO_PNG}"),
            "logo-svg": format!("/kernelspecs/{name}/{LOGO_SVG}"),
        },
    })
}

/// The kernel logo's file names under `/kernelspecs/{name}/` (the names Jupyter uses).
const LOGO_PNG: &str = "logo-64x64.png";
const LOGO_SVG: &str = "logo-svg.svg";

/// `GET /kernelspecs/{name}/{file}`: a kernelspec's resources (its logos), where Jupyter
/// Server's gateway client fetches them for the browser.
pub async fn kernelspec_resource(
    Caller { state, ctx }: Caller,
    Path((name, file)): Path<(String, String)>,
) -> ApiResult<Response> {
    if template_of(&state.runner, ctx.key_id.as_deref(), &name)
        .await
        .is_none()
    {
        return Err(ApiError::NotFound(format!("no kernelspec {name}")));
    }
    let (body, media): (&'static [u8], &str) = match file.as_str() {
        LOGO_PNG => (
            include_bytes!("../../../../assets/kernel-logo-64x64.png"),
            "image/png",
        ),
        LOGO_SVG => (
            include_bytes!("../../../../assets/kernel-logo.svg"),
            "image/svg+xml",
        ),
        _ => {
            return Err(ApiError::NotFound(format!(
                "kernelspec {name} has no resource {file}"
            )));
        }
    };
    Ok((
        [
            (axum::http::header::CONTENT_TYPE, media),
            (axum::http::header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        body,
    )
        .into_response())
}

/// `GET /api/kernelspecs`: the built-in templates' and the caller's ready ones.
pub async fn kernelspecs(Caller { state, ctx }: Caller) -> ApiResult<Json<Value>> {
    let specs: serde_json::Map<String, Value> =
        intake::template::list(&state.runner, ctx.key_id.as_deref())
            .await?
            .iter()
            .filter(|t| t.status == TemplateStatus::Ready)
            .map(|t| (spec_name(&t.name), kernelspec(t)))
            .collect();
    let default = spec_name(Template::Scientific.name());
    Ok(Json(json!({ "default": default, "kernelspecs": specs })))
}

/// `GET /api/kernelspecs/{name}`.
pub async fn one_kernelspec(
    Caller { state, ctx }: Caller,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let t = template_of(&state.runner, ctx.key_id.as_deref(), &name)
        .await
        .ok_or_else(|| ApiError::NotFound(format!("kernelspec {name}")))?;
    Ok(Json(kernelspec(&t)))
}

/// A kernel as Jupyter's REST API describes it.
#[derive(Debug, Serialize)]
pub struct KernelModel {
    id: String,
    name: String,
    last_activity: String,
    execution_state: &'static str,
    connections: u32,
}

impl KernelModel {
    fn of(info: &SessionInfo) -> Self {
        KernelModel {
            id: kernel_id(&info.id),
            name: spec_name(info.template.name()),
            last_activity: info.last_used_at.clone(),
            execution_state: match info.state {
                SessionState::Idle => "idle",
                SessionState::Busy => "busy",
                SessionState::Ended => "dead",
            },
            connections: 0,
        }
    }
}

/// `GET /api/kernels`: every session of the caller's key on this node, as a kernel.
pub async fn list(Caller { state, ctx }: Caller) -> ApiResult<Json<Vec<KernelModel>>> {
    state.runner.host()?;
    Ok(Json(
        state
            .runner
            .sessions(ctx.key_id.as_deref())
            .iter()
            .map(KernelModel::of)
            .collect(),
    ))
}

/// The body of `POST /api/kernels` (Jupyter's; `path` and `env` are taken and ignored: a
/// kernel has no host path, and its environment is the sandbox's).
#[derive(Debug, Default, Deserialize)]
struct StartKernel {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    path: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    env: Option<Value>,
}

/// `POST /api/kernels`: opens a session from the kernelspec's template.
pub async fn start(Caller { state, ctx }: Caller, body: Result<Bytes, BytesRejection>) -> Response {
    let mut bracket = Bracket::open(&state, &ctx, Action::SessionOpen);
    let result: ApiResult<KernelModel> = async {
        let body = body?;
        let req: StartKernel = if body.iter().all(u8::is_ascii_whitespace) {
            StartKernel::default()
        } else {
            serde_json::from_slice(&body).map_err(|e| ApiError::InvalidJson(e.to_string()))?
        };
        let template = match req.name.as_deref() {
            // Jupyter's clients ask for `python3` when nothing names a kernelspec.
            None | Some("" | "python3" | "python") => Template::Scientific.to_string(),
            Some(name) => {
                template_of(&state.runner, ctx.key_id.as_deref(), name)
                    .await
                    .ok_or_else(|| {
                        ApiError::from(SupervisorError::InvalidRequest(format!(
                            "no kernelspec {name:?}; see GET /api/kernelspecs"
                        )))
                    })?
                    .name
            }
        };
        // The server's default limits, and the operator's network list as it is, as for
        // any request that names neither.
        let ask = OpenSessionRequest {
            template: Some(template),
            ..OpenSessionRequest::default()
        };
        let session = intake::open(&state.runner, ask, bracket.record()).await?;
        Ok(KernelModel::of(&session.info()))
    }
    .await;
    bracket.close(outcome_of(&result, 201));
    match result {
        Ok(model) => {
            let id = model.id.clone();
            naming_session((StatusCode::CREATED, Json(model)).into_response(), &id)
        }
        Err(e) => e.into_response(),
    }
}

/// `GET /api/kernels/{id}`.
pub async fn info(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<KernelModel>> {
    Ok(Json(KernelModel::of(
        &state
            .runner
            .session_info(&session_id(&id)?, ctx.key_id.as_deref())
            .await?,
    )))
}

/// `DELETE /api/kernels/{id}`: closes the session.
pub async fn shutdown(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id = session_id(&id)?;
    let bracket = Bracket::open(&state, &ctx, Action::SessionClose).session(&id);
    let result = state.runner.close_session(&id, ctx.key_id.as_deref()).await;
    bracket.close(outcome_of(&result, 204));
    result
        .map_err(ApiError::from)
        .map(|()| StatusCode::NO_CONTENT)
}

/// `POST /api/kernels/{id}/interrupt`: stops the running cell; the kernel keeps its state
/// as it was after the last completed cell (the session's rollback).
pub async fn interrupt(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    state
        .runner
        .interrupt_session(&session_id(&id)?, ctx.key_id.as_deref())?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/kernels/{id}/restart`: a fresh interpreter under the same id.
pub async fn restart(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<KernelModel>> {
    let id = session_id(&id)?;
    let key = ctx.key_id.as_deref();
    state.runner.restart_session(&id, key).await?;
    Ok(Json(KernelModel::of(
        &state.runner.session_info(&id, key).await?,
    )))
}
