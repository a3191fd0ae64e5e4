//! A session's own metrics (`GET /v1/sessions/{id}/metrics`), over real HTTP: totals and one
//! sample a turn, kept while the session hibernates (and answered without waking it),
//! carried over its waking; another tenant's key gets a 404.

use std::time::Duration;

use crate::http_support::*;
use serde_json::{Value, json};

const ALICE: &str = "metrics-key-alice-0123456789";
const BOB: &str = "metrics-key-bob-0123456789ab";

async fn metrics_of(c: &reqwest::Client, s: &TestServer, id: &str) -> (u16, Value) {
    get(c, &s.url(&format!("/v1/sessions/{id}/metrics"))).await
}

async fn turn(c: &reqwest::Client, s: &TestServer, id: &str, code: &str) {
    let (st, v) = post(
        c,
        &s.url(&format!("/v1/sessions/{id}/execute")),
        &json!({ "code": code }),
    )
    .await;
    assert_eq!((st, &v["status"]), (200, &json!("ok")), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_metrics_count_its_turns_and_outlive_its_hibernation() {
    let keys = two_tenant_keys("session-metrics", ALICE, BOB);
    let s = start("session-metrics", move |a| {
        a.api_keys_file = Some(keys);
        a.hibernate_after_secs = 1;
    })
    .await;
    let c = client_with_key(ALICE);
    let (st, v) = post(
        &c,
        &s.url("/v1/sessions"),
        &json!({"template": "python", "limits": {"memory_bytes": 200 << 20, "disk_bytes": 10 << 20}}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let (st, m) = metrics_of(&c, &s, &id).await;
    assert_eq!(st, 200, "{m}");
    assert_eq!(
        (&m["session_id"], &m["turns"], &m["samples"], &m["fuel"]),
        (&json!(id), &json!(0), &json!([]), &json!(0)),
        "{m}"
    );
    let opened = m["memory_bytes"].as_u64().unwrap();
    assert!(opened > 0, "{m}");
    assert_eq!(m["memory_limit_bytes"], 200 << 20, "{m}");
    assert_eq!(m["disk_limit_bytes"], 10 << 20, "{m}");

    turn(
        &c,
        &s,
        &id,
        "b = bytearray(30_000_000)\nn = sum(range(300_000))",
    )
    .await;
    turn(&c, &s, &id, "open('f.bin', 'wb').write(b'x' * 100_000)").await;
    let (_, m) = metrics_of(&c, &s, &id).await;
    assert_eq!(m["turns"], 2, "{m}");
    let samples = m["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 2, "{m}");
    // 30 MB more than it opened with, less what the interpreter's free heap already held.
    assert!(
        m["memory_peak_bytes"].as_u64().unwrap() > opened + 10_000_000,
        "{m}"
    );
    assert!(m["disk_bytes"].as_u64().unwrap() >= 100_000, "{m}");
    assert_eq!(samples[1]["disk_bytes"], m["disk_bytes"], "{m}");
    assert!(m["cpu_seconds"].as_f64().unwrap() > 0.0, "{m}");
    assert!(m["fuel"].as_u64().unwrap() > 0, "{m}");
    let pct = samples[0]["cpu_used_pct"].as_f64().unwrap();
    assert!(pct > 0.0 && pct <= 100.0, "{m}");
    assert_eq!(m["egress"]["requests"], 0, "{m}");

    // Another tenant's key: no such session.
    let (st, e) = metrics_of(&client_with_key(BOB), &s, &id).await;
    assert_eq!(st, 404, "{e}");

    // Asleep, it answers from what it left, and is not woken by the asking.
    wait_for_metric(
        &c,
        &s.base,
        r#"vivarium_session_events_total{event="hibernate"}"#,
        1.0,
        Duration::from_secs(15),
    )
    .await;
    let (st, asleep) = metrics_of(&c, &s, &id).await;
    assert_eq!(st, 200, "{asleep}");
    for field in [
        "turns",
        "cpu_seconds",
        "fuel",
        "memory_peak_bytes",
        "disk_bytes",
        "samples",
    ] {
        assert_eq!(asleep[field], m[field], "{field}: {asleep} vs {m}");
    }
    let (_, info) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(info["resident"], false, "{info}");
    // Woken by a turn, it goes on counting.
    turn(&c, &s, &id, "n + 1").await;
    let (_, m) = metrics_of(&c, &s, &id).await;
    assert_eq!(m["turns"], 3, "{m}");
    assert_eq!(m["samples"].as_array().unwrap().len(), 3, "{m}");
    assert_eq!(m["samples"][0], asleep["samples"][0], "{m}");
    s.stop().await;
}
