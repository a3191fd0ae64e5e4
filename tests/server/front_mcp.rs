//! The MCP front door end to end: the official MCP Python SDK (`mcp` on PyPI) as the client,
//! `tests/front_mcp_client.py`, against `/mcp` of the real server on 127.0.0.1; sessions as
//! data (snapshot, fork, restore) through the same transport as plain JSON-RPC
//! (`McpClient`); and `vivarium mcp` over stdio with raw JSON-RPC lines.
//!
//! The SDK goes into a venv under `target/front_mcp_venv` (made on first use, reused after).
//! Without python3/pip or the registry the HTTP test skips with a message; under CI
//! (`CI=true`) it fails instead.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::http_support::*;
use serde_json::{Value, json};

/// The venv's python with `mcp` importable, or None when it cannot be had.
fn sdk_python() -> Option<PathBuf> {
    venv_python("front_mcp_venv")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_python_sdk_gets_text_and_the_plot() {
    let Some(python) = sdk_python() else { return };
    let s = shared().await;
    let url = s.url("/mcp");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/front_mcp_client.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python).arg(script).arg(url).output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "the MCP client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));

    assert_eq!(v["server"], "vivarium", "{v}");
    // The SDK's current revision, in which structuredContent is checked against outputSchema;
    // a client of the handshake revision still gets the text and the image.
    assert_eq!(v["protocol"], "2026-07-28", "{v}");
    assert_eq!(v["legacy_protocol"], "2025-11-25", "{v}");
    let legacy = &v["legacy_plot"];
    assert!(
        legacy["texts"][0].as_str().unwrap().contains("plotted"),
        "{legacy}"
    );
    assert_eq!(legacy["images"][0]["png"], true, "{legacy}");
    assert_eq!(
        v["tools"],
        json!([
            "check_python",
            "close_session",
            "execute_python",
            "fork_session",
            "open_session",
            "rollback_session",
            "run_command",
            "run_in_session",
            "snapshot_session"
        ])
    );
    assert_eq!(v["execute_schema"]["required"], json!(["code"]), "{v}");

    let plot = &v["plot"];
    assert_eq!(plot["is_error"], false, "{plot}");
    assert!(
        plot["texts"][0].as_str().unwrap().contains("plotted"),
        "{plot}"
    );
    let images = plot["images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "{plot}");
    assert_eq!(images[0]["mime"], "image/png");
    assert_eq!(images[0]["png"], true);
    assert!(images[0]["size"].as_u64().unwrap() > 1000);

    let files = &v["files"];
    assert_eq!(files["is_error"], true, "{files}");
    let text = files["texts"][0].as_str().unwrap();
    assert!(text.contains("FROM THE CLIENT"), "{text}");
    assert!(
        text.contains("error: ZeroDivisionError: division by zero at line 2"),
        "{text}"
    );

    // Files the run wrote come back as embedded resources: text as text, the rest as a blob.
    let written = &v["written"];
    let resources = written["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 2, "{written}");
    let csv = resources.iter().find(|r| r["mime"] == "text/csv").unwrap();
    assert_eq!(csv["text"], "a,b\n1,2\n", "{csv}");
    assert!(
        csv["uri"]
            .as_str()
            .unwrap()
            .starts_with("vivarium://executions/ex-")
            && csv["uri"].as_str().unwrap().ends_with("/files/out.csv"),
        "{csv}"
    );
    let raw = resources
        .iter()
        .find(|r| r["mime"] == "application/octet-stream")
        .unwrap();
    assert_eq!(raw["blob"], "009f9296", "{raw}");

    let check = &v["check"];
    assert_eq!(check["is_error"], true, "{check}");
    let verdict: Value = serde_json::from_str(check["texts"][0].as_str().unwrap()).unwrap();
    assert_eq!(verdict["findings"][0]["rule"], "os_system");

    assert_eq!(v["denied"]["is_error"], true);
    assert!(
        v["denied"]["texts"][0]
            .as_str()
            .unwrap()
            .contains("nothing ran")
    );

    // Templates by name: pandas is already imported in `scientific`; a wrong name is an error.
    let sci = v["scientific"]["texts"][0].as_str().unwrap();
    assert!(sci.contains("True"), "{sci}");
    assert_eq!(v["bad_template"]["is_error"], true, "{}", v["bad_template"]);
    let bad = v["bad_template"]["texts"][0].as_str().unwrap();
    assert!(bad.contains("nope"), "{bad}");

    let turn = v["turn"]["texts"][0].as_str().unwrap();
    assert!(turn.contains("result: 42"), "{turn}");
    // A session's files are links the client reads with resources/read (a path outside
    // the working directory is refused).
    let uri = format!(
        "vivarium://sessions/{}/files/notes.md",
        v["session_id"].as_str().unwrap()
    );
    assert_eq!(
        v["turn"]["links"],
        json!([{"uri": uri, "name": "notes.md"}]),
        "{}",
        v["turn"]
    );
    assert_eq!(v["read"], json!([{"uri": uri, "text": "# x"}]));
    let outside = v["read_outside"].as_str().unwrap();
    assert!(outside.contains("path"), "{outside}");

    // Structured results, which the SDK checked against each tool's outputSchema.
    for tool in ["execute_python", "run_in_session"] {
        let schema = &v["output_schemas"][tool];
        assert_eq!(schema["type"], "object", "{tool}: {schema}");
        assert!(schema["properties"]["status"].is_object(), "{schema}");
    }
    assert!(v["output_schemas"]["check_python"].is_null());
    assert_eq!(
        v["turn_schema"]["properties"]["session_id"]["x-mcp-header"], "Vivarium-Session",
        "{}",
        v["turn_schema"]
    );
    let plot = &v["plot"]["structured"];
    assert_eq!(plot["status"], "ok", "{plot}");
    assert_eq!(plot["stdout"], "plotted\n");
    assert_eq!(plot["outputs"][0]["mime"], "image/png", "{plot}");
    assert!(plot["outputs"][0]["bytes"].as_u64().unwrap() > 1000);
    let failed = &v["files"]["structured"];
    assert_eq!(failed["status"], "error", "{failed}");
    assert_eq!(failed["error"]["type"], "ZeroDivisionError");
    assert_eq!(failed["error"]["line"], 2);
    let t = &v["turn"]["structured"];
    assert_eq!(
        (&t["turn"]["turn"], &t["turn"]["result"]),
        (&json!(2), &json!("42")),
        "{t}"
    );
    assert_eq!(t["turn"]["rolled_back"], false);
    assert_eq!(v["closed"]["is_error"], false);
    assert_eq!(v["after_close"]["is_error"], true);
    assert!(
        v["after_close"]["texts"][0]
            .as_str()
            .unwrap()
            .contains("session_not_found")
    );
}

/// `vivarium mcp` speaks the same tools over stdio (newline-delimited JSON-RPC).
#[test]
fn mcp_over_stdio() {
    let scratch = scratch_dir("mcp-stdio");
    let mut child = Command::new(env!("CARGO_BIN_EXE_vivarium"))
        .arg("mcp")
        .env("VIVARIUM_SCRATCH", &scratch)
        .env("VIVARIUM_AUDIT_LOG", scratch.with_extension("audit.jsonl"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut recv = || -> Value {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line ({e}): {line:?}"))
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}),
    );
    let init = recv();
    assert_eq!(init["result"]["serverInfo"]["name"], "vivarium", "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "execute_python", "arguments": {"code": "print(6 * 7)"}}}),
    );
    let r = recv();
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("status: ok") && text.contains("42"), "{r}");
    // End of input: the server stops.
    stdin.flush().unwrap();
    std::mem::drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let left: Vec<_> = std::fs::read_dir(&scratch)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(scratch.with_extension("audit.jsonl"));
    assert!(
        left.iter()
            .all(|p| p.file_name().unwrap() == ".create.lock"),
        "left behind: {left:?}"
    );
}

/// A tool call's outcome: whether it is an error result, and its first text block.
async fn tool(mcp: &mut McpClient, name: &str, arguments: Value) -> (bool, String) {
    let (body, message) = mcp.call(name, arguments).await;
    let result = &message["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no text in {body}"))
        .to_string();
    (result["isError"] == true, text)
}

