//! Per-request context: the request id (taken from a sane incoming `x-request-id`, else
//! made up) echoed in the `x-request-id` response header, the client address, the key id
//! once authenticated; plus the access log line and the per-status response counter.

use std::net::SocketAddr;
use std::time::Instant;

use axum::extract::rejection::ExtensionRejection;
use axum::extract::{ConnectInfo, Extension, FromRequestParts, Request, State};
use axum::http::HeaderValue;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use super::AppState;
use crate::supervisor::ErrorCode;
use crate::supervisor::audit::Door;
pub use crate::supervisor::audit::RequestContext;

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Marks a response made from a caught panic.
#[derive(Debug, Clone, Copy)]
pub struct Panicked;

fn sane_id(v: &HeaderValue) -> Option<String> {
    let s = v.to_str().ok()?;
    (!s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b)))
    .then(|| s.to_string())
}

pub fn new_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// Gives every request its [`RequestContext`] (`door`: the door its path is for, named by the
/// doors' registry) and logs and counts its answer.
pub async fn middleware(
    State(state): State<AppState>,
    door: Door,
    mut req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let request_id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(sane_id)
        .unwrap_or_else(new_id);
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    req.extensions_mut().insert(RequestContext {
        request_id: request_id.clone(),
        client,
        key_id: None,
        door,
    });
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let span = tracing::info_span!(
        "request",
        id = %request_id,
        %method,
        path = %shown_path(&path),
        door = door.as_str(),
        otel.kind = "server",
        http.response.status_code = tracing::field::Empty,
        vivarium.tenant = tracing::field::Empty,
    );
    super::telemetry::follow_caller(&span, req.headers());
    let mut resp = next.run(req).instrument(span.clone()).await;
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, v);
    }
    let status = resp.status().as_u16();
    span.record("http.response.status_code", status);
    state.runner.metrics().responded(status);
    if resp.extensions().get::<Panicked>().is_some() {
        state.runner.metrics().panicked();
    }
    let code = resp.extensions().get::<ErrorCode>().map(|c| c.as_str());
    let ms = started.elapsed().as_secs_f64() * 1e3;
    span.in_scope(|| match code {
        Some(code) => tracing::info!(status, ms, error = code, client = %client, "request done"),
        None => tracing::info!(status, ms, client = %client, "request done"),
    });
    resp
}

/// `path` as logs and traces show it: a file's path (`…/files/{path}`) is the caller's data
/// and may hold anything, so it is left out.
fn shown_path(path: &str) -> std::borrow::Cow<'_, str> {
    match path.find("/files/") {
        Some(i) => format!("{}/files/{{path}}", &path[..i]).into(),
        None => path.into(),
    }
}

/// What every handler starts from: the state of its router (`AppState`, or a door's own) and
/// the request's [`RequestContext`] (its id, client and key), taken in one extractor so
/// that no handler spells out the two.
#[derive(Clone)]
pub struct Caller<S = AppState> {
    /// The router's state.
    pub state: S,
    /// Who asks: the request's id, client and key.
    pub ctx: RequestContext,
}

impl<S: Clone + Send + Sync + 'static> FromRequestParts<S> for Caller<S> {
    type Rejection = ExtensionRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Extension(ctx) = Extension::<RequestContext>::from_request_parts(parts, state).await?;
        Ok(Caller {
            state: state.clone(),
            ctx,
        })
    }
}
