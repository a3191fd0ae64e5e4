//! The shell behind the E2B door (issue 49): `commands.run` runs its command line through the
//! sandbox's own shell (`vivarium_shell`, in the guest) with E2B's semantics (each command
//! afresh, in `cwd` or `/home/user`, with its `envs`; bash's exit statuses), and
//! `run_code(…, language="bash")` runs a cell of shell in the sandbox's session, `cd` and
//! `export` kept between its cells. Through the real, unpatched E2B SDKs (Python: the script
//! below, in the venv `front_e2b.rs` uses; JavaScript: `tests/front_e2b_js/shell.mjs`) and
//! over plain HTTP for what the SDKs do not show (the audit line, a missing `cwd`).

use std::process::Command;

use crate::front_e2b::{command, command_with, control, e2b, json_of};
use crate::http_support::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn e2b_env(cmd: &mut Command, base: &str) {
    let url = format!("{base}/e2b");
    cmd.env("E2B_API_KEY", "any-key-the-server-does-not-check")
        .env("E2B_API_URL", &url)
        .env("E2B_SANDBOX_URL", &url)
        .env_remove("E2B_DEBUG")
        .env_remove("E2B_DOMAIN");
}

/// The Python SDK's scenario: each check prints `ok NAME`; the last line is `done`.
const PYTHON_SCENARIO: &str = r#"
from e2b import CommandExitException
from e2b_code_interpreter import Sandbox

def fails(cmd, **kw):
    try:
        r = sbx.commands.run(cmd, **kw)
    except CommandExitException as e:
        return e
    raise AssertionError(f"{cmd!r} succeeded: {r}")

sbx = Sandbox.create(envs={"FROM_CREATE": "made"})
try:
    sbx.files.write("a.txt", "A\n")
    sbx.files.write("b.txt", "B\n")
    sbx.files.write("c.csv", "x,y\n")
    r = sbx.commands.run("ls -la | grep txt")
    assert r.exit_code == 0 and "a.txt" in r.stdout and "b.txt" in r.stdout, r
    assert "c.csv" not in r.stdout and len(r.stdout.splitlines()) == 2, r
    print("ok pipeline")

    r = sbx.commands.run("python3 -c 'print(1)' > out.txt 2>&1; cat out.txt")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "1\n", ""), r
    assert sbx.files.read("out.txt") == "1\n"
    print("ok redirection")

    assert sbx.commands.run("cd /tmp && pwd").stdout == "/tmp\n"
    assert sbx.commands.run("pwd").stdout == "/home/user\n"
    assert sbx.commands.run("export X=1; echo ${X:-unset}").stdout == "1\n"
    assert sbx.commands.run("echo ${X:-unset}").stdout == "unset\n"
    print("ok afresh")

    e = fails("echo before; exit 3")
    assert e.exit_code == 3 and e.stdout == "before\n", (e.exit_code, e.stdout)
    e = fails("nosuch --flag")
    assert e.exit_code == 127 and "nosuch: command not found" in e.stderr, (e.exit_code, e.stderr)
    e = fails("python3 -c 'import sys; sys.exit(5)'")
    assert e.exit_code == 5, e.exit_code
    e = fails("python3 -c '1/0'")
    assert e.exit_code == 1 and "ZeroDivisionError" in e.stderr, (e.exit_code, e.stderr)
    print("ok exit statuses")

    sbx.commands.run("mkdir -p sub && echo inside > sub/f.txt")
    assert sbx.commands.run("cat f.txt", cwd="/home/user/sub").stdout == "inside\n"
    assert sbx.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    r = sbx.commands.run('echo "$GREETING $FROM_CREATE $HOME"', envs={"GREETING": "hi"})
    assert r.stdout == "hi made /home/user\n", r
    assert sbx.commands.run("echo ${GREETING:-gone}").stdout == "gone\n"
    print("ok cwd and envs")

    live = []
    r = sbx.commands.run("for i in 1 2 3; do echo line $i; done", on_stdout=live.append)
    assert r.stdout == "line 1\nline 2\nline 3\n" and "".join(live) == r.stdout, (r, live)
    print("ok streamed")

    ex = sbx.run_code("echo hi", language="bash")
    assert ex.logs.stdout == ["hi\n"] and ex.error is None, ex
    sbx.run_code("export KEPT=yes; cd sub", language="bash")
    ex = sbx.run_code("echo $KEPT; ls", language="bash")
    assert ex.logs.stdout == ["yes\nf.txt\n"], ex
    ex = sbx.run_code("false", language="bash")
    assert ex.error is not None and ex.error.value == "1", ex
    # A Python cell of the same session sees the shell's working directory.
    assert sbx.run_code("import os; os.getcwd()").text == "'/home/user/sub'"
    print("ok run_code bash")
finally:
    sbx.kill()
