//! `GET /v1/events`: the caller's tenant's lifecycle events, oldest first, filtered and
//! paged (`supervisor/events/`).

use axum::Json;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;

use crate::server::error::{ApiResult, ErrorBody};
use crate::server::request_context::Caller;
use crate::supervisor::SupervisorError;
use crate::supervisor::events::{EventPage, EventQuery};

#[utoipa::path(
    get, path = "/v1/events", tag = "operations", operation_id = "list_events",
    params(EventQuery),
    responses(
        (status = 200, description = "The tenant's events after `after`, oldest first (kept 24 h, the newest 1,000 a tenant); `next` pages on", body = EventPage),
        (status = 400, description = "A parameter out of shape, or a `type` that is no event kind", body = ErrorBody),
        (status = 401, body = ErrorBody),
    )
)]
pub async fn list(
    Caller { state, ctx }: Caller,
    query: Result<Query<EventQuery>, QueryRejection>,
) -> ApiResult<Json<EventPage>> {
    let Query(q) = query.map_err(|e| SupervisorError::InvalidRequest(e.body_text()))?;
    Ok(Json(state.runner.events(ctx.key_id.as_deref(), &q)?))
}
