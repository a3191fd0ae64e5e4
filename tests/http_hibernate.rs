//! Idle sessions hibernate: written to the snapshot store and their instance freed; the next
//! request brings each back with all its state. Over real HTTP.

mod http_support;

use std::time::{Duration, Instant};

use http_support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_hibernates_and_wakes_with_its_state() {
    let s = start("hibernate", |a| a.hibernate_after_secs = 1).await;
    let c = client();
    let (_, v) = post(&c, &s.url("/v1/sessions"), &json!({"template": "python"})).await;
    let id = v["id"].as_str().unwrap().to_string();
    session_turn(&c, &s.base, &id, "x = 7\nopen('h.txt', 'w').write('kept')").await;
    let metric = |text: &str| {
        parse_metrics(text)
            .get("vivarium_session_events_total{event=\"hibernate\"}")
            .copied()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = c
            .get(s.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if metric(&text) == Some(1.0) {
            break;
        }
        assert!(Instant::now() < deadline, "never hibernated");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its instance and working directory are gone.
    assert_eq!(s.settled_sandbox_dirs().await, 0);
    let v = session_turn(&c, &s.base, &id, "x + 1, open('h.txt').read()").await;
    assert_eq!(v["result"], "(8, 'kept')");
    assert_eq!(v["turn"], 2);
    s.stop().await;
}
