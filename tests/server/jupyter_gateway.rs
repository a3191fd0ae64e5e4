//! Vivarium sessions as Jupyter kernels, over the real server on 127.0.0.1: the kernel
//! gateway's REST API and the kernel WebSocket carrying Jupyter's messaging protocol (5.3,
//! JSON form), every message checked for the fields the protocol requires.

use std::time::Duration;

use crate::http_support::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Frame;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

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

/// Every message the kernel sends has the protocol's envelope.
fn check_envelope(m: &Value) {
    for f in [
        "msg_id", "session", "username", "date", "msg_type", "version",
    ] {
        assert!(m["header"][f].is_string(), "header.{f} in {m}");
    }
    assert_eq!(m["header"]["version"], "5.3");
    assert!(m["parent_header"].is_object(), "{m}");
    assert!(m["metadata"].is_object(), "{m}");
    assert!(m["content"].is_object(), "{m}");
    assert!(
        ["shell", "iopub", "control", "stdin"].contains(&m["channel"].as_str().unwrap()),
        "{m}"
    );
}

async fn connect(base: &str, id: &str) -> Socket {
    let url = format!(
        "{}/api/kernels/{id}/channels",
        base.replace("http://", "ws://")
    );
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

async fn send(ws: &mut Socket, m: &Value) {
    ws.send(Frame::Text(m.to_string().into())).await.unwrap();
}

/// The next message the kernel sends.
async fn next_message(ws: &mut Socket) -> Value {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .expect("no message in time")
            .expect("socket closed")
            .unwrap();
        if let Frame::Text(t) = frame {
            return serde_json::from_str(t.as_str()).unwrap();
        }
    }
}

/// The next message of type `t`, skipping others.
async fn next_of_type(ws: &mut Socket, t: &str) -> Value {
    loop {
        let m = next_message(ws).await;
        if m["header"]["msg_type"] == t {
            return m;
        }
    }
}

/// Reads messages until the `status: idle` answering `req`; returns every message that
/// answered it, in order.
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
        check_envelope(&m);
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

