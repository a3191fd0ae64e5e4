//! `POST /v1/execute`: one program in a fresh sandbox. Files come in and go out base64
//! encoded; the response is the core [`Report`](crate::report::Report) as JSON, each file with
//! a media type, plus an execution `id`. Every execution outcome is HTTP 200: `status` says
//! what the guest did. (With `Accept: text/event-stream` the same route streams: `stream.rs`.)

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};

use std::sync::Arc;

use super::types::{
    ExecuteRequest, drive, execute_run, executed_response, spawn_run, start_code_mode,
};
use crate::leakage::Guard;
use crate::server::AppState;
use crate::server::bracket::{Bracket, run_outcome};
use crate::server::error::OnWire;
use crate::server::request_context::RequestContext;
use crate::vivarium::RunSpec;

pub async fn execute(
    State(state): State<AppState>,
    Extension(ctx): Extension<RequestContext>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (mut bracket, id) = Bracket::run(&state, &ctx);
    let (spec, guard, packages) = match ExecuteRequest::parse(&state, body, bracket.record()) {
        Ok(parsed) => parsed,
        Err(e) => {
            bracket.close(e.outcome());
            return e.into_response();
        }
    };
    if spec.program.tools.is_some() {
        return code_mode(state, ctx, bracket, id, spec, guard, packages).await;
    }
    let result = execute_run(&state, spec, guard, packages, bracket.record()).await;
    bracket.close(run_outcome(&result));
    executed_response(&state, &id, result).await
}

/// Code mode without streaming: the program runs in a task of its own; the response is its
/// first stop (a round of calls, `suspended`, or its end).
async fn code_mode(
    state: AppState,
    ctx: RequestContext,
    mut bracket: Bracket,
    id: String,
    mut spec: RunSpec,
    guard: Arc<Guard>,
    packages: Vec<String>,
) -> Response {
    let started = async {
        spec.packages = state
            .runner
            .packages(packages.clone(), bracket.record())
            .await?;
        start_code_mode(
            &state,
            ctx.key_id.as_deref(),
            &id,
            &mut spec,
            &guard,
            &packages,
            false,
        )
    };
    let exec = match started.await {
        Ok(exec) => exec,
        Err(e) => {
            bracket.close(e.outcome());
            return e.into_response();
        }
    };
    spawn_run(&state, bracket, spec, guard, exec.clone());
    drive(&state, &exec).await
}
