//! Streaming `POST /v1/execute` (`Accept: text/event-stream`) over real HTTP: output chunks
//! arrive while the code still runs, then the whole result as the last event.

use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

/// One server-sent event as it arrived: its name, its data, and when.
#[derive(Debug)]
struct Sse {
    event: String,
    data: Value,
    at: Duration,
}

/// Reads the whole event stream of `resp`, timing each event from `t0`.
async fn read_events(mut resp: reqwest::Response, t0: Instant) -> Vec<Sse> {
    let mut buf = String::new();
    let mut events = Vec::new();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let mut event = String::from("message");
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                }
            }
            if data.is_empty() {
                continue; // a keep-alive comment
            }
            let data = serde_json::from_str(&data.join("\n")).unwrap_or(Value::Null);
            events.push(Sse {
                event,
                data,
                at: t0.elapsed(),
            });
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_streams_while_the_code_runs() {
    let s = start("stream", |_| {}).await;
    let c = client();
    let code = "\
import sys, time
print('first')
print('to stderr', file=sys.stderr)
time.sleep(0.5)
print('second')
time.sleep(0.5)
print('café ☕')
";
    let t0 = Instant::now();
    let resp = c
        .post(s.url("/v1/execute"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let events = read_events(resp, t0).await;
    let names: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    let last = events.last().expect("no events");
    assert_eq!(last.event, "result", "{names:?}");
    let result = &last.data;
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["stdout"], "first\nsecond\ncafé ☕\n");
    assert!(result["id"].as_str().unwrap().starts_with("ex-"));

    let first = events
        .iter()
        .find(|e| e.event == "stdout" && e.data["text"] == "first\n")
        .unwrap_or_else(|| panic!("no first chunk in {events:?}"));
    // The first chunk left a good while before the run ended (two 0.5 s sleeps later).
    assert!(
        last.at >= first.at + Duration::from_millis(800),
        "first chunk at {:?}, result at {:?}",
        first.at,
        last.at
    );
    let stdout: String = events
        .iter()
        .filter(|e| e.event == "stdout")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(stdout, "first\nsecond\ncafé ☕\n");
    let stderr: String = events
        .iter()
        .filter(|e| e.event == "stderr")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(stderr, "to stderr\n");

    // Errors before the run are plain JSON errors, not a stream.
    let resp = c
        .post(s.url("/v1/execute"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": "1", "limits": {"timeout_ms": 99999999999u64}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(error_code(&v), "invalid_limit");

    // A refusal by the `deny` policy ends the stream with an `error` event.
    let resp = c
        .post(s.url("/v1/execute"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": "import os\nos.system('ls')", "policy": "deny"}))
        .send()
        .await
        .unwrap();
    let events = read_events(resp, Instant::now()).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].event, "error");
    assert_eq!(events[0].data["error"]["code"], "policy_denied");

    // A client that hangs up mid-run cancels the run: the sandbox goes away.
    let resp = c
        .post(s.url("/v1/execute"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": "import time\nprint('x', flush=True)\ntime.sleep(60)"}))
        .send()
        .await
        .unwrap();
    let mut resp = resp;
    let _ = resp.chunk().await;
    drop(resp);
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.sandbox_dirs() > 0 {
        assert!(Instant::now() < deadline, "the run was not cancelled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // ... and its audit record is not lost.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let gone: Vec<Value> = s
            .audit()
            .into_iter()
            .filter(|r| r["error"] == "client_closed_request")
            .collect();
        if let Some(r) = gone.first() {
            assert_eq!(r["http_status"], 499, "{r}");
            assert_eq!(r["action"], "execute", "{r}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no audit record for the hung-up run"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Without the header the answer is the plain JSON, as before.
    let (st, v) = post(&c, &s.url("/v1/execute"), &json!({"code": "print(1)"})).await;
    assert_eq!(st, 200);
    assert_eq!(v["stdout"], "1\n");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_results_carry_held_files_only_up_to_a_bound() {
    let s = shared().await;
    let c = client();
    // Two files over the 1 MiB a worker carries in memory: 3 MiB fits in what a whole
    // response brings in, 40 MiB does not (it is listed, without its content).
    let code = "\
open('small.bin', 'wb').write(bytes(range(256)) * (3 * 4096))
open('big.bin', 'wb').write(b'x' * (40 << 20))
";
    let t0 = Instant::now();
    let resp = c
        .post(s.url("/v1/execute"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": code, "template": "python", "limits": {"disk_bytes": 64 << 20}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let events = read_events(resp, t0).await;
    let last = events.last().expect("no events");
    assert_eq!(last.event, "result");
    let files = last.data["files"].as_array().unwrap();
    let file = |name: &str| files.iter().find(|f| f["path"] == name).unwrap();
    assert_eq!(file("small.bin")["size"], 3 << 20);
    let small = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        file("small.bin")["content"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(small.len(), 3 << 20);
    assert_eq!(file("big.bin")["size"], 40 << 20);
    assert_eq!(file("big.bin")["content"], Value::Null);
}
