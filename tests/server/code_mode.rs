//! Code mode over HTTP: a program calls the caller's tools as functions; the caller (here,
//! reqwest on 127.0.0.1) answers each round by resuming the suspended execution, or, over
//! server-sent events, at `tool-results`. Real servers, real worker processes, the real
//! runtime; one test restarts the real binary after `kill -9`.

use std::time::Duration;

use crate::http_support::*;
use serde_json::{Value, json};

/// An agent's three tools.
fn tools() -> Value {
    json!([
        {
            "name": "get-weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7}
                },
                "required": ["city"],
                "additionalProperties": false
            }
        },
        {
            "name": "search",
            "description": "Documents matching a query.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
        },
        {
            "name": "send_email",
            "description": "Sends an email.",
            "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}}
        }
    ])
}

/// What the caller answers a call with: the weather is the city's length in degrees, a
/// search for "missing" raises KeyError, one for "quota" a custom QuotaError.
fn answer(call: &Value) -> Value {
    let id = call["call_id"].clone();
    let args = &call["arguments"];
    match call["name"].as_str().unwrap() {
        "get-weather" => {
            json!({"call_id": id, "result": {"temp": args["city"].as_str().unwrap_or("").len()}})
        }
        "search" => match args["q"].as_str().unwrap_or("") {
            "missing" => {
                json!({"call_id": id, "error": {"type": "KeyError", "message": "no such document"}})
            }
            "quota" => {
                json!({"call_id": id, "error": {"type": "QuotaError", "message": "over quota"}})
            }
            q => json!({"call_id": id, "result": [format!("doc about {q}")]}),
        },
        _ => json!({"call_id": id, "result": "sent"}),
    }
}

/// `POST /v1/execute` of `code` with the tools; its first answer (200).
async fn start_with_tools(api: &Api, code: &str) -> Value {
    let body = json!({"code": code, "template": "python", "tools": tools()});
    let (st, v) = post(&api.c, &api.url("/v1/execute"), &body).await;
    assert_eq!(st, 200, "{v}");
    v
}

async fn resume(api: &Api, id: &str, results: Value) -> (u16, Value) {
    post(
        &api.c,
        &api.url(&format!("/v1/executions/{id}/resume")),
        &json!({ "results": results }),
    )
    .await
}

/// Drives an execution to its end, answering every round with [`answer`]; the result and
/// the size of each round.
async fn drive(api: &Api, body: Value) -> (Value, Vec<usize>) {
    let (st, mut v) = post(&api.c, &api.url("/v1/execute"), &body).await;
    assert_eq!(st, 200, "{v}");
    let mut rounds = Vec::new();
    while v["status"] == "suspended" {
        let calls = v["pending_calls"].as_array().unwrap().clone();
        rounds.push(calls.len());
        let id = v["execution_id"].as_str().unwrap().to_string();
        // Answered in reverse: any order does.
        let results: Vec<Value> = calls.iter().rev().map(answer).collect();
        let (st, next) = resume(api, &id, Value::Array(results)).await;
        assert_eq!(st, 200, "{next}");
        v = next;
    }
    (v, rounds)
}

const AGENT: &str = r#"
import asyncio
temps = {}
for city in ["Paris", "Rome", "Oslo"]:
    temps[city] = tools.get_weather(city=city)["temp"]
print("loop", temps)
docs = await asyncio.gather(*(tools.aio.search(q=f"topic {i}") for i in range(10)))
print("gather", len(docs), docs[9])
try:
    tools.search(q="missing")
except KeyError as e:
    print("raised", repr(e))
try:
    tools.search(q="quota")
except tools.ToolError as e:
    print("tool error", e.type, e.message)
try:
    tools.get_weather(city="Paris", days=30)
except ValueError as e:
    print("refused", type(e).__name__)
try:
    tools.get_weather(city=7)
except TypeError as e:
    print("refused", type(e).__name__)
