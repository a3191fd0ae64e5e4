//! Worker processes, through a real server on 127.0.0.1: a worker that dies (SIGKILL, a
//! segfault, its heap limit, a forbidden system call) loses only its own runs, which get 503
//! `worker_lost`; the others finish; a replacement serves within a second; no scratch
//! directory is left; the metrics count it. And each jail layer, probed from inside a
//! worker (the debug-only fault hook of test builds).

use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

async fn workers(c: &reqwest::Client, s: &TestServer) -> Vec<Value> {
    let (code, v) = get(c, &s.url("/v1/debug/workers")).await;
    assert_eq!(code, 200, "{v}");
    v["workers"].as_array().unwrap().clone()
}

/// The pid running exactly one job, other than `not`.
async fn busy_pid(c: &reqwest::Client, s: &TestServer, not: Option<u64>) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for w in workers(c, s).await {
            let pid = w["pid"].as_u64().unwrap();
            if w["in_flight"] == 1 && Some(pid) != not {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "no worker took the run");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn server(tag: &str) -> TestServer {
    start(tag, |a| {
        a.workers = Some(2);
        a.debug_panic_route = true;
    })
    .await
}

fn kill(pid: u64, signal: i32) {
    // SAFETY: kill with integers; the pid is a worker of this test's server.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_worker_loses_only_its_run_and_is_replaced() {
    let s = server("workers-kill").await;
    let c = client();
    let ready = get(&c, &s.url("/readyz")).await.1;
    assert_eq!(ready["workers"]["alive"], 2, "{ready}");
    assert_eq!(ready["workers"]["configured"], 2, "{ready}");

    let long = {
        let (c, url) = (c.clone(), s.url("/v1/execute"));
        tokio::spawn(async move {
            let r = c
                .post(url)
                .json(&json!({"code": "import time\ntime.sleep(6)\nprint('a')"}))
                .send()
                .await
                .unwrap();
            let retry = r.headers().get("retry-after").cloned();
            (r.status().as_u16(), retry, r.json::<Value>().await.unwrap())
        })
    };
    let victim = busy_pid(&c, &s, None).await;
    let other = {
        let (c, url) = (c.clone(), s.url("/v1/execute"));
        tokio::spawn(async move {
            post(
                &c,
                &url,
                &json!({"code": "import time\ntime.sleep(1.5)\nprint('b')"}),
            )
            .await
        })
    };
    busy_pid(&c, &s, Some(victim)).await;

    kill(victim, libc::SIGKILL);
    let killed = Instant::now();
    let replaced = {
        let (c, s) = (c.clone(), s.url(""));
        tokio::spawn(async move {
            // Polled while the runs settle, so the time is the replacement's own.
            let started = Instant::now();
            loop {
                let (_, v) = get(&c, &format!("{s}/v1/debug/workers")).await;
                let w = v["workers"].as_array().cloned().unwrap_or_default();
                if w.len() == 2 && w.iter().all(|w| w["pid"].as_u64() != Some(victim)) {
                    return started.elapsed();
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "no replacement"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let (code, retry, body) = long.await.unwrap();
    assert_eq!(code, 503, "{body}");
    assert_eq!(error_code(&body), "worker_lost", "{body}");
    assert_eq!(retry.unwrap(), "1");
    let (code, body) = other.await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["stdout"], "b\n", "{body}");

    let back = replaced.await.unwrap();
    eprintln!(
        "replacement ready {back:?} after the kill ({:?} since)",
        killed.elapsed()
    );
    assert!(back < Duration::from_secs(1), "replacement took {back:?}");
    // Both workers serve: two runs at once, each on its own.
    let url = s.url("/v1/execute");
    let (one, two) = (
        json!({"code": "import time; time.sleep(0.3); print(1)"}),
        json!({"code": "import time; time.sleep(0.3); print(2)"}),
    );
    let (a, b) = tokio::join!(post(&c, &url, &one), post(&c, &url, &two));
    assert_eq!((a.0, b.0), (200, 200), "{a:?} {b:?}");

    let m = metrics_at(&c, &s.base).await;
    assert_eq!(
        m.get("vivarium_workers_lost_total{signal=\"SIGKILL\"}"),
        Some(&1.0),
        "{m:?}"
    );
    assert_eq!(m.get("vivarium_workers_restarted_total"), Some(&1.0));
    assert_eq!(m.get("vivarium_workers"), Some(&2.0));
    assert_eq!(
        s.settled_sandbox_dirs().await,
        0,
        "a scratch directory was left"
    );
    assert!(
        !s.scratch.join(victim.to_string()).exists(),
        "the dead worker's scratch root is still there"
    );
    s.stop().await;
}

/// Asks for `fault` and checks the worker died of `signal`, then that the pool recovers.
async fn dies_of(s: &TestServer, fault: &str, signal: &str) {
    let c = client();
    let before = workers(&c, s).await;
    let (code, body) = post(
        &c,
        &s.url("/v1/debug/worker-fault"),
        &json!({"fault": fault}),
    )
    .await;
    assert_eq!(code, 503, "{fault}: {body}");
    assert_eq!(error_code(&body), "worker_lost", "{body}");
    let pids: Vec<u64> = before.iter().map(|w| w["pid"].as_u64().unwrap()).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now: Vec<u64> = workers(&c, s)
            .await
            .iter()
            .map(|w| w["pid"].as_u64().unwrap())
            .collect();
        if now.len() == 2 && now.iter().any(|p| !pids.contains(p)) {
            break;
        }
        assert!(Instant::now() < deadline, "no replacement after {fault}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let m = metrics_at(&c, &s.base).await;
    let key = format!("vivarium_workers_lost_total{{signal=\"{signal}\"}}");
    assert!(m.get(&key).is_some_and(|n| *n >= 1.0), "{key} in {m:?}");
    let (code, body) = post(
        &c,
        &s.url("/v1/execute"),
        &json!({"code": "print('after')"}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["stdout"], "after\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_that_segfaults_or_breaks_its_limits_is_replaced() {
    let s = start("workers-faults", |a| {
        a.workers = Some(2);
        a.debug_panic_route = true;
        // Room for the engine and a few sandboxes, not for a heap that grows without end.
        a.worker_heap_bytes = Some(6 << 30);
    })
    .await;
    dies_of(&s, "segfault", "SIGSEGV").await;
    // Past its heap limit an allocation fails, and the worker aborts.
    dies_of(&s, "exhaust", "SIGABRT").await;
    // A system call the seccomp allowlist leaves out kills the worker.
    dies_of(&s, "forbidden_syscall", "SIGSYS").await;
    assert_eq!(s.settled_sandbox_dirs().await, 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_that_breaks_the_protocol_is_ended() {
    let s = server("workers-protocol").await;
    // It answers a job nobody sent: the supervisor kills it there and then (SIGKILL), its run
    // is lost, and it is replaced like any dead worker.
    dies_of(&s, "break_protocol", "SIGKILL").await;
    assert_eq!(s.settled_sandbox_dirs().await, 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_jail_layer_holds_inside_a_worker() {
    let s = server("workers-jail").await;
    let c = client();
    let ready = get(&c, &s.url("/readyz")).await.1;
    let jail = &ready["workers"]["jail"];
    for layer in [
        "landlock",
        "seccomp",
        "no_new_privs",
        "rlimits",
        "network",
        "capabilities",
    ] {
        assert_eq!(jail[layer], "full", "{layer}: {ready}");
    }
    let (code, probe) = post(
        &c,
        &s.url("/v1/debug/worker-fault"),
        &json!({"fault": "probe"}),
    )
    .await;
    assert_eq!(code, 200, "{probe}");
    // Landlock: no host file outside its roots, read or written; the runtime is readable.
    let denied = |v: &Value| {
        v["Err"]
            .as_str()
            .is_some_and(|e| e.contains("ermission denied"))
    };
    assert!(denied(&probe["read_outside"]), "{probe}");
    assert!(denied(&probe["write_outside"]), "{probe}");
    assert!(probe["read_runtime"]["Ok"].as_u64().unwrap() > 0, "{probe}");
    // seccomp: no socket at all (EPERM, the worker lives on).
    assert!(
        probe["inet_socket"]["Err"]
            .as_str()
            .unwrap()
            .contains("not permitted"),
        "{probe}"
    );
    // A network namespace of its own, not this process's (the supervisor's).
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let theirs = probe["netns"]["Ok"]
        .as_str()
        .expect("the worker reads its namespace");
    assert!(theirs.starts_with("net:["), "{probe}");
    assert_ne!(theirs, ours.display().to_string(), "{probe}");
    // No capability, even for a worker started as root.
    assert_eq!(probe["capabilities"]["Ok"], "0000000000000000", "{probe}");
    // The worker is still there.
    assert_eq!(workers(&c, &s).await.len(), 2);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_on_a_lost_worker_end_or_come_back() {
    let s = server("workers-sessions").await;
    let c = client();
    let plain = open_session(&c, &s.base, &json!({})).await;
    let durable = open_session(&c, &s.base, &json!({"durable": true})).await;
    for id in [&plain, &durable] {
        let v = session_turn(&c, &s.base, id, "x = 7").await;
        assert_eq!(v["status"], "ok", "{v}");
    }
    // The durable session's own snapshot of that turn is written in the background.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Kill every worker: both sessions lose their interpreters.
    let before: Vec<u64> = workers(&c, &s)
        .await
        .iter()
        .map(|w| w["pid"].as_u64().unwrap())
        .collect();
    for pid in &before {
        kill(*pid, libc::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, v) = get(&c, &s.url(&format!("/v1/sessions/{plain}"))).await;
        if v["state"] == "ended" {
            assert_eq!(v["ended"]["reason"], "worker_lost", "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "the session never ended: {v}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Both replaced (a request sent to a worker in the moment it dies is lost with it).
    let deadline = Instant::now() + Duration::from_secs(30);
    while workers(&c, &s)
        .await
        .iter()
        .any(|w| before.contains(&w["pid"].as_u64().unwrap()))
        || workers(&c, &s).await.len() < 2
    {
        assert!(Instant::now() < deadline, "the workers were not replaced");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (code, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{plain}/execute")),
        &json!({"code": "x"}),
    )
    .await;
    assert_eq!(code, 409, "{v}");
    assert_eq!(error_code(&v), "session_ended");
    // The durable one comes back from its own snapshot, on a replacement worker.
    let v = session_turn(&c, &s.base, &durable, "x * 6").await;
    assert_eq!(v["result"], "42", "{v}");
    let m = metrics_at(&c, &s.base).await;
    assert_eq!(
        m.get("vivarium_sessions_closed_total{reason=\"worker_lost\"}"),
        Some(&1.0),
        "{m:?}"
    );
    s.stop().await;
}
