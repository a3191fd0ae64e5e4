//! Density, over real HTTP against the real `vivarium serve` binary: sandboxes are charged for
//! the memory they use, not their caps; growth past the host's budget fails in the guest
//! (`MemoryError`, `ENOSPC`) and the result says it was the host's budget, while every other
//! session goes on; the coldest idle sessions hibernate to make room, and a hibernated
//! session survives a restart (even `kill -9`) when the snapshot store does.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

/// The server process, killed when the test ends, passed or failed (a panicking test must
/// not leave a server behind).
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real server on 127.0.0.1 with `flags`, its snapshots in `snaps`, ready.
async fn serve(scratch: &Path, snaps: &Path, flags: &[&str]) -> (Server, String) {
    let Proc { child, base } = spawn_server(scratch, Some(snaps), flags);
    let child = Server(child);
    wait_ready_at(&base).await;
    (child, base)
}

/// The server process's resident set, in bytes.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb << 10
}

async fn open(c: &reqwest::Client, base: &str, body: Value) -> String {
    open_session(c, base, &body).await
}

async fn turn(c: &reqwest::Client, base: &str, id: &str, code: &str) -> Value {
    let (st, v) = post(
        c,
        &format!("{base}/v1/sessions/{id}/execute"),
        &json!({ "code": code }),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    v
}

fn cleanup(scratch: &Path, snaps: &Path) {
    let _ = std::fs::remove_dir_all(scratch);
    let _ = std::fs::remove_dir_all(snaps);
    let _ = std::fs::remove_file(scratch.with_extension("audit.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_more_sessions_than_budget_over_cap_open_answer_and_keep_their_state() {
    // 1.5 GiB over 512 MiB caps: the old rule (every session charged its cap) fit two.
    // Four may be resident; the rest hibernate, coldest first, and wake when asked.
    let scratch = scratch_dir("density-many");
    let snaps = scratch.with_extension("snaps");
    let (child, base) = serve(
        &scratch,
        &snaps,
        &["--memory-budget-bytes", "1610612736", "--max-sessions", "4"],
    )
    .await;
    let c = client();
    let mut ids = Vec::new();
    for i in 0..12 {
        let id = open(&c, &base, json!({"template": "python"})).await;
        let v = turn(&c, &base, &id, &format!("x = {i} * 7\nx")).await;
        assert_eq!(v["result"], (i * 7).to_string(), "{v}");
        ids.push(id);
    }
    let m = metrics_at(&c, &base).await;
    assert!(m["vivarium_live_sessions"] <= 4.0, "{m:?}");
    assert_eq!(
        m["vivarium_live_sessions"] + m["vivarium_hibernated_sessions"],
        12.0
    );
    assert!(m["vivarium_hibernated_bytes"] > 0.0);
    let charged = m["vivarium_memory_charged_bytes"];
    assert!(charged > 0.0 && charged <= m["vivarium_memory_budget_bytes"]);
    // Every one answers with its own state, the hibernated ones woken on the way.
    for (i, id) in ids.iter().enumerate() {
        let v = turn(&c, &base, id, "x + 1").await;
        assert_eq!(v["status"], "ok", "{v}");
        assert_eq!(v["result"], (i * 7 + 1).to_string(), "{v}");
        assert_eq!(v["turn"], 2);
    }
    let m = metrics_at(&c, &base).await;
    assert!(m[r#"vivarium_session_events_total{event="hibernate"}"#] >= 8.0);
    assert!(m[r#"vivarium_session_events_total{event="wake"}"#] >= 8.0);
    assert!(m["vivarium_session_wake_seconds_count"] >= 8.0);
    // A hibernated one is still there (without waking it), and closes like any other.
    let mut cold = None;
    for id in &ids {
        let (_, v) = get(&c, &format!("{base}/v1/sessions/{id}")).await;
        if v["resident"] == false {
            assert_eq!(v["turns"], 2, "{v}");
            cold = Some(id.clone());
            break;
        }
    }
    let cold = cold.expect("some session hibernated");
    // Two hibernated sessions, three requests at each at once: each comes back once, and
    // every request is answered (a turn, or 409 while another turn of it runs).
    let mut asleep = Vec::new();
    for id in &ids {
        let (_, v) = get(&c, &format!("{base}/v1/sessions/{id}")).await;
        if v["resident"] == false && *id != cold {
            asleep.push(id.clone());
        }
    }
    assert!(asleep.len() >= 2, "{asleep:?}");
    let wakes = |m: &std::collections::HashMap<String, f64>| m[r#"vivarium_session_events_total{event="wake"}"#];
    let before = wakes(&metrics_at(&c, &base).await);
    let mut tasks = Vec::new();
    for id in asleep.iter().take(2) {
        for _ in 0..3 {
            let (c, url) = (c.clone(), format!("{base}/v1/sessions/{id}/execute"));
            tasks.push(tokio::spawn(async move {
                post(&c, &url, &json!({"code": "x"})).await
            }));
        }
    }
    let mut ran = 0;
    for t in tasks {
        let (st, v) = t.await.unwrap();
        match st {
            200 => ran += 1,
            409 => assert_eq!(error_code(&v), "session_busy", "{v}"),
            _ => panic!("{st} {v}"),
        }
    }
    assert!(ran >= 2);
    assert_eq!(wakes(&metrics_at(&c, &base).await) - before, 2.0);
    let r = c
        .delete(format!("{base}/v1/sessions/{cold}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let (st, _) = get(&c, &format!("{base}/v1/sessions/{cold}")).await;
    assert_eq!(st, 404);
    drop(child);
    cleanup(&scratch, &snaps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn growth_past_the_hosts_budget_is_a_memory_error_that_names_it_and_harms_no_one() {
    // 700 MiB for everything; each session may grow to 512 MiB on its own.
    let scratch = scratch_dir("density-oom");
    let snaps = scratch.with_extension("snaps");
    let budget: u64 = 700 << 20;
    let (child, base) = serve(
        &scratch,
        &snaps,
        &[
            "--memory-budget-bytes",
            &budget.to_string(),
            "--hibernate-after-secs",
            "0",
        ],
    )
    .await;
    let c = client();
    let a = open(&c, &base, json!({"template": "python"})).await;
    let b = open(&c, &base, json!({"template": "python"})).await;
    // A takes 150 MiB (touched, so it is really resident), and as much again for the copy
    // its rollback checkpoint keeps.
    turn(
        &c,
        &base,
        &a,
        "x = bytearray(150 << 20)\nx[::4096] = b'1' * len(x[::4096])",
    )
    .await;
    // B asks for 450 MiB: under its own cap, past what the host has left.
    let v = turn(&c, &base, &b, "y = bytearray(450 << 20)").await;
    assert_eq!(v["status"], "host_memory_exceeded", "{v}");
    assert_eq!(v["error"]["type"], "MemoryError", "{v}");
    assert!(
        v["detail"].as_str().unwrap().contains("memory budget"),
        "{v}"
    );
    // B caught it the way Python code does and goes on; A kept everything.
    let v = turn(
        &c,
        &base,
        &b,
        "try:\n    y = bytearray(450 << 20)\nexcept MemoryError:\n    y = b'fallback'\nlen(y)",
    )
    .await;
    assert_eq!(v["result"], "8", "{v}");
    let v = turn(&c, &base, &a, "len(x), x[4096]").await;
    assert_eq!(v["result"], format!("({}, 49)", 150u64 << 20), "{v}");
    // A fresh execution still runs beside them, and the process stayed within the budget.
    let (st, v) = post(
        &c,
        &format!("{base}/v1/execute"),
        &json!({"code": "print(6 * 7)", "template": "python"}),
    )
    .await;
    assert_eq!((st, v["stdout"].as_str()), (200, Some("42\n")), "{v}");
    let rss = rss_bytes(child.0.id());
    assert!(rss < budget, "server RSS {rss} past the budget {budget}");
    let m = metrics_at(&c, &base).await;
    assert!(m["vivarium_memory_charged_bytes"] <= budget as f64);
    drop(child);
    cleanup(&scratch, &snaps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_tmpfs_a_write_past_the_hosts_budget_is_enospc_that_names_it() {
    let shm = Path::new("/dev/shm");
    assert!(
        vivarium::testing::is_memory_backed(shm),
        "this test needs /dev/shm as tmpfs (as on the CI machine)"
    );
    let scratch = shm.join(format!("vivarium-test-density-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let snaps = scratch_dir("density-disk").with_extension("snaps");
    let budget: u64 = 700 << 20;
    let (child, base) = serve(
        &scratch,
        &snaps,
        &[
            "--memory-budget-bytes",
            &budget.to_string(),
            "--hibernate-after-secs",
            "0",
            "--max-body-bytes",
            "209715200",
        ],
    )
    .await;
    let c = client();
    let a = open(&c, &base, json!({"template": "python"})).await;
    let b = open(
        &c,
        &base,
        json!({"template": "python", "limits": {"disk_bytes": 500u64 << 20}}),
    )
    .await;
    turn(&c, &base, &a, "x = bytearray(150 << 20)").await;
    // B's own quota (500 MiB) allows the file; the host's memory does not.
    let write = "with open('big.bin', 'wb') as f:\n    for _ in range(400):\n        f.write(b'z' * (1 << 20))";
    let v = turn(&c, &base, &b, write).await;
    assert_eq!(v["status"], "error", "{v}");
    assert_eq!(v["error"]["type"], "OSError", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("No space left"),
        "{v}"
    );
    assert!(
        v["detail"].as_str().unwrap().contains("memory budget"),
        "{v}"
    );
    // An upload meets the same budget: 429, nothing written.
    let r = c
        .put(format!("{base}/v1/sessions/{b}/files/more.bin"))
        .body(vec![b'u'; 100 << 20])
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    assert_eq!((st, error_code(&v)), (429, "overloaded"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("memory budget"),
        "{v}"
    );
    // Deleting the file gives the room back to the budget; A is untouched.
    let full = metrics_at(&c, &base).await["vivarium_memory_charged_bytes"];
    let v = turn(
        &c,
        &base,
        &b,
        "import os\nos.remove('big.bin')\nopen('s.txt', 'w').write('ok')",
    )
    .await;
    assert_eq!(v["status"], "ok", "{v}");
    let freed = full - metrics_at(&c, &base).await["vivarium_memory_charged_bytes"];
    assert!(
        freed > (200u64 << 20) as f64,
        "only {freed} bytes came back"
    );
    let v = turn(&c, &base, &a, "len(x)").await;
    assert_eq!(v["result"], (150u64 << 20).to_string(), "{v}");
    drop(child);
    cleanup(&scratch, &snaps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernated_session_survives_kill_9_and_wakes_on_the_next_server() {
    let scratch = scratch_dir("density-restart");
    let snaps = scratch.with_extension("snaps");
    let flags = ["--hibernate-after-secs", "1"];
    let (child, base) = serve(&scratch, &snaps, &flags).await;
    let c = client();
    let id = open(&c, &base, json!({"template": "python"})).await;
    turn(
        &c,
        &base,
        &id,
        "import json\nstate = {'rows': list(range(5))}\nopen('kept.json', 'w').write(json.dumps(state))",
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = get(&c, &format!("{base}/v1/sessions/{id}")).await;
        if v["resident"] == false {
            assert_eq!(v["turns"], 1);
            break;
        }
        assert!(Instant::now() < deadline, "never hibernated: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let m = metrics_at(&c, &base).await;
    assert_eq!(
        m[r#"vivarium_session_events_total{event="hibernate"}"#],
        1.0
    );
    assert_eq!(m["vivarium_live_sessions"], 0.0);
    // No goodbye (SIGKILL): the hibernated session is already in the store.
    drop(child);
    let (second, base) = serve(&scratch, &snaps, &flags).await;
    let v = turn(
        &c,
        &base,
        &id,
        "sum(state['rows']), json.load(open('kept.json'))['rows'][-1]",
    )
    .await;
    assert_eq!(v["result"], "(10, 4)", "{v}");
    assert_eq!(v["turn"], 2);
    drop(second);
    cleanup(&scratch, &snaps);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_resident_place_can_hold_a_session() {
    // 40 resident places, one execution slot: the engine's pool must hold 40 sessions, each
    // with its linear memory and its store's GC heap (once it ran out at half).
    let scratch = scratch_dir("density-pool");
    let snaps = scratch.with_extension("snaps");
    let (child, base) = serve(
        &scratch,
        &snaps,
        &["--max-sessions", "40", "--max-concurrency", "1"],
    )
    .await;
    let c = client();
    for i in 0..40 {
        let id = open(&c, &base, json!({"template": "python"})).await;
        let v = turn(&c, &base, &id, &format!("{i} + 1")).await;
        assert_eq!(v["result"], (i + 1).to_string(), "{v}");
    }
    let m = metrics_at(&c, &base).await;
    assert_eq!(
        m["vivarium_live_sessions"] + m["vivarium_hibernated_sessions"],
        40.0
    );
    assert!(m["vivarium_pooled_instances"] >= m["vivarium_live_sessions"]);
    drop(child);
    cleanup(&scratch, &snaps);
}