print(tools.send_email(to="a@example.com", body=f"warmest: {max(temps, key=temps.get)}"))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_calls_three_tools_in_a_loop_in_parallel_and_with_errors() {
    let s = start("code-mode", |_| {}).await;
    let api = Api::at(&s.base);
    let body = json!({"code": AGENT, "template": "python", "tools": tools()});
    let (v, rounds) = drive(&api, body).await;
    assert_eq!(v["status"], "ok", "{v}");
    let out = v["stdout"].as_str().unwrap();
    assert!(
        out.contains("loop {'Paris': 5, 'Rome': 4, 'Oslo': 4}"),
        "{out}"
    );
    assert!(out.contains("gather 10 ['doc about topic 9']"), "{out}");
    assert!(out.contains("raised KeyError('no such document')"), "{out}");
    assert!(out.contains("tool error QuotaError over quota"), "{out}");
    assert!(
        out.contains("refused ValueError\nrefused TypeError"),
        "{out}"
    );
    assert!(out.ends_with("sent\n"), "{out}");
    // Three calls one by one, the ten under gather in one suspension, the two errors, the
    // email; the schema-invalid calls never left.
    assert_eq!(rounds, vec![1, 1, 1, 10, 1, 1, 1]);
    // The audit line: each call's name, sizes and outcome, never its content.
    let line = s
        .audit()
        .into_iter()
        .find(|l| l["action"] == "execute" && l["execution_id"] == v["id"])
        .unwrap();
    let calls = line["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 16);
    assert_eq!(calls[13]["outcome"], "error:KeyError");
    assert_eq!(calls[0]["name"], "get-weather");
    assert!(!line.to_string().contains("Paris"), "{line}");
    assert_eq!(
        s.audit()
            .iter()
            .filter(|l| l["action"] == "execution_resume")
            .count(),
        7
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_calls_are_events_answered_at_tool_results() {
    let s = start("code-mode-sse", |_| {}).await;
    let c = client();
    let code = "import asyncio\nprint('start')\nr = await asyncio.gather(tools.aio.search(q='a'), tools.aio.search(q='b'))\nprint(r, tools.get_weather(city='Lima'))\n";
    let mut resp = c
        .post(s.url("/v1/execute"))
        .header("accept", "text/event-stream")
        .json(&json!({"code": code, "template": "python", "tools": tools()}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut buf = String::new();
    let mut seen = Vec::new();
    let mut result = Value::Null;
    'read: while let Some(chunk) = resp.chunk().await.unwrap() {
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let event = block
                .lines()
                .find_map(|l| l.strip_prefix("event:"))
                .map(|e| e.trim().to_string())
                .unwrap_or_default();
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data:")) else {
                continue;
            };
            let data: Value = serde_json::from_str(data.trim()).unwrap();
            seen.push(event.clone());
            match event.as_str() {
                "tool_call" => {
                    let id = data["execution_id"].as_str().unwrap();
                    let (st, v) = post(
                        &c,
                        &s.url(&format!("/v1/executions/{id}/tool-results")),
                        &answer(&data),
                    )
                    .await;
                    assert_eq!(st, 200, "{v}");
                }
                "result" => {
                    result = data;
                    break 'read;
                }
                _ => {}
            }
        }
    }
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(
        result["stdout"],
        "start\n[['doc about a'], ['doc about b']] {'temp': 4}\n"
    );
    assert_eq!(
        seen,
        [
            "stdout",
            "tool_call",
            "tool_call",
            "tool_call",
            "stdout",
            "result"
        ]
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_calls_a_silent_caller_and_a_cancel_are_named() {
    let s = start("code-mode-bad", |_| {}).await;
    let api = Api::at(&s.base);
    // A schema-invalid call and an unknown tool never leave: the guest raises.
    let code = r#"
import _host, json
try:
    tools.nope()
except AttributeError:
    print("no attribute")
reply = _host.call(b"\0vivarium-tools\0" + json.dumps([{"name": "nope", "arguments": {}}]).encode())
print(json.loads(reply)[0]["error"]["type"])
try:
    tools.get_weather(city="x", extra=1)
except TypeError:
    print("TypeError")
"#;
    let (v, rounds) = drive(
        &api,
        json!({"code": code, "template": "python", "tools": tools()}),
    )
    .await;
    assert_eq!(v["stdout"], "no attribute\nTypeError\nTypeError\n", "{v}");
    assert!(rounds.is_empty());

    // A caller that never answers: the wait is named.
    let body = json!({"code": "tools.search(q='x')", "template": "python", "tools": tools(),
                      "tool_limits": {"tool_timeout_ms": 300}});
    let (_, v) = post(&api.c, &api.url("/v1/execute"), &body).await;
    assert_eq!(v["status"], "suspended");
    let id = v["execution_id"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (st, v) = resume(&api, &id, json!([{"call_id": "call_1", "result": 1}])).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "tool_timeout");
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("tool_timeout_ms of 300 ms")
    );
    assert_eq!(resume(&api, &id, json!([])).await.0, 404);

    // Answers out of shape: named, and the execution waits on.
    let (_, v) = post(
        &api.c,
        &api.url("/v1/execute"),
        &json!({"code": "print(tools.search(q='x'))", "template": "python", "tools": tools()}),
    )
    .await;
    let id = v["execution_id"].as_str().unwrap().to_string();
    for bad in [
        json!([{"call_id": "call_9", "result": 1}]),
        json!([{"call_id": "call_1"}]),
        json!([{"call_id": "call_1", "error": {"type": "not a name"}}]),
    ] {
        let (st, v) = resume(&api, &id, bad).await;
        assert_eq!((st, error_code(&v)), (400, "invalid_request"), "{v}");
    }
    // A cancelled execution is gone, its program stopped.
    let r = api
        .c
        .delete(api.url(&format!("/v1/executions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let (st, v) = resume(&api, &id, json!([{"call_id": "call_1", "result": 1}])).await;
    assert_eq!((st, error_code(&v)), (404, "execution_not_found"));
    assert_eq!(s.settled_sandbox_dirs().await, 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_of_a_suspension_is_answered_two_ways() {
    let s = start("code-mode-fork", |_| {}).await;
    let api = Api::at(&s.base);
    let code = "import random\nseed = random.random()\nw = tools.get_weather(city='Paris')\nprint(seed, w['temp'] * 2)\n";
    let v = start_with_tools(&api, code).await;
    let id = v["execution_id"].as_str().unwrap().to_string();
    let (st, fork) = post(
        &api.c,
        &api.url(&format!("/v1/executions/{id}/fork")),
        &json!({}),
    )
    .await;
    assert_eq!(st, 201, "{fork}");
    assert_eq!(fork["pending_calls"], v["pending_calls"]);
    let other = fork["execution_id"].as_str().unwrap().to_string();
    let (_, a) = resume(
        &api,
        &id,
        json!([{"call_id": "call_1", "result": {"temp": 10}}]),
    )
    .await;
    let (_, b) = resume(
        &api,
        &other,
        json!([{"call_id": "call_1", "result": {"temp": 21}}]),
    )
    .await;
    let (a, b) = (a["stdout"].as_str().unwrap(), b["stdout"].as_str().unwrap());
    assert!(a.ends_with(" 20\n") && b.ends_with(" 42\n"), "{a} {b}");
    // Both branches carry the state from before the fork: the same random draw.
    assert_eq!(a.split(' ').next(), b.split(' ').next());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_passed_as_a_tool_argument_is_guest_output() {
    let s = start("code-mode-leak", |_| {}).await;
    let api = Api::at(&s.base);
    let code =
        "import os\nprint(tools.send_email(to='x', body='token ' + os.environ['API_TOKEN']))";
    let secret = "sk-live-4f9a8b7c6d5e4f3a2b1c";
    let body = |leakage: &str| {
        json!({"code": code, "template": "python", "tools": tools(),
        "env": {"API_TOKEN": secret}, "leakage": leakage})
    };
    let (_, v) = post(&api.c, &api.url("/v1/execute"), &body("redact")).await;
    assert_eq!(v["status"], "suspended", "{v}");
    let shown = v["pending_calls"][0]["arguments"]["body"].as_str().unwrap();
    assert_eq!(shown, "token [REDACTED:env:API_TOKEN]");
    assert!(!v.to_string().contains(secret));
    let (st, v) = post(&api.c, &api.url("/v1/execute"), &body("deny")).await;
    assert_eq!((st, error_code(&v)), (422, "output_leak"), "{v}");
    assert!(!v.to_string().contains(secret));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_calls_past_every_limit_is_named() {
    let s = start("code-mode-limits", |args| {
        args.max_suspended_executions_per_tenant = Some(2);
    })
    .await;
    let api = Api::at(&s.base);
    let run = |code: &str, limits: Value| json!({"code": code, "template": "python", "tools": tools(), "tool_limits": limits});
    // Calls past `calls`.
    let (v, rounds) = drive(
        &api,
        run(
            "for i in range(100): tools.search(q=str(i))",
            json!({"calls": 5}),
        ),
    )
    .await;
    assert_eq!(v["status"], "tool_limit");
    assert!(v["detail"].as_str().unwrap().contains("limit of 5"));
    assert_eq!(rounds.len(), 5);
    // A round past `calls` at once.
    let code =
        "import asyncio\nawait asyncio.gather(*(tools.aio.search(q=str(i)) for i in range(50)))";
    let (v, rounds) = drive(&api, run(code, json!({"calls": 20}))).await;
    assert_eq!(v["status"], "tool_limit");
    assert!(rounds.is_empty());
    // Arguments past `argument_bytes`.
    let (v, _) = drive(
        &api,
        run(
            "tools.search(q='x' * 5000)",
            json!({"argument_bytes": 1000}),
        ),
    )
    .await;
    assert_eq!(v["status"], "tool_limit");
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("argument_bytes of 1000")
    );
    // A result past `result_bytes` is refused; the execution waits on and takes a smaller one.
    let (_, v) = post(
        &api.c,
        &api.url("/v1/execute"),
        &run(
            "print(len(tools.search(q='x')))",
            json!({"result_bytes": 100}),
        ),
    )
    .await;
    let id = v["execution_id"].as_str().unwrap().to_string();
    let (st, e) = resume(
        &api,
        &id,
        json!([{"call_id": "call_1", "result": "y".repeat(500)}]),
    )
    .await;
    assert_eq!(st, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("result_bytes of 100")
    );
    let (_, v) = resume(&api, &id, json!([{"call_id": "call_1", "result": "short"}])).await;
    assert_eq!(v["stdout"], "5\n");
    // Limits and tools out of bounds: 400 naming the field.
    let (st, e) = post(
        &api.c,
        &api.url("/v1/execute"),
        &run("1", json!({"calls": 0})),
    )
    .await;
    assert_eq!(st, 400);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tool_limits.calls")
    );
    let many: Vec<Value> = (0..300).map(|i| json!({"name": format!("t{i}")})).collect();
    let (st, _) = post(
        &api.c,
        &api.url("/v1/execute"),
        &json!({"code": "1", "tools": many}),
    )
    .await;
    assert_eq!(st, 400);
    // Suspended executions past the tenant's quota.
    let mut held = Vec::new();
    for _ in 0..2 {
        let (_, v) = post(
            &api.c,
            &api.url("/v1/execute"),
            &run("tools.search(q='x')", json!({})),
        )
        .await;
        assert_eq!(v["status"], "suspended");
        held.push(v["execution_id"].as_str().unwrap().to_string());
    }
    let (st, e) = post(
        &api.c,
        &api.url("/v1/execute"),
        &run("tools.search(q='x')", json!({})),
    )
    .await;
    assert_eq!((st, error_code(&e)), (429, "quota_exceeded"), "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("suspended_executions")
    );
    for id in held {
        let r = api
            .c
            .delete(api.url(&format!("/v1/executions/{id}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204);
    }
    let (_, v) = post(
        &api.c,
        &api.url("/v1/execute"),
        &run("tools.search(q='x')", json!({})),
    )
    .await;
    assert_eq!(v["status"], "suspended", "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_execution_survives_kill_9() {
    let scratch = scratch_dir("code-mode-kill");
    let store = scratch.with_extension("snapshots");
    let a = spawn_server(&scratch, Some(&store), &[]);
    wait_ready_at(&a.base).await;
    let api = Api::at(&a.base);
    let code = "import random\nx = [random.random()]\nfor c in ['Oslo', 'Rome']:\n    x.append(tools.get_weather(city=c)['temp'])\nprint(x)\n";
    let v = start_with_tools(&api, code).await;
    let id = v["execution_id"].as_str().unwrap().to_string();
    let (_, v) = resume(
        &api,
        &id,
        json!([{"call_id": "call_1", "result": {"temp": 11}}]),
    )
    .await;
    assert_eq!(v["pending_calls"][0]["call_id"], "call_2", "{v}");
    let mut child = a.child;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let b = spawn_server(&scratch, Some(&store), &[]);
    wait_ready_at(&b.base).await;
    let api = Api::at(&b.base);
    let (st, v) = resume(
        &api,
        &id,
        json!([{"call_id": "call_2", "result": {"temp": 22}}]),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let out = v["stdout"].as_str().unwrap();
    assert!(out.ends_with(", 11, 22]\n"), "{out}");
    let mut child = b.child;
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_turn_calls_tools_and_keeps_its_state() {
    let s = start("code-mode-turn", |_| {}).await;
    let api = Api::at(&s.base);
    let c = &api.c;
    let id = open_session(c, &s.base, &json!({"template": "python"})).await;
    session_turn(c, &s.base, &id, "base = 100").await;
    let turn_url = s.url(&format!("/v1/sessions/{id}/execute"));
    let code = "import asyncio\nt = await asyncio.gather(tools.aio.get_weather(city='Oslo'), tools.aio.get_weather(city='Lima'))\nbase + sum(x['temp'] for x in t)";
    let (st, v) = post(c, &turn_url, &json!({"code": code, "tools": tools()})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "suspended");
    let turn = v["execution_id"].as_str().unwrap().to_string();
    assert!(turn.starts_with("turn-"), "{turn}");
    let calls = v["pending_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    // The session is busy while its turn waits.
    let (st, _) = post(c, &turn_url, &json!({"code": "1"})).await;
    assert_eq!(st, 409);
    let results: Vec<Value> = calls.iter().map(answer).collect();
    let (st, v) = resume(&api, &turn, Value::Array(results)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["session_id"], id);
    assert_eq!(v["result"], "108");
    // Its state goes on, tools and all, in the next turn.
    let v = session_turn(c, &s.base, &id, "base + 1, callable(tools.get_weather)").await;
    assert_eq!(v["result"], "(101, True)");
    // A turn's suspension is its session's: it does not fork.
    let (_, v) = post(
        c,
        &turn_url,
        &json!({"code": "tools.search(q='a')", "tools": tools()}),
    )
    .await;
    let turn = v["execution_id"].as_str().unwrap().to_string();
    let (st, _) = post(
        c,
        &s.url(&format!("/v1/executions/{turn}/fork")),
        &json!({}),
    )
    .await;
    assert_eq!(st, 400);
    let (_, v) = resume(&api, &turn, json!([{"call_id": "call_1", "result": ["x"]}])).await;
    assert_eq!(v["result"], "['x']");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_execution_holds_no_execution_slot() {
    // One slot, a short queue wait: executions waiting on their caller must not hold it.
    let s = start("code-mode-slots", |args| {
        args.max_concurrency = Some(1);
        args.queue_timeout_ms = 2_000;
    })
    .await;
    let api = Api::at(&s.base);
    let mut waiting = Vec::new();
    for i in 0..3 {
        let code = format!("print(tools.search(q='{i}'))");
        let (st, v) = post(
            &api.c,
            &api.url("/v1/execute"),
            &json!({"code": code, "template": "python", "tools": tools()}),
        )
        .await;
        assert_eq!((st, &v["status"]), (200, &json!("suspended")), "{v}");
        waiting.push(v["execution_id"].as_str().unwrap().to_string());
    }
    let (st, v) = post(
        &api.c,
        &api.url("/v1/execute"),
        &json!({"code": "print('still served')", "template": "python"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "still served\n");
    // Each takes a slot again for its answer, one after another.
    for (i, id) in waiting.iter().enumerate() {
        let (st, v) = resume(&api, id, json!([{"call_id": "call_1", "result": i}])).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["stdout"], format!("{i}\n"));
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_suspension_comes_back_and_an_abandoned_one_expires() {
    let s = start("code-mode-evict", |args| {
        args.suspended_resident_secs = 1;
        args.suspended_ttl_secs = 8;
        args.session_idle_secs = 5; // the sweep every 0.5 s
    })
    .await;
    let api = Api::at(&s.base);
    let store = s.scratch.with_extension("snapshots");
    let journals = || std::fs::read_dir(&store).map_or(0, |d| d.flatten().count());
    let code = "x = 40\nx += tools.get_weather(city='ab')['temp']\nprint(x)";
    let body = json!({"code": code, "template": "python", "tools": tools()});
    let (_, a) = post(&api.c, &api.url("/v1/execute"), &body).await;
    let (_, b) = post(&api.c, &api.url("/v1/execute"), &body).await;
    assert_eq!(
        journals(),
        2,
        "a journal for each suspension, before its response"
    );
    // Evicted: the programs stop, their sandboxes go; the journals stay.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while s.sandbox_dirs() > 0 {
        assert!(std::time::Instant::now() < until, "never evicted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(journals(), 2);
    let id = a["execution_id"].as_str().unwrap();
    let (st, v) = resume(
        &api,
        id,
        json!([{"call_id": "call_1", "result": {"temp": 2}}]),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "42\n");
    assert_eq!(journals(), 1, "an execution that ended leaves no journal");
    // The other is never answered: it expires, and its journal goes.
    let id = b["execution_id"].as_str().unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while journals() > 0 {
        assert!(std::time::Instant::now() < until, "never expired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (st, v) = resume(&api, id, json!([{"call_id": "call_1", "result": 1}])).await;
    assert_eq!((st, error_code(&v)), (404, "execution_not_found"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_refuses_tools_with_a_clear_error() {
    let s = start("code-mode-mcp", |_| {}).await;
    let mut m = McpClient::open(&s).await;
    let (_, msg) = m
        .call(
            "execute_python",
            json!({"code": "print(1)", "tools": tools()}),
        )
        .await;
    assert_eq!(msg["result"]["isError"], true, "{msg}");
    let text = msg["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("MCP has no request by which a server calls its client's tools"),
        "{text}"
    );
    // Without tools it runs as ever.
    let (_, msg) = m.call("execute_python", json!({"code": "print(1)"})).await;
    assert_ne!(msg["result"]["isError"], true, "{msg}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_left_by_a_restart_is_deleted_once_expired() {
    let scratch = scratch_dir("code-mode-orphan");
    let store = scratch.with_extension("snapshots");
    let a = spawn_server(&scratch, Some(&store), &["--suspended-ttl-secs", "1"]);
    wait_ready_at(&a.base).await;
    let v = start_with_tools(&Api::at(&a.base), "tools.search(q='x')").await;
    assert_eq!(v["status"], "suspended", "{v}");
    let journals = || std::fs::read_dir(&store).map_or(0, |d| d.flatten().count());
    assert_eq!(journals(), 1);
    let mut child = a.child;
    child.kill().unwrap();
    child.wait().unwrap();
    // A server that never counted it finds it among what is no snapshot in its store, and
    // deletes it once it has expired (its store is swept every second here).
    let b = spawn_server(&scratch, Some(&store), &["--snapshot-retention-secs", "1"]);
    wait_ready_at(&b.base).await;
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while journals() > 0 {
        assert!(
            std::time::Instant::now() < until,
            "the expired journal stayed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut child = b.child;
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_past_the_hosts_bound_is_a_tool_limit() {
    let api = shared().await;
    // Seventy calls of 250 KB each, every one within `argument_bytes` (256 KiB), made at once:
    // a round of 17.5 MB, past the 16 MiB the host takes at once.
    let code = "import asyncio\nawait asyncio.gather(*(tools.aio.search(q='x' * 250_000) \
                for i in range(70)))";
    let body = json!({"code": code, "template": "python", "tools": tools()});
    let (st, v) = post(&api.c, &api.url("/v1/execute"), &body).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "tool_limit", "{v}");
    let detail = v["detail"].as_str().unwrap();
    assert!(detail.contains("16777216 bytes"), "{detail}");
    // Just under the bound, the same round leaves as one.
    let code = "import asyncio\nawait asyncio.gather(*(tools.aio.search(q='x' * 250_000) \
                for i in range(60)))";
    let body = json!({"code": code, "template": "python", "tools": tools()});
    let (st, v) = post(&api.c, &api.url("/v1/execute"), &body).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "suspended", "{v}");
    assert_eq!(v["pending_calls"].as_array().unwrap().len(), 60);
    let id = v["execution_id"].as_str().unwrap();
    let r = api
        .c
        .delete(api.url(&format!("/v1/executions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
}

/// `/v1/usage`'s `used` of `quota`.
async fn used(c: &reqwest::Client, base: &str, quota: &str) -> u64 {
    let (st, u) = get(c, &format!("{base}/v1/usage")).await;
    assert_eq!(st, 200, "{u}");
    u["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["quota"] == quota)
        .and_then(|q| q["used"].as_u64())
        .unwrap_or_else(|| panic!("no {quota} in {u}"))
}

/// Bytes of the files in `dir` (the snapshot store: here, only journals).
fn stored_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journals_count_against_the_snapshot_quota() {
    const KEY: &str = "journal-key-0123456789abcdef";
    const QUOTA: u64 = 3 << 20;
    let keys = scratch_dir("code-mode-journal-keys").join("keys.txt");
    std::fs::write(
        &keys,
        format!("tenant small snapshot_bytes=3M\nme@small:{KEY}\n"),
    )
    .unwrap();
    let s = start("code-mode-journal-quota", |args| {
        args.api_keys_file = Some(keys);
        args.suspended_ttl_secs = 12;
        args.session_idle_secs = 5; // the sweep every 0.5 s
    })
    .await;
    let store = s.scratch.with_extension("snapshots");
    let c = client_with_key(KEY);
    let base = s.base.clone();
    // 700 KB of input file: each journal holds it, so each is a little more.
    let body = json!({"code": "tools.search(q='x')", "template": "python", "tools": tools(),
        "files": [{"path": "data.bin", "content": "A".repeat(933_332)}]});
    let (st, v) = post(&c, &s.url("/v1/execute"), &body).await;
    assert_eq!((st, v["status"].as_str()), (200, Some("suspended")), "{v}");
    let first = v["execution_id"].as_str().unwrap().to_string();
    let one = stored_bytes(&store);
    assert!(one > 700_000, "the journal is {one} bytes");
    assert_eq!(used(&c, &base, "snapshot_bytes").await, one);
    // Forked until refused: the store never holds more than the quota, and usage says what
    // it holds.
    let mut forks = Vec::new();
    let refusal = loop {
        let (st, v) = post(
            &c,
            &s.url(&format!("/v1/executions/{first}/fork")),
            &json!({}),
        )
        .await;
        let held = stored_bytes(&store);
        assert!(held <= QUOTA, "the store holds {held} bytes");
        assert_eq!(used(&c, &base, "snapshot_bytes").await, held);
        if st != 201 {
            break (st, v);
        }
        forks.push(v["execution_id"].as_str().unwrap().to_string());
        assert!(forks.len() < 10, "forks never refused");
    };
    assert_eq!(forks.len() as u64, QUOTA / one - 1, "{refusal:?}");
    let (st, e) = refusal;
    assert_eq!(
        (st, error_code(&e)),
        (409, "snapshot_quota_exceeded"),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("snapshot_bytes quota"),
        "{e}"
    );
    let executions = used(&c, &base, "suspended_executions").await;
    assert_eq!(executions, 1 + forks.len() as u64);
    // A new execution whose first journal does not fit is refused and holds nothing.
    let (st, e) = post(&c, &s.url("/v1/execute"), &body).await;
    assert_eq!(
        (st, error_code(&e)),
        (409, "snapshot_quota_exceeded"),
        "{e}"
    );
    assert_eq!(used(&c, &base, "suspended_executions").await, executions);
    assert_eq!(stored_bytes(&store), one * executions);
    // A cancel gives its journal's bytes back, and a fork fits again.
    let r = c
        .delete(s.url(&format!("/v1/executions/{}", forks.pop().unwrap())))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let held = stored_bytes(&store);
    assert_eq!(held, one * (executions - 1));
    assert_eq!(used(&c, &base, "snapshot_bytes").await, held);
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/executions/{first}/fork")),
        &json!({}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    // An answered execution's journal goes with it.
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/executions/{first}/resume")),
        &json!({"results": [{"call_id": "call_1", "result": []}]}),
    )
    .await;
    assert_eq!((st, v["status"].as_str()), (200, Some("ok")), "{v}");
    assert_eq!(
        used(&c, &base, "snapshot_bytes").await,
        stored_bytes(&store)
    );
    assert_eq!(stored_bytes(&store), one * (executions - 1));
    // The others are never answered: they expire, and their bytes come back.
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while used(&c, &base, "snapshot_bytes").await > 0 || stored_bytes(&store) > 0 {
        assert!(std::time::Instant::now() < until, "never expired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(used(&c, &base, "suspended_executions").await, 0);
    s.stop().await;
}
