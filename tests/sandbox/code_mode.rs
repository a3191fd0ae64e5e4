//! Code mode in the core: a program given tools calls them as functions, through the real
//! runtime's door, answered here by a Rust caller on another thread (the server's side is
//! `tests/server/code_mode.rs`).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use vivarium::testing::ToolAsker;
use vivarium::{
    Limits, Program, Report, RunSpec, Status, Template, ToolCall, ToolLimits, ToolSpec, Toolbox,
};

use crate::common::host;

fn toolbox(limits: ToolLimits) -> Toolbox {
    Toolbox {
        tools: vec![
            ToolSpec {
                name: "get-weather".into(),
                description: "The weather in a city.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "description": "Where."},
                        "days": {"type": "integer", "minimum": 1, "maximum": 7}
                    },
                    "required": ["city"],
                    "additionalProperties": false
                }),
            },
            ToolSpec {
                name: "lookup".into(),
                description: "A key's value.".into(),
                parameters: json!({"type": "object", "properties": {"key": {"type": "string"}}}),
            },
            // Its properties are not in alphabetical order: the signature must keep theirs.
            ToolSpec {
                name: "call_tool".into(),
                description: "Calls another tool (FastMCP's shape).".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"tool_name": {"type": "string"}, "params": {"type": "object"}},
                    "required": ["tool_name", "params"],
                    "additionalProperties": false
                }),
            },
        ],
        limits,
    }
}

/// What the caller answers: the weather is the city's name length; `lookup` raises
/// `KeyError` for "missing" and a custom `QuotaError` for "quota".
fn answer(call: &ToolCall) -> Value {
    let id = &call.call_id;
    match call.name.as_str() {
        "get-weather" => {
            let city = call.arguments["city"].as_str().unwrap_or("");
            json!({"call_id": id, "result": {"city": city, "temp": city.len()}})
        }
        "call_tool" => json!({"call_id": id, "result": call.arguments}),
        _ => match call.arguments["key"].as_str() {
            Some("missing") => {
                json!({"call_id": id, "error": {"type": "KeyError", "message": "missing"}})
            }
            Some("quota") => {
                json!({"call_id": id, "error": {"type": "QuotaError", "message": "over"}})
            }
            k => json!({"call_id": id, "result": k}),
        },
    }
}

#[test]
fn a_tools_parameters_keep_the_order_its_schema_gives() {
    let code = r#"
import inspect
print(list(inspect.signature(tools.call_tool).parameters))
print(tools.call_tool("add", {"b": 2, "a": 1}))
"#;
    let (r, _) = run(code, ToolLimits::DEFAULT, Duration::ZERO, 30_000);
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "['tool_name', 'params']\n{'tool_name': 'add', 'params': {'b': 2, 'a': 1}}\n"
    );
}

/// Runs `code` with the tools, answering each round after `delay`; the report and every
/// round's size.
fn run(code: &str, limits: ToolLimits, delay: Duration, timeout_ms: u64) -> (Report, Vec<usize>) {
    let rounds = Arc::new(Mutex::new(Vec::new()));
    let seen = rounds.clone();
    let asker: ToolAsker = Arc::new(move |calls: Vec<ToolCall>| {
        let (tx, rx) = std::sync::mpsc::channel();
        seen.lock().unwrap().push(calls.len());
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            let answers: Vec<Value> = calls.iter().map(answer).collect();
            let _ = tx.send(Value::Array(answers).to_string());
        });
        rx
    });
    let host = host();
    let spec = RunSpec {
        program: Program {
            code: code.into(),
            stdin: vec![],
            files: vec![],
            limits: Limits {
                timeout_ms,
                ..Limits::DEFAULT
            },
            env: vec![],
            template: Template::Python,
            rich: false,
            line_buffered: false,
            policy: vivarium::Policy::Off,
            tools: Some(toolbox(limits)),
            seed: None,
            network: None,
            language: Default::default(),
            volumes: Vec::new(),
            layer: None,
        },
        observer: None,
        packages: host.no_packages(),
        tools: Some(asker),
        egress: None,
        secrets: Default::default(),
        volumes: Vec::new(),
    };
    let executed = vivarium::testing::run_on_guest_thread(move || {
        host.run(spec, Arc::new(AtomicBool::new(false)))
    })
    .unwrap()
    .unwrap();
    let vivarium::Executed::Ran { report, .. } = executed else {
        panic!("denied")
    };
    let rounds = rounds.lock().unwrap().clone();
    (*report, rounds)
}

