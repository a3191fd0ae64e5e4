//! The E2B door's edges over plain HTTP against a real server on 127.0.0.1: a sandbox's
//! network setting reaches every session it opens (contexts, restarts, forks, a pause and
//! resume), against a local upstream the server's `--egress-allow` permits; timeouts of
//! any size saturate instead of failing, and a failed create leaves nothing running; a
//! sandbox's contexts end with it when its timeout passes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use reqwest::Method as M;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::front_e2b::{control, e2b, json_of};
use crate::http_support::*;

/// A plain HTTP upstream on 127.0.0.1 answering `reached` to everything, counting requests.
async fn upstream() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nreached",
                    )
                    .await;
            });
        }
    });
    (port, hits)
}

/// Seconds since the epoch of an RFC 3339 UTC time as the server writes it
/// (`2025-01-31T12:34:56.789Z`).
fn epoch_secs(t: &Value) -> i64 {
    let t = t.as_str().unwrap_or_else(|| panic!("not a time: {t}"));
    let n = |r: std::ops::Range<usize>| t[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Creates a sandbox with `body` (its `templateID` `base` unless given); its id.
async fn create(c: &reqwest::Client, base: &str, body: Value) -> String {
    let mut body = body;
    body.as_object_mut()
        .unwrap()
        .entry("templateID")
        .or_insert(json!("base"));
    let (st, v) = json_of(control(c, M::POST, base, "/v2/sandboxes").json(&body)).await;
    assert_eq!(st, 201, "{v}");
    v["sandboxID"].as_str().unwrap().to_string()
}

/// Runs `code` in sandbox `id` (in `context` when given); the NDJSON lines it answers.
async fn cell_lines(
    c: &reqwest::Client,
    base: &str,
    id: &str,
    context: Option<&str>,
    code: &str,
) -> Vec<Value> {
    let (st, v) = json_of(
        e2b(c, M::POST, base, "/execute", Some(49999), Some(id))
            .json(&json!({"code": code, "context_id": context})),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    v.as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect()
}

/// Runs `code` in sandbox `id` (in `context` when given); its stdout.
async fn cell(
    c: &reqwest::Client,
    base: &str,
    id: &str,
    context: Option<&str>,
    code: &str,
) -> String {
    cell_lines(c, base, id, context, code)
        .await
        .into_iter()
        .filter(|l| l["type"] == "stdout")
        .map(|l| l["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A new context of sandbox `id`; its id.
async fn context(c: &reqwest::Client, base: &str, id: &str) -> String {
    let (st, v) =
        json_of(e2b(c, M::POST, base, "/contexts", Some(49999), Some(id)).json(&json!({}))).await;
    assert_eq!(st, 200, "{v}");
    v["id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_sandbox_is_offline_in_its_contexts_restarts_forks_and_after_a_pause() {
    let (port, hits) = upstream().await;
    let s = start("e2b-offline", |a| {
        a.egress_allow = "api.test".into();
        a.egress_allow_private = "127.0.0.1".into();
        a.egress_test_resolve = Some("api.test=127.0.0.1".into());
    })
    .await;
    let (base, c) = (s.base.clone(), client());
    let fetch = format!(
        "import urllib.request\n\
         try:\n    print(urllib.request.urlopen('http://api.test:{port}/', timeout=10).read().decode())\n\
         except Exception as e:\n    print('refused', e)\n"
    );
    // Online: the sandbox and its context reach the upstream the operator allows.
    let online = create(&c, &base, json!({})).await;
    assert_eq!(cell(&c, &base, &online, None, &fetch).await, "reached\n");
    let ctx = context(&c, &base, &online).await;
    assert_eq!(
        cell(&c, &base, &online, Some(&ctx), &fetch).await,
        "reached\n"
    );
    let reached = hits.load(Ordering::SeqCst);
    assert_eq!(reached, 2);
    // Offline, by either of E2B's spellings: no session it opens reaches it.
    let refused = |out: String, what: &str| {
        assert!(
            out.starts_with("refused"),
            "{what} reached the network: {out}"
        );
    };
    for body in [
        json!({"allow_internet_access": false}),
        json!({"allowInternetAccess": false}),
        json!({"network": {"denyOut": ["0.0.0.0/0"]}}),
    ] {
        let id = create(&c, &base, body.clone()).await;
        refused(cell(&c, &base, &id, None, &fetch).await, "the sandbox");
        let ctx = context(&c, &base, &id).await;
        refused(
            cell(&c, &base, &id, Some(&ctx), &fetch).await,
            "its context",
        );
        let path = format!("/contexts/{ctx}/restart");
        let (st, v) = json_of(e2b(&c, M::POST, &base, &path, Some(49999), Some(&id))).await;
        assert_eq!(st, 204, "{v}");
        refused(
            cell(&c, &base, &id, Some(&ctx), &fetch).await,
            "its restarted context",
        );
        let (st, v) =
            json_of(control(&c, M::POST, &base, &format!("/sandboxes/{id}/fork")).json(&json!({})))
                .await;
        assert_eq!(st, 201, "{v}");
        let fork = v[0]["sandbox"]["sandboxID"].as_str().unwrap().to_string();
        refused(cell(&c, &base, &fork, None, &fetch).await, "its fork");
        let fork_ctx = context(&c, &base, &fork).await;
        refused(
            cell(&c, &base, &fork, Some(&fork_ctx), &fetch).await,
            "its fork's context",
        );
        let (st, v) = json_of(control(
            &c,
            M::POST,
            &base,
            &format!("/sandboxes/{id}/pause"),
        ))
        .await;
        assert_eq!(st, 204, "{v}");
        let (st, v) = json_of(
            control(&c, M::POST, &base, &format!("/v2/sandboxes/{id}/connect"))
                .json(&json!({"timeout": 60})),
        )
        .await;
        assert_eq!(st, 201, "{v}");
        refused(
            cell(&c, &base, &id, None, &fetch).await,
            "the resumed sandbox",
        );
        let ctx2 = context(&c, &base, &id).await;
        refused(
            cell(&c, &base, &id, Some(&ctx2), &fetch).await,
            "a context of the resumed sandbox",
        );
    }
    // Denied, but for what allowOut names: reached, by the sandbox and its contexts.
    let id = create(
        &c,
        &base,
        json!({"allow_internet_access": false, "network": {"allowOut": ["api.test"]}}),
    )
    .await;
    let ctx = context(&c, &base, &id).await;
    assert_eq!(cell(&c, &base, &id, Some(&ctx), &fetch).await, "reached\n");
    assert_eq!(hits.load(Ordering::SeqCst), reached + 1);
    // A deny list has no counterpart: refused, not ignored.
    let (st, v) = json_of(
        control(&c, M::POST, &base, "/v2/sandboxes")
            .json(&json!({"templateID": "base", "network": {"denyOut": ["10.0.0.0/8"]}})),
    )
    .await;
    assert_eq!(st, 400, "{v}");
    assert!(v["message"].as_str().unwrap().contains("denyOut"), "{v}");
    s.stop().await;
}

/// The sessions resident for the caller, as `/v1/usage` counts them.
async fn resident(c: &reqwest::Client, base: &str) -> u64 {
    let (st, u) = get(c, &format!("{base}/v1/usage")).await;
    assert_eq!(st, 200, "{u}");
    u["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["quota"] == "resident_sessions")
        .and_then(|q| q["used"].as_u64())
        .unwrap_or_else(|| panic!("no resident_sessions in {u}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_of_any_size_saturate_at_the_lifetime_and_bad_ones_are_400() {
    let s = start("e2b-huge", |a| a.session_lifetime_secs = 3600).await;
    let (base, c) = (s.base.clone(), client());
    let lifetime_end = || now_secs() + 3600 + 5;
    let end_at = |v: &Value| epoch_secs(&v["endAt"]);
    let before = resident(&c, &base).await;
    // Huge: whole seconds past any clock, written as an integer or a float.
    let mut ids = Vec::new();
    for huge in [json!(u64::MAX), json!(1e300), json!(1e19)] {
        let (st, v) = json_of(
            control(&c, M::POST, &base, "/v2/sandboxes")
                .json(&json!({"templateID": "base", "timeout": huge})),
        )
        .await;
        assert_eq!(st, 201, "timeout {huge}: {v}");
        let id = v["sandboxID"].as_str().unwrap().to_string();
        let (_, info) = json_of(control(&c, M::GET, &base, &format!("/sandboxes/{id}"))).await;
        assert!(end_at(&info) <= lifetime_end(), "{info}");
        ids.push(id);
    }
    assert_eq!(resident(&c, &base).await, before + 3);
    let id = ids[0].clone();
    // Every call that takes a timeout.
    let calls: Vec<(String, Value, u16)> = vec![
        (
            format!("/sandboxes/{id}/timeout"),
            json!({"timeout": u64::MAX}),
            204,
        ),
        (
            format!("/sandboxes/{id}/refreshes"),
            json!({"duration": u64::MAX}),
            204,
        ),
        (
            format!("/sandboxes/{id}/timeout"),
            json!({"timeout": 1e300}),
            204,
        ),
        (
            format!("/v2/sandboxes/{id}/connect"),
            json!({"timeout": u64::MAX}),
            200,
        ),
        (
            format!("/sandboxes/{id}/resume"),
            json!({"timeout": u64::MAX}),
            200,
        ),
    ];
    for (path, body, want) in &calls {
        let (st, v) = json_of(control(&c, M::POST, &base, path).json(body)).await;
        assert_eq!(st, *want, "{path} {body}: {v}");
    }
    let (_, info) = json_of(control(&c, M::GET, &base, &format!("/sandboxes/{id}"))).await;
    assert!(end_at(&info) <= lifetime_end(), "{info}");
    let (st, v) = json_of(
        control(&c, M::POST, &base, &format!("/sandboxes/{id}/fork"))
            .json(&json!({"timeout": u64::MAX})),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    assert!(v[0]["sandbox"]["sandboxID"].is_string(), "{v}");
    assert_eq!(resident(&c, &base).await, before + 4);
    // Negative, fractional, a string, zero: 400 naming the problem, on every call, and
    // nothing opened.
    for bad in [json!(-1), json!(1.5), json!(-1e300), json!("60"), json!(0)] {
        let (st, v) = json_of(
            control(&c, M::POST, &base, "/v2/sandboxes")
                .json(&json!({"templateID": "base", "timeout": bad})),
        )
        .await;
        assert_eq!(
            (st, v["code"].clone()),
            (400, json!(400)),
            "create {bad}: {v}"
        );
        assert!(
            v["message"].as_str().unwrap().contains("second")
                || v["message"].as_str().unwrap().contains("number"),
            "create {bad}: {v}"
        );
        for (path, field) in [
            (format!("/sandboxes/{id}/timeout"), "timeout"),
            (format!("/sandboxes/{id}/refreshes"), "duration"),
            (format!("/v2/sandboxes/{id}/connect"), "timeout"),
            (format!("/sandboxes/{id}/fork"), "timeout"),
        ] {
            let (st, v) =
                json_of(control(&c, M::POST, &base, &path).json(&json!({field: bad}))).await;
            assert_eq!(st, 400, "{path} {bad}: {v}");
        }
    }
    assert_eq!(resident(&c, &base).await, before + 4);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxs_contexts_end_with_it_when_its_timeout_passes() {
    // Sessions idle for 30 s before they expire: the contexts must go well before that.
    let s = start("e2b-ctx-end", |a| a.session_idle_secs = 30).await;
    let (base, c) = (s.base.clone(), client());
    let id = create(&c, &base, json!({"timeout": 60})).await;
    let first = context(&c, &base, &id).await;
    // A longer timeout reaches the contexts there are, and the ones made after it.
    let (st, _) = json_of(
        control(&c, M::POST, &base, &format!("/sandboxes/{id}/timeout"))
            .json(&json!({"timeout": 900})),
    )
    .await;
    assert_eq!(st, 204);
    let second = context(&c, &base, &id).await;
    let (_, info) = json_of(control(&c, M::GET, &base, &format!("/sandboxes/{id}"))).await;
    let sandbox_end = epoch_secs(&info["endAt"]);
    assert!(sandbox_end > now_secs() + 800, "{info}");
    for ctx in [&first, &second] {
        let (st, v) = get(&c, &format!("{base}/v1/sessions/{ctx}")).await;
        assert_eq!(st, 200, "{v}");
        let gap = (epoch_secs(&v["expires_at"]) - sandbox_end).abs();
        assert!(gap <= 2, "context {ctx}: {v} vs {info}");
    }
    // Paused, its contexts sleep with it; connect wakes them with its new deadline.
    let (st, v) = json_of(control(
        &c,
        M::POST,
        &base,
        &format!("/sandboxes/{id}/pause"),
    ))
    .await;
    assert_eq!(st, 204, "{v}");
    for ctx in [&first, &second] {
        let (_, v) = get(&c, &format!("{base}/v1/sessions/{ctx}")).await;
        assert_eq!(v["resident"], false, "context {ctx} stayed awake: {v}");
    }
    let (st, v) = json_of(
        control(&c, M::POST, &base, &format!("/v2/sandboxes/{id}/connect"))
            .json(&json!({"timeout": 600})),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let (_, info) = json_of(control(&c, M::GET, &base, &format!("/sandboxes/{id}"))).await;
    let sandbox_end = epoch_secs(&info["endAt"]);
    for ctx in [&first, &second] {
        let (_, v) = get(&c, &format!("{base}/v1/sessions/{ctx}")).await;
        assert_eq!(v["resident"], true, "context {ctx} still asleep: {v}");
        let gap = (epoch_secs(&v["expires_at"]) - sandbox_end).abs();
        assert!(gap <= 2, "context {ctx}: {v} vs {info}");
    }
    // Now a short one: the sandbox ends, and its contexts with it, long before their
    // idle time.
    let since = Instant::now();
    let (st, _) = json_of(
        control(&c, M::POST, &base, &format!("/sandboxes/{id}/timeout"))
            .json(&json!({"timeout": 1})),
    )
    .await;
    assert_eq!(st, 204);
    let gone = |st: u16| st == 404 || st == 410;
    loop {
        let (st, _) = get(&c, &format!("{base}/v1/sessions/{id}")).await;
        let mut all = gone(st);
        for ctx in [&first, &second] {
            let (st, _) = get(&c, &format!("{base}/v1/sessions/{ctx}")).await;
            all &= gone(st);
        }
        if all {
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(15),
            "the sandbox or a context outlived the sandbox's timeout"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (st, v) = json_of(
        e2b(&c, M::POST, &base, "/execute", Some(49999), Some(&first)).json(&json!({"code": "1"})),
    )
    .await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(resident(&c, &base).await, 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_closes_a_sandboxs_contexts_also_when_it_was_closed_elsewhere() {
    let s = start("e2b-ctx-kill", |_| {}).await;
    let (base, c) = (s.base.clone(), client());
    let kill = |id: &str| json_of(control(&c, M::DELETE, &base, &format!("/sandboxes/{id}")));
    // Killed here: it and its context.
    let id = create(&c, &base, json!({})).await;
    let ctx = context(&c, &base, &id).await;
    assert_eq!(kill(&id).await.0, 204);
    let (st, v) = get(&c, &format!("{base}/v1/sessions/{ctx}")).await;
    assert_eq!(st, 404, "{v}");
    // Closed through Vivarium's own API first: its contexts go with it (they are its
    // session's), and E2B's kill is then 404.
    let id = create(&c, &base, json!({})).await;
    let ctx = context(&c, &base, &id).await;
    let r = c
        .delete(format!("{base}/v1/sessions/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(kill(&id).await.0, 404);
    let (st, v) = get(&c, &format!("{base}/v1/sessions/{ctx}")).await;
    assert_eq!(st, 404, "{v}");
    assert_eq!(resident(&c, &base).await, 0);
    s.stop().await;
}

/// The `number_of_executions` a cell of sandbox `id` reports.
async fn cell_number(c: &reqwest::Client, base: &str, id: &str) -> i64 {
    let lines = cell_lines(c, base, id, None, "1").await;
    lines
        .iter()
        .find(|l| l["type"] == "number_of_executions")
        .and_then(|l| l["execution_count"].as_i64())
        .unwrap_or_else(|| panic!("no number_of_executions in {lines:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_operations_are_queries_not_the_callers_turns() {
    let s = start("e2b-file-queries", |_| {}).await;
    let (base, c) = (s.base.clone(), client());
    // The sandbox's set-up (its directory, HOME, envVars) is no turn either: the first cell
    // is number 1.
    let id = create(&c, &base, json!({"envVars": {"MADE_WITH": "create"}})).await;
    assert_eq!(cell_number(&c, &base, &id).await, 1);
    let fs = |op: &str, body: Value| {
        json_of(
            e2b(
                &c,
                M::POST,
                &base,
                &format!("/filesystem.Filesystem/{op}"),
                Some(49983),
                Some(&id),
            )
            .json(&body),
        )
    };
    let (st, v) = fs("MakeDir", json!({"path": "d/e"})).await;
    assert_eq!(
        (st, v["entry"]["path"].as_str()),
        (200, Some("/home/user/d/e")),
        "{v}"
    );
    let (st, v) = fs("Move", json!({"source": "d", "destination": "moved/d"})).await;
    assert_eq!(
        (st, v["entry"]["path"].as_str()),
        (200, Some("/home/user/moved/d")),
        "{v}"
    );
    let (st, v) = fs("ListDir", json!({"path": "/home/user/moved", "depth": 2})).await;
    let paths: Vec<&str> = v["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("{st} {v}"))
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/home/user/moved/d", "/home/user/moved/d/e"]);
    let (st, v) = fs("Stat", json!({"path": "moved/d/e"})).await;
    assert_eq!(
        (st, v["entry"]["type"].as_str()),
        (200, Some("FILE_TYPE_DIRECTORY")),
        "{v}"
    );
    let (st, v) = fs("Remove", json!({"path": "moved"})).await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = fs("Stat", json!({"path": "moved"})).await;
    assert_eq!(v["code"], "not_found", "{st} {v}");
    // A listing past the result channel's bound is named, not cut short.
    let many = "for i in range(2000): open(f'f{i:05}-' + 'x' * 200, 'w').close()\n";
    assert_eq!(cell(&c, &base, &id, None, many).await, "");
    let (st, v) = fs("ListDir", json!({"path": "."})).await;
    assert_eq!(v["code"], "resource_exhausted", "{st} {v}");
    assert!(v["message"].as_str().unwrap().contains("1048576"), "{v}");
    // None of the seven was a turn: the cells are numbered 1, 2, 3, the session counts
    // three turns, and the audit has no turn beside the cells' (the door's program is no
    // caller's code), one `file_operation` line each, on the session, without code.
    assert_eq!(cell_number(&c, &base, &id).await, 3);
    let (st, info) = json_of(c.get(format!("{base}/v1/sessions/{id}"))).await;
    assert_eq!((st, info["turns"].as_u64()), (200, Some(3)), "{info}");
    let audit = s.audit();
    let on_session = |action: &str| {
        audit
            .iter()
            .filter(|l| l["session_id"] == id.as_str() && l["action"] == action)
            .collect::<Vec<_>>()
    };
    assert_eq!(on_session("session_turn").len(), 3, "{audit:#?}");
    let ops = on_session("file_operation");
    assert_eq!(ops.len(), 7, "{audit:#?}");
    assert!(
        ops.iter()
            .all(|l| l["door"] == "e2b" && l.get("code_sha256").is_none()),
        "{ops:#?}"
    );
    assert_eq!(ops[0]["path"], "d/e");
    // What a file operation and the set-up did survive a cell rolled back (a client that
    // hangs up interrupts its cell: the session goes back to its state before it).
    let (st, v) = fs("MakeDir", json!({"path": "kept"})).await;
    assert_eq!(st, 200, "{v}");
    let mut r = e2b(&c, M::POST, &base, "/execute", Some(49999), Some(&id))
        .json(&json!({"code": "print('started', flush=True)\nwhile True: pass"}))
        .send()
        .await
        .unwrap();
    let first = r.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("started"));
    drop(r);
    let check = "import os\nprint(os.path.isdir('kept'), os.getcwd(), os.environ['HOME'], \
                 os.environ['MADE_WITH'])";
    let since = Instant::now();
    let after = loop {
        let (_, v) = json_of(
            e2b(&c, M::POST, &base, "/execute", Some(49999), Some(&id))
                .json(&json!({"code": check})),
        )
        .await;
        let text = v.as_str().unwrap_or_default().to_string();
        if !text.contains("session_busy") {
            break text;
        }
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "still busy: {text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        after.contains(r#""text":"True /home/user /home/user create\n""#),
        "{after}"
    );
    s.stop().await;
}

/// `GET /v2/sandboxes` with `query`; the sandboxes' ids and the whole answer.
async fn listed(c: &reqwest::Client, base: &str, query: &str) -> (Vec<String>, Value) {
    let (st, v) = json_of(control(c, M::GET, base, &format!("/v2/sandboxes{query}"))).await;
    assert_eq!(st, 200, "{v}");
    let ids = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sandboxID"].as_str().unwrap().to_string())
        .collect();
    (ids, v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_env_and_contexts_survive_a_restart_and_list_finds_the_sandbox() {
    let dir = scratch_dir("e2b-keep-store");
    let d = dir.clone();
    let a = start("e2b-keep-a", move |args| args.snapshot_dir = Some(d)).await;
    let c = client();
    let id = create(
        &c,
        &a.base,
        json!({"metadata": {"team": "t1", "run": "r 7"}, "envVars": {"GREETING": "hi"}, "timeout": 120}),
    )
    .await;
    let other = create(&c, &a.base, json!({"metadata": {"team": "t2"}})).await;
    let (st, v) = json_of(
        e2b(&c, M::POST, &a.base, "/contexts", Some(49999), Some(&id))
            .json(&json!({"language": "bash", "cwd": "/home/user/sub"})),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let ctx = v["id"].as_str().unwrap().to_string();
    assert_eq!(
        cell(&c, &a.base, &id, Some(&ctx), "pwd; echo $GREETING").await,
        "/home/user/sub\nhi\n"
    );
    let (ids, _) = listed(&c, &a.base, "?metadata=team%3Dt1").await;
    assert_eq!(ids, vec![id.clone()], "a context is not a sandbox");
    a.stop().await;

    // A new server on the same store: the sandbox is known before anything touches it.
    let d = dir.clone();
    let b = start("e2b-keep-b", move |args| args.snapshot_dir = Some(d)).await;
    let (ids, v) = listed(&c, &b.base, "?metadata=team%3Dt1%26run%3Dr%2B7").await;
    assert_eq!(ids, vec![id.clone()], "{v}");
    assert_eq!(v[0]["metadata"], json!({"team": "t1", "run": "r 7"}));
    assert_eq!(v[0]["templateID"], "base");
    assert_eq!(v[0]["state"], "paused", "not resident until it is used");
    // Its timeout came with it: it ends when it would have, not at the idle time.
    let left = epoch_secs(&v[0]["endAt"]) - now_secs();
    assert!(
        (60..=121).contains(&left),
        "{left} s left of its 120 s timeout"
    );
    let (ids, _) = listed(&c, &b.base, "").await;
    let mut both = vec![id.clone(), other.clone()];
    both.sort();
    let mut ids = ids;
    ids.sort();
    assert_eq!(ids, both, "both sandboxes, no context");
    // Its contexts, their language, and the env its interpreters start with.
    let (st, v) = json_of(e2b(
        &c,
        M::GET,
        &b.base,
        "/contexts",
        Some(49999),
        Some(&id),
    ))
    .await;
    assert_eq!(st, 200, "{v}");
    let langs: Vec<(String, String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap().to_string();
            (s("id"), s("language"), s("cwd"))
        })
        .collect();
    assert_eq!(
        langs,
        vec![
            (id.clone(), "python".into(), "/home/user".into()),
            (ctx.clone(), "bash".into(), "/home/user/sub".into())
        ]
    );
    assert_eq!(
        cell(&c, &b.base, &id, Some(&ctx), "echo $GREETING").await,
        "hi\n"
    );
    let path = format!("/contexts/{ctx}/restart");
    let (st, v) = json_of(e2b(&c, M::POST, &b.base, &path, Some(49999), Some(&id))).await;
    assert_eq!(st, 204, "{v}");
    assert_eq!(
        cell(&c, &b.base, &id, Some(&ctx), "pwd; echo $GREETING").await,
        "/home/user/sub\nhi\n",
        "a restarted context starts where it was made, with the sandbox's env"
    );
    let (st, v) = json_of(control(&c, M::GET, &b.base, &format!("/sandboxes/{id}"))).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["metadata"]["team"], "t1");
    assert_eq!(v["state"], "running");
    let left = epoch_secs(&v["endAt"]) - now_secs();
    assert!(
        (60..=121).contains(&left),
        "{left} s left of its 120 s timeout, awake"
    );
    // Killed: its context goes with it, after the restart too.
    let (st, _) = json_of(control(&c, M::DELETE, &b.base, &format!("/sandboxes/{id}"))).await;
    assert_eq!(st, 204);
    let (st, v) = get(&c, &format!("{}/v1/sessions/{ctx}", b.base)).await;
    assert_eq!(st, 404, "{v}");
    let (ids, _) = listed(&c, &b.base, "?metadata=team%3Dt1").await;
    assert!(ids.is_empty(), "{ids:?}");
    b.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