/// Interrupts kernel `id` over REST (`204`).
async fn interrupt(c: &reqwest::Client, base: &str, id: &str) {
    let r = c
        .post(format!("{base}/api/kernels/{id}/interrupt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
}

async fn execute(ws: &mut Socket, code: &str) -> Vec<Value> {
    let req = request(
        "execute_request",
        "shell",
        json!({"code": code, "silent": false, "store_history": true, "user_expressions": {}, "allow_stdin": false, "stop_on_error": true}),
    );
    send(ws, &req).await;
    until_idle(ws, &req).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_a_jupyter_kernel() {
    let s = start("jupyter", |_| {}).await;
    let c = client();
    let (st, specs) = get(&c, &s.url("/api/kernelspecs")).await;
    assert_eq!(st, 200, "{specs}");
    assert_eq!(specs["default"], "vivarium-scientific");
    // Each spec's logos are served where its resources say.
    for (resource, magic) in [("logo-64x64", &b"\x89PNG"[..]), ("logo-svg", &b"<svg"[..])] {
        let path = specs["kernelspecs"]["vivarium-python"]["resources"][resource]
            .as_str()
            .unwrap()
            .to_string();
        let r = c.get(s.url(&path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(r.bytes().await.unwrap().starts_with(magic), "{path}");
    }
    let (st, _) = get(&c, &s.url("/kernelspecs/vivarium-python/../../etc/passwd")).await;
    assert_eq!(st, 404);
    assert_eq!(
        specs["kernelspecs"]["vivarium-python"]["spec"]["language"],
        "python"
    );
    let (st, k) = post(
        &c,
        &s.url("/api/kernels"),
        &json!({"name": "vivarium-python"}),
    )
    .await;
    assert_eq!(st, 201, "{k}");
    let id = k["id"].as_str().unwrap().to_string();
    // A kernel id is its session's id in UUID form (Jupyter Server's routes take only that).
    assert_eq!(id.len(), 36, "{id}");
    let sid = format!("s-{}", id.replace('-', ""));
    assert_eq!(k["name"], "vivarium-python");
    assert_eq!(k["execution_state"], "idle");
    let (_, list) = get(&c, &s.url("/api/kernels")).await;
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|k| k["id"] == id.as_str()),
        "{list}"
    );

    let (st, one) = get(&c, &s.url(&format!("/api/kernels/{id}"))).await;
    assert_eq!((st, &one["id"]), (200, &json!(id)), "{one}");

    let mut ws = connect(&s.base, &id).await;
    // The kernel says its state as the socket opens, answering nothing (JupyterLab counts
    // no status that answers its own kernel_info request).
    let first = next_message(&mut ws).await;
    check_envelope(&first);
    assert_eq!(first["header"]["msg_type"], "status", "{first}");
    assert_eq!(first["parent_header"], json!({}), "{first}");
    assert_eq!(first["content"]["execution_state"], "idle", "{first}");
    // kernel_info.
    let req = request("kernel_info_request", "shell", json!({}));
    send(&mut ws, &req).await;
    let msgs = until_idle(&mut ws, &req).await;
    let info = of_type(&msgs, "kernel_info_reply")[0];
    assert_eq!(info["channel"], "shell");
    assert_eq!(info["content"]["language_info"]["name"], "python");
    assert_eq!(info["content"]["protocol_version"], "5.3");
    assert!(
        info["content"]["language_info"]["version"]
            .as_str()
            .unwrap()
            .starts_with("3.15")
    );

    // A cell that prints and leaves a value: busy, execute_input, stream, execute_result,
    // execute_reply, idle, in that order.
    let msgs = execute(&mut ws, "x = 6 * 7\nprint('hello')\nx").await;
    let types: Vec<&str> = msgs
        .iter()
        .map(|m| m["header"]["msg_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "status",
            "execute_input",
            "stream",
            "execute_result",
            "execute_reply",
            "status"
        ],
        "{msgs:?}"
    );
    assert_eq!(msgs[0]["content"]["execution_state"], "busy");
    assert_eq!(
        msgs[2]["content"],
        json!({"name": "stdout", "text": "hello\n"})
    );
    let result = &msgs[3]["content"];
    assert_eq!(result["data"]["text/plain"], "42");
    let count = result["execution_count"].as_u64().unwrap();
    let reply = &msgs[4];
    assert_eq!(reply["channel"], "shell");
    assert_eq!(reply["content"]["status"], "ok");
    assert_eq!(reply["content"]["execution_count"], count);
    assert_eq!(msgs[1]["content"]["execution_count"], count);

    // State persists; an error has ename, evalue, traceback.
    let msgs = execute(&mut ws, "x / 0").await;
    let err = of_type(&msgs, "error")[0];
    assert_eq!(err["content"]["ename"], "ZeroDivisionError");
    assert_eq!(err["content"]["evalue"], "division by zero");
    assert!(err["content"]["traceback"].as_array().unwrap().len() > 1);
    assert!(
        of_type(&msgs, "stream").is_empty(),
        "the traceback is not a stream: {msgs:?}"
    );
    let reply = of_type(&msgs, "execute_reply")[0];
    assert_eq!(reply["content"]["status"], "error");
    assert_eq!(reply["content"]["execution_count"], count + 1);

    // Streams leave as the cell writes them: two prints a moment apart are two messages,
    // the first sent while the cell still runs; a traceback printed by the cell's own code
    // is a stream, the uncaught one is the error.
    let req = request(
        "execute_request",
        "shell",
        json!({"code": "import sys, time, traceback\nprint('one')\ntry:\n    1/0\nexcept ZeroDivisionError:\n    traceback.print_exc()\ntime.sleep(1.5)\nprint('two', end='')\nraise KeyError('k')", "silent": false}),
    );
    send(&mut ws, &req).await;
    let sent = std::time::Instant::now();
    let mut first_at = None;
    let mut msgs = Vec::new();
    loop {
        let m = next_message(&mut ws).await;
        if m["parent_header"]["msg_id"] != req["header"]["msg_id"] {
            continue;
        }
        if m["header"]["msg_type"] == "stream" && first_at.is_none() {
            first_at = Some(sent.elapsed());
        }
        let idle = m["header"]["msg_type"] == "status" && m["content"]["execution_state"] == "idle";
        msgs.push(m);
        if idle {
            break;
        }
    }
    let streams: Vec<(String, String)> = of_type(&msgs, "stream")
        .iter()
        .map(|m| {
            (
                m["content"]["name"].as_str().unwrap().to_string(),
                m["content"]["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(streams[0], ("stdout".into(), "one\n".into()), "{streams:?}");
    assert!(
        first_at.unwrap() < sent.elapsed() - Duration::from_millis(1000),
        "the first print came only at the end: {first_at:?} of {:?}",
        sent.elapsed()
    );
    let stderr: String = streams
        .iter()
        .filter(|(n, _)| n == "stderr")
        .map(|(_, t)| t.as_str())
        .collect();
    assert!(stderr.contains("ZeroDivisionError"), "{streams:?}");
    assert!(!stderr.contains("KeyError"), "{streams:?}");
    assert_eq!(
        streams.last().unwrap(),
        &("stdout".to_string(), "two".to_string()),
        "{streams:?}"
    );
    assert_eq!(of_type(&msgs, "error")[0]["content"]["ename"], "KeyError");

    // input(): an input_request on the stdin channel when the client allows it; its
    // input_reply is the line. A reply that answers nothing is dropped.
    let stray = json!({"header": {"msg_id": "stray", "msg_type": "input_reply", "session": "client-session"}, "parent_header": {"msg_id": "nothing"}, "channel": "stdin", "content": {"value": "no"}});
    send(&mut ws, &stray).await;
    let req = request(
        "execute_request",
        "shell",
        json!({"code": "name = input('Who? ')\nprint('hi', name)", "silent": false, "allow_stdin": true}),
    );
    send(&mut ws, &req).await;
    let asked = next_of_type(&mut ws, "input_request").await;
    check_envelope(&asked);
    assert_eq!(asked["channel"], "stdin", "{asked}");
    assert_eq!(
        asked["content"],
        json!({"prompt": "Who? ", "password": false})
    );
    let mut answer = request("input_reply", "stdin", json!({"value": "Ada"}));
    answer["parent_header"] = asked["header"].clone();
    send(&mut ws, &answer).await;
    let msgs = until_idle(&mut ws, &req).await;
    assert_eq!(
        of_type(&msgs, "stream")[0]["content"]["text"],
        "hi Ada\n",
        "{msgs:?}"
    );
    // A message reaches only the kernel of its socket: an input_reply sent to another
    // kernel, naming this kernel's request, answers nothing; the request waits for its own.
    let (_, other) = post(
        &c,
        &s.url("/api/kernels"),
        &json!({"name": "vivarium-python"}),
    )
    .await;
    let mut other_ws = connect(&s.base, other["id"].as_str().unwrap()).await;
    let req = request(
        "execute_request",
        "shell",
        json!({"code": "print(input())", "silent": false, "allow_stdin": true}),
    );
    send(&mut ws, &req).await;
    let asked = next_of_type(&mut ws, "input_request").await;
    let mut misrouted = request("input_reply", "stdin", json!({"value": "wrong kernel"}));
    misrouted["parent_header"] = asked["header"].clone();
    send(&mut other_ws, &misrouted).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut answer = request("input_reply", "stdin", json!({"value": "right kernel"}));
    answer["parent_header"] = asked["header"].clone();
    send(&mut ws, &answer).await;
    let msgs = until_idle(&mut ws, &req).await;
    assert_eq!(
        of_type(&msgs, "stream")[0]["content"]["text"],
        "right kernel\n",
        "{msgs:?}"
    );
    drop(other_ws);

    // A client that cannot answer gets EOFError, as a program with no stdin does.
    let msgs = execute(&mut ws, "input('? ')").await;
    assert_eq!(
        of_type(&msgs, "error")[0]["content"]["ename"],
        "EOFError",
        "{msgs:?}"
    );

    // Live streams keep to the server's leakage policy (`redact` by default).
    let token = "Zq8Wm3Xr7Lp2Vb9Nc4Ty6Hd1Kf5Gs0Ja8Ue3";
    let msgs = execute(&mut ws, &format!("print('ghp_' + '{token}')")).await;
    let text = of_type(&msgs, "stream")[0]["content"]["text"].clone();
    assert_eq!(text, "[REDACTED:github-pat]\n", "{msgs:?}");

    // A plot: display_data with a PNG.
    let msgs = execute(
        &mut ws,
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
    )
    .await;
    let shown = of_type(&msgs, "display_data");
    assert_eq!(shown.len(), 1, "{msgs:?}");
    let png = unb64(shown[0]["content"]["data"]["image/png"].as_str().unwrap());
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    // The small requests, each between busy and idle. Completions and inspection come from
    // the session itself (its globals), and asking is not a turn.
    let ask = |t: &str, content: Value| request(t, "shell", content);
    let small = async |ws: &mut Socket, req: Value| {
        send(ws, &req).await;
        let msgs = until_idle(ws, &req).await;
        assert_eq!(msgs[0]["content"]["execution_state"], "busy", "{msgs:?}");
        let t = req["header"]["msg_type"]
            .as_str()
            .unwrap()
            .replace("_request", "_reply");
        of_type(&msgs, &t)[0].clone()
    };
    execute(
        &mut ws,
        "def frobnicate(level, *, loud=False):\n    'Makes things frobnicated.'\nfrob_count = 3",
    )
    .await;
    let r = small(
        &mut ws,
        ask(
            "complete_request",
            json!({"code": "print(frob", "cursor_pos": 10}),
        ),
    )
    .await;
    assert_eq!(r["content"]["status"], "ok", "{r}");
    assert_eq!(
        r["content"]["matches"],
        json!(["frobnicate", "frob_count"]),
        "{r}"
    );
    assert_eq!(
        (
            r["content"]["cursor_start"].clone(),
            r["content"]["cursor_end"].clone()
        ),
        (json!(6), json!(10))
    );
    let r = small(
        &mut ws,
        ask(
            "complete_request",
            json!({"code": "import math\nmath.fl", "cursor_pos": 19}),
        ),
    )
    .await;
    assert_eq!(
        r["content"]["matches"],
        json!([]),
        "math is not imported yet: {r}"
    );
    let r = small(
        &mut ws,
        ask(
            "complete_request",
            json!({"code": "x.bit_len", "cursor_pos": 9}),
        ),
    )
    .await;
    assert_eq!(r["content"]["matches"], json!(["x.bit_length"]), "{r}");
    let r = small(
        &mut ws,
        ask(
            "inspect_request",
            json!({"code": "frobnicate(", "cursor_pos": 11, "detail_level": 0}),
        ),
    )
    .await;
    assert_eq!(r["content"]["found"], true, "{r}");
    let text = r["content"]["data"]["text/plain"].as_str().unwrap();
    assert!(
        text.contains("Signature: frobnicate(level, *, loud=False)")
            && text.contains("Makes things frobnicated."),
        "{text}"
    );
    let r = small(
        &mut ws,
        ask(
            "inspect_request",
            json!({"code": "no_such_name", "cursor_pos": 3}),
        ),
    )
    .await;
    assert_eq!(r["content"]["found"], false, "{r}");
    for (code, st) in [
        ("for i in range(3):", "incomplete"),
        ("x = 1", "complete"),
        ("x = = 1", "invalid"),
    ] {
        let r = small(&mut ws, ask("is_complete_request", json!({"code": code}))).await;
        assert_eq!(r["content"]["status"], st, "{code}: {r}");
        if st == "incomplete" {
            assert_eq!(r["content"]["indent"], "    ");
        }
    }
    // A query that a limit stops (a property that never returns) is an error reply, and the
    // session goes on as it was.
    execute(&mut ws, "class Slow:\n    @property\n    def p(self):\n        while True:\n            pass\nslow = Slow()").await;
    let r = small(
        &mut ws,
        ask(
            "inspect_request",
            json!({"code": "slow.p", "cursor_pos": 6}),
        ),
    )
    .await;
    assert_eq!(r["content"]["status"], "error", "{r}");
    let msgs = execute(&mut ws, "frob_count + 1").await;
    assert_eq!(
        of_type(&msgs, "execute_result")[0]["content"]["data"]["text/plain"],
        "4",
        "{msgs:?}"
    );
    let r = small(&mut ws, ask("comm_info_request", json!({}))).await;
    assert_eq!(r["content"]["comms"], json!({}));
    // None of it was a turn: the next cell's number follows the last cell's, and an error's
    // line still points into the cell.
    let msgs = execute(&mut ws, "frob_count\n1/0").await;
    let err = of_type(&msgs, "error")[0];
    assert!(
        err["content"]["traceback"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("line 2")),
        "{err}"
    );
    // An unknown type gets an error reply; the socket stays.
    let reply = small(&mut ws, ask("frobnicate_request", json!({}))).await;
    assert_eq!(reply["header"]["msg_type"], "frobnicate_reply");
    assert_eq!(reply["content"]["status"], "error");

    // Interrupt a `while True:` cell (over control); the kernel goes on with its state.
    let req = request(
        "execute_request",
        "shell",
        json!({"code": "while True:\n    pass", "silent": false}),
    );
    send(&mut ws, &req).await;
    wait_busy(&c, &s.base, &sid).await;
    interrupt(&c, &s.base, &id).await;
    let msgs = until_idle(&mut ws, &req).await;
    let err = of_type(&msgs, "error")[0];
    assert_eq!(err["content"]["ename"], "KeyboardInterrupt", "{err}");
    let msgs = execute(&mut ws, "x + 1").await;
    assert_eq!(
        of_type(&msgs, "execute_result")[0]["content"]["data"]["text/plain"],
        "43"
    );

    // Restart: a fresh interpreter under the same id.
    let (st, k) = post(
        &c,
        &s.url(&format!("/api/kernels/{id}/restart")),
        &json!({}),
    )
    .await;
    assert_eq!((st, k["id"].as_str()), (200, Some(id.as_str())), "{k}");
    let msgs = execute(&mut ws, "'x' in dir()").await;
    assert_eq!(
        of_type(&msgs, "execute_result")[0]["content"]["data"]["text/plain"],
        "False"
    );

    // Hostile frames close the socket with a reason: one that is not a message (1007), a
    // binary one (1003), a signed one (1008: no key is shared, so no signature checks), one
    // over 16 MiB (1009). After each the kernel and the server go on.
    execute(&mut ws, "y = 42").await;
    let mut signed = request("execute_request", "shell", json!({"code": "y = 0"}));
    signed["signature"] = json!("5b1a0cd1f1d8e9d4c1f5a1e5ab6c3e2f8d0c4b1a2e3f4d5c6b7a8e9f0a1b2c3d");
    let oversized = format!("{{\"pad\": \"{}\"}}", "a".repeat(17 << 20));
    for (frame, code) in [
        (Frame::Text("{not json".into()), 1007),
        (Frame::Binary(vec![0u8; 64].into()), 1003),
        (Frame::Text(signed.to_string().into()), 1008),
        (Frame::Text(oversized.into()), 1009),
    ] {
        let _ = ws.send(frame).await;
        let closed = loop {
            match ws.next().await {
                Some(Ok(Frame::Close(f))) => break f,
                Some(Ok(_)) => continue,
                _ => break None,
            }
        };
        assert_eq!(closed.map(|f| u16::from(f.code)), Some(code));
        ws = connect(&s.base, &id).await;
        let msgs = execute(&mut ws, "y + 1").await;
        assert_eq!(
            of_type(&msgs, "execute_result")[0]["content"]["data"]["text/plain"],
            "43",
            "the signed cell must not have run"
        );
    }

    // A flood: every request is answered (run, or `aborted` past the queue).
    let reqs: Vec<Value> = (0..100)
        .map(|i| request("execute_request", "shell", json!({"code": format!("{i}")})))
        .collect();
    for r in &reqs {
        send(&mut ws, r).await;
    }
    let mut replies = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while replies < reqs.len() {
        let Some(Ok(Frame::Text(t))) = tokio::time::timeout_at(deadline, ws.next()).await.unwrap()
        else {
            panic!("closed")
        };
        let m: Value = serde_json::from_str(t.as_str()).unwrap();
        if m["header"]["msg_type"] == "execute_reply" {
            assert!(
                ["ok", "aborted"].contains(&m["content"]["status"].as_str().unwrap()),
                "{m}"
            );
            replies += 1;
        }
    }

    // Unauthenticated or unknown kernels: JSON errors.
    let (st, _) = get(
        &c,
        &s.url("/api/kernels/s-00000000000000000000000000000000"),
    )
    .await;
    assert_eq!(st, 404);
    // Shutdown over the REST API ends the session.
    let r = c
        .delete(s.url(&format!("/api/kernels/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let (st, _) = get(&c, &s.url(&format!("/v1/sessions/{sid}"))).await;
    assert!(st == 404 || st == 410, "{st}");
    drop(ws);
    s.stop().await;
}

/// An interrupt asked while the cell still waits for a slot (the kernel reads busy, its worker
/// has not seen the turn) stops the cell when it runs: it is not lost to the turn's arrival.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_asked_while_the_cell_waits_for_a_slot_stops_it() {
    let s = start("jupyter-interrupt-queued", |a| a.max_concurrency = Some(1)).await;
    let c = client();
    let (st, k) = post(&c, &s.url("/api/kernels"), &json!({})).await;
    assert_eq!(st, 201, "{k}");
    let id = k["id"].as_str().unwrap().to_string();
    let sid = format!("s-{}", id.replace('-', ""));
    let mut ws = connect(&s.base, &id).await;
    // The tenant's one slot taken by an execution that sleeps.
    let blocker = {
        let (c, url) = (c.clone(), s.url("/v1/execute"));
        tokio::spawn(
            async move { post(&c, &url, &json!({"code": "import time; time.sleep(3)"})).await },
        )
    };
    wait_for_metric(
        &c,
        &s.base,
        "vivarium_running_executions",
        1.0,
        Duration::from_secs(20),
    )
    .await;
    let req = request(
        "execute_request",
        "shell",
        json!({"code": "while True:\n    pass", "silent": false}),
    );
    send(&mut ws, &req).await;
    wait_busy(&c, &s.base, &sid).await;
    wait_for_metric(
        &c,
        &s.base,
        "vivarium_queue_depth",
        1.0,
        Duration::from_secs(20),
    )
    .await;
    interrupt(&c, &s.base, &id).await;
    let msgs = until_idle(&mut ws, &req).await;
    let err = of_type(&msgs, "error")[0];
    assert_eq!(err["content"]["ename"], "KeyboardInterrupt", "{err}");
    let (st, v) = blocker.await.unwrap();
    assert_eq!((st, &v["status"]), (200, &json!("ok")), "{v}");
    // The next cell is not stopped by the interrupt that stopped this one.
    let msgs = execute(&mut ws, "6 * 7").await;
    assert_eq!(
        of_type(&msgs, "execute_result")[0]["content"]["data"]["text/plain"],
        "42",
        "{msgs:?}"
    );
    drop(ws);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernels_take_jupyter_token_forms_of_the_api_key() {
    let dir = scratch_dir("jupyter-keys-file");
    std::fs::create_dir_all(&dir).unwrap();
    let keys = dir.join("keys");
    std::fs::write(&keys, "nb:sekret-key-1234567\n").unwrap();
    let k2 = keys.clone();
    let s = start("jupyter-keys", move |a| a.api_keys_file = Some(k2)).await;
    let c = client();
    let (st, _) = get(&c, &s.url("/api/kernels")).await;
    assert_eq!(st, 401);
    let r = c
        .get(s.url("/api/kernels"))
        .header("Authorization", "token sekret-key-1234567")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The kernelspecs' logos too, as Jupyter Server's gateway client fetches them.
    let logo = s.url("/kernelspecs/vivarium-python/logo-64x64.png");
    assert_eq!(c.get(&logo).send().await.unwrap().status(), 401);
    let r = c
        .get(&logo)
        .header("Authorization", "token sekret-key-1234567")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = c
        .post(s.url("/api/kernels?token=sekret-key-1234567"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let id = r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    // A browser's WebSocket carries the token in the query.
    let url = format!(
        "{}/api/kernels/{id}/channels?token=sekret-key-1234567",
        s.base.replace("http://", "ws://")
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let msgs = execute(&mut ws, "print('keyed')").await;
    assert_eq!(of_type(&msgs, "stream")[0]["content"]["text"], "keyed\n");
    let bad = format!(
        "{}/api/kernels/{id}/channels?token=wrong",
        s.base.replace("http://", "ws://")
    );
    assert!(tokio_tungstenite::connect_async(bad).await.is_err());
    // `?token=` is only for the kernel API.
    let (st, _) = get(&c, &s.url("/v1/packages?token=sekret-key-1234567")).await;
    assert_eq!(st, 401);
    drop(ws);
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_stopping_under_open_kernel_sockets_leaves_nothing_behind() {
    let s = shared().await;
    let c = client();
    let mut sockets = Vec::new();
    for code in ["x = 1", "while True:\n    pass"] {
        let (st, k) = post(&c, &s.url("/api/kernels"), &json!({})).await;
        assert_eq!(st, 201, "{k}");
        let mut ws = connect(&s.base, k["id"].as_str().unwrap()).await;
        let req = request("execute_request", "shell", json!({"code": code}));
        send(&mut ws, &req).await;
        sockets.push(ws);
    }
    // One kernel idle with its socket open, one in a cell that never ends.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(sockets);
}
