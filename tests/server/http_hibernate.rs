//! Idle sessions hibernate: written to the snapshot store and their instance freed; the next
//! request brings each back with all its state. Over real HTTP.

use std::time::Duration;

use crate::http_support::*;
use serde_json::{Value, json};

/// A session opened with `open`, one turn of `code` run in it, and hibernated since (on a
/// server that hibernates after 1 s); its id.
async fn hibernated(c: &reqwest::Client, s: &TestServer, open: &Value, code: &str) -> String {
    let (_, v) = post(c, &s.url("/v1/sessions"), open).await;
    let id = v["id"].as_str().unwrap().to_string();
    session_turn(c, &s.base, &id, code).await;
    wait_for_metric(
        c,
        &s.base,
        r#"vivarium_session_events_total{event="hibernate"}"#,
        1.0,
        Duration::from_secs(15),
    )
    .await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_hibernates_and_wakes_with_its_state() {
    let s = start("hibernate", |a| a.hibernate_after_secs = 1).await;
    let c = client();
    let id = hibernated(
        &c,
        &s,
        &json!({"template": "python"}),
        "x = 7\nopen('h.txt', 'w').write('kept')",
    )
    .await;
    // Its instance and working directory are gone (the pool holds only the template's
    // pristine baseline and the checker its worker keeps, which checked its turn); asking
    // about it does not wake it.
    assert_eq!(s.settled_sandbox_dirs().await, 0);
    wait_for_metric(
        &c,
        &s.base,
        "vivarium_pooled_instances",
        2.0,
        Duration::from_secs(10),
    )
    .await;
    let (st, v) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(
        (st, &v["resident"], &v["turns"], &v["state"]),
        (200, &json!(false), &json!(1), &json!("idle")),
        "{v}"
    );
    let m = metrics_at(&c, &s.base).await;
    assert_eq!(m["vivarium_hibernated_sessions"], 1.0);
    assert_eq!(m["vivarium_live_sessions"], 0.0);
    let v = session_turn(&c, &s.base, &id, "x + 1, open('h.txt').read()").await;
    assert_eq!(v["result"], "(8, 'kept')");
    assert_eq!(v["turn"], 2);
    let (_, v) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(v["resident"], true, "{v}");
    let m = metrics_at(&c, &s.base).await;
    assert_eq!(m[r#"vivarium_session_events_total{event="wake"}"#], 1.0);
    assert_eq!(m["vivarium_session_wake_seconds_count"], 1.0);
    assert_eq!(m["vivarium_hibernated_sessions"], 0.0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_turn_is_refused_before_it_wakes_the_session() {
    let s = start("hibernate-malformed", |a| a.hibernate_after_secs = 1).await;
    let c = client();
    let open = json!({"template": "python", "limits": {"disk_bytes": 1 << 20}});
    let id = hibernated(&c, &s, &open, "x = 7").await;
    let url = s.url(&format!("/v1/sessions/{id}/execute"));
    let (st, v) = post_raw(&c, &url, "{\"code\": ").await;
    assert_eq!(
        (st, &v["error"]["code"]),
        (400, &json!("invalid_json")),
        "{v}"
    );
    // Each refused for its body, naming the code and (where one field is at fault) the field.
    let malformed = [
        (json!({"code": "1", "colour": "red"}), "invalid_json", None),
        (
            json!({"code": "1", "files": [{"path": "../up", "content": ""}]}),
            "invalid_path",
            Some("files[0].path"),
        ),
        (
            json!({"code": "1", "files": [{"path": "a", "content": "%%%"}]}),
            "invalid_base64",
            Some("files[0].content"),
        ),
    ];
    for (body, code, field) in malformed {
        let (st, v) = post(&c, &url, &body).await;
        assert_eq!(
            (st, &v["error"]["code"], v["error"]["field"].as_str()),
            (400, &json!(code), field),
            "{body}: {v}"
        );
    }
    // None of them woke it.
    let (_, v) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(v["resident"], false, "{v}");
    let m = metrics_at(&c, &s.base).await;
    let woken = r#"vivarium_session_events_total{event="wake"}"#;
    assert_eq!(m.get(woken).copied().unwrap_or(0.0), 0.0);
    // A malformed turn for a session that does not exist is still the body's fault.
    let (st, _) = post_raw(&c, &s.url("/v1/sessions/s-nope/execute"), "[").await;
    assert_eq!(st, 400);
    // Files past the session's disk limit are refused once it is known; the session goes on.
    let big = json!({"code": "1", "files": [{"path": "a", "content": b64(&[0u8; 3 << 19])}]});
    let (st, v) = post(&c, &url, &big).await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (400, Some("invalid_request")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("disk limit"),
        "{v}"
    );
    let v = session_turn(&c, &s.base, &id, "x + 1").await;
    assert_eq!(v["result"], "8");
    s.stop().await;
}
