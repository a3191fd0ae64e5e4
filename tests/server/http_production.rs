//! Production behaviour over real HTTP: API keys, admission control (429 with Retry-After),
//! the live-session cap, the audit trail.

use crate::http_support::*;
use serde_json::json;

const KEY: &str = "test-key-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_are_required_and_never_logged() {
    let keys = scratch_dir("keys").join("keys.txt");
    std::fs::write(&keys, format!("# test keys\nalice:{KEY}\n")).unwrap();
    let path = keys.clone();
    let s = start("auth", move |a| a.api_keys_file = Some(path)).await;
    let c = client();
    let url = s.url("/v1/execute");
    let body = json!({"code": "print(1)"});

    let r = c.post(&url).json(&body).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    assert_eq!(error_code(&r.json().await.unwrap()), "unauthorized");
    let r = c
        .post(&url)
        .bearer_auth("wrong-key-wrong-key")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = c.post(s.url("/v1/sessions")).send().await.unwrap();
    assert_eq!(r.status(), 401);

    let r = c
        .post(&url)
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["stdout"], "1\n");
    // Operational endpoints stay open.
    assert_eq!(c.get(s.url("/healthz")).send().await.unwrap().status(), 200);
    assert_eq!(c.get(s.url("/metrics")).send().await.unwrap().status(), 200);

    let audit_text = std::fs::read_to_string(&s.audit_log).unwrap();
    assert!(
        !audit_text.contains(KEY),
        "the key itself must never be logged"
    );
    let audit = s.audit();
    assert!(
        audit
            .iter()
            .any(|r| r["action"] == "execute" && r["key_id"] == "alice" && r["http_status"] == 200)
    );
    let rejected: Vec<_> = audit
        .iter()
        .filter(|r| r["action"] == "rejection")
        .collect();
    assert_eq!(rejected.len(), 3);
    assert!(rejected.iter().all(
        |r| r["http_status"] == 401 && r["client"].as_str().unwrap().starts_with("127.0.0.1:")
    ));
    let e = audit.iter().find(|r| r["action"] == "execute").unwrap();
    for field in [
        "time",
        "request_id",
        "client",
        "code_sha256",
        "limits",
        "status",
        "exit_code",
        "usage",
    ] {
        assert!(!e[field].is_null(), "audit record lacks {field}: {e}");
    }
    s.stop().await;
    let _ = std::fs::remove_dir_all(keys.parent().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_capacity_gets_429() {
    let s = start("burst", |a| {
        a.max_concurrency = Some(1);
        a.queue_depth = 0;
        a.max_sessions = 1;
        a.max_hibernated_sessions = 1;
    })
    .await;
    let c = client();
    let url = s.url("/v1/execute");
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let c = c.clone();
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let r = c
                .post(&url)
                .json(&json!({"code": "import time\ntime.sleep(0.7)"}))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let retry = r
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_string());
            let v: serde_json::Value = r.json().await.unwrap();
            (status, retry, v)
        }));
    }
    let mut ok = 0;
    let mut rejected = 0;
    for t in tasks {
        let (status, retry, v) = t.await.unwrap();
        match status {
            200 => ok += 1,
            429 => {
                rejected += 1;
                assert_eq!(error_code(&v), "overloaded");
                assert!(retry.unwrap().parse::<u64>().unwrap() >= 1);
            }
            other => panic!("unexpected {other}: {v}"),
        }
    }
    assert!(ok >= 1 && rejected >= 1, "ok {ok}, rejected {rejected}");
    let m = metrics_at(&c, &s.base).await;
    assert_eq!(
        m[r#"vivarium_rejections_total{reason="queue_full"}"#],
        rejected as f64
    );
    assert_eq!(
        m[r#"vivarium_http_responses_total{code="429"}"#],
        rejected as f64
    );

    // The resident-session cap: a second session makes the first, idle, hibernate; a third
    // finds the hibernated ones full too, and gets 429.
    let (st, v) = post(&c, &s.url("/v1/sessions"), &json!({})).await;
    assert_eq!(st, 201, "{v}");
    let first = v["id"].as_str().unwrap().to_string();
    let (st, v) = post(&c, &s.url("/v1/sessions"), &json!({})).await;
    assert_eq!(st, 201, "{v}");
    let (_, v) = get(&c, &s.url(&format!("/v1/sessions/{first}"))).await;
    assert_eq!(v["resident"], false, "{v}");
    let (st, v) = post(&c, &s.url("/v1/sessions"), &json!({})).await;
    assert_eq!((st, error_code(&v)), (429, "too_many_sessions"));
    s.stop().await;
}

/// An audit line names what was done (`action`) and, apart from it, the front door it came
/// through (`door`): one program through each door is one `execute`, told apart by its door,
/// and a kernel opened over Jupyter's API is that door's `session_open`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_lines_name_the_action_and_the_door_apart() {
    let s = start("audit-doors", |_| {}).await;
    let c = client();
    let (st, v) = post(&c, &s.url("/v1/execute"), &json!({"code": "print(1)"})).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = post(
        &c,
        &s.url("/api/v2/execute"),
        &json!({"language": "python", "version": "*", "files": [{"content": "print(2)"}]}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let mut mcp = McpClient::open(&s).await;
    let (_, reply) = mcp
        .call("execute_python", json!({"code": "print(3)"}))
        .await;
    assert_ne!(reply["result"]["isError"], true, "{reply}");
    let (st, k) = post(&c, &s.url("/api/kernels"), &json!({})).await;
    assert_eq!(st, 201, "{k}");
    assert!(k["id"].is_string(), "{k}");

    let audit = s.audit();
    let doors_of = |action: &str| -> Vec<String> {
        audit
            .iter()
            .filter(|r| r["action"] == action)
            .map(|r| r["door"].as_str().unwrap_or("none").to_string())
            .collect()
    };
    let mut executed = doors_of("execute");
    executed.sort();
    assert_eq!(executed, ["http", "mcp", "piston"], "{audit:?}");
    assert_eq!(doors_of("session_open"), ["jupyter"], "{audit:?}");
    // Every line has a door; none is a door's own action name any more.
    assert!(audit.iter().all(|r| r["door"].is_string()), "{audit:?}");
    assert!(
        !audit
            .iter()
            .any(|r| r["action"].as_str().unwrap().starts_with("mcp_")),
        "{audit:?}"
    );
    s.stop().await;
}

/// Every action a caller begins leaves one audit line, even when the caller hangs up before
/// the answer: a plain execution and a session turn whose clients gave up are each recorded
/// once, as HTTP 499 `client_closed_request`, with their execution ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_hangs_up_still_leaves_its_audit_line() {
    let s = start("audit-hangup", |_| {}).await;
    let c = client();
    let impatient = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(400))
        .build()
        .unwrap();
    let slow = json!({"code": "import time\ntime.sleep(1.5)"});
    let hung_up = impatient
        .post(s.url("/v1/execute"))
        .json(&slow)
        .send()
        .await;
    assert!(hung_up.is_err(), "the client gave up first: {hung_up:?}");
    let id = open_session(&c, &s.base, &json!({})).await;
    let turn = s.url(&format!("/v1/sessions/{id}/execute"));
    let hung_up = impatient.post(&turn).json(&slow).send().await;
    assert!(hung_up.is_err(), "the client gave up first: {hung_up:?}");

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let closed = loop {
        let closed: Vec<_> = s
            .audit()
            .into_iter()
            .filter(|r| r["error"] == "client_closed_request")
            .collect();
        if closed.len() >= 2 || std::time::Instant::now() > deadline {
            break closed;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let mut actions: Vec<_> = closed
        .iter()
        .map(|r| (r["action"].as_str().unwrap(), r["http_status"].as_u64()))
        .collect();
    actions.sort();
    assert_eq!(
        actions,
        [("execute", Some(499)), ("session_turn", Some(499))],
        "{closed:?}"
    );
    assert!(
        closed.iter().all(|r| r["execution_id"].is_string()),
        "{closed:?}"
    );
    let turned = closed
        .iter()
        .find(|r| r["action"] == "session_turn")
        .unwrap();
    assert_eq!(turned["session_id"], id.as_str());
    wait_idle(&c, &s.base, &id).await;
    s.stop().await;
}
