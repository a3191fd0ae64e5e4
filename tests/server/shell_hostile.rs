//! Hostile shell scripts (issue 49) through a real server: fork bombs written in shell,
//! endless pipelines, globbing and brace expansion to a million names, deep recursion of
//! functions, output floods, a full disk, and paths escaping the sandbox through `..`,
//! symlinks and `cd`. Each ends within its limits with a named status, and the server keeps
//! serving after all of them.

use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

/// A fresh bash execution of `script` with `limits`; its 200 result and how long it took.
async fn bash(api: &Api, script: &str, limits: Value) -> (Value, Duration) {
    let started = Instant::now();
    let v = api
        .execute(&json!({
            "code": script, "language": "bash", "template": "python", "limits": limits,
        }))
        .await
        .expect(200);
    (v, started.elapsed())
}

fn stdout(v: &Value) -> &str {
    v["stdout"].as_str().unwrap()
}

fn stderr(v: &Value) -> &str {
    v["stderr"].as_str().unwrap()
}

/// The server answers a plain Python request and a plain shell one.
async fn still_serving(api: &Api) {
    let v = api.run("print(6 * 7)").await;
    assert_eq!(v["stdout"], "42\n", "{v}");
    let (v, _) = bash(api, "echo still here | tr a-z A-Z", json!({})).await;
    assert_eq!(
        (&v["status"], stdout(&v)),
        (&json!("ok"), "STILL HERE\n"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_bombs_end_within_their_limits() {
    let api = shared().await;
    // The classic one needs `&`, which the shell refuses before running anything.
    let (v, took) = bash(&api, ":(){ :|:& };:", json!({"timeout_ms": 10_000})).await;
    assert_eq!(
        (&v["status"], &v["exit_code"]),
        (&json!("error"), &json!(2)),
        "{v}"
    );
    assert!(stderr(&v).contains('&'), "the refusal names `&`: {v}");
    assert!(took < Duration::from_secs(10), "{took:?}");

    // Without `&`: each call pipes itself into itself, recursing without end. There are no
    // processes to multiply: the recursion runs out in the interpreter, named.
    let (v, took) = bash(&api, "f(){ f|f; }; f", json!({"timeout_ms": 5_000})).await;
    assert_ne!(v["status"], "ok", "{v}");
    assert_named_end(&v);
    assert!(took < Duration::from_secs(10), "{took:?}");
    still_serving(&api).await;
}

/// A run that did not end normally says why: a host limit's status with its detail, or an
/// error whose stderr names what ran out.
fn assert_named_end(v: &Value) {
    let status = v["status"].as_str().unwrap();
    match status {
        "timeout" | "fuel_exhausted" | "memory_exceeded" | "stack_overflow" => {
            assert!(
                v["detail"].is_string(),
                "a limit's status has its detail: {v}"
            )
        }
        "error" => {
            let err = stderr(v).to_lowercase();
            assert!(
                err.contains("recursion") || err.contains("nesting") || err.contains("depth"),
                "an error that names the recursion: {v}"
            );
            assert!(v["exit_code"].as_i64().unwrap() != 0, "{v}");
        }
        other => panic!("unexpected status {other}: {v}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_pipelines_end() {
    let api = shared().await;
    // `head` stops pulling: `yes` is closed, the pipeline ends at once.
    let (v, took) = bash(
        &api,
        "yes | head -5; echo status $?",
        json!({"timeout_ms": 10_000}),
    )
    .await;
    assert_eq!(
        (&v["status"], stdout(&v)),
        (&json!("ok"), "y\ny\ny\ny\ny\nstatus 0\n"),
        "{v}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    let (v, _) = bash(
        &api,
        "yes abc | cat | grep a | head -n 3 | wc -l; seq 1000000000 | sed 2q | tail -1",
        json!({"timeout_ms": 10_000}),
    )
    .await;
    assert_eq!((&v["status"], stdout(&v)), (&json!("ok"), "3\n2\n"), "{v}");

    // A loop that never ends is stopped at its deadline.
    let (v, took) = bash(&api, "while true; do :; done", json!({"timeout_ms": 1_500})).await;
    assert_eq!(v["status"], "timeout", "{v}");
    assert!(v["detail"].as_str().unwrap().contains("1500 ms"), "{v}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    // ... or when its fuel runs out, whichever comes first.
    let (v, _) = bash(
        &api,
        "while :; do echo x > /dev/null; done",
        json!({"fuel": 2_000_000_000}),
    )
    .await;
    assert_eq!(v["status"], "fuel_exhausted", "{v}");
    still_serving(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_floods_are_cut_at_the_output_limit() {
    let api = shared().await;
    let cap: usize = 64 << 10;
    let (v, took) = bash(
        &api,
        "yes",
        json!({"timeout_ms": 2_000, "output_bytes": cap}),
    )
    .await;
    assert_eq!(v["status"], "timeout", "{v}");
    assert_eq!(v["truncated"]["stdout"], true, "{v}");
    let out = stdout(&v);
    assert!(
        out.len() <= cap && out.len() > cap / 2,
        "{} bytes kept",
        out.len()
    );
    assert!(out.starts_with("y\ny\n"), "{}", &out[..20]);
    assert!(took < Duration::from_secs(15), "{took:?}");
    // A flood on stderr too, and one that ends: the status is the script's own.
    let (v, _) = bash(
        &api,
        "seq 200000 >&2; seq 300000 | tail -1",
        json!({"timeout_ms": 30_000, "output_bytes": cap}),
    )
    .await;
    assert_eq!(
        (&v["status"], stdout(&v)),
        (&json!("ok"), "300000\n"),
        "{v}"
    );
    assert_eq!(v["truncated"]["stderr"], true, "{v}");
    assert!(stderr(&v).len() <= cap, "{}", stderr(&v).len());
    still_serving(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_a_write_error() {
    let api = shared().await;
    let disk: u64 = 1 << 20;
    let (v, took) = bash(
        &api,
        "yes > big.txt; echo status $?; ls -s big.txt > /dev/null && echo kept",
        json!({"timeout_ms": 20_000, "disk_bytes": disk}),
    )
    .await;
    assert_eq!(v["status"], "ok", "{v}");
    assert!(
        stdout(&v).starts_with("status 1\n"),
        "yes stops at a failed write: {v}"
    );
    let err = stderr(&v).to_lowercase();
    assert!(err.contains("space") || err.contains("quota"), "{v}");
    assert!(v["usage"]["disk_bytes"].as_u64().unwrap() <= disk, "{v}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    still_serving(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_names_are_bounded() {
    let api = shared().await;
    // Brace expansion to a million words, counted: what bash prints, or (a bound the
    // shell sets) an error that says so; never a silently shorter list.
    let (v, took) = bash(
        &api,
        "echo {1..100}{1..100}{1..100} | wc -wc",
        json!({"timeout_ms": 60_000}),
    )
    .await;
    if v["status"] == "ok" {
        assert_eq!(stdout(&v), "1000000 6760000\n", "{v}");
    } else {
        assert_eq!(v["status"], "error", "{v}");
        assert!(stderr(&v).contains("brace"), "{v}");
    }
    assert!(took < Duration::from_secs(60), "{took:?}");
    // A wide tree, globbed at every depth, and a pattern deeper than the tree.
    let script = "python3 -c '
import os
for a in range(40):
    for b in range(40):
        os.makedirs(f\"t/d{a}/e{b}\")
'
echo t/*/* | wc -w
echo t/*/*/ | wc -w
ls -d t/d1*/e2* | wc -l
echo t/*/*/*/*/*/*/*/*
";
    let (v, _) = bash(&api, script, json!({"timeout_ms": 60_000})).await;
    assert_eq!(
        (&v["status"], stdout(&v)),
        (&json!("ok"), "1600\n1600\n121\nt/*/*/*/*/*/*/*/*\n"),
        "{v}"
    );
    // A billion words: past any memory limit. It ends with a limit's status or an error
    // that names the bound, not a count of some of them.
    let (v, _) = bash(
        &api,
        "echo {1..1000}{1..1000}{1..1000} | wc -w",
        json!({"timeout_ms": 30_000, "memory_bytes": 64 << 20}),
    )
    .await;
    match v["status"].as_str().unwrap() {
        "memory_exceeded" | "timeout" | "fuel_exhausted" => assert!(v["detail"].is_string()),
        "error" => assert!(!stderr(&v).is_empty(), "{v}"),
        // As bash's pipeline would end were echo refused: echo fails naming the bound, and
        // `wc -w` counts none of the words (the pipeline's status is wc's).
        "ok" => {
            assert!(stderr(&v).contains("too many words"), "{v}");
            assert_eq!(stdout(&v), "0\n", "{v}");
        }
        _ => panic!("a billion words expanded? {v}"),
    }
    still_serving(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_of_functions_is_a_named_error() {
    let api = shared().await;
    let (v, took) = bash(
        &api,
        "f() { f; }; f; echo after $?",
        json!({"timeout_ms": 20_000}),
    )
    .await;
    assert_named_end(&v);
    assert!(took < Duration::from_secs(25), "{took:?}");
    // Recursion to a modest depth works, as in bash.
    let (v, _) = bash(
        &api,
        "down() { if [ $1 -gt 0 ]; then down $(( $1 - 1 )); else echo bottom; fi; }; down 100",
        json!({}),
    )
    .await;
    assert_eq!(
        (&v["status"], stdout(&v)),
        (&json!("ok"), "bottom\n"),
        "{v}"
    );
    still_serving(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_stay_inside_the_sandbox() {
    let api = shared().await;
    let script = r#"
echo secret > mine.txt
mkdir -p a/b && cd a/b && cd /../../..; pwd
cd /a/b && cd ../../../..; pwd
cd /
ls /
cat ../../../etc/passwd; echo "cat $?"
cat /etc/passwd; echo "abs $?"
cat /usr/bin/bash > /dev/null; echo "bin $?"
ls /proc /sys /root; echo "ls $?"
ln -s /etc/passwd pw; cat pw; echo "symlink $?"
ln -s ../../../../../etc up; ls up/; echo "up $?"
cd up; echo "cd $?"; pwd
realpath ../../..
find / -name passwd | wc -l
"#;
    let (v, _) = bash(&api, script, json!({"timeout_ms": 20_000})).await;
    assert_eq!(v["status"], "ok", "{v}");
    let out = stdout(&v);
    let lines: Vec<&str> = out.lines().collect();
    // `..` above the root stays at the root, as on any system.
    assert_eq!(&lines[..2], &["/", "/"], "{v}");
    // `/` is the sandbox's own directory: the file just written, none of the host's.
    assert!(lines.contains(&"mine.txt"), "{v}");
    for host in ["etc", "proc", "sys", "root", "home", "boot", "var", "dev"] {
        assert!(
            !lines.contains(&host),
            "`ls /` shows the host's {host}: {v}"
        );
    }
    for (what, want) in [("cat", "cat 1"), ("abs", "abs 1"), ("bin", "bin 1")] {
        assert!(lines.contains(&want), "{what}: {v}");
    }
    assert!(lines.contains(&"ls 2"), "{v}");
    // Links out of the sandbox are refused when made, and cannot be entered.
    assert!(lines.contains(&"symlink 1"), "{v}");
    assert!(lines.contains(&"up 2"), "{v}");
    assert!(lines.contains(&"cd 1"), "{v}");
    assert_eq!(&lines[lines.len() - 3..], &["/", "/", "0"], "{v}");
    assert!(!out.contains("root:"), "the host's /etc/passwd leaked: {v}");
    still_serving(&api).await;
}
