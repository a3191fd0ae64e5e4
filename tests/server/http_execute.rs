//! `POST /v1/execute` over real HTTP: results, files in and out, every 4xx, panics,
//! metrics, OpenAPI and the small pages.

use crate::http_support::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_results_and_files() {
    let s = start("exec", |_| {}).await;
    let c = client();
    let url = s.url("/v1/execute");

    // Hello world.
    let (st, v) = post(&c, &url, &json!({"code": "print('hello world')"})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "ok");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["stdout"], "hello world\n");
    assert!(v["id"].as_str().unwrap().starts_with("ex-"));
    assert!(v["usage"]["fuel"].as_u64().unwrap() > 0);

    // A structured ZeroDivisionError, still HTTP 200.
    let (st, v) = post(&c, &url, &json!({"code": "x = 1\na = 10 / 0"})).await;
    assert_eq!(st, 200);
    assert_eq!(v["status"], "error");
    assert_eq!(v["exit_code"], 1);
    assert_eq!(v["error"]["type"], "ZeroDivisionError");
    assert_eq!(v["error"]["message"], "division by zero");
    assert_eq!(v["error"]["line"], 2);

    // stdin, env, a limit breach.
    let (_, v) = post(
        &c,
        &url,
        &json!({"code": "import os, sys\nprint(sys.stdin.read().upper(), os.environ['WHO'])",
                "stdin": "abc", "env": {"WHO": "me"}}),
    )
    .await;
    assert_eq!(v["stdout"], "ABC me\n", "{v}");
    let (st, v) = post(
        &c,
        &url,
        &json!({"code": "while True: pass", "limits": {"timeout_ms": 300}}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(v["status"], "timeout");
    assert!(v["detail"].as_str().unwrap().contains("300 ms"));

    // A CSV in, summarised with pandas, and a matplotlib PNG out, in one request.
    let csv = "x,y\n1,2\n2,4\n3,9\n4,16\n";
    let code = r#"
import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
df = pd.read_csv("in/data.csv")
print(df.describe().loc["mean"].to_dict())
ax = df.plot(x="x", y="y")
import os
os.makedirs("out", exist_ok=True)
plt.savefig("out/plot.png")
"#;
    let (st, v) = post(
        &c,
        &url,
        &json!({"code": code, "files": [{"path": "in/data.csv", "content": b64(csv.as_bytes())}],
                "limits": {"timeout_ms": 60000}}),
    )
    .await;
    assert_eq!(st, 200);
    assert_eq!(v["status"], "ok", "{v}");
    assert!(v["stdout"].as_str().unwrap().contains("'y': 7.75"), "{v}");
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "only the new file comes back: {files:?}");
    assert_eq!(files[0]["path"], "out/plot.png");
    assert_eq!(files[0]["media_type"], "image/png");
    let png = unb64(files[0]["content"].as_str().unwrap());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(files[0]["size"].as_u64().unwrap(), png.len() as u64);

    assert_eq!(
        s.settled_sandbox_dirs().await,
        0,
        "every sandbox dir is gone after its run"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_error_is_json() {
    let s = start("4xx", |a| a.debug_panic_route = true).await;
    let c = client();
    let url = s.url("/v1/execute");
    let cases: Vec<(&str, &'static str, u16, &str)> = vec![
        ("malformed JSON", "{\"code\": ", 400, "invalid_json"),
        ("not an object", "[1, 2]", 400, "invalid_json"),
        ("empty body", "", 400, "invalid_json"),
        ("wrong type", r#"{"code": 42}"#, 400, "invalid_json"),
        ("missing code", r#"{"stdin": "x"}"#, 400, "invalid_json"),
        (
            "unknown field",
            r#"{"code": "1", "colour": "red"}"#,
            400,
            "invalid_json",
        ),
        (
            "unknown limit",
            r#"{"code": "1", "limits": {"cpu": 1}}"#,
            400,
            "invalid_json",
        ),
        (
            "limit above max",
            r#"{"code": "1", "limits": {"timeout_ms": 99999999}}"#,
            400,
            "invalid_limit",
        ),
        (
            "memory below min",
            r#"{"code": "1", "limits": {"memory_bytes": 1024}}"#,
            400,
            "invalid_limit",
        ),
        (
            "absolute path",
            r#"{"code": "1", "files": [{"path": "/etc/x", "content": ""}]}"#,
            400,
            "invalid_path",
        ),
        (
            "dotdot path",
            r#"{"code": "1", "files": [{"path": "a/../../x", "content": ""}]}"#,
            400,
            "invalid_path",
        ),
        (
            "NUL path",
            r#"{"code": "1", "files": [{"path": "a\u0000b", "content": ""}]}"#,
            400,
            "invalid_path",
        ),
        (
            "bad base64",
            r#"{"code": "1", "files": [{"path": "a", "content": "%%%"}]}"#,
            400,
            "invalid_base64",
        ),
        (
            "files past disk",
            r#"{"code": "1", "files": [{"path": "a", "content": "AAAA"}], "limits": {"disk_bytes": 1}}"#,
            400,
            "invalid_request",
        ),
        (
            "bad env",
            r#"{"code": "1", "env": {"A=B": "c"}}"#,
            400,
            "invalid_request",
        ),
    ];
    for (what, body, status, code) in cases {
        let (st, v) = post_raw(&c, &url, body).await;
        assert_eq!(st, status, "{what}: {v}");
        assert_eq!(error_code(&v), code, "{what}: {v}");
    }
    // The limit error names the field.
    let (_, v) = post_raw(
        &c,
        &url,
        r#"{"code": "1", "limits": {"fuel": 99999999999999999}}"#,
    )
    .await;
    assert_eq!(v["error"]["field"], "limits.fuel");
    assert!(v["error"]["message"].as_str().unwrap().contains("fuel"));
    let (_, v) = post_raw(&c, &url, r#"{"code": "1", "files": [{"path": "ok", "content": ""}, {"path": "../x", "content": ""}]}"#).await;
    assert_eq!(v["error"]["field"], "files[1].path");

    // Too many files.
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"path": format!("f{i}"), "content": ""}))
        .collect();
    let (st, v) = post(&c, &url, &json!({"code": "1", "files": many})).await;
    assert_eq!((st, error_code(&v)), (400, "invalid_request"), "{v}");

    // Unknown route, wrong method, unknown session.
    let (st, v) = get(&c, &s.url("/v1/nothing")).await;
    assert_eq!((st, error_code(&v)), (404, "not_found"));
    let (st, v) = get(&c, &url).await;
    assert_eq!((st, error_code(&v)), (405, "method_not_allowed"));
    let (st, v) = get(&c, &s.url("/v1/sessions/s-doesnotexist")).await;
    assert_eq!((st, error_code(&v)), (404, "session_not_found"));

    // 413 past the default 32 MiB cap, declared up front: answered from the headers alone.
    // (A raw socket, because a client still writing 32 MiB may see the early answer as a
    // broken pipe instead.)
    let (status, text) = declared_post(s.addr, "/v1/execute", (32 << 20) + 1).await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("payload_too_large"), "{text}");
    // ...and streamed without a length (chunked), cut off at the cap.
    let (status, text) = chunked_post(s.addr, "/v1/execute", 33, 1 << 20).await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("payload_too_large"), "{text}");

    // A panic in a handler is a JSON 500, and the server goes on.
    let r = c.post(s.url("/v1/debug/panic")).send().await.unwrap();
    assert_eq!(r.status(), 500);
    assert!(r.headers().contains_key("x-request-id"));
    assert_eq!(error_code(&r.json::<Value>().await.unwrap()), "internal");
    let (st, v) = post(&c, &url, &json!({"code": "print(1)"})).await;
    assert_eq!((st, v["stdout"].as_str()), (200, Some("1\n")));
    s.stop().await;
}