/// A tool call that must succeed, its text as JSON.
async fn tool_json(mcp: &mut McpClient, name: &str, arguments: Value) -> Value {
    let (is_error, text) = tool(mcp, name, arguments).await;
    assert!(!is_error, "{name}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {text}"))
}

/// `run_in_session`, which must succeed; its text.
async fn turn(mcp: &mut McpClient, session: &str, code: &str) -> String {
    let (is_error, text) = tool(
        mcp,
        "run_in_session",
        json!({"session_id": session, "code": code}),
    )
    .await;
    assert!(!is_error, "{code}: {text}");
    assert!(text.starts_with("status: ok"), "{code}: {text}");
    text
}

async fn session_of(mcp: &mut McpClient, name: &str, arguments: Value) -> String {
    let v = tool_json(mcp, name, arguments).await;
    let id = v["session_id"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert!(id.starts_with("s-"), "{v}");
    id.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_snapshots_forks_and_restores_a_session() {
    let s = start("mcp-snap", |_| {}).await;
    let mut mcp = McpClient::open(&s).await;
    let id = session_of(&mut mcp, "open_session", json!({"template": "python"})).await;
    turn(
        &mut mcp,
        &id,
        "x = 41\nopen('notes.txt', 'w').write('kept')",
    )
    .await;

    let snap = tool_json(&mut mcp, "snapshot_session", json!({"session_id": id})).await;
    let snap_id = snap["snapshot_id"].as_str().unwrap().to_string();
    assert!(snap_id.starts_with("snap-"), "{snap}");
    assert_eq!(snap["template"], "python", "{snap}");
    assert_eq!(snap["turns"], 1, "{snap}");
    assert!(snap["size_bytes"].as_u64().unwrap() > 0, "{snap}");

    // A fork sees the state, then the two diverge.
    let fork = session_of(&mut mcp, "fork_session", json!({"session_id": id})).await;
    assert_ne!(fork, id);
    let probe = "x, open('notes.txt').read()";
    assert!(
        turn(&mut mcp, &fork, probe)
            .await
            .contains("result: (41, 'kept')")
    );
    turn(
        &mut mcp,
        &fork,
        "x += 1\nopen('notes.txt', 'w').write('fork')",
    )
    .await;
    assert!(
        turn(&mut mcp, &fork, probe)
            .await
            .contains("result: (42, 'fork')")
    );
    turn(&mut mcp, &id, "x = 0").await;
    assert!(
        turn(&mut mcp, &id, probe)
            .await
            .contains("result: (0, 'kept')")
    );

    // Turns undone: back to just after turn 1 (x = 41), and a fork of turn 1 while the
    // session has moved on.
    let (is_error, text) = tool(
        &mut mcp,
        "rollback_session",
        json!({"session_id": id, "turn": 1}),
    )
    .await;
    assert!(!is_error && text.contains("next turn is 2"), "{text}");
    let text = turn(&mut mcp, &id, probe).await;
    assert!(
        text.contains("result: (41, 'kept')") && text.contains("turn: 2"),
        "{text}"
    );
    let early = session_of(
        &mut mcp,
        "fork_session",
        json!({"session_id": id, "turn": 1}),
    )
    .await;
    assert!(turn(&mut mcp, &early, "x").await.contains("result: 41"));
    let (is_error, text) = tool(
        &mut mcp,
        "rollback_session",
        json!({"session_id": id, "turn": 5}),
    )
    .await;
    assert!(is_error && text.contains("turn_not_kept"), "{text}");
    let (is_error, text) = tool(&mut mcp, "close_session", json!({"session_id": early})).await;
    assert!(!is_error, "{text}");

    // Restored from the snapshot: the state when it was taken, turns numbered on from it.
    let restored = session_of(&mut mcp, "open_session", json!({"snapshot": snap_id})).await;
    let text = turn(&mut mcp, &restored, probe).await;
    assert!(text.contains("result: (41, 'kept')"), "{text}");
    assert!(text.contains("turn: 2"), "{text}");
    for sid in [&id, &fork, &restored] {
        let (is_error, text) = tool(&mut mcp, "close_session", json!({"session_id": sid})).await;
        assert!(!is_error, "{text}");
    }

    // Refusals are tool errors with the API's code, not protocol errors.
    let (is_error, text) = tool(
        &mut mcp,
        "open_session",
        json!({"snapshot": "snap-0123456789abcdef01234567"}),
    )
    .await;
    assert!(is_error, "{text}");
    assert!(text.contains("snapshot_not_found"), "{text}");
    let (is_error, text) = tool(
        &mut mcp,
        "open_session",
        json!({"snapshot": snap_id, "template": "python"}),
    )
    .await;
    assert!(is_error && text.contains("invalid_request"), "{text}");
    let (is_error, text) = tool(&mut mcp, "snapshot_session", json!({"session_id": id})).await;
    assert!(is_error && text.contains("session_not_found"), "{text}");

    let audit = s.audit();
    // Each line names the action and, apart from it, the door.
    let with = |action: &str| -> Vec<&Value> {
        audit
            .iter()
            .filter(|r| r["action"] == action && r["door"] == "mcp")
            .collect()
    };
    let snapshots = with("session_snapshot");
    assert_eq!(snapshots.len(), 2, "{audit:?}");
    assert_eq!(snapshots[0]["snapshot_id"], snap_id);
    assert_eq!(snapshots[0]["http_status"], 201);
    assert_eq!(snapshots[1]["error"], "session_not_found");
    let forks = with("session_fork");
    assert_eq!(forks.len(), 2, "{audit:?}");
    // The record names the new session, as the HTTP door's does.
    assert_eq!(
        (&forks[0]["session_id"], &forks[0]["http_status"]),
        (&json!(fork), &json!(201))
    );
    let rollbacks = with("session_rollback");
    assert_eq!(rollbacks.len(), 2, "{audit:?}");
    assert_eq!(rollbacks[1]["error"], "turn_not_kept", "{audit:?}");
    let restores = with("session_restore");
    assert_eq!(restores.len(), 2, "{audit:?}");
    assert_eq!(restores[0]["snapshot_id"], snap_id);
    assert_eq!(restores[1]["error"], "snapshot_not_found");
    s.stop().await;
}

/// Over `/mcp` a snapshot belongs to the API key that took it, as over HTTP: the same key
/// sees it on `/v1/snapshots`, another key can neither see nor restore it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_snapshots_belong_to_the_key_that_took_them() {
    let keys = scratch_dir("mcp-snap-keys").join("keys.txt");
    std::fs::write(
        &keys,
        "alice:key-alice-0123456789\nbob:key-bob-0123456789\n",
    )
    .unwrap();
    let path = keys.clone();
    let s = start("mcp-snap-keys", move |a| a.api_keys_file = Some(path)).await;
    let mut alice = McpClient::open_with_key(&s, "key-alice-0123456789").await;
    let mut bob = McpClient::open_with_key(&s, "key-bob-0123456789").await;
    let id = session_of(&mut alice, "open_session", json!({"template": "python"})).await;
    turn(&mut alice, &id, "x = 41").await;
    let snap = tool_json(&mut alice, "snapshot_session", json!({"session_id": id})).await;
    let snap_id = snap["snapshot_id"].as_str().unwrap().to_string();

    let (is_error, text) = tool(&mut bob, "open_session", json!({"snapshot": snap_id})).await;
    assert!(is_error && text.contains("snapshot_not_found"), "{text}");
    let url = s.url(&format!("/v1/snapshots/{snap_id}"));
    let (st, v) = get(&client_with_key("key-alice-0123456789"), &url).await;
    assert_eq!(st, 200, "{v}");
    let (st, _) = get(&client_with_key("key-bob-0123456789"), &url).await;
    assert_eq!(st, 404);

    let restored = session_of(&mut alice, "open_session", json!({"snapshot": snap_id})).await;
    assert!(
        turn(&mut alice, &restored, "x")
            .await
            .contains("result: 41")
    );
    for sid in [&id, &restored] {
        tool(&mut alice, "close_session", json!({"session_id": sid})).await;
    }
    let audit = s.audit();
    for action in ["session_open", "session_snapshot", "session_restore"] {
        let r = audit
            .iter()
            .find(|r| {
                r["action"] == action && r["door"] == "mcp" && r["http_status"].as_u64() < Some(300)
            })
            .unwrap_or_else(|| panic!("{action} in {audit:?}"));
        assert_eq!(r["key_id"], "alice", "{r}");
    }
    s.stop().await;
    let _ = std::fs::remove_dir_all(keys.parent().unwrap());
}

/// A session holding a folder open between turns (an `os.scandir` in progress) is neither
/// snapshotted nor forked: a tool error with `snapshot_refused`, and the session goes on
/// untouched. (A file held open is carried: capture records it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_refuses_to_snapshot_a_session_listing_a_folder() {
    let s = start("mcp-snap-refuse", |_| {}).await;
    let mut mcp = McpClient::open(&s).await;
    let held = session_of(&mut mcp, "open_session", json!({"template": "python"})).await;
    turn(&mut mcp, &held, "import os\nit = os.scandir('.')").await;
    for name in ["snapshot_session", "fork_session"] {
        let (is_error, text) = tool(&mut mcp, name, json!({"session_id": held})).await;
        assert!(is_error, "{name}: {text}");
        assert!(
            text.contains("snapshot_refused") && text.contains("scandir"),
            "{name}: {text}"
        );
    }
    // The session is untouched and goes on.
    turn(&mut mcp, &held, "it.close()").await;
    tool_json(&mut mcp, "snapshot_session", json!({"session_id": held})).await;
    tool(&mut mcp, "close_session", json!({"session_id": held})).await;

    let refused: Vec<_> = s
        .audit()
        .into_iter()
        .filter(|r| r["error"] == "snapshot_refused")
        .map(|r| {
            format!(
                "{} {}",
                r["door"].as_str().unwrap(),
                r["action"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(refused, ["mcp session_snapshot", "mcp session_fork"]);
    s.stop().await;
}

/// Volumes through MCP: `execute_python` mounts one read-only, a session mounts it writable
/// and what its turn wrote is read back over HTTP; a bad mount and a missing volume are tool
/// errors naming them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_mounts_volumes_in_runs_and_sessions() {
    let s = start("mcp-volumes", |_| {}).await;
    let c = client();
    let (st, v) = post(&c, &s.url("/v1/volumes"), &json!({"name": "data"})).await;
    assert_eq!(st, 201, "{v}");
    let r = c
        .put(s.url("/v1/volumes/data/files/in.csv"))
        .body("a,b\n1,2\n3,4\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let mut mcp = McpClient::open(&s).await;
    let code = "import csv\nrows = list(csv.DictReader(open('/mnt/data/in.csv')))\nprint('sum', sum(int(r['b']) for r in rows))\ntry:\n    open('/mnt/data/x', 'w')\nexcept OSError:\n    print('refused')";
    let (is_error, text) = tool(
        &mut mcp,
        "execute_python",
        json!({"code": code, "volumes": [{"name": "data", "path": "/mnt/data", "read_only": true}]}),
    )
    .await;
    assert!(!is_error, "{text}");
    assert!(text.contains("sum 6\nrefused"), "{text}");
    let id = session_of(
        &mut mcp,
        "open_session",
        json!({"volumes": [{"name": "data", "path": "/mnt/data"}]}),
    )
    .await;
    turn(
        &mut mcp,
        &id,
        "open('/mnt/data/out.txt', 'w').write('from mcp')",
    )
    .await;
    let r = c
        .get(s.url("/v1/volumes/data/files/out.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "from mcp");
    for (mount, says) in [
        (json!({"name": "data", "path": "/tmp"}), "volumes"),
        (json!({"name": "nope", "path": "/mnt/x"}), "nope"),
        (json!({"name": "../up", "path": "/mnt/x"}), "volumes"),
    ] {
        let (is_error, text) = tool(
            &mut mcp,
            "execute_python",
            json!({"code": "print(1)", "volumes": [mount]}),
        )
        .await;
        assert!(is_error && text.contains(says), "{mount}: {text}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_runs_and_sessions_start_from_a_user_template() {
    let s = start("mcp-templates", |_| {}).await;
    let c = client();
    let (st, v) = post(
        &c,
        &s.url("/v1/templates"),
        &json!({"name": "tools", "setup": "HELPER = 'ready'", "env": {"STAGE": "mcp"}}),
    )
    .await;
    assert_eq!(st, 202, "{v}");
    let v = template_built(&c, &s.base, "tools").await;
    assert_eq!(v["status"], "ready", "{v}");
    let mut mcp = McpClient::open(&s).await;
    let code = "import os\nprint(HELPER, os.environ['STAGE'])";
    let (is_error, text) = tool(
        &mut mcp,
        "execute_python",
        json!({"code": code, "template": "tools"}),
    )
    .await;
    assert!(!is_error, "{text}");
    assert!(text.contains("ready mcp"), "{text}");
    let id = session_of(&mut mcp, "open_session", json!({"template": "tools"})).await;
    let out = turn(&mut mcp, &id, "print(HELPER)").await;
    assert!(out.contains("ready"), "{out}");
    // A name that is no template is the tool's error, naming it.
    let (is_error, text) = tool(
        &mut mcp,
        "execute_python",
        json!({"code": "1", "template": "nope"}),
    )
    .await;
    assert!(is_error && text.contains("nope"), "{text}");
    s.stop().await;
}
