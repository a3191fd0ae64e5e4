//! `GET /v1/usage`: the caller's tenant's use of each of its quotas.

use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::server::error::ErrorBody;
use crate::server::request_context::Caller;
use crate::supervisor::tenants::QuotaUse;

/// What `GET /v1/usage` says (named `TenantUsage` in the OpenAPI document: a run's `usage`
/// is `Usage`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = TenantUsage)]
pub struct Usage {
    /// The tenant the caller's key belongs to (`default` without API keys).
    #[schema(example = "acme")]
    pub tenant: String,
    /// The caller's key id (`null` without API keys).
    pub key_id: Option<String>,
    /// Each quota: what the tenant holds now, and its limit (`null`: none).
    pub quotas: Vec<QuotaUse>,
}

#[utoipa::path(
    get, path = "/v1/usage", tag = "operations",
    responses(
        (status = 200, description = "The caller's tenant's use of each quota", body = Usage),
        (status = 401, body = ErrorBody),
    )
)]
pub async fn usage(Caller { state, ctx }: Caller) -> Json<Usage> {
    let tenant = state.runner.tenant(ctx.key_id.as_deref());
    Json(Usage {
        tenant: tenant.id().to_string(),
        key_id: ctx.key_id,
        quotas: tenant.usage(),
    })
}
