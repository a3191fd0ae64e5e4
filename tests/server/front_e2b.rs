//! E2B compatibility (`/e2b`), tested with the real, unpatched E2B SDKs against a real server
//! on 127.0.0.1, configured only as a user would (`E2B_API_KEY`, `E2B_API_URL`,
//! `E2B_SANDBOX_URL`): the Python SDKs (`e2b` 2.63.0, `e2b-code-interpreter` 2.11.5, sync and
//! async; `tests/fixtures/e2b_sdk.py`, in a venv under `target/e2b_venv`) and the JavaScript
//! ones (`e2b` 2.51.0, `@e2b/code-interpreter` 2.8.0; `tests/front_e2b_js/run.mjs`, installed
//! with `npm install --prefix tests/front_e2b_js`). The refusals, keys, a hung-up client and
//! a sandbox's timeout are checked over plain HTTP. Without Python's venv, node or the
//! registries the SDK tests skip with a message; under CI they fail instead.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

const KEY_A: &str = "e2b-key-alice-0123456789";
const KEY_B: &str = "e2b-key-bob-0123456789ab";

fn e2b_env(cmd: &mut Command, base: &str, key: &str) {
    let url = format!("{base}/e2b");
    cmd.env("E2B_API_KEY", key)
        .env("E2B_API_URL", &url)
        .env("E2B_SANDBOX_URL", &url)
        .env("E2B_VOLUME_API_URL", &url)
        .env_remove("E2B_DEBUG")
        .env_remove("E2B_DOMAIN");
}

/// The timings line a scenario prints last.
fn timings(stdout: &str) -> Value {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("JSON:"))
        .expect("the scenario prints its timings");
    serde_json::from_str(line).unwrap()
}

