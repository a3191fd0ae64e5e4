//! The operator console: a read-only page (`/console`, its script `/console.js`) that
//! draws live charts of the server from `GET /v1/console/stream` (server-sent events, a
//! reading a second) or `GET /v1/console/state` (one reading): tenants' use beside their
//! quotas, sessions, runs per second and latency, the memory budget, refusals by reason,
//! the newest audit lines. Only the keys the operator names (`--console-keys`) may read it;
//! without API keys, anyone may, as every route. The page holds no data and needs no build
//! step or network: the key is typed in the page (or given as `#key=` in its address, which
//! never reaches a server) and sent as a bearer token.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::http::header;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::Stream;

use crate::server::AppState;
use crate::server::error::{ApiError, ApiResult};
use crate::server::request_context::{Caller, RequestContext};
use crate::supervisor::runner::ConsoleState;

/// Console streams open at once, the server over.
pub const MAX_STREAMS: usize = 8;
/// How often a stream sends a reading.
const EVERY: Duration = Duration::from_secs(1);

const PAGE: &str = include_str!("console.html");
const SCRIPT: &str = include_str!("console.js");
/// Nothing but this server: no inline script, no other origin.
const POLICY: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:";

/// `GET /console`.
pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
        ],
        PAGE,
    )
        .into_response()
}

/// `GET /console.js`.
pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

/// Whether the caller may read the console.
fn operator(state: &AppState, ctx: &RequestContext) -> ApiResult<()> {
    if state.keys.is_none() {
        return Ok(());
    }
    match &ctx.key_id {
        Some(id) if state.config.console_keys.iter().any(|k| k == id) => Ok(()),
        _ => Err(ApiError::NotOperator),
    }
}

/// `GET /v1/console/state`: one reading.
pub async fn state(Caller { state, ctx }: Caller) -> ApiResult<Json<ConsoleState>> {
    operator(&state, &ctx)?;
    Ok(Json(state.runner.console_state()))
}

/// `GET /v1/console/stream`: a reading a second, as server-sent events (`state`), while
/// the client listens; at most [`MAX_STREAMS`] at once (then 429).
pub async fn stream(
    Caller { state, ctx }: Caller,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    operator(&state, &ctx)?;
    let place = state
        .console_streams
        .clone()
        .try_acquire_owned()
        .map_err(|_| crate::supervisor::SupervisorError::Overloaded {
            message: format!("{MAX_STREAMS} console streams are open; close one"),
            retry_after_secs: 5,
        })?;
    let readings =
        futures_util::stream::unfold((state, place, true), |(state, place, first)| async move {
            if !first {
                tokio::time::sleep(EVERY).await;
            }
            let reading = serde_json::to_string(&state.runner.console_state())
                .unwrap_or_else(|_| "{}".into());
            let event = Event::default().event("state").data(reading);
            Some((Ok(event), (state, place, false)))
        });
    Ok(Sse::new(readings).keep_alive(KeepAlive::default()))
}
