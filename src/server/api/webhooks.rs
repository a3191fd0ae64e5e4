//! `/v1/webhooks`: the caller's tenant's webhooks, registered, listed and deleted; each is
//! sent the tenant's events, signed (`supervisor/events/webhooks.rs`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;

use super::types::parse_json;
use crate::server::bracket::Bracket;
use crate::server::error::{ApiError, ApiResult, ErrorBody};
use crate::server::request_context::Caller;
use crate::supervisor::audit::Action;
use crate::supervisor::events::{WebhookInfo, WebhookRequest};

#[utoipa::path(
    post, path = "/v1/webhooks", tag = "operations", operation_id = "create_webhook",
    request_body = WebhookRequest,
    responses(
        (status = 201, description = "Registered; `secret` is shown this once", body = WebhookInfo),
        (status = 400, description = "A URL out of shape, on an address the operator does not allow, or unresolvable; an unknown event kind; a bad secret", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 429, description = "`quota_exceeded`: the tenant has 8 webhooks", body = ErrorBody),
    )
)]
pub async fn create(
    Caller { state, ctx }: Caller,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<WebhookInfo>)> {
    let key = ctx.key_id.as_deref();
    Bracket::open(&state, &ctx, Action::WebhookCreate)
        .around(201, async |_| {
            let req: WebhookRequest = parse_json(body)?;
            Ok::<_, ApiError>(state.runner.register_webhook(key, req).await?)
        })
        .await
        .map(|info| (StatusCode::CREATED, Json(info)))
}

#[utoipa::path(
    get, path = "/v1/webhooks", tag = "operations", operation_id = "list_webhooks",
    responses(
        (status = 200, description = "The tenant's webhooks and how their deliveries went (never a secret)", body = Vec<WebhookInfo>),
        (status = 401, body = ErrorBody),
    )
)]
pub async fn list(Caller { state, ctx }: Caller) -> Json<Vec<WebhookInfo>> {
    Json(state.runner.webhooks(ctx.key_id.as_deref()))
}

#[utoipa::path(
    delete, path = "/v1/webhooks/{id}", tag = "operations", operation_id = "delete_webhook",
    params(("id" = String, Path, description = "Webhook id (`wh_…`)")),
    responses(
        (status = 204, description = "Deleted: what waited on it is dropped"),
        (status = 404, description = "`webhook_not_found`", body = ErrorBody),
    )
)]
pub async fn delete(
    Caller { state, ctx }: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let bracket = Bracket::open(&state, &ctx, Action::WebhookDelete);
    let key = ctx.key_id.as_deref();
    bracket
        .around(204, async |_| state.runner.delete_webhook(key, &id))
        .await
        .map_err(ApiError::from)
        .map(|()| StatusCode::NO_CONTENT)
}
