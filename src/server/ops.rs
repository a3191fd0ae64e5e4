//! Operational endpoints: `/healthz` (process alive), `/readyz` (runtime loaded and taking
//! work), `/metrics` (Prometheus text), `/openapi.json`, the small human page at `/`, and the
//! JSON answers for unknown routes, wrong methods, oversized bodies and caught panics.

use axum::Json;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::request_context::Panicked;
use crate::supervisor::SupervisorError;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` for /healthz, `ready` for /readyz.
    pub status: &'static str,
    pub version: &'static str,
    /// /readyz: the worker processes guest code runs in (absent when it runs in process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersHealth>,
}

/// The worker processes, as /readyz says them.
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkersHealth {
    /// Alive now.
    pub alive: usize,
    /// The pool's size (`--workers`).
    pub configured: usize,
    /// Each jail layer and how much of it holds in the workers (`full`, `partial`,
    /// `missing`; the weakest any live worker reports).
    pub jail: std::collections::BTreeMap<&'static str, &'static str>,
}

#[utoipa::path(
    get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process is alive", body = Health))
)]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        workers: None,
    })
}

#[utoipa::path(
    get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Runtime loaded; executions are taken", body = Health),
        (status = 503, description = "Still loading, or shutting down", body = ErrorBody),
    )
)]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    // Draining (SIGTERM): the proxy should stop sending work here, though it is still served.
    if state.runner.is_leaving() {
        return Err(ApiError::from(SupervisorError::ShuttingDown));
    }
    state.runner.host()?;
    let workers = state
        .runner
        .loaded_workers()
        .filter(|w| w.configured() > 0)
        .map(|w| {
            let mut jail = std::collections::BTreeMap::new();
            for (_, report) in w.processes() {
                for (layer, l) in report.layers() {
                    let rank =
                        |s: &str| ["missing", "partial", "full"].iter().position(|x| *x == s);
                    let weaker = jail
                        .get(layer)
                        .is_none_or(|old: &&str| rank(l.as_str()) < rank(old));
                    if weaker {
                        jail.insert(layer, l.as_str());
                    }
                }
            }
            WorkersHealth {
                alive: w.processes().len(),
                configured: w.configured(),
                jail,
            }
        });
    Ok(Json(Health {
        status: "ready",
        version: env!("CARGO_PKG_VERSION"),
        workers,
    }))
}

#[utoipa::path(
    get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition format", content_type = "text/plain", body = String))
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let gauges = state.runner.gauges();
    let mut text = state.runner.metrics().render(&gauges);
    tenant_usage(&state, &mut text);
    state.runner.render_egress(&mut text);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Tenants named in `/metrics` at most (the keys file's, in order of id): the label stays
/// bounded whatever the file holds.
const MAX_TENANT_LABELS: usize = 256;

/// `vivarium_tenant_quota_used{tenant,quota}` and `..._limit` (limits that are set only).
fn tenant_usage(state: &AppState, out: &mut String) {
    use std::fmt::Write;
    let tenants: Vec<_> = state
        .runner
        .tenants()
        .into_iter()
        .take(MAX_TENANT_LABELS)
        .map(|t| (t.id().to_string(), t.usage()))
        .collect();
    let _ = writeln!(
        out,
        "# HELP vivarium_tenant_quota_used What each tenant holds of each quota now.\n\
         # TYPE vivarium_tenant_quota_used gauge"
    );
    for (id, usage) in &tenants {
        for u in usage {
            let _ = writeln!(
                out,
                "vivarium_tenant_quota_used{{tenant=\"{id}\",quota=\"{}\"}} {}",
                u.quota.as_str(),
                u.used
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP vivarium_tenant_quota_limit Each tenant's limit of each quota that has one.\n\
         # TYPE vivarium_tenant_quota_limit gauge"
    );
    for (id, usage) in &tenants {
        for u in usage {
            if let Some(limit) = u.limit {
                let _ = writeln!(
                    out,
                    "vivarium_tenant_quota_limit{{tenant=\"{id}\",quota=\"{}\"}} {limit}",
                    u.quota.as_str(),
                );
            }
        }
    }
}

#[utoipa::path(
    get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "This API's OpenAPI 3.1 document", content_type = "application/json", body = Object))
)]
pub async fn openapi_json(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi.clone(),
    )
        .into_response()
}

#[utoipa::path(
    get, path = "/", tag = "operations",
    responses((status = 200, description = "A small HTML page linking the rest", content_type = "text/html", body = String))
)]
pub async fn index() -> Html<&'static str> {
    Html(INDEX_HTML)
}

const INDEX_HTML: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Vivarium</title>
<style>body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;line-height:1.5}code{background:#f3f3f3;padding:0 .25rem}</style>
</head><body>
<h1>Vivarium</h1>
<p>Runs untrusted Python (CPython on WASI under Wasmtime) with host-enforced limits.</p>
<ul>
<li><a href="/openapi.json">/openapi.json</a>: the API, as OpenAPI 3.1</li>
<li><a href="/healthz">/healthz</a>: the process is alive</li>
<li><a href="/readyz">/readyz</a>: the runtime is loaded and executions are taken</li>
<li><a href="/metrics">/metrics</a>: Prometheus metrics</li>
</ul>
<p>Try: <code>curl -s localhost:8080/v1/execute -H 'content-type: application/json' -d '{"code":"print(6*7)"}'</code></p>
<p>Sessions: <code>POST /v1/sessions</code>, then <code>POST /v1/sessions/{id}/execute</code>.</p>
</body></html>
"#;

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(uri.path().chars().take(200).collect())
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

/// Answers 413 at once for a body whose declared length is above the cap, before reading it.
/// (Bodies without a length are cut off at the cap as they are read.)
pub async fn body_cap(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared
        && len > state.config.max_body_bytes as u64
        && !streams_to_disk(req.method(), req.uri().path())
    {
        return ApiError::PayloadTooLarge(format!(
            "request body of {len} bytes is above the cap of {} bytes",
            state.config.max_body_bytes
        ))
        .into_response();
    }
    next.run(req).await
}

/// Whether a request's body is streamed to disk within a bound of its own (a volume's file:
/// the volume's room), so the body cap is not its bound.
fn streams_to_disk(method: &axum::http::Method, path: &str) -> bool {
    let volume_file = |prefix: &str, rest: &str| {
        path.strip_prefix(prefix)
            .and_then(|p| p.split_once('/'))
            .is_some_and(|(_, r)| r.starts_with(rest))
    };
    method == axum::http::Method::PUT
        && (volume_file("/v1/volumes/", "files/") || volume_file("/e2b/volumecontent/", "file"))
}

/// The 500 answer for a panic caught in a handler; the server goes on.
pub fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response<Body> {
    let msg = crate::sandbox::guest_threads::panic_message(&*panic);
    tracing::error!(panic = %msg, "a request handler panicked");
    let mut resp = ApiError::from(SupervisorError::Internal(
        "the request handler panicked; the server goes on".into(),
    ))
    .into_response();
    resp.extensions_mut().insert(Panicked);
    resp
}

/// `GET /v1/debug/workers` (test builds, with `--debug-panic-route`): each live worker's
/// pid and the runs in flight on it.
#[cfg(debug_assertions)]
pub async fn debug_workers(
    State(state): State<AppState>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let workers = state.runner.workers()?;
    Ok(Json(serde_json::json!({
        "workers": workers
            .loads()
            .iter()
            .map(|(pid, in_flight, sessions)| {
                serde_json::json!({"pid": pid, "in_flight": in_flight, "sessions": sessions})
            })
            .collect::<Vec<_>>(),
        "lost": workers.lost_and_restarted().0,
        "restarted": workers.lost_and_restarted().1,
    })))
}

/// `POST /v1/debug/worker-fault` (test builds, with `--debug-panic-route`): makes a worker
/// fail in the way asked (`{"fault": "segfault" | "exhaust" | "forbidden_syscall" |
/// "probe"}`); a probe answers what the jail let through.
#[cfg(debug_assertions)]
pub async fn debug_worker_fault(
    State(state): State<AppState>,
    Json(req): Json<serde_json::Value>,
) -> Result<Json<crate::worker::ProbeReport>, ApiError> {
    let fault: crate::worker::Fault = serde_json::from_value(req["fault"].clone())
        .map_err(|e| ApiError::from(SupervisorError::InvalidRequest(format!("fault: {e}"))))?;
    Ok(Json(state.runner.inflict(fault).await?))
}

/// `POST /v1/debug/panic` (only with `--debug-panic-route`): panics, to test the above.
pub async fn debug_panic() -> StatusCode {
    panic!("deliberate panic from /v1/debug/panic");
}
