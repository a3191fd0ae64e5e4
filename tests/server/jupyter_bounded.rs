//! The kernel WebSocket as an attacker with an ordinary key would use it, over the real
//! server on 127.0.0.1: large shell frames queued without reading cost the supervisor about
//! what the kernel may hold (measured from `/proc/PID/status`), and those past its bound are
//! refused; a tenant's open kernel sockets are a quota; what a kernel's queries and `input()`
//! prompts send leaves through the session's leakage policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::http_support::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Frame;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The largest frame the kernel reads (`messages.rs`).
const MAX_FRAME_BYTES: usize = 16 << 20;
/// What one socket's shell requests may hold (`channels.rs`): two of the largest frames.
const SHELL_QUEUE_BYTES: usize = 2 * MAX_FRAME_BYTES;

fn request(msg_type: &str, channel: &str, content: Value) -> Value {
    json!({
        "header": {
            "msg_id": format!("{:032x}", rand::random::<u128>()),
            "session": "client-session",
            "username": "test",
            "date": "2026-12-01T00:00:00Z",
            "msg_type": msg_type,
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "content": content,
        "buffers": [],
        "channel": channel,
    })
}

async fn connect(base: &str, id: &str, key: Option<&str>) -> Result<Socket, Value> {
    let mut url = format!(
        "{}/api/kernels/{id}/channels",
        base.replace("http://", "ws://")
    );
    if let Some(key) = key {
        url.push_str(&format!("?token={key}"));
    }
    match tokio_tungstenite::connect_async(url).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            let status = r.status().as_u16();
            let body = r.body().clone().unwrap_or_default();
            Err(
                json!({"status": status, "body": serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null)}),
            )
        }
        Err(e) => panic!("{e}"),
    }
}

async fn send(ws: &mut Socket, m: &Value) {
    ws.send(Frame::Text(m.to_string().into())).await.unwrap();
}

/// Reads messages until the `status: idle` answering `req`; every message that answered it.
async fn until_idle(ws: &mut Socket, req: &Value) -> Vec<Value> {
    let id = &req["header"]["msg_id"];
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let frame = tokio::time::timeout_at(deadline, ws.next())
            .await
            .expect("no idle in time")
            .expect("socket closed")
            .unwrap();
        let Frame::Text(t) = frame else { continue };
        let m: Value = serde_json::from_str(t.as_str()).unwrap();
        if m["parent_header"]["msg_id"] != *id {
            continue;
        }
        let idle = m["header"]["msg_type"] == "status" && m["content"]["execution_state"] == "idle";
        got.push(m);
        if idle {
            return got;
        }
    }
}

fn of_type<'a>(msgs: &'a [Value], t: &str) -> Vec<&'a Value> {
    msgs.iter()
        .filter(|m| m["header"]["msg_type"] == t)
        .collect()
}

/// `VmRSS` of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

