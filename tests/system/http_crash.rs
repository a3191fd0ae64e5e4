//! The real `vivarium serve` binary: SIGKILL in the middle of runs, then a restart that
//! removes what the dead process left and serves again; SIGTERM's graceful shutdown.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::json;

/// Scratch roots under the base (its shared `.create.lock` is not one).
fn roots(scratch: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(scratch)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".create.lock")
        .collect();
    v.sort();
    v
}

/// The parent of process `pid`, from `/proc`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may hold spaces, so read after its `)`.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_run_then_restart_leaves_no_temp_dir() {
    let scratch = scratch_dir("crash");
    let mut p = spawn_server(&scratch, None, &[]);
    wait_ready_at(&p.base).await;
    let c = client();
    // A live session with a file, and executions in flight.
    let (_, v) = post(&c, &format!("{}/v1/sessions", p.base), &json!({})).await;
    let id = v["id"].as_str().unwrap().to_string();
    c.put(format!("{}/v1/sessions/{id}/files/keep.txt", p.base))
        .body("x")
        .send()
        .await
        .unwrap();
    for _ in 0..2 {
        let c = c.clone();
        let url = format!("{}/v1/execute", p.base);
        tokio::spawn(async move {
            let _ = c
                .post(url)
                .json(&json!({"code": "import time\ntime.sleep(30)"}))
                .send()
                .await;
        });
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while count_sandbox_dirs(&scratch) < 3 {
        assert!(Instant::now() < deadline, "runs never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let dead_pid = p.child.id();
    // SAFETY: kill(2) takes a pid and a signal number and touches no memory of ours.
    unsafe { libc::kill(dead_pid as i32, libc::SIGKILL) };
    p.child.wait().unwrap();
    assert!(
        count_sandbox_dirs(&scratch) >= 3,
        "SIGKILL leaves the dirs behind"
    );

    // The restart removes them and serves.
    let mut p2 = spawn_server(&scratch, None, &[]);
    wait_ready_at(&p2.base).await;
    // What is left is the new server's own root and its workers' (its children), none of
    // the dead ones'.
    let server = p2.child.id();
    let left = roots(&scratch);
    assert!(left.contains(&server.to_string()), "{left:?}");
    for root in &left {
        let pid: u32 = root.parse().unwrap();
        assert!(
            pid == server || parent_of(pid) == Some(server),
            "a dead process's root {root} is left: {left:?}"
        );
    }
    assert_eq!(count_sandbox_dirs(&scratch), 0);
    let (st, v) = post(
        &c,
        &format!("{}/v1/execute", p2.base),
        &json!({"code": "print('back')"}),
    )
    .await;
    assert_eq!((st, v["stdout"].as_str()), (200, Some("back\n")));

    // SIGTERM: graceful, and nothing survives.
    // SAFETY: kill(2) takes a pid and a signal number and touches no memory of ours.
    unsafe { libc::kill(p2.child.id() as i32, libc::SIGTERM) };
    let status = p2.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(roots(&scratch).is_empty(), "left: {:?}", roots(&scratch));
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(scratch.with_extension("audit.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_runs_finish_then_cancels_them() {
    let scratch = scratch_dir("term");
    let mut p = spawn_server(&scratch, None, &["--shutdown-grace-ms", "1500"]);
    wait_ready_at(&p.base).await;
    let c = client();
    let (_, v) = post(&c, &format!("{}/v1/sessions", p.base), &json!({})).await;
    assert!(v["id"].is_string());
    let short = {
        let c = c.clone();
        let url = format!("{}/v1/execute", p.base);
        tokio::spawn(async move {
            post(
                &c,
                &url,
                &json!({"code": "import time\ntime.sleep(0.5)\nprint('finished')"}),
            )
            .await
        })
    };
    let long = {
        let c = c.clone();
        let url = format!("{}/v1/execute", p.base);
        tokio::spawn(async move { post(&c, &url, &json!({"code": "while True: pass"})).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    // SAFETY: kill(2) takes a pid and a signal number and touches no memory of ours.
    unsafe { libc::kill(p.child.id() as i32, libc::SIGTERM) };
    let (st, v) = short.await.unwrap();
    assert_eq!(
        (st, v["stdout"].as_str()),
        (200, Some("finished\n")),
        "in-flight work finishes"
    );
    let (st, v) = long.await.unwrap();
    assert_eq!((st, v["status"].as_str()), (200, Some("cancelled")), "{v}");
    let status = p.child.wait().unwrap();
    assert!(status.success());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(roots(&scratch).is_empty(), "left: {:?}", roots(&scratch));
    let audit = std::fs::read_to_string(scratch.with_extension("audit.jsonl")).unwrap();
    assert!(audit.lines().last().unwrap().contains("\"shutdown\""));
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(scratch.with_extension("audit.jsonl"));
}
