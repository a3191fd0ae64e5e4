//! E2B's sandbox metrics (`Sandbox.get_metrics`), from the session's own
//! (`GET /v1/sessions/{id}/metrics`): one `SandboxMetric` a turn within `start`..`end` (Unix
//! seconds), then one for now when the range reaches it. A sandbox runs one guest thread
//! (`cpuCount` 1); `memUsed` is its linear memory, `memTotal` its `limits.memory_bytes`
//! (beyond the template's image), `diskUsed`/`diskTotal` its working directory and
//! `limits.disk_bytes`; `memCache` is 0 (no page cache of its own).

use std::time::SystemTime;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query};
use serde::Deserialize;
use serde_json::{Value, json};

use super::control::invalid;
use super::{DoorState, E2bError};
use crate::server::request_context::Caller;
use crate::supervisor::session::SessionMetrics;
use crate::supervisor::time::{rfc3339, unix_secs};

/// The most sandboxes one `GET /sandboxes/metrics` may name.
const MAX_IDS: usize = 100;

pub fn routes() -> axum::Router<DoorState> {
    axum::Router::new()
        .route("/sandboxes/{id}/metrics", axum::routing::get(one))
        .route("/sandboxes/metrics", axum::routing::get(many))
}

#[derive(Deserialize)]
struct Range {
    start: Option<u64>,
    end: Option<u64>,
}

#[derive(Deserialize)]
struct Ids {
    sandbox_ids: String,
}

/// `GET /sandboxes/{id}/metrics?start&end`.
async fn one(
    Caller { state: door, ctx }: Caller<DoorState>,
    Path(id): Path<String>,
    query: Result<Query<Range>, QueryRejection>,
) -> Result<Json<Value>, E2bError> {
    let Query(range) = query.map_err(|e| invalid(e.body_text()))?;
    let key = ctx.key_id.as_deref();
    let m = door.app.runner.session_metrics(&id, key).await?;
    Ok(Json(Value::Array(series(&m, &range, SystemTime::now()))))
}

/// `GET /sandboxes/metrics?sandbox_ids=a,b`: each one's metric now; one the caller cannot
/// see is left out, as E2B leaves out a sandbox that is not running.
async fn many(
    Caller { state: door, ctx }: Caller<DoorState>,
    query: Result<Query<Ids>, QueryRejection>,
) -> Result<Json<Value>, E2bError> {
    let Query(q) = query.map_err(|e| invalid(e.body_text()))?;
    let ids: Vec<&str> = q.sandbox_ids.split(',').filter(|s| !s.is_empty()).collect();
    if ids.len() > MAX_IDS {
        return Err(invalid(format!(
            "sandbox_ids: at most {MAX_IDS} sandboxes a request"
        )));
    }
    let key = ctx.key_id.as_deref();
    let mut out = serde_json::Map::new();
    for id in ids {
        if let Ok(m) = door.app.runner.session_metrics(id, key).await {
            out.insert(id.to_string(), now(&m, SystemTime::now()));
        }
    }
    Ok(Json(json!({ "sandboxes": out })))
}

/// The samples of `m` within `range`, then one for `now` if the range reaches it.
fn series(m: &SessionMetrics, range: &Range, now: SystemTime) -> Vec<Value> {
    let within = |t: u64| range.start.is_none_or(|s| t >= s) && range.end.is_none_or(|e| t <= e);
    let mut out: Vec<Value> = m
        .samples
        .iter()
        .filter(|s| within(s.at_unix))
        .map(|s| {
            metric(
                m,
                &s.at,
                s.at_unix,
                s.cpu_used_pct,
                s.memory_bytes,
                s.disk_bytes,
            )
        })
        .collect();
    if range.end.is_none_or(|e| e >= unix_secs(now)) {
        out.push(self::now(m, now));
    }
    out
}

/// Its metric now: idle between turns, so no CPU.
fn now(m: &SessionMetrics, now: SystemTime) -> Value {
    metric(
        m,
        &rfc3339(now),
        unix_secs(now),
        0.0,
        m.memory_bytes,
        m.disk_bytes,
    )
}

/// E2B's `SandboxMetric`.
fn metric(m: &SessionMetrics, at: &str, unix: u64, cpu: f64, mem: u64, disk: u64) -> Value {
    json!({
        "timestamp": at,
        "timestampUnix": unix,
        "cpuCount": 1,
        "cpuUsedPct": cpu,
        "memUsed": mem,
        "memTotal": m.memory_limit_bytes,
        "memCache": 0,
        "diskUsed": disk,
        "diskTotal": m.disk_limit_bytes,
    })
}
