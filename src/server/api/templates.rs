//! `/v1/templates`: environments a tenant builds and names (`docs/guides/templates.md`).
//! A build is answered at once (`202`, `status: building`) and runs on; `GET
//! /v1/templates/{name}` shows how it went, with each step's output.

use axum::Json;
use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::types::parse_json;
use crate::server::bracket::Bracket;
use crate::server::error::{ApiError, ApiResult, ErrorBody};
use crate::server::request_context::Caller;
use crate::supervisor::audit::Action;
use crate::supervisor::intake::template::{self as intake, TemplateRequest};
use crate::supervisor::templates::TemplateInfo;

/// `GET /v1/templates`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TemplateList {
    /// The built-in templates, then the caller's, by name.
    pub templates: Vec<TemplateInfo>,
}

#[utoipa::path(
    post, path = "/v1/templates", tag = "templates", operation_id = "build_template",
    request_body = TemplateRequest,
    responses(
        (status = 202, description = "The build started (`status: building`): poll `GET /v1/templates/{name}`", body = TemplateInfo),
        (status = 200, description = "The caller has a ready template of identical inputs: it is this one, at once", body = TemplateInfo),
        (status = 400, description = "A field out of shape (named in `field` or the message)", body = ErrorBody),
        (status = 404, description = "`template_not_found`: `from` names no template of the caller's", body = ErrorBody),
        (status = 409, description = "`template_building`: the name is being built", body = ErrorBody),
        (status = 429, description = "`quota_exceeded`: the tenant has as many templates, or builds in flight, as it may", body = ErrorBody),
    )
)]
pub async fn build(
    Caller { state, ctx }: Caller,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<(StatusCode, Json<TemplateInfo>)> {
    Bracket::open(&state, &ctx, Action::TemplateBuild)
        .around(202, async |record| {
            let req: TemplateRequest = parse_json(body)?;
            record.set_path(&req.name, 0);
            Ok::<_, ApiError>(intake::build(&state.runner, req, record).await?)
        })
        .await
        .map(|(started, info)| {
            let status = if started {
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            (status, Json(info))
        })
}

#[utoipa::path(
    get, path = "/v1/templates", tag = "templates", operation_id = "list_templates",
    responses((status = 200, description = "The built-in templates and the caller's", body = TemplateList))
)]
pub async fn list(Caller { state, ctx }: Caller) -> ApiResult<Json<TemplateList>> {
    let templates = intake::list(&state.runner, ctx.key_id.as_deref()).await?;
    Ok(Json(TemplateList { templates }))
}

#[utoipa::path(
    get, path = "/v1/templates/{name}", tag = "templates", operation_id = "template_info",
    params(("name" = String, Path, description = "Template name")),
    responses(
        (status = 200, description = "The template: its status, and its build's log and failure", body = TemplateInfo),
        (status = 404, description = "`template_not_found` (never built, deleted, or another tenant's)", body = ErrorBody),
    )
)]
pub async fn info(
    Caller { state, ctx }: Caller,
    Path(name): Path<String>,
) -> ApiResult<Json<TemplateInfo>> {
    Ok(Json(
        intake::get(&state.runner, ctx.key_id.as_deref(), &name).await?,
    ))
}

#[utoipa::path(
    delete, path = "/v1/templates/{name}", tag = "templates", operation_id = "delete_template",
    params(("name" = String, Path, description = "Template name")),
    responses(
        (status = 204, description = "Deleted; sessions and runs started from it go on"),
        (status = 400, description = "A built-in template", body = ErrorBody),
        (status = 404, description = "`template_not_found`", body = ErrorBody),
        (status = 409, description = "`template_building`", body = ErrorBody),
    )
)]
pub async fn delete(
    Caller { state, ctx }: Caller,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    let key = ctx.key_id.as_deref();
    Bracket::open(&state, &ctx, Action::TemplateDelete)
        .around(204, async |record| {
            record.set_path(&name, 0);
            intake::delete(&state.runner, key, &name).await
        })
        .await
        .map_err(ApiError::from)
        .map(|()| StatusCode::NO_CONTENT)
}