#[test]
fn tools_are_functions_called_in_a_loop_in_parallel_and_raising() {
    let code = r#"
import asyncio
temps = [tools.get_weather(city=c)["temp"] for c in ("Paris", "Rome", "Oslo")]
print("loop", temps)
many = await asyncio.gather(*(tools.aio.get_weather(city="x" * i) for i in range(1, 11)))
print("gather", [m["temp"] for m in many])
try:
    tools.lookup(key="missing")
except KeyError as e:
    print("KeyError", e)
try:
    tools.lookup(key="quota")
except tools.ToolError as e:
    print("ToolError", e.type, e.message)
for bad in ({"city": 3}, {"city": "x", "days": 9}, {}):
    try:
        tools.get_weather(**bad)
    except (TypeError, ValueError) as e:
        print(type(e).__name__)
print(tools.names["get-weather"], list(__import__("inspect").signature(tools.get_weather).parameters))
print(tools.get_weather.__doc__.splitlines()[0])
"#;
    let (r, rounds) = run(code, ToolLimits::DEFAULT, Duration::ZERO, 30_000);
    assert_eq!(r.status, Status::Ok, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "loop [5, 4, 4]");
    assert_eq!(lines[1], "gather [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]");
    assert_eq!(lines[2], "KeyError 'missing'");
    assert_eq!(lines[3], "ToolError QuotaError over");
    // Mistyped and missing arguments are TypeErrors, a refused value a ValueError: the
    // schema's verdict, before anything left (no round for them).
    assert_eq!(&lines[4..7], ["TypeError", "ValueError", "TypeError"]);
    assert_eq!(lines[7], "get_weather ['city', 'days']");
    assert_eq!(lines[8], "The weather in a city.");
    // Three calls one by one, ten in one round, two lookups; the refused calls sent none
    // (the missing argument never reached the host: `bind` refused it in the guest).
    assert_eq!(rounds, vec![1, 1, 1, 10, 1, 1]);
}

#[test]
fn waiting_for_answers_is_not_the_programs_time() {
    // Three rounds of 400 ms each under a 1 s wall-clock limit: the waits do not count.
    let code = "for c in 'abc': tools.get_weather(city=c)\nprint('done')";
    let (r, _) = run(code, ToolLimits::DEFAULT, Duration::from_millis(400), 1_000);
    assert_eq!(r.status, Status::Ok, "{:?} {}", r.detail, r.stderr);
    assert_eq!(r.stdout, "done\n");
}

#[test]
fn every_tool_limit_is_named() {
    let slow = ToolLimits {
        tool_timeout_ms: 200,
        ..ToolLimits::DEFAULT
    };
    let (r, _) = run(
        "tools.lookup(key='a')",
        slow,
        Duration::from_secs(3),
        30_000,
    );
    assert_eq!(r.status, Status::ToolTimeout);
    assert!(r.detail.unwrap().contains("tool_timeout_ms of 200 ms"));

    let total = ToolLimits {
        total_wait_ms: 500,
        ..ToolLimits::DEFAULT
    };
    let code = "for i in range(10): tools.lookup(key='a')";
    let (r, rounds) = run(code, total, Duration::from_millis(200), 30_000);
    assert_eq!(r.status, Status::ToolTimeout);
    assert!(r.detail.unwrap().contains("total_wait_ms of 500 ms"));
    assert_eq!(rounds.len(), 3);

    let few = ToolLimits {
        calls: 5,
        ..ToolLimits::DEFAULT
    };
    let (r, rounds) = run(code, few, Duration::ZERO, 30_000);
    assert_eq!(r.status, Status::ToolLimit);
    assert!(r.detail.unwrap().contains("limit of 5"));
    assert_eq!(rounds.len(), 5);

    let small = ToolLimits {
        argument_bytes: 100,
        ..ToolLimits::DEFAULT
    };
    let (r, rounds) = run(
        "tools.lookup(key='x' * 1000)",
        small,
        Duration::ZERO,
        30_000,
    );
    assert_eq!(r.status, Status::ToolLimit);
    assert!(r.detail.unwrap().contains("argument_bytes of 100"));
    assert!(rounds.is_empty());
}

#[test]
fn a_traceback_starts_at_the_callers_code() {
    let code = "x = 1\ndef f():\n    return tools.lookup(key='missing')\nf()\n";
    let (r, _) = run(code, ToolLimits::DEFAULT, Duration::ZERO, 30_000);
    assert_eq!(r.status, Status::Error);
    let e = r.error.unwrap();
    assert_eq!(e.kind, "KeyError");
    assert_eq!(e.line, Some(3), "{}", e.traceback);
    assert!(!e.traceback.contains("vivarium_tools"), "{}", e.traceback);
}