const MIB: f64 = (1 << 20) as f64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_shell_frames_cost_about_what_the_kernel_may_hold_and_past_it_are_refused() {
    let scratch = scratch_dir("jupyter-bounded");
    let mut server = spawn_server(&scratch, None, &[]);
    let pid = server.child.id();
    wait_ready_at(&server.base).await;
    let c = client();
    let (st, k) = post(
        &c,
        &format!("{}/api/kernels", server.base),
        &json!({"name": "vivarium-python"}),
    )
    .await;
    assert_eq!(st, 201, "{k}");
    let id = k["id"].as_str().unwrap().to_string();
    let mut ws = connect(&server.base, &id, None).await.unwrap();
    let warm = request("execute_request", "shell", json!({"code": "1"}));
    send(&mut ws, &warm).await;
    until_idle(&mut ws, &warm).await;
    // A cell that runs through the whole flood: everything after it waits.
    let sleeper = request(
        "execute_request",
        "shell",
        json!({"code": "import time\ntime.sleep(60)"}),
    );
    send(&mut ws, &sleeper).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let baseline = rss(pid);
    let peak = Arc::new(AtomicU64::new(baseline));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(Ordering::Acquire) {
                peak.fetch_max(rss(pid), Ordering::AcqRel);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    // Frames of the largest size, each a cell of ~16 MiB of code, sent without reading a
    // reply; then frames of the shape that cost ~17x their size as JSON trees (a `buffers`
    // array of small numbers), which the kernel does not keep.
    let frames = 24;
    let padding = "x".repeat(MAX_FRAME_BYTES - 4096);
    let mut big = Vec::new();
    for _ in 0..frames {
        let r = request(
            "execute_request",
            "shell",
            json!({"code": format!("pass\n#{padding}")}),
        );
        let text = r.to_string();
        assert!(text.len() <= MAX_FRAME_BYTES);
        ws.send(Frame::Text(text.into())).await.unwrap();
        big.push(r["header"]["msg_id"].as_str().unwrap().to_string());
    }
    let buffers = format!("[{}1]", "1,".repeat(4 << 20));
    for _ in 0..2 {
        let r = request("execute_request", "shell", json!({"code": "pass"}));
        let text = r
            .to_string()
            .replace(r#""buffers":[]"#, &format!(r#""buffers":{buffers}"#));
        ws.send(Frame::Text(text.into())).await.unwrap();
    }
    let sent = frames as f64 * MAX_FRAME_BYTES as f64 + 2.0 * buffers.len() as f64;
    // The last frames are read and parsed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    sampling.store(false, Ordering::Release);
    sampler.join().unwrap();
    let grew = peak.load(Ordering::Acquire).saturating_sub(baseline) as f64;
    // What the kernel may hold: its shell queue's bytes, and the frame being read and
    // parsed (the frame, serde_json's scratch for a string with escapes, and the code
    // taken from it).
    let allowed = (SHELL_QUEUE_BYTES + 3 * MAX_FRAME_BYTES) as f64;
    eprintln!(
        "sent {:.0} MiB; the supervisor grew {:.0} MiB; the kernel may hold {:.0} MiB",
        sent / MIB,
        grew / MIB,
        allowed / MIB
    );
    // The slack: the allocator's own (buffers of 1 MiB and more go back to the kernel
    // when freed: `M_MMAP_THRESHOLD`), a fixed amount however many frames come.
    assert!(
        grew <= 1.2 * allowed + 16.0 * MIB,
        "the supervisor grew {:.0} MiB for {:.0} MiB sent (bound {:.0} MiB)",
        grew / MIB,
        sent / MIB,
        allowed / MIB
    );

    // Every large frame past the bound was answered at once, as refused, naming the bound.
    let mut refused = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while refused < frames - 2 {
        let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, ws.next()).await else {
            break;
        };
        let Frame::Text(t) = frame else { continue };
        let m: Value = serde_json::from_str(t.as_str()).unwrap();
        if m["header"]["msg_type"] != "execute_reply" {
            continue;
        }
        let parent = m["parent_header"]["msg_id"].as_str().unwrap_or_default();
        assert!(
            big.iter().any(|b| b == parent),
            "a reply before its turn: {m}"
        );
        assert_eq!(m["content"]["status"], "error", "{m}");
        assert_eq!(m["content"]["ename"], "VivariumQueueFull", "{m}");
        assert!(
            m["content"]["evalue"]
                .as_str()
                .unwrap()
                .contains(&SHELL_QUEUE_BYTES.to_string()),
            "{m}"
        );
        refused += 1;
    }
    assert_eq!(refused, frames - 2, "frames past the bound must be refused");
    let _ = server.child.kill();
    let _ = server.child.wait();
    let _ = std::fs::remove_dir_all(&scratch);
}

const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789ab";

/// A server whose keys file makes alice and bob two tenants, with `configure`'s settings;
/// and the folder of the keys file (the caller removes it).
async fn two_tenants(
    tag: &str,
    configure: impl FnOnce(&mut vivarium::server::ServeArgs),
) -> (TestServer, std::path::PathBuf) {
    let dir = scratch_dir(&format!("{tag}-keys"));
    let keys = dir.join("keys");
    std::fs::write(&keys, format!("alice:{ALICE}\nbob:{BOB}\n")).unwrap();
    let s = start(tag, move |a| {
        a.api_keys_file = Some(keys);
        configure(a);
    })
    .await;
    (s, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_kernel_sockets_are_a_quota() {
    let (s, dir) = two_tenants("jupyter-sockets", |a| {
        a.max_kernel_sockets_per_tenant = Some(2);
    })
    .await;
    let (ka, kb) = (ALICE, BOB);
    let (a, b) = (client_with_key(ka), client_with_key(kb));
    let (st, k) = post(&a, &s.url("/api/kernels"), &json!({})).await;
    assert_eq!(st, 201, "{k}");
    let id_a = k["id"].as_str().unwrap().to_string();
    let (st, k) = post(&b, &s.url("/api/kernels"), &json!({})).await;
    assert_eq!(st, 201, "{k}");
    let id_b = k["id"].as_str().unwrap().to_string();

    let first = connect(&s.base, &id_a, Some(ka)).await.unwrap();
    let _second = connect(&s.base, &id_a, Some(ka)).await.unwrap();
    let refused = connect(&s.base, &id_a, Some(ka)).await.unwrap_err();
    assert_eq!(refused["status"], 429, "{refused}");
    let body = &refused["body"];
    assert_eq!(error_code(body), "quota_exceeded", "{refused}");
    assert_eq!(body["quota"]["quota"], "kernel_sockets", "{refused}");
    assert_eq!(
        (&body["quota"]["used"], &body["quota"]["limit"]),
        (&json!(2), &json!(2)),
        "{refused}"
    );
    // Another tenant is not held to alice's count.
    let mut other = connect(&s.base, &id_b, Some(kb)).await.unwrap();
    let req = request("kernel_info_request", "shell", json!({}));
    send(&mut other, &req).await;
    assert!(!of_type(&until_idle(&mut other, &req).await, "kernel_info_reply").is_empty());
    // A closed socket gives its place back.
    drop(first);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let _third = loop {
        match connect(&s.base, &id_a, Some(ka)).await {
            Ok(ws) => break ws,
            Err(e) => {
                assert_eq!(e["status"], 429, "{e}");
                assert!(tokio::time::Instant::now() < deadline, "never given back");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A GitHub token's format, random (none sits in the repository).
fn token() -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let tail: String = (0..36)
        .map(|_| ALNUM[rand::random::<u32>() as usize % ALNUM.len()] as char)
        .collect();
    format!("ghp_{tail}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_inspections_and_prompts_leave_through_the_leakage_policy() {
    let s = shared().await;
    let c = client();
    let secret = token();
    // A kernel under the server's default (`redact`), and a session under `deny` driven as
    // a kernel.
    let (st, k) = post(&c, &s.url("/api/kernels"), &json!({})).await;
    assert_eq!(st, 201, "{k}");
    let redact = k["id"].as_str().unwrap().to_string();
    let sid = open_session(&c, &s.base, &json!({"leakage": "deny"})).await;
    let h = sid.trim_start_matches("s-");
    let deny = format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    );
    for (id, policy) in [(redact, "redact"), (deny, "deny")] {
        let mut ws = connect(&s.base, &id, None).await.unwrap();
        // A variable whose name is the secret, and a function whose docstring holds it.
        let code =
            format!("{secret} = 1\ndef fetch():\n    \"\"\"Calls the API with {secret}.\"\"\"\n");
        let req = request("execute_request", "shell", json!({"code": code}));
        send(&mut ws, &req).await;
        let msgs = until_idle(&mut ws, &req).await;
        assert_eq!(
            of_type(&msgs, "execute_reply")[0]["content"]["status"],
            "ok",
            "{msgs:?}"
        );

        let req = request(
            "complete_request",
            "shell",
            json!({"code": "ghp_", "cursor_pos": 4}),
        );
        send(&mut ws, &req).await;
        let msgs = until_idle(&mut ws, &req).await;
        let reply = of_type(&msgs, "complete_reply")[0];
        assert_eq!(reply["content"]["status"], "ok", "{reply}");
        assert!(!reply.to_string().contains(&secret), "{policy}: {reply}");
        // The completion is there when it holds no secret.
        let req = request(
            "complete_request",
            "shell",
            json!({"code": "fet", "cursor_pos": 3}),
        );
        send(&mut ws, &req).await;
        let msgs = until_idle(&mut ws, &req).await;
        let reply = of_type(&msgs, "complete_reply")[0];
        assert!(
            reply["content"]["matches"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m.as_str().unwrap().starts_with("fetch")),
            "{reply}"
        );

        let req = request(
            "inspect_request",
            "shell",
            json!({"code": "fetch", "cursor_pos": 5, "detail_level": 0}),
        );
        send(&mut ws, &req).await;
        let msgs = until_idle(&mut ws, &req).await;
        let reply = of_type(&msgs, "inspect_reply")[0];
        assert!(!reply.to_string().contains(&secret), "{policy}: {reply}");
        match policy {
            "redact" => {
                let text = reply["content"]["data"]["text/plain"].as_str().unwrap();
                assert!(text.contains("[REDACTED:"), "{reply}");
                assert!(text.contains("Calls the API with"), "{reply}");
            }
            _ => {
                assert_eq!(reply["content"]["status"], "error", "{reply}");
                assert_eq!(reply["content"]["ename"], "VivariumOutputLeak", "{reply}");
            }
        }

        let req = request(
            "execute_request",
            "shell",
            json!({"code": format!("answer = input('token {secret}? ')"), "allow_stdin": true}),
        );
        send(&mut ws, &req).await;
        let asked = loop {
            let Some(Ok(Frame::Text(t))) = tokio::time::timeout(Duration::from_secs(30), ws.next())
                .await
                .unwrap()
            else {
                panic!("closed")
            };
            let m: Value = serde_json::from_str(t.as_str()).unwrap();
            if m["header"]["msg_type"] == "input_request" {
                break m;
            }
        };
        let prompt = asked["content"]["prompt"].as_str().unwrap();
        assert!(!prompt.contains(&secret), "{policy}: {asked}");
        assert!(
            prompt.contains(if policy == "redact" {
                "[REDACTED:"
            } else {
                "withheld"
            }),
            "{asked}"
        );
        let mut reply = request("input_reply", "stdin", json!({"value": "no"}));
        reply["parent_header"] = asked["header"].clone();
        send(&mut ws, &reply).await;
        let msgs = until_idle(&mut ws, &req).await;
        assert_eq!(
            of_type(&msgs, "execute_reply")[0]["content"]["status"],
            "ok",
            "{msgs:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_nothing_is_dropped_once_its_outgoing_bound_is_full() {
    let s = start("jupyter-slow-client", |_| {}).await;
    let c = client();
    // A session whose cells may print 8 MiB each, driven as a kernel.
    let sid = open_session(
        &c,
        &s.base,
        &json!({"template": "python", "limits": {"output_bytes": 8 << 20}}),
    )
    .await;
    let h = sid.trim_start_matches("s-");
    let id = format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    );
    let mut ws = connect(&s.base, &id, None).await.unwrap();
    // 96 MiB of output toward a client that reads none of it: past the 32 MiB the kernel
    // may hold toward it (and what the sockets buffer), the kernel waits, then drops it.
    let cells = 12;
    for _ in 0..cells {
        let req = request(
            "execute_request",
            "shell",
            json!({"code": "print('x' * ((8 << 20) - 64))"}),
        );
        send(&mut ws, &req).await;
    }
    // Seven cells' output (56 MiB) is past the bound and what the sockets buffer; the
    // kernel then waits 10 s for the client. How long the cells take depends on the machine
    // (a fixed wait was too short on a slow one): the test waits until seven have run (if
    // the kernel holds them back while it waits, they run once the client is dropped),
    // then past the kernel's wait.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
    loop {
        let info: Value = c
            .get(format!("{}/v1/sessions/{sid}", s.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if info["turns"].as_u64().is_some_and(|n| n >= 7) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cells did not run: {info}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(12)).await;
    let mut replies = 0;
    let mut closed = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Ok(next) = tokio::time::timeout_at(deadline, ws.next()).await {
        match next {
            Some(Ok(Frame::Text(t))) => {
                let m: Value = serde_json::from_str(t.as_str()).unwrap();
                if m["header"]["msg_type"] == "execute_reply" {
                    replies += 1;
                }
            }
            Some(Ok(_)) => {}
            Some(Err(_)) | None => {
                closed = true;
                break;
            }
        }
    }
    assert!(closed, "the connection was kept ({replies} replies)");
    assert!(replies < cells, "every reply arrived: nothing was dropped");
    // The kernel itself goes on: once the dropped client's last cell is done (it may still
    // run on a loaded machine), a new connection runs a cell.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let k: Value = c
            .get(format!("{}/api/kernels/{id}", s.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if k["execution_state"] == "idle" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the kernel stayed {k}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut ws = connect(&s.base, &id, None).await.unwrap();
    let req = request("execute_request", "shell", json!({"code": "6 * 7"}));
    send(&mut ws, &req).await;
    let msgs = until_idle(&mut ws, &req).await;
    let result = of_type(&msgs, "execute_result");
    assert_eq!(result.len(), 1, "{msgs:?}");
    assert_eq!(result[0]["content"]["data"]["text/plain"], "42");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_tenants_sockets_hold_waiting_is_bounded_together() {
    // Each socket may hold 32 MiB; alice's together 2.5 MiB.
    let (s, dir) = two_tenants("jupyter-queue", |a| {
        a.kernel_queue_bytes_per_tenant = 5 << 19;
    })
    .await;
    let (ka, kb) = (ALICE, BOB);
    let (a, b) = (client_with_key(ka), client_with_key(kb));
    let mut alice = Vec::new();
    for _ in 0..2 {
        let (st, k) = post(&a, &s.url("/api/kernels"), &json!({})).await;
        assert_eq!(st, 201, "{k}");
        let id = k["id"].as_str().unwrap().to_string();
        alice.push(connect(&s.base, &id, Some(ka)).await.unwrap());
    }
    // On each of her sockets a cell sleeps, and a 1 MiB one waits behind it: 2 MiB held
    // plus the sleeping cells' few bytes.
    let pad = format!("x = 1 # {}", "p".repeat(1 << 20));
    let cell = |code: &str| {
        request(
            "execute_request",
            "shell",
            json!({"code": code, "silent": false}),
        )
    };
    for ws in alice.iter_mut() {
        send(ws, &cell("import time; time.sleep(10)")).await;
        send(ws, &cell(&pad)).await;
    }
    // Both pads wait (the sockets' frames are read concurrently: see them counted first).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, u) = get(&a, &s.url("/v1/usage")).await;
        let queued = u["quotas"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["quota"] == "kernel_queue_bytes")
            .and_then(|q| q["used"].as_u64())
            .unwrap();
        if queued >= 2 << 20 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{u}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A third waiting MiB on either socket is past her 2.5 MiB: answered with the quota.
    let third = cell(&pad);
    send(&mut alice[0], &third).await;
    let got = until_idle(&mut alice[0], &third).await;
    let reply = of_type(&got, "execute_reply");
    assert_eq!(reply.len(), 1);
    let (status, ename) = (
        &reply[0]["content"]["status"],
        &reply[0]["content"]["ename"],
    );
    assert_eq!(ename, "VivariumQueueFull", "status {status}");
    let evalue = reply[0]["content"]["evalue"].as_str().unwrap();
    assert!(evalue.contains("kernel_queue_bytes"), "{evalue}");
    // Bob's own queue is his.
    let (st, k) = post(&b, &s.url("/api/kernels"), &json!({})).await;
    assert_eq!(st, 201, "{k}");
    let mut bob = connect(&s.base, k["id"].as_str().unwrap(), Some(kb))
        .await
        .unwrap();
    let mine = cell(&pad);
    send(&mut bob, &mine).await;
    let got = until_idle(&mut bob, &mine).await;
    let reply = of_type(&got, "execute_reply");
    assert_eq!(
        reply[0]["content"]["status"], "ok",
        "{}",
        reply[0]["content"]
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
