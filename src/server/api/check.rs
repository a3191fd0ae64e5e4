//! `POST /v1/check`: the pre-execution check alone (the domain is `crate::check`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;

use super::types::{CheckRequest, parse_json};
use crate::check::CheckResult;
use crate::server::AppState;
use crate::server::bracket::{Bracket, outcome_of};
use crate::server::error::{ApiResult, ErrorBody};
use crate::server::request_context::Caller;
use crate::supervisor::audit::{Action, AuditRecord};

#[utoipa::path(
    post, path = "/v1/check", tag = "execute",
    request_body = CheckRequest,
    responses(
        (status = 200, description = "The verdict: syntax by the guest's own parser, static findings", body = CheckResult),
        (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 429, body = ErrorBody),
        (status = 500, description = "The checker failed (its output is never trusted beyond data)", body = ErrorBody),
        (status = 503, body = ErrorBody),
    )
)]
pub async fn check(
    Caller { state, ctx }: Caller,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<CheckResult>> {
    let mut bracket = Bracket::open(&state, &ctx, Action::Check);
    let result = check_inner(&state, body, bracket.record()).await;
    bracket.close(outcome_of(&result, 200));
    result.map(Json)
}

async fn check_inner(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    record: &mut AuditRecord,
) -> ApiResult<CheckResult> {
    state.runner.host()?;
    let req: CheckRequest = parse_json(body)?;
    record.set_code(&req.code);
    let key = record.key_id.clone();
    Ok(state.runner.check(req.code, key.as_deref()).await?)
}
