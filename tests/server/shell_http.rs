//! `language: "bash"` over HTTP (issue 49): a shell script run by the sandbox's own shell
//! (`vivarium_shell`, in the guest), fresh and as a session's turns, with a real server on
//! 127.0.0.1.

use std::time::Duration;

use crate::http_support::*;
use serde_json::{Value, json};

/// A fresh execution of `script` in bash, with `extra` fields; its 200 result.
async fn bash(api: &Api, script: &str, extra: Value) -> Value {
    let mut body = json!({"code": script, "language": "bash", "template": "python"});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    api.execute(&body).await.expect(200)
}

/// A bash turn of `script` in session `id`; its 200 body.
async fn bash_turn(api: &Api, id: &str, script: &str) -> Value {
    api.turn(id, &json!({"code": script, "language": "bash"}))
        .await
        .expect(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_runs_in_a_fresh_sandbox() {
    let api = shared().await;
    let v = bash(
        &api,
        "ls *.csv | wc -l",
        json!({"files": [
            {"path": "a.csv", "content": b64(b"x\n")},
            {"path": "b.csv", "content": b64(b"y\n")},
            {"path": "notes.txt", "content": b64(b"z\n")},
        ]}),
    )
    .await;
    assert_eq!(
        (&v["status"], &v["exit_code"]),
        (&json!("ok"), &json!(0)),
        "{v}"
    );
    assert_eq!(v["stdout"].as_str().unwrap().trim(), "2", "{v}");
    // `sh` is the same language; the default policy (`warn`) has nothing of Python to check.
    let v = api
        .execute(&json!({"code": "echo $((6 * 7))", "language": "sh", "template": "python"}))
        .await
        .expect(200);
    assert_eq!(v["stdout"], "42\n", "{v}");
    assert_eq!(v["findings"], json!([]), "{v}");
    // `deny` refuses nothing a shell script says: it starts no process (see shell.md).
    let v = bash(&api, "echo hi", json!({"policy": "deny"})).await;
    assert_eq!(v["stdout"], "hi\n", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_statuses_are_the_runs() {
    let api = shared().await;
    for (script, code) in [
        ("true", 0),
        ("exit 3", 3),
        ("false", 1),
        ("nosuchcmd --x", 127),
    ] {
        let v = bash(&api, script, json!({})).await;
        let status = if code == 0 { "ok" } else { "error" };
        assert_eq!(
            (&v["status"], &v["exit_code"]),
            (&json!(status), &json!(code)),
            "{script}: {v}"
        );
        // No Python error is made of a shell's failure.
        assert_eq!(v["error"], Value::Null, "{script}: {v}");
    }
    let v = bash(&api, "nosuchcmd", json!({})).await;
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("nosuchcmd: command not found"),
        "{v}"
    );
    // A `python` command's traceback is its output, not the run's error.
    let v = bash(&api, "python3 -c '1/0'; echo after $?", json!({})).await;
    assert_eq!(v["stdout"], "after 1\n", "{v}");
    assert!(
        v["stderr"].as_str().unwrap().contains("ZeroDivisionError"),
        "{v}"
    );
    assert_eq!(v["error"], Value::Null, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_language_is_a_400_naming_it() {
    let api = shared().await;
    let a = api
        .execute(&json!({"code": "ls", "language": "fish"}))
        .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("fish"),
        "{}",
        a.body
    );
    let id = api.session(&json!({"template": "python"})).await;
    let a = api
        .turn(&id, &json!({"code": "ls", "language": "zsh"}))
        .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(
        a.body["error"]["message"].as_str().unwrap().contains("zsh"),
        "{}",
        a.body
    );
    // Code mode is Python's.
    let a = api
        .execute(&json!({"code": "ls", "language": "bash", "tools": [
            {"name": "t", "description": "", "parameters": {"type": "object"}}
        ]}))
        .await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tools"),
        "{}",
        a.body
    );
    // In the OpenAPI document.
    let (_, doc) = get(&api.c, &api.url("/openapi.json")).await;
    let lang = &doc["components"]["schemas"]["Language"];
    assert_eq!(lang["enum"], json!(["python", "bash"]), "{lang}");
    api.close(&id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_is_stopped_by_the_timeout() {
    let api = shared().await;
    let v = bash(
        &api,
        "while true; do :; done",
        json!({"limits": {"timeout_ms": 1000}}),
    )
    .await;
    assert_eq!(v["status"], "timeout", "{v}");
    assert!(v["detail"].as_str().unwrap().contains("1000"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_install_of_a_package_present_already() {
    let api = shared().await;
    let v = bash(
        &api,
        "pip install -q numpy && python3 -c 'import numpy; print(numpy.__name__)'",
        json!({"template": "scientific"}),
    )
    .await;
    // The guest's pip finds it ("Requirement already satisfied"); the host fetched nothing.
    assert_eq!(v["status"], "ok", "{v}");
    assert!(v["stdout"].as_str().unwrap().ends_with("\nnumpy\n"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_files_cd_and_export_for_python_too() {
    let api = shared().await;
    let id = api.session(&json!({"template": "python"})).await;
    // A pipeline's output redirected into a file, read back by Python in the next turn.
    let v = bash_turn(
        &api,
        &id,
        "printf 'b\\na\\nc\\n' | sort > sorted.txt 2>&1; echo done",
    )
    .await;
    assert_eq!(
        (&v["status"], &v["stdout"]),
        (&json!("ok"), &json!("done\n")),
        "{v}"
    );
    let v = api.turn_ok(&id, "open('sorted.txt').read()").await;
    assert_eq!(v["result"], "'a\\nb\\nc\\n'", "{v}");
    // `cd` and `export` stay, for the shell's next turn and for Python's.
    let v = bash_turn(
        &api,
        &id,
        "mkdir -p work/sub && cd work && export GREETING=hi",
    )
    .await;
    assert_eq!(v["status"], "ok", "{v}");
    let v = bash_turn(&api, &id, "echo \"$GREETING\" && basename \"$(pwd)\"").await;
    assert_eq!(v["stdout"], "hi\nwork\n", "{v}");
    let v = api
        .turn_ok(
            &id,
            "import os\n(os.path.basename(os.getcwd()), os.environ['GREETING'])",
        )
        .await;
    assert_eq!(v["result"], "('work', 'hi')", "{v}");
    // A failing command is the turn's status; the session goes on.
    let v = bash_turn(&api, &id, "false").await;
    assert_eq!(
        (&v["status"], &v["exit_code"]),
        (&json!("error"), &json!(1)),
        "{v}"
    );
    assert_eq!(v["ended"], Value::Null, "{v}");
    // A fork carries them (they are the interpreter's state).
    let fork = api.fork(&id).await.expect(201);
    let fid = fork["id"].as_str().unwrap().to_string();
    let v = bash_turn(
        &api,
        &fid,
        "echo \"$GREETING\" && ls sub && cat ../sorted.txt | head -1",
    )
    .await;
    assert_eq!(v["stdout"], "hi\na\n", "{v}");
    api.close(&fid).await;
    api.close(&id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cd_and_export_survive_hibernation() {
    let s = start("shell-hibernate", |a| a.hibernate_after_secs = 1).await;
    let api = s.api();
    let id = api.session(&json!({"template": "python"})).await;
    let v = bash_turn(
        &api,
        &id,
        "mkdir d && cd d && export KEPT=yes && echo x > f",
    )
    .await;
    assert_eq!(v["status"], "ok", "{v}");
    wait_for_metric(
        &api.c,
        &s.base,
        r#"vivarium_session_events_total{event="hibernate"}"#,
        1.0,
        Duration::from_secs(15),
    )
    .await;
    assert_eq!(api.info(&id).await.expect(200)["resident"], false);
    let v = bash_turn(&api, &id, "echo \"$KEPT\" && cat f && basename \"$PWD\"").await;
    assert_eq!(v["stdout"], "yes\nx\nd\n", "{v}");
    s.stop().await;
}