print("done")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_runs_command_lines_through_the_shell() {
    let Some(python) = venv_python("e2b_venv") else {
        return;
    };
    let s = start("e2b-shell-python", |_| {}).await;
    let base = s.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(python);
        cmd.args(["-c", PYTHON_SCENARIO]);
        e2b_env(&mut cmd, &base);
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.lines().last() == Some("done"),
        "the Python SDK's shell scenario failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_sdk_runs_command_lines_through_the_shell() {
    let Some(dir) = npm_prefix("tests/front_e2b_js") else {
        return;
    };
    let s = start("e2b-shell-js", |_| {}).await;
    let base = s.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new("node");
        cmd.arg(dir.join("shell.mjs"));
        e2b_env(&mut cmd, &base);
        cmd.output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !stdout.contains("FAIL"),
        "the JS SDK's shell scenario failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("steps: 9/9"), "{stdout}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_is_audited_as_its_command_line_and_leaves_the_session_as_it_was() {
    let s = start("e2b-shell-audit", |_| {}).await;
    let (base, c) = (s.base.clone(), client());
    let (st, v) = json_of(
        control(&c, reqwest::Method::POST, &base, "/v2/sandboxes")
            .json(&json!({"templateID": "base"})),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let id = v["sandboxID"].as_str().unwrap().to_string();
    let line = "echo audited | tr a-z A-Z";
    let (code, out, err) = command(&c, &base, &id, line).await;
    assert_eq!((code, out.as_str()), (0, "AUDITED\n"), "{err}");
    // The turn's code is the caller's command line, not the door's wrapper around it.
    let want = hex::encode(Sha256::digest(line.as_bytes()));
    let audit = s.audit();
    assert!(
        audit.iter().any(|l| l["door"] == "e2b"
            && l["action"] == "session_turn"
            && l["code_sha256"] == want.as_str()),
        "no turn audited with the command line's hash {want}: {audit:#?}"
    );
    // A missing cwd: bash's message, status 1, and nothing ran.
    let (code, out, err) = command_with(
        &c,
        &base,
        &id,
        "echo ran",
        json!({"cwd": "/home/user/missing"}),
    )
    .await;
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("/home/user/missing"), "{err}");
    // A variable that cannot be given is the call's error, before anything runs.
    let (st, v) = json_of(
        e2b(
            &c,
            reqwest::Method::POST,
            &base,
            "/process.Process/Start",
            Some(49983),
            Some(&id),
        )
        .json(
            &json!({"process": {"cmd": "/bin/bash", "args": ["-c", "true"],
                                  "envs": {"A=B": "1"}}}),
        ),
    )
    .await;
    assert_eq!(
        (st, v["code"].as_str()),
        (400, Some("invalid_argument")),
        "{v}"
    );
    // Neither a command's cd, nor its variables, nor an exit reached the session.
    let (code, _, _) = command_with(
        &c,
        &base,
        &id,
        "cd /tmp; export LEFT=1; exit 7",
        json!({"envs": {"GIVEN": "x"}}),
    )
    .await;
    assert_eq!(code, 7);
    let (st, v) = json_of(
        e2b(&c, reqwest::Method::POST, &base, "/execute", Some(49999), Some(&id)).json(
            &json!({"code": "import os\n(os.getcwd(), os.environ.get('LEFT'), os.environ.get('GIVEN'), os.environ['HOME'])"}),
        ),
    )
    .await;
    assert_eq!(st, 200);
    let text = v.as_str().unwrap_or_default();
    assert!(
        text.contains(r#""text":"('/home/user', None, None, '/home/user')""#),
        "{text}"
    );
    s.stop().await;
}

/// A JSON line of an NDJSON body, by its `type`.
fn lines_of(body: &Value, kind: &str) -> Vec<Value> {
    body.as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["type"] == kind)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_cell_over_plain_http_and_its_error() {
    let s = shared().await;
    let (base, c) = (s.base.clone(), client());
    let (_, v) = json_of(
        control(&c, reqwest::Method::POST, &base, "/v2/sandboxes")
            .json(&json!({"templateID": "base"})),
    )
    .await;
    let id = v["sandboxID"].as_str().unwrap().to_string();
    let cell = |code: &str, language: &str| {
        e2b(
            &c,
            reqwest::Method::POST,
            &base,
            "/execute",
            Some(49999),
            Some(&id),
        )
        .json(&json!({"code": code, "language": language}))
    };
    let (st, v) = json_of(cell("echo one; echo two >&2; exit 3", "bash")).await;
    assert_eq!(st, 200);
    let out: Vec<_> = lines_of(&v, "stdout");
    assert_eq!(out[0]["text"], "one\n", "{v}");
    assert_eq!(lines_of(&v, "stderr")[0]["text"], "two\n", "{v}");
    let error = &lines_of(&v, "error")[0];
    assert_eq!(error["value"], "3", "{v}");
    // `sh` is bash's alias; a language Vivarium does not run is still refused.
    let (_, v) = json_of(cell("printf '%s-' a b", "sh")).await;
    assert_eq!(lines_of(&v, "stdout")[0]["text"], "a-b-", "{v}");
    assert!(lines_of(&v, "error").is_empty(), "{v}");
    let (st, v) = json_of(cell("1", "r")).await;
    assert_eq!(st, 400, "{v}");
    let (st, _) = json_of(control(
        &c,
        reqwest::Method::DELETE,
        &base,
        &format!("/sandboxes/{id}"),
    ))
    .await;
    assert_eq!(st, 204);
}