/// Sends only the headers of a request that declares a `len`-byte body, then reads the
/// answer; returns the status and the body text.
async fn declared_post(addr: std::net::SocketAddr, path: &str, len: usize) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n\r\n"
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        sock.read_to_end(&mut answer),
    )
    .await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// Sends `chunks` chunks of `size` bytes with chunked transfer encoding over a raw socket;
/// returns the status and the body text of the answer.
async fn chunked_post(
    addr: std::net::SocketAddr,
    path: &str,
    chunks: usize,
    size: usize,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; size];
    for _ in 0..chunks {
        let frame = format!("{size:x}\r\n");
        // The server may answer and close before we are done: stop writing then.
        if sock.write_all(frame.as_bytes()).await.is_err()
            || sock.write_all(&chunk).await.is_err()
            || sock.write_all(b"\r\n").await.is_err()
        {
            break;
        }
    }
    let _ = sock.write_all(b"0\r\n\r\n").await;
    let mut buf = Vec::new();
    let _ = sock.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_openapi_and_pages() {
    let s = start("ops", |_| {}).await;
    let c = client();
    let url = s.url("/v1/execute");
    for code in ["print(1)", "print(2)", "1/0"] {
        post(&c, &url, &json!({"code": code})).await;
    }
    post(
        &c,
        &url,
        &json!({"code": "while True: pass", "limits": {"timeout_ms": 100}}),
    )
    .await;
    post_raw(&c, &url, "{").await;
    // Sandboxes are torn down just after their responses left.
    assert_eq!(s.settled_sandbox_dirs().await, 0);

    let text = c
        .get(s.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let m = parse_metrics(&text);
    let val = |k: &str| {
        m.get(k)
            .copied()
            .unwrap_or_else(|| panic!("no {k} in\n{text}"))
    };
    assert_eq!(
        val(r#"vivarium_executions_total{kind="execute",status="ok"}"#),
        2.0
    );
    assert_eq!(
        val(r#"vivarium_executions_total{kind="execute",status="error"}"#),
        1.0
    );
    assert_eq!(
        val(r#"vivarium_executions_total{kind="execute",status="timeout"}"#),
        1.0
    );
    assert_eq!(val("vivarium_execution_duration_seconds_count"), 4.0);
    assert_eq!(
        val(r#"vivarium_execution_duration_seconds_bucket{le="+Inf"}"#),
        4.0
    );
    assert_eq!(
        val(r#"vivarium_http_responses_total{code="200"}"#),
        4.0 + 1.0,
        "4 runs and /readyz"
    );
    assert_eq!(val(r#"vivarium_http_responses_total{code="400"}"#), 1.0);
    assert!(val("vivarium_fuel_consumed_total") > 0.0);
    assert_eq!(val("vivarium_live_sessions"), 0.0);
    assert_eq!(val("vivarium_queue_depth"), 0.0);
    assert_eq!(val("vivarium_ready"), 1.0);
    assert_eq!(val("vivarium_sandbox_dirs"), 0.0);

    // Every endpoint is in the OpenAPI document.
    let (st, doc) = get(&c, &s.url("/openapi.json")).await;
    assert_eq!(st, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for (path, methods) in [
        ("/v1/execute", &["post"][..]),
        ("/v1/sessions", &["post"]),
        ("/v1/sessions/{id}", &["get", "delete"]),
        ("/v1/sessions/{id}/execute", &["post"]),
        ("/v1/sessions/{id}/files", &["get"]),
        ("/v1/sessions/{id}/files/{path}", &["get", "put"]),
        ("/healthz", &["get"]),
        ("/readyz", &["get"]),
        ("/metrics", &["get"]),
        ("/openapi.json", &["get"]),
        ("/", &["get"]),
        ("/v1/check", &["post"]),
        ("/api/v2/runtimes", &["get"]),
        ("/api/v2/execute", &["post"]),
        ("/mcp", &["post"]),
    ] {
        for m in methods {
            assert!(
                paths[path][m].is_object(),
                "{m} {path} missing from the OpenAPI document"
            );
        }
    }
    assert!(doc["components"]["schemas"]["ExecuteResponse"].is_object());
    // Every schema reference resolves (the core's types describe themselves).
    fn refs(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(r) = m.get("$ref").and_then(|r| r.as_str()) {
                    out.push(r.to_string());
                }
                m.values().for_each(|v| refs(v, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.iter().any(|r| r.ends_with("/LimitsRequest")), "{all:?}");
    for r in &all {
        let name = r.strip_prefix("#/components/schemas/").expect(r);
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "{r} does not resolve"
        );
    }

    // Every route the document names is served (the router and the document are made from
    // one list): none falls through to the router's own 404 or 405. MCP's transport is a
    // service of its own (front_mcp drives it).
    for (path, item) in paths.iter().filter(|(p, _)| *p != "/mcp") {
        for method in item.as_object().unwrap().keys() {
            let url = s.url(&path.replace("{id}", "s-none").replace("{path}", "a/b.txt"));
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let r = c
                .request(m, &url)
                .header("content-type", "application/json")
                .body("{\"code\": 1}")
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let body: Value = r.json().await.unwrap_or(Value::Null);
            let code = body["error"]["code"].as_str().unwrap_or("");
            assert!(
                !matches!(code, "not_found" | "method_not_allowed"),
                "{method} {path}: {status} {body}"
            );
        }
    }

    let (st, h) = get(&c, &s.url("/healthz")).await;
    assert_eq!((st, h["status"].as_str()), (200, Some("ok")));
    let r = c.get(s.url("/")).send().await.unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(r.text().await.unwrap().contains("/openapi.json"));

    // The request id is echoed, and an incoming one kept.
    let r = c
        .get(s.url("/healthz"))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "abc-123");
    let r = c.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(r.headers()["x-request-id"].len(), 32);
    s.stop().await;
}
