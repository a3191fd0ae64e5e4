//! MCP's `run_command` (issue 49): a shell command line in the sandbox's own shell, through
//! `/mcp` of a real server as JSON-RPC: listed with its schema; alone, in a fresh sandbox
//! each time; in a session, a terminal whose `cd` and `export` persist beside the session's
//! Python; bash's exit statuses; a timeout named.

use crate::http_support::*;
use serde_json::{Value, json};

/// `run_command`'s structured result (the `outputSchema`'s `RunResult`) and whether the
/// call is an error result.
async fn run(mcp: &mut McpClient, arguments: Value) -> (bool, Value) {
    let (body, message) = mcp.call("run_command", arguments).await;
    let result = &message["result"];
    assert!(
        result["structuredContent"].is_object(),
        "no structuredContent: {body}"
    );
    (
        result["isError"] == true,
        result["structuredContent"].clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_is_listed_and_runs_a_command_line() {
    let s = shared().await;
    let mut mcp = McpClient::open(&s).await;
    let tools = mcp.request("tools/list", json!({})).await;
    let tool = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "run_command")
        .unwrap_or_else(|| panic!("run_command is not listed: {tools}"))
        .clone();
    let schema = &tool["inputSchema"];
    assert_eq!(schema["required"], json!(["command"]), "{schema}");
    for field in ["command", "session_id", "timeout_ms"] {
        assert!(schema["properties"][field].is_object(), "{field}: {schema}");
    }
    assert_eq!(
        schema["properties"]["session_id"]["x-mcp-header"],
        "Vivarium-Session"
    );
    assert!(tool["outputSchema"].is_object(), "{tool}");
    assert!(
        tool["description"].as_str().unwrap().contains("shell"),
        "{tool}"
    );

    // Without a session: a fresh sandbox each time.
    let (is_error, r) = run(
        &mut mcp,
        json!({"command": "printf 'b\\na\\nb\\n' > f.txt; sort f.txt | uniq -c | head -1; cd /tmp; pwd"}),
    )
    .await;
    assert!(!is_error, "{r}");
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["exit_code"], 0, "{r}");
    assert_eq!(r["stdout"], "      1 a\n/tmp\n", "{r}");
    assert!(
        r["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["path"] == "f.txt"),
        "{r}"
    );
    let (_, r) = run(&mut mcp, json!({"command": "ls f.txt"})).await;
    assert_eq!(r["exit_code"], 2, "a fresh sandbox has no f.txt: {r}");
    // bash's statuses: a command not found, an exit.
    let (is_error, r) = run(&mut mcp, json!({"command": "nosuch"})).await;
    assert!(is_error, "{r}");
    assert_eq!(r["exit_code"], 127, "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .contains("nosuch: command not found"),
        "{r}"
    );
    let (_, r) = run(&mut mcp, json!({"command": "echo out; exit 3"})).await;
    assert_eq!(
        (r["exit_code"].clone(), r["stdout"].clone()),
        (json!(3), json!("out\n"))
    );
    // A timeout is named, as execute_python's is.
    let (is_error, r) = run(
        &mut mcp,
        json!({"command": "while true; do :; done", "timeout_ms": 500}),
    )
    .await;
    assert!(is_error, "{r}");
    assert_eq!(r["status"], "timeout", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_session_run_command_is_a_terminal_beside_its_python() {
    let s = shared().await;
    let mut mcp = McpClient::open(&s).await;
    let (_, message) = mcp
        .call("open_session", json!({"template": "python"}))
        .await;
    let text = message["result"]["content"][0]["text"].as_str().unwrap();
    let session: Value = serde_json::from_str(text).unwrap();
    let id = session["session_id"].as_str().unwrap().to_string();
    let (is_error, r) = run(
        &mut mcp,
        json!({"session_id": id, "command": "mkdir -p work && cd work && export STAGE=one && echo data > in.txt"}),
    )
    .await;
    assert!(!is_error, "{r}");
    assert!(r["turn"]["turn"].as_u64().unwrap() >= 1, "{r}");
    // The next command starts where the last one left: its directory and variables.
    let (_, r) = run(
        &mut mcp,
        json!({"session_id": id, "command": "pwd | sed 's|.*/||'; echo $STAGE; cat in.txt"}),
    )
    .await;
    assert_eq!(r["stdout"], "work\none\ndata\n", "{r}");
    // The session's Python sees the same directory and environment.
    let (_, message) = mcp
        .call(
            "run_in_session",
            json!({"session_id": id, "code": "import os\n(os.path.basename(os.getcwd()), os.environ['STAGE'], open('in.txt').read())"}),
        )
        .await;
    assert_eq!(
        message["result"]["structuredContent"]["turn"]["result"], "('work', 'one', 'data\\n')",
        "{message}"
    );
    // A failing command is an error result, the session goes on.
    let (is_error, r) = run(
        &mut mcp,
        json!({"session_id": id, "command": "grep nothing-here in.txt"}),
    )
    .await;
    assert!(is_error);
    assert_eq!(r["exit_code"], 1, "{r}");
    let (_, r) = run(
        &mut mcp,
        json!({"session_id": id, "command": "echo $STAGE"}),
    )
    .await;
    assert_eq!(r["stdout"], "one\n", "{r}");
    // Another's session, or none, is a tool error naming it.
    let (_, message) = mcp
        .call(
            "run_command",
            json!({"session_id": "s-00000000000000000000000000000000", "command": "true"}),
        )
        .await;
    assert_eq!(message["result"]["isError"], true, "{message}");
    let text = message["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("session_not_found"), "{text}");
    let (_, message) = mcp.call("close_session", json!({"session_id": id})).await;
    assert_ne!(message["result"]["isError"], true, "{message}");
}
