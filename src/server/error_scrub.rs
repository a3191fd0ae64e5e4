//! Every JSON error response leaves through the leakage rules: its message may echo what a
//! guest wrote (a path in its working directory, a worker's refusal) or what a caller sent
//! (a path, an id, a fragment of a malformed body), and is redacted like output
//! ([`crate::supervisor::runner::Runner::scrub_error_message`]). Both shapes are covered: the API's
//! `{"error": {"message"}}` and Piston's `{"message"}`.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::AppState;
use super::error::ApiError;
use crate::supervisor::SupervisorError;

/// Error bodies are the server's own and small (an `output_leak` lists at most
/// [`crate::leakage::MAX_LISTED_LEAKS`] leaks); one larger than this is not an error body.
const MAX_ERROR_BODY: usize = 4 << 20;

/// Rewrites the message of a JSON error response that holds a secret.
pub async fn middleware(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(resp.status().is_client_error() || resp.status().is_server_error()) || !is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        return ApiError::from(SupervisorError::Internal(
            "an error response could not be read".into(),
        ))
        .into_response();
    };
    let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let mut changed = false;
    for pointer in ["/error/message", "/message"] {
        if let Some(message) = v.pointer_mut(pointer)
            && let Some(text) = message.as_str()
            && let Some(scrubbed) = state.runner.scrub_error_message(text)
        {
            *message = Value::String(scrubbed);
            changed = true;
        }
    }
    if !changed {
        return Response::from_parts(parts, Body::from(bytes));
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(v.to_string()))
}
