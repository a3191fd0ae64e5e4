//! The operator console over real HTTP: the page and its script (no data in them, a strict
//! content security policy), a reading of the server (`GET /v1/console/state`) and its
//! stream (server-sent events, a reading a second) for an operator's key only, bounded in
//! streams. The page itself in Chromium: `tests/system/console_browser.rs`.

use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

const OPERATOR: &str = "console-key-alice-0123456789";
const TENANT: &str = "console-key-bob-0123456789ab";

/// The first `n` `state` events of a console stream.
async fn readings(resp: &mut reqwest::Response, n: usize) -> Vec<Value> {
    let mut buffered = String::new();
    let mut out = Vec::new();
    let until = Instant::now() + Duration::from_secs(15);
    while out.len() < n && Instant::now() < until {
        let Some(chunk) = resp.chunk().await.unwrap() else {
            break;
        };
        buffered.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffered.find("\n\n") {
            let block: String = buffered.drain(..end + 2).collect();
            if block.contains("event: state") {
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data: "))
                    .collect();
                out.push(serde_json::from_str(&data).unwrap());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_an_operators_live_reading_of_the_server() {
    let keys = two_tenant_keys("console", OPERATOR, TENANT);
    let s = start("console", move |a| {
        a.api_keys_file = Some(keys);
        a.console_keys = vec!["alice".into()];
    })
    .await;
    // The page and its script hold no data and load nothing from elsewhere.
    let page = client().get(s.url("/console")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(policy.contains("default-src 'self'"), "{policy}");
    let html = page.text().await.unwrap();
    assert!(
        html.contains("<script src=\"/console.js\">") && !html.contains("http"),
        "{html}"
    );
    let js = client().get(s.url("/console.js")).send().await.unwrap();
    assert_eq!(js.status(), 200);

    // A run, so there is something to read.
    let op = client_with_key(OPERATOR);
    let (st, v) = post(
        &op,
        &s.url("/v1/execute"),
        &json!({"code": "print(1)", "template": "python"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");

    // Only the operator's key reads it.
    let (st, e) = get(&client(), &s.url("/v1/console/state")).await;
    assert_eq!(st, 401, "{e}");
    let (st, e) = get(&client_with_key(TENANT), &s.url("/v1/console/state")).await;
    assert_eq!((st, error_code(&e)), (403, "forbidden"), "{e}");
    let (st, state) = get(&op, &s.url("/v1/console/state")).await;
    assert_eq!(st, 200, "{state}");
    assert_eq!(state["ready"], true, "{state}");
    assert!(state["counters"]["runs"].as_u64().unwrap() >= 1, "{state}");
    assert!(
        state["counters"]["latency_at_most_seconds"]["p50"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{state}"
    );
    let tenants: Vec<&str> = state["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tenant"].as_str().unwrap())
        .collect();
    assert!(
        tenants.contains(&"acme") && tenants.contains(&"other"),
        "{tenants:?}"
    );
    let acme = state["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tenant"] == "acme")
        .unwrap();
    assert!(
        acme["quotas"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["quota"] == "runs"),
        "{acme}"
    );
    assert!(
        state["audit"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("\"execute\"")),
        "{state}"
    );
    assert!(
        state["memory_budget_bytes"].as_u64().unwrap() > 0,
        "{state}"
    );

    // The stream: a reading a second.
    let started = Instant::now();
    let mut first = op.get(s.url("/v1/console/stream")).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let got = readings(&mut first, 2).await;
    assert_eq!(got.len(), 2, "two readings");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "a second apart"
    );
    assert!(got[1]["counters"]["runs"].as_u64().unwrap() >= 1);

    // At most eight at once.
    let mut open = vec![first];
    for _ in 0..7 {
        let r = op.get(s.url("/v1/console/stream")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        open.push(r);
    }
    let r = op.get(s.url("/v1/console/stream")).send().await.unwrap();
    assert_eq!(r.status(), 429);
    drop(open);
    s.stop().await;
}
