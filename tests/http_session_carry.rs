//! What a session carries through hibernation, snapshots, forks and rollbacks, over real
//! HTTP: files held open between turns (reopened at the same descriptor and position), the
//! bounds a capture shares with the decode (what is captured always restores), and the
//! turn numbers of tracebacks (the caller's first turn is `<turn 1>`).

mod http_support;

use http_support::*;
use serde_json::{Value, json};

async fn turn(c: &reqwest::Client, s: &TestServer, id: &str, code: &str) -> Value {
    let (st, v) = post(
        c,
        &s.url(&format!("/v1/sessions/{id}/execute")),
        &json!({ "code": code }),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_turns_are_numbered_from_1_in_tracebacks() {
    let s = start("carry-turns", |_| {}).await;
    let c = client();
    let id = open_session(&c, &s.base, &json!({"template": "python"})).await;
    let v = turn(&c, &s, &id, "1/0").await;
    assert_eq!(v["turn"], 1, "{v}");
    assert!(
        v["stderr"].as_str().unwrap().contains("File \"<turn 1>\""),
        "{v}"
    );
    assert_eq!(v["error"]["type"], "ZeroDivisionError", "{v}");
    assert_eq!(v["error"]["line"], 1, "{v}");
    let v = turn(&c, &s, &id, "x = 1\nundefined").await;
    assert!(
        v["stderr"].as_str().unwrap().contains("File \"<turn 2>\""),
        "{v}"
    );
    assert_eq!(v["error"]["line"], 2, "{v}");
    s.stop().await;
}
