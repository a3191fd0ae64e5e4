//! Output leakage beyond the streams, over real HTTP with the real runtime: a stream cut at
//! the output limit inside a secret, the parsed exception (its type, message, traceback)
//! when stderr was cut at the output limit, the `ModuleNotFoundError` hint, file and folder
//! names (a run's files, a session's listing, MCP's resource links) and the messages of API
//! errors, each under `redact` and `deny` (and `report` where it differs).

use crate::http_support::*;
use serde_json::{Value, json};

/// A GitHub token of the real format (made here, so none sits in the repository).
fn token() -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let tail: String = (0..36)
        .map(|_| ALNUM[rand::random::<u32>() as usize % ALNUM.len()] as char)
        .collect();
    format!("ghp_{tail}")
}

fn assert_hidden(v: &impl ToString, token: &str, what: &str) {
    let text = v.to_string();
    assert!(
        !text.contains(&token[..16]),
        "{what} shows the token: {text}"
    );
}

/// Each leak's place, as `key=value`.
fn places(v: &Value) -> Vec<String> {
    v["leaks"]
        .as_array()
        .unwrap_or_else(|| panic!("no leaks in {v}"))
        .iter()
        .map(|l| {
            ["stream", "error", "output", "file", "file_name"]
                .iter()
                .find_map(|k| l.get(*k).map(|p| format!("{k}={}", p.as_str().unwrap())))
                .unwrap_or_else(|| panic!("no place in {l}"))
        })
        .collect()
}

