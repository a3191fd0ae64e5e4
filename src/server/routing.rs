//! What a proxy in front of several nodes routes by. Every response names the node that
//! answered (`Vivarium-Node`); a successful response about a session, or one that made a
//! session, names it (`Vivarium-Session`), so a proxy can learn where a session lives now
//! (HAProxy's `stick store-response`); a request may name its session in
//! `Vivarium-Session` (for proxies that hash a header rather than a path), and where its
//! path names one too they must agree. An E2B sandbox is its session: named by its path
//! (`/e2b/sandboxes/{id}`) or its `E2b-Sandbox-Id` header. A code-mode execution waiting on its caller is named
//! the same way (`Vivarium-Execution`), by the response that suspended it and by every
//! successful one about it, so its resumes reach the node whose program waits.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use crate::supervisor::SupervisorError;
use crate::supervisor::session::is_session_id;

/// The node that answered.
pub const NODE_HEADER: HeaderName = HeaderName::from_static("vivarium-node");
/// The session a request is for, or a response made.
pub const SESSION_HEADER: HeaderName = HeaderName::from_static("vivarium-session");

/// The code-mode execution a response suspended, or answered for.
pub const EXECUTION_HEADER: HeaderName = HeaderName::from_static("vivarium-execution");

/// The execution a path names: `/v1/executions/{id}…`.
fn execution_in_path(path: &str) -> Option<String> {
    let id = path.strip_prefix("/v1/executions/")?.split('/').next()?;
    let shaped = (id.starts_with("ex-") || id.starts_with("turn-"))
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    shaped.then(|| id.to_string())
}

/// The session a path names: `/v1/sessions/{id}…`, `/api/kernels/{id}…`, or an E2B
/// sandbox's `/e2b/sandboxes/{id}…` and `/e2b/v2/sandboxes/{id}…`.
fn session_in_path(path: &str) -> Option<&str> {
    let rest = path
        .strip_prefix("/v1/sessions/")
        .or_else(|| path.strip_prefix("/api/kernels/"))
        .or_else(|| path.strip_prefix("/e2b/sandboxes/"))
        .or_else(|| path.strip_prefix("/e2b/v2/sandboxes/"))?;
    let id = rest.split('/').next()?;
    (!id.is_empty()).then_some(id)
}

/// The sandbox an E2B sandbox-plane request is for (its `E2b-Sandbox-Id` header): its
/// session, which the response names as a path's.
fn e2b_sandbox(req: &Request) -> Option<String> {
    if !req.uri().path().starts_with("/e2b/") {
        return None;
    }
    let id = req.headers().get("e2b-sandbox-id")?.to_str().ok()?.trim();
    is_session_id(id).then(|| id.to_string())
}

/// Checks a request's `Vivarium-Session` and adds `Vivarium-Node` to every response.
pub async fn middleware(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(v) = req.headers().get(&SESSION_HEADER) {
        let named = v.to_str().ok().filter(|s| is_session_id(s));
        let refusal = match (named, session_in_path(req.uri().path())) {
            (None, _) => Some(
                "the Vivarium-Session header is not a session id (s- and 32 hex digits)"
                    .to_string(),
            ),
            (Some(h), Some(p)) if h != p => Some(format!(
                "the Vivarium-Session header names {h} but the path names {p}"
            )),
            _ => None,
        };
        if let Some(message) = refusal {
            let mut resp = ApiError::from(SupervisorError::InvalidRequest(message)).into_response();
            name_node(resp.headers_mut(), &state.config.node_id);
            return resp;
        }
    }
    let named = session_in_path(req.uri().path())
        .filter(|id| is_session_id(id))
        .map(str::to_string)
        .or_else(|| e2b_sandbox(&req));
    let execution = execution_in_path(req.uri().path());
    let mut resp = next.run(req).await;
    name_node(resp.headers_mut(), &state.config.node_id);
    // An execution this node answered for (it may have just brought it back) waits here.
    if let Some(id) = execution
        && resp.status().is_success()
        && let Ok(v) = HeaderValue::from_str(&id)
    {
        resp.headers_mut().insert(EXECUTION_HEADER, v);
    }
    // A session this node answered for lives here now (it may have just taken it over).
    if let Some(id) = named
        && resp.status().is_success()
        && !resp.headers().contains_key(&SESSION_HEADER)
    {
        return naming_session(resp, &id);
    }
    resp
}

fn name_node(headers: &mut HeaderMap, node: &str) {
    if let Ok(v) = HeaderValue::from_str(node) {
        headers.insert(NODE_HEADER, v);
    }
}

/// `resp` with `Vivarium-Execution: id` (a response that suspended execution `id`).
pub fn naming_execution(mut resp: Response, id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert(EXECUTION_HEADER, v);
    }
    resp
}

/// `resp` with `Vivarium-Session: id` (a response that made session `id`).
pub fn naming_session(mut resp: Response, id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert(SESSION_HEADER, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_sessions() {
        assert_eq!(session_in_path("/v1/sessions/s-1/execute"), Some("s-1"));
        assert_eq!(session_in_path("/v1/sessions/s-1"), Some("s-1"));
        assert_eq!(session_in_path("/api/kernels/s-2/channels"), Some("s-2"));
        assert_eq!(session_in_path("/v1/sessions"), None);
        assert_eq!(session_in_path("/v1/sessions/"), None);
        assert_eq!(session_in_path("/v1/execute"), None);
        assert_eq!(session_in_path("/e2b/sandboxes/s-3/pause"), Some("s-3"));
        assert_eq!(
            session_in_path("/e2b/v2/sandboxes/s-4/connect"),
            Some("s-4")
        );
        assert_eq!(session_in_path("/e2b/v2/sandboxes"), None);
    }
}