/// Runs `tests/fixtures/e2b_sdk.py` with `args` against the server at `base` (as a user
/// would configure the SDK) and asserts it succeeded; its stdout.
async fn python_sdk(python: std::path::PathBuf, base: &str, args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/e2b_sdk.py");
    let (base, args) = (
        base.to_string(),
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
    );
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(python);
        cmd.arg(script).args(&args);
        e2b_env(&mut cmd, &base, "any-key-the-server-does-not-check");
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the Python SDK scenario failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdks_volume_api_works_unchanged() {
    let Some(python) = venv_python("e2b_venv") else {
        return;
    };
    let s = start("e2b-volumes", |a| a.max_body_bytes = 1 << 20).await;
    let stdout = python_sdk(python, &s.base, &["volumes"]).await;
    for step in [
        "create, list",
        "files written",
        "mounted in sandboxes",
        "connect, destroy",
    ] {
        assert!(stdout.contains(step), "step {step} did not pass:\n{stdout}");
    }
    let audit = s.audit();
    assert!(
        audit
            .iter()
            .any(|l| l["door"] == "e2b" && l["action"] == "volume_upload"),
        "no E2B volume upload in the audit log"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdks_template_builder_builds_a_template_sandboxes_start_from() {
    let Some(python) = venv_python("e2b_venv") else {
        return;
    };
    let index = PackageIndex::start("e2b-template");
    let url = index.url.clone();
    let s = start("e2b-template", move |a| a.package_index = Some(url)).await;
    let stdout = python_sdk(python, &s.base, &["template"]).await;
    for step in ["built", "a sandbox from it", "refusals and failures named"] {
        assert!(stdout.contains(step), "step {step} did not pass:\n{stdout}");
    }
    // Over Vivarium's own API it is a template like any: its steps named as E2B's.
    let (st, v) = get(&client(), &s.url("/v1/templates/py-template")).await;
    assert_eq!((st, v["status"].as_str()), (200, Some("ready")), "{v}");
    assert_eq!(v["workdir"], "/app", "{v}");
    assert!(
        s.audit()
            .iter()
            .any(|l| l["door"] == "e2b" && l["action"] == "template_build"),
        "no E2B template build in the audit log"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdks_sync_and_async_run_the_scenario_unchanged() {
    let Some(python) = venv_python("e2b_venv") else {
        return;
    };
    let s = start("e2b-python", |_| {}).await;
    let stdout = python_sdk(python, &s.base, &[]).await;
    for step in [
        "ten cells",
        "contexts",
        "files",
        "commands",
        "metrics",
        "fork",
        "kill",
        "async:",
    ] {
        assert!(stdout.contains(step), "step {step} did not pass:\n{stdout}");
    }
    let t = timings(&stdout);
    assert_eq!(t["run_code_ms"].as_array().unwrap().len(), 50);
    // Every request was audited as the E2B door's.
    let audit = s.audit();
    assert!(
        audit
            .iter()
            .any(|l| l["door"] == "e2b" && l["action"] == "session_turn"),
        "no E2B turn in the audit log"
    );
    assert!(
        audit
            .iter()
            .any(|l| l["door"] == "e2b" && l["action"] == "session_pause")
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_sdks_run_the_scenario_unchanged() {
    let Some(dir) = npm_prefix("tests/front_e2b_js") else {
        return;
    };
    let s = start("e2b-js", |_| {}).await;
    let base = s.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new("node");
        cmd.arg(dir.join("run.mjs"));
        e2b_env(&mut cmd, &base, "any-key-the-server-does-not-check");
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the JS SDK scenario failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    timings(&stdout);
    s.stop().await;
}

/// A request to the E2B door: `port` None is the control plane.
pub(crate) fn e2b(
    c: &reqwest::Client,
    method: reqwest::Method,
    base: &str,
    path: &str,
    port: Option<u16>,
    sandbox: Option<&str>,
) -> reqwest::RequestBuilder {
    let mut r = c.request(method, format!("{base}/e2b{path}"));
    if let Some(p) = port {
        r = r.header("E2b-Sandbox-Port", p.to_string());
    }
    if let Some(id) = sandbox {
        r = r.header("E2b-Sandbox-Id", id);
    }
    r
}

/// A request to the E2B door's control plane.
pub(crate) fn control(
    c: &reqwest::Client,
    method: reqwest::Method,
    base: &str,
    path: &str,
) -> reqwest::RequestBuilder {
    e2b(c, method, base, path, None, None)
}

/// Its status and JSON body (a body that is not one JSON value as a string: NDJSON).
pub(crate) async fn json_of(r: reqwest::RequestBuilder) -> (u16, Value) {
    let r = r.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_not_offered_is_refused_as_documented() {
    use reqwest::Method as M;
    let s = shared().await;
    let (base, c) = (s.base.clone(), client());
    let (st, v) = json_of(
        control(&c, M::POST, &base, "/v2/sandboxes")
            .json(&json!({"templateID": "code-interpreter-v1"})),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let id = v["sandboxID"].as_str().unwrap().to_string();
    assert_eq!(v["envdVersion"], "0.5.7");
    // (method, path, port, body, status, what the message says)
    type Case = (M, &'static str, Option<u16>, Value, u16, &'static str);
    let cases: Vec<Case> = vec![
        // A port nothing serves, as E2B's edge answers it.
        (
            M::GET,
            "/health",
            Some(8080),
            json!(null),
            502,
            "not served",
        ),
        (
            M::GET,
            "/nope",
            None,
            json!(null),
            404,
            "not part of the E2B control plane",
        ),
        (
            M::GET,
            "/sandboxes/x/metrics",
            None,
            json!(null),
            404,
            "no session x",
        ),
        (
            M::GET,
            "/sandboxes/x/metrics?start=yesterday",
            None,
            json!(null),
            400,
            "start",
        ),
        (
            M::GET,
            "/sandboxes/x/logs",
            None,
            json!(null),
            501,
            "audit log",
        ),
        (
            M::POST,
            "/v2/sandboxes",
            None,
            // A name that is none of the key's templates (E2B's NotFoundException).
            json!({"templateID": "my-own-template"}),
            404,
            "template_not_found",
        ),
        (
            M::POST,
            "/v2/sandboxes",
            None,
            json!({"templateID": "base", "mcp": {"x": {}}}),
            400,
            "mcp",
        ),
        (
            M::POST,
            "/v2/sandboxes",
            None,
            json!({"templateID": "base", "timeout": 0}),
            400,
            "at least 1 second",
        ),
        (
            M::POST,
            "/execute",
            Some(49999),
            json!({"code": "1", "language": "r"}),
            400,
            "is not available",
        ),
        (
            M::POST,
            "/execute",
            Some(49999),
            json!({"code": "1", "context_id": "s-00000000000000000000000000000000"}),
            404,
            "session_not_found",
        ),
        (M::GET, "/files", Some(49983), json!(null), 400, "path"),
    ];
    for (method, path, port, body, want, says) in cases {
        let mut r = e2b(&c, method.clone(), &base, path, port, Some(&id));
        if !body.is_null() {
            r = r.json(&body);
        }
        let (st, v) = json_of(r).await;
        assert_eq!(st, want, "{method} {path}: {v}");
        assert_eq!(
            v["code"],
            json!(want),
            "{method} {path}: E2B's error body: {v}"
        );
        assert!(
            v["message"].as_str().unwrap_or_default().contains(says),
            "{method} {path}: {v}"
        );
    }
    // Connect: a service not served, with Connect's codes.
    for (method, want, code) in [
        ("filesystem.Filesystem/WatchDir", 501, "unimplemented"),
        ("filesystem.Filesystem/CreateWatcher", 501, "unimplemented"),
        ("process.Process/SendSignal", 404, "not_found"),
        ("process.Process/StreamInput", 501, "unimplemented"),
    ] {
        let (st, v) = json_of(
            e2b(
                &c,
                M::POST,
                &base,
                &format!("/{method}"),
                Some(49983),
                Some(&id),
            )
            .json(&json!({"path": "/home/user"})),
        )
        .await;
        assert_eq!(
            (st, v["code"].as_str()),
            (want, Some(code)),
            "{method}: {v}"
        );
    }
    let (st, v) = json_of(
        e2b(
            &c,
            M::POST,
            &base,
            "/process.Process/List",
            Some(49983),
            Some(&id),
        )
        .json(&json!({})),
    )
    .await;
    assert_eq!((st, v), (200, json!({"processes": []})));
    let (st, _) = json_of(control(&c, M::DELETE, &base, &format!("/sandboxes/{id}"))).await;
    assert_eq!(st, 204);
    let (st, v) = json_of(control(&c, M::DELETE, &base, &format!("/sandboxes/{id}"))).await;
    assert_eq!((st, v["code"].clone()), (404, json!(404)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_is_its_keys_alone() {
    use reqwest::Method as M;
    let keys = scratch_dir("e2b-keys").join("keys.txt");
    std::fs::write(&keys, format!("alice:{KEY_A}\nbob:{KEY_B}\n")).unwrap();
    let path = keys.clone();
    let s = start("e2b-keys", move |a| a.api_keys_file = Some(path)).await;
    let (base, c) = (s.base.clone(), client());
    let create =
        || control(&c, M::POST, &base, "/v2/sandboxes").json(&json!({"templateID": "base"}));
    let (st, _) = json_of(create()).await;
    assert_eq!(st, 401);
    let (st, _) = json_of(create().header("X-API-Key", "wrong-wrong-wrong-wrong")).await;
    assert_eq!(st, 401);
    let (st, v) = json_of(create().header("X-API-Key", KEY_A)).await;
    assert_eq!(st, 201, "{v}");
    let id = v["sandboxID"].as_str().unwrap().to_string();
    // The access token the sandbox planes take is the key it was made with.
    assert_eq!(v["envdAccessToken"], KEY_A);
    let cell = |token: &str| {
        e2b(&c, M::POST, &base, "/execute", Some(49999), Some(&id))
            .header("X-Access-Token", token)
            .json(&json!({"code": "40 + 2"}))
    };
    let (st, v) = json_of(cell(KEY_A)).await;
    assert_eq!(st, 200);
    assert!(v.as_str().unwrap().contains("\"text\":\"42\""), "{v}");
    // Bob sees no such sandbox anywhere.
    let (st, v) = json_of(cell(KEY_B)).await;
    assert_eq!((st, v["code"].clone()), (404, json!(404)), "{v}");
    let (st, _) =
        json_of(control(&c, M::GET, &base, &format!("/sandboxes/{id}")).header("X-API-Key", KEY_B))
            .await;
    assert_eq!(st, 404);
    let (st, v) =
        json_of(control(&c, M::GET, &base, "/v2/sandboxes").header("X-API-Key", KEY_B)).await;
    assert_eq!((st, v), (200, json!([])));
    let (st, v) = json_of(
        e2b(
            &c,
            M::GET,
            &base,
            "/files?path=a.txt",
            Some(49983),
            Some(&id),
        )
        .header("X-Access-Token", KEY_B),
    )
    .await;
    assert_eq!(st, 404, "{v}");
    let kill = |key: &'static str| {
        control(&c, M::DELETE, &base, &format!("/sandboxes/{id}")).header("X-API-Key", key)
    };
    assert_eq!(json_of(kill(KEY_B)).await.0, 404);
    assert_eq!(json_of(kill(KEY_A)).await.0, 204);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_interrupts_its_cell_and_a_timeout_ends_the_sandbox() {
    use reqwest::Method as M;
    let s = start("e2b-life", |a| a.session_idle_secs = 10).await;
    let (base, c) = (s.base.clone(), client());
    let (_, v) = json_of(
        control(&c, M::POST, &base, "/v2/sandboxes")
            .json(&json!({"templateID": "base", "timeout": 60})),
    )
    .await;
    let id = v["sandboxID"].as_str().unwrap().to_string();
    // A cell that never ends, with a variable of its own, streamed; the client reads its
    // first line and hangs up.
    let r = e2b(&c, M::POST, &base, "/execute", Some(49999), Some(&id))
        .json(&json!({
            "code": "print('started', flush=True)\nwhile True: pass",
            "env_vars": {"VV_CELL": "set"},
        }))
        .send()
        .await
        .unwrap();
    let mut r = r;
    let first = r.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("started"));
    drop(r);
    // The session is free again well before the cell's own timeout, and the cell's
    // variable is gone with it.
    let since = Instant::now();
    loop {
        let (_, v) = json_of(
            e2b(&c, M::POST, &base, "/execute", Some(49999), Some(&id))
                .json(&json!({"code": "__import__('os').environ.get('VV_CELL', 'unset')"})),
        )
        .await;
        let text = v.as_str().unwrap_or_default();
        if !text.contains("session_busy") {
            assert!(text.contains(r#""text":"'unset'""#), "{text}");
            break;
        }
        assert!(since.elapsed() < Duration::from_secs(10), "still busy: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A one-second timeout ends it, used or not.
    let (st, _) = json_of(
        control(&c, M::POST, &base, &format!("/sandboxes/{id}/timeout"))
            .json(&json!({"timeout": 1})),
    )
    .await;
    assert_eq!(st, 204);
    let (_, v) = json_of(control(&c, M::GET, &base, &format!("/sandboxes/{id}"))).await;
    assert_eq!(v["state"], "running");
    let since = Instant::now();
    loop {
        let (st, _) = json_of(e2b(&c, M::GET, &base, "/health", Some(49983), Some(&id))).await;
        if st == 502 {
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "the sandbox outlived its timeout"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Ended is not found, as E2B says (the SDKs' kill() is then false).
    for method in [M::GET, M::DELETE] {
        let path = format!("/sandboxes/{id}");
        let (st, v) = json_of(e2b(&c, method.clone(), &base, &path, None, None)).await;
        assert_eq!(
            (st, v["code"].clone()),
            (404, json!(404)),
            "{method} {path}: {v}"
        );
    }
    s.stop().await;
}

/// Runs `line` with `commands.run`'s call (`process.Process/Start`, Connect's streamed JSON):
/// its stdout, stderr and exit status; checks the stream's framing as it goes (a start
/// event first, an end event, the end-of-stream envelope last).
pub(crate) async fn command(
    c: &reqwest::Client,
    base: &str,
    id: &str,
    line: &str,
) -> (i64, String, String) {
    command_with(c, base, id, line, json!({})).await
}

/// [`command`] with more of the `process` the SDKs send (`cwd`, `envs`).
pub(crate) async fn command_with(
    c: &reqwest::Client,
    base: &str,
    id: &str,
    line: &str,
    process: Value,
) -> (i64, String, String) {
    use base64::Engine as _;
    let mut process = process;
    process["cmd"] = json!("/bin/bash");
    process["args"] = json!(["-l", "-c", line]);
    let message = json!({"process": process, "stdin": false});
    let payload = message.to_string().into_bytes();
    let mut body = vec![0u8];
    body.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    body.extend_from_slice(&payload);
    let r = e2b(
        c,
        reqwest::Method::POST,
        base,
        "/process.Process/Start",
        Some(49983),
        Some(id),
    )
    .header("content-type", "application/connect+json")
    .header("connect-protocol-version", "1")
    .body(body)
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/connect+json");
    let bytes = r.bytes().await.unwrap();
    let (mut at, mut events) = (0, Vec::new());
    let mut last_flags = 0;
    while at < bytes.len() {
        let flags = bytes[at];
        let len = u32::from_be_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
        let v: Value = serde_json::from_slice(&bytes[at + 5..at + 5 + len]).unwrap();
        at += 5 + len;
        last_flags = flags;
        if flags == 0 {
            events.push(v);
        } else {
            assert_eq!(v, json!({}), "the stream ended with an error");
        }
    }
    assert_eq!(last_flags, 2, "no end-of-stream envelope");
    assert!(events[0]["event"]["start"]["pid"].is_u64(), "{events:?}");
    let (mut out, mut err, mut code) = (String::new(), String::new(), None);
    for e in &events {
        let data = &e["event"]["data"];
        for (field, into) in [("stdout", &mut out), ("stderr", &mut err)] {
            if let Some(b) = data[field].as_str() {
                let raw = base64::engine::general_purpose::STANDARD.decode(b).unwrap();
                into.push_str(&String::from_utf8_lossy(&raw));
            }
        }
        if let Some(c) = e["event"]["end"]["exitCode"].as_i64() {
            code = Some(c);
        }
    }
    (code.expect("an end event"), out, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_install_as_a_command_adds_a_package_to_the_sandbox() {
    let index = PackageIndex::start("e2b-pip");
    let (url, cache) = (index.url.clone(), scratch_dir("e2b-pip-cache"));
    let s = start("e2b-pip", move |a| {
        a.package_index = Some(url);
        a.package_cache_dir = Some(cache);
    })
    .await;
    let (base, c) = (s.base.clone(), client());
    let (_, v) = json_of(
        control(&c, reqwest::Method::POST, &base, "/v2/sandboxes")
            .json(&json!({"templateID": "base"})),
    )
    .await;
    let id = v["sandboxID"].as_str().unwrap().to_string();
    let (code, out, err) = command(&c, &base, &id, "pip install -q vivtest-greet").await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("Successfully installed vivtest"), "{out}");
    let (code, out, err) = command(
        &c,
        &base,
        &id,
        "python -c 'import vivtest_greet; print(vivtest_greet.hello())'",
    )
    .await;
    assert_eq!(
        (code, out.as_str()),
        (0, "hello from greet, base 1.0\n"),
        "{err}"
    );
    // A package the index does not have: exit 1, and why on stderr.
    let (code, _, err) = command(&c, &base, &id, "pip install vivtest-no-such-package").await;
    assert_eq!(code, 1);
    assert!(err.contains("package_not_found"), "{err}");
    // Other shapes of pip go to the sandbox's shell, whose pip says what it cannot do.
    let (code, _, err) = command(&c, &base, &id, "pip install -r requirements.txt").await;
    assert_ne!(code, 0, "{err}");
    assert!(!err.is_empty());
    s.stop().await;
}