/// The leaks of a run whose stderr was cut before its traceback: in the traceback only (it
/// may show the raising line's source as well as the message).
fn only_in_the_traceback(v: &Value) {
    let found = places(v);
    assert!(
        !found.is_empty() && found.iter().all(|p| p == "error=traceback"),
        "{found:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parsed_error_and_the_hint_are_scanned_whatever_the_cut() {
    let s = shared().await;
    let c = client();
    let t = token();
    // stderr is cut after 1 KiB of noise; the exception comes from its tail.
    let cut = json!({
        "code": format!("import sys\nsys.stderr.write('x' * 5000)\nraise RuntimeError('bad {t}')"),
        "limits": {"output_bytes": 1024},
    });
    let (status, v) = post(&c, &s.url("/v1/execute"), &cut).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["truncated"]["stderr"], true, "{v}");
    assert_eq!(v["error"]["type"], "RuntimeError", "{v}");
    assert_hidden(&v, &t, "the cut run");
    assert_eq!(v["error"]["message"], "bad [REDACTED:github-pat]", "{v}");
    only_in_the_traceback(&v);

    let mut report = cut.clone();
    report["leakage"] = json!("report");
    let (status, v) = post(&c, &s.url("/v1/execute"), &report).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["error"]["message"],
        format!("bad {t}"),
        "report alters nothing"
    );
    only_in_the_traceback(&v);

    let mut deny = cut;
    deny["leakage"] = json!("deny");
    let (status, v) = post(&c, &s.url("/v1/execute"), &deny).await;
    assert_eq!((status, error_code(&v)), (422, "output_leak"), "{v}");
    assert_hidden(&v, &t, "the 422");

    // The hint repeats the module's name, which is the secret.
    let (status, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": format!("import {t}")}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["error"]["type"], "ModuleNotFoundError", "{v}");
    assert_hidden(&v, &t, "the ModuleNotFoundError");
    let hint = v["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("[REDACTED:github-pat]"), "{hint}");
    let found = places(&v);
    assert!(found.contains(&"error=hint".to_string()), "{found:?}");

    // stdout cut at the output limit in the middle of an `env` value: its first part.
    let cut_env = |leakage: &str| {
        json!({
            "code": "import os\nprint('x' * 1010 + os.environ['DB_PASSWORD'])",
            "env": {"DB_PASSWORD": "pw-Zq81vX0pLwTq93nBc7Rk"},
            "limits": {"output_bytes": 1024},
            "leakage": leakage,
        })
    };
    let (status, v) = post(&c, &s.url("/v1/execute"), &cut_env("redact")).await;
    assert_eq!(status, 200, "{v}");
    let stdout = v["stdout"].as_str().unwrap();
    assert!(
        stdout.ends_with("x[REDACTED:env:DB_PASSWORD]") && !stdout.contains("pw-Zq81vX"),
        "{stdout}"
    );
    let (status, v) = post(&c, &s.url("/v1/execute"), &cut_env("deny")).await;
    assert_eq!((status, error_code(&v)), (422, "output_leak"), "{v}");

    // A class the guest defined is named as it chose: `error.type`.
    let code = format!("raise type('{t}', (Exception,), {{'__module__': 'builtins'}})('x')");
    let (status, v) = post(&c, &s.url("/v1/execute"), &json!({"code": code})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["error"]["type"], "[REDACTED:github-pat]", "{v}");
    assert_hidden(&v, &t, "the exception's type");
}

/// Writes a file named after `t`, one in a folder named after it, and an ordinary one.
fn secret_files(t: &str) -> String {
    format!(
        "import os\nopen('{t}.txt', 'w').write('x')\nos.mkdir('d-{t}')\n\
         open('d-{t}/a.txt', 'w').write('y')\nopen('ok.txt', 'w').write('z')\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_whose_names_hold_a_secret_are_withheld_or_refused() {
    let s = shared().await;
    let c = client();
    let t = token();
    let run = json!({"code": secret_files(&t)});
    let (status, v) = post(&c, &s.url("/v1/execute"), &run).await;
    assert_eq!(status, 200, "{v}");
    assert_hidden(&v, &t, "the run");
    let paths: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["ok.txt"], "{v}");
    let mut found = places(&v);
    found.sort();
    assert_eq!(
        found,
        [
            "file_name=[REDACTED:github-pat].txt",
            "file_name=d-[REDACTED:github-pat]/a.txt"
        ]
    );
    let mut deny = run.clone();
    deny["leakage"] = json!("deny");
    let (status, v) = post(&c, &s.url("/v1/execute"), &deny).await;
    assert_eq!((status, error_code(&v)), (422, "output_leak"), "{v}");
    assert_hidden(&v, &t, "the 422");

    // A session's listing, and MCP's links to its files.
    let id = open_session(&c, &s.base, &json!({})).await;
    let turn = session_turn(&c, &s.base, &id, &secret_files(&t)).await;
    assert_eq!(turn["status"], "ok", "{turn}");
    let (status, v) = get(&c, &s.url(&format!("/v1/sessions/{id}/files"))).await;
    assert_eq!(status, 200, "{v}");
    assert_hidden(&v, &t, "the listing");
    assert_eq!(v["files"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(places(&v).len(), 2, "{v}");
    let mut mcp = McpClient::open(&s).await;
    let (text, _) = mcp
        .call(
            "run_in_session",
            json!({"session_id": id, "code": "print('again')"}),
        )
        .await;
    assert!(text.contains("vivarium://sessions/"), "no links: {text}");
    assert!(text.contains("ok.txt"), "{text}");
    assert_hidden(&text, &t, "the MCP result");

    let deny_id = open_session(&c, &s.base, &json!({"leakage": "deny"})).await;
    let (status, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{deny_id}/execute")),
        &json!({"code": secret_files(&t)}),
    )
    .await;
    assert_eq!(status, 200, "session turns return no files: {v}");
    let (status, v) = get(&c, &s.url(&format!("/v1/sessions/{deny_id}/files"))).await;
    assert_eq!((status, error_code(&v)), (422, "output_leak"), "{v}");
    assert_hidden(&v, &t, "the listing's 422");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_error_messages_are_redacted() {
    let s = shared().await;
    let c = client();
    let t = token();
    // A caller's field name echoed by the JSON parser.
    let (status, v) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "1", t.clone(): 1}),
    )
    .await;
    assert_eq!((status, error_code(&v)), (400, "invalid_json"), "{v}");
    assert_hidden(&v, &t, "invalid_json");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:github-pat]"),
        "{v}"
    );
    // A path echoed by the file download, under a session's `deny` too.
    for leakage in ["redact", "deny"] {
        let id = open_session(&c, &s.base, &json!({"leakage": leakage})).await;
        let (status, v) = get(&c, &s.url(&format!("/v1/sessions/{id}/files/{t}.txt"))).await;
        assert_eq!((status, error_code(&v)), (404, "not_found"), "{v}");
        assert_hidden(&v, &t, "the 404");
    }
    // A guest's path echoed by a refusal: a snapshot holds paths of at most 1 KiB, and the
    // refusal names the path's first characters.
    let id = open_session(&c, &s.base, &json!({})).await;
    let deep = format!("{t}/{}", vec!["d".repeat(200); 5].join("/"));
    session_turn(
        &c,
        &s.base,
        &id,
        &format!("import os\nos.makedirs('{deep}')\nopen('{deep}/f', 'w').close()"),
    )
    .await;
    let (status, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/snapshot")),
        &json!({}),
    )
    .await;
    assert_eq!((status, error_code(&v)), (409, "snapshot_refused"), "{v}");
    assert_hidden(&v, &t, "the snapshot's refusal");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[REDACTED:github-pat]"),
        "{v}"
    );
    // Piston's error shape.
    let (status, v) = post(
        &c,
        &s.url("/api/v2/execute"),
        &json!({"language": t.clone(), "version": "*", "files": [{"content": "1"}]}),
    )
    .await;
    assert!(status >= 400, "{status} {v}");
    assert_hidden(&v, &t, "Piston's error");
}
