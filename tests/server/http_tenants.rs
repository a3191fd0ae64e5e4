//! Tenants against each other: one key's load, sessions and snapshots never lock another
//! tenant out, and every quota is named when it refuses. Each test runs a real server on
//! 127.0.0.1 with a keys file of two or more tenants, driven over HTTP.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-key-0123456789abcdef";
const BOB: &str = "bob-key-0123456789abcdef";
const ACME_CI: &str = "acme-ci-key-0123456789abcdef";
const ACME_BOT: &str = "acme-bot-key-0123456789abcdef";

/// A keys file: alice and bob each their own tenant, acme's two keys one tenant with a
/// quota of its own.
fn keys_file(tag: &str) -> PathBuf {
    let dir = scratch_dir(tag);
    let path = dir.join("keys.txt");
    std::fs::write(
        &path,
        format!(
            "# two tenants of one key each\nalice:{ALICE}\nbob:{BOB}\n\
             tenant acme runs=3\nci@acme:{ACME_CI}\nbot@acme:{ACME_BOT}\n"
        ),
    )
    .unwrap();
    path
}

async fn usage(c: &reqwest::Client, s: &TestServer) -> Value {
    let (status, v) = get(c, &s.url("/v1/usage")).await;
    assert_eq!(status, 200, "{v}");
    v
}

fn used(usage: &Value, quota: &str) -> (u64, Option<u64>) {
    let q = usage["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["quota"] == quota)
        .unwrap_or_else(|| panic!("no {quota} in {usage}"));
    (q["used"].as_u64().unwrap(), q["limit"].as_u64())
}

#[tokio::test]
async fn keys_of_one_tenant_share_its_quotas_and_usage_names_each() {
    let keys = keys_file("tenants-usage");
    let s = start("tenants-usage", move |a| a.api_keys_file = Some(keys)).await;
    let (ci, bot, alice) = (
        client_with_key(ACME_CI),
        client_with_key(ACME_BOT),
        client_with_key(ALICE),
    );
    let u = usage(&ci, &s).await;
    assert_eq!(u["tenant"], "acme");
    assert_eq!(u["key_id"], "ci");
    assert_eq!(used(&u, "runs"), (0, Some(3)));
    let u = usage(&alice, &s).await;
    assert_eq!(u["tenant"], "alice");
    for q in [
        "runs",
        "resident_sessions",
        "hibernated_sessions",
        "snapshot_bytes",
        "kernel_sockets",
        "mcp_sessions",
        "package_jobs",
        "memory_bytes",
    ] {
        used(&u, q);
    }

    // acme's two keys hold its three runs together: a fourth is refused, naming the quota;
    // alice is not affected.
    let slow = json!({"code": "import time\ntime.sleep(2)", "template": "python"});
    let mut runs = Vec::new();
    for c in [&ci, &bot, &ci] {
        let (c, url, body) = (c.clone(), s.url("/v1/execute"), slow.clone());
        runs.push(tokio::spawn(async move { post(&c, &url, &body).await }));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while used(&usage(&bot, &s).await, "runs").0 < 3 {
        assert!(Instant::now() < deadline, "acme's runs never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, v) = post(&bot, &s.url("/v1/execute"), &slow).await;
    assert_eq!(status, 429, "{v}");
    assert_eq!(error_code(&v), "quota_exceeded");
    assert_eq!(v["quota"], json!({"quota": "runs", "used": 3, "limit": 3}));
    assert!(
        v["error"]["message"].as_str().unwrap().contains("acme"),
        "{v}"
    );
    let (status, v) = post(
        &alice,
        &s.url("/v1/execute"),
        &json!({"code": "print(1)", "template": "python"}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    for r in runs {
        let (status, v) = r.await.unwrap();
        assert_eq!(status, 200, "{v}");
    }
    assert_eq!(used(&usage(&ci, &s).await, "runs").0, 0);
    let m = metrics_at(&client(), &s.base).await;
    assert_eq!(
        m.get("vivarium_tenant_quota_limit{tenant=\"acme\",quota=\"runs\"}"),
        Some(&3.0)
    );
    assert!(m.contains_key("vivarium_rejections_total{reason=\"tenant_quota\"}"));
    s.stop().await;
}

#[tokio::test]
async fn another_tenants_run_is_not_queued_behind_a_backlog() {
    let keys = keys_file("tenants-fair");
    let s = start("tenants-fair", move |a| {
        a.api_keys_file = Some(keys);
        a.max_concurrency = Some(2);
    })
    .await;
    let (alice, bob) = (client_with_key(ALICE), client_with_key(BOB));
    // Alice keeps four times the slots busy with CPU-bound runs.
    let busy = json!({
        "code": "import time\nt = time.time()\nwhile time.time() - t < 2.5: pass",
        "template": "python",
        "limits": {"timeout_ms": 60000},
    });
    let started = Instant::now();
    let mut backlog = Vec::new();
    for _ in 0..8 {
        let (c, url, body) = (alice.clone(), s.url("/v1/execute"), busy.clone());
        backlog.push(tokio::spawn(async move {
            let (status, v) = post(&c, &url, &body).await;
            (status, v, started.elapsed())
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while used(&usage(&alice, &s).await, "runs").0 < 8 {
        assert!(Instant::now() < deadline, "alice's runs never queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Bob's hello world starts at once, beside them: it is done before any of hers.
    let (status, v) = post(
        &bob,
        &s.url("/v1/execute"),
        &json!({"code": "print('hello')", "template": "python"}),
    )
    .await;
    let bob_done = started.elapsed();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["stdout"], "hello\n");
    let mut first_of_hers = Duration::MAX;
    for r in backlog {
        let (status, v, at) = r.await.unwrap();
        assert_eq!(status, 200, "{v}");
        first_of_hers = first_of_hers.min(at);
    }
    assert!(
        bob_done < first_of_hers,
        "bob's hello world ({bob_done:?}) waited behind alice's backlog (her first done at {first_of_hers:?})"
    );
    s.stop().await;
}

/// Opens a python session for `c` that keeps a file open between turns; the status and body.
async fn open_holding_a_file(c: &reqwest::Client, s: &TestServer) -> (u16, Value) {
    let (status, v) = post(c, &s.url("/v1/sessions"), &json!({"template": "python"})).await;
    if status != 201 {
        return (status, v);
    }
    let id = v["id"].as_str().unwrap().to_string();
    let t = session_turn(
        c,
        &s.base,
        &id,
        "held = open('held.txt', 'w')\nheld.write('x')",
    )
    .await;
    assert_eq!(t["status"], "ok", "{t}");
    (status, v)
}

#[tokio::test]
async fn one_tenant_cannot_hold_every_resident_place() {
    let keys = keys_file("tenants-lockout");
    let s = start("tenants-lockout", move |a| {
        a.api_keys_file = Some(keys);
        a.max_sessions = 4;
        a.hibernate_after_secs = 0;
    })
    .await;
    let (alice, bob) = (client_with_key(ALICE), client_with_key(BOB));
    // Alice opens as many as she can; her share is half the places.
    let mut opened = 0;
    for _ in 0..6 {
        let (status, v) = open_holding_a_file(&alice, &s).await;
        match status {
            201 => opened += 1,
            429 => {
                assert_eq!(error_code(&v), "quota_exceeded", "{v}");
                assert_eq!(v["quota"]["quota"], "resident_sessions", "{v}");
            }
            _ => panic!("{status}: {v}"),
        }
    }
    assert!(opened >= 2, "alice opened {opened}");
    let (resident, limit) = used(&usage(&alice, &s).await, "resident_sessions");
    assert!(resident <= 2 && limit == Some(2), "{resident} of {limit:?}");
    // Bob still gets places of his own at once.
    for _ in 0..2 {
        let (status, v) = post(&bob, &s.url("/v1/sessions"), &json!({"template": "python"})).await;
        assert_eq!(status, 201, "{v}");
    }
    s.stop().await;
}

/// Bytes of the files in `dir` (the snapshot store).
fn stored_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn hibernated_sessions_count_against_the_snapshot_quota() {
    let keys = keys_file("tenants-store");
    let store = scratch_dir("tenants-store").join("store");
    let d = store.clone();
    const QUOTA: u64 = 1_200_000;
    let s = start("tenants-store", move |a| {
        a.api_keys_file = Some(keys);
        a.snapshot_dir = Some(d);
        a.snapshot_quota_bytes = QUOTA;
        a.hibernate_after_secs = 1;
    })
    .await;
    let (alice, bob) = (client_with_key(ALICE), client_with_key(BOB));
    let mut ids = Vec::new();
    for i in 0..6 {
        let id = open_session(&alice, &s.base, &json!({"template": "python"})).await;
        let t = session_turn(
            &alice,
            &s.base,
            &id,
            &format!("x = bytes(range(256)) * {}", 300 + i),
        )
        .await;
        assert_eq!(t["status"], "ok", "{t}");
        ids.push(id);
    }
    // Her idle sessions hibernate until her quota is full, and no further.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let u = usage(&alice, &s).await;
        let (hibernated, _) = used(&u, "hibernated_sessions");
        if hibernated >= 1 {
            tokio::time::sleep(Duration::from_secs(3)).await;
            break;
        }
        assert!(Instant::now() < deadline, "nothing hibernated: {u}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let u = usage(&alice, &s).await;
    let (bytes, limit) = used(&u, "snapshot_bytes");
    assert_eq!(limit, Some(QUOTA));
    assert!(bytes <= QUOTA, "{u}");
    assert!(
        stored_bytes(&store) <= QUOTA,
        "the store holds {} bytes",
        stored_bytes(&store)
    );
    let (hibernated, _) = used(&u, "hibernated_sessions");
    assert!(
        hibernated < ids.len() as u64,
        "every session hibernated past the quota: {u}"
    );
    // Every one of her sessions still answers, asleep or not.
    for id in &ids {
        let t = session_turn(&alice, &s.base, id, "len(x)").await;
        assert_eq!(t["status"], "ok", "{t}");
    }
    // A snapshot past her quota is refused; bob's own quota is untouched.
    let (status, v) = post(
        &alice,
        &s.url(&format!("/v1/sessions/{}/snapshot", ids[0])),
        &json!({}),
    )
    .await;
    if status != 201 {
        assert_eq!(status, 409, "{v}");
        assert_eq!(error_code(&v), "snapshot_quota_exceeded");
    }
    let bob_s = open_session(&bob, &s.base, &json!({"template": "python"})).await;
    let (status, v) = post(
        &bob,
        &s.url(&format!("/v1/sessions/{bob_s}/snapshot")),
        &json!({}),
    )
    .await;
    assert_eq!(status, 201, "{v}");
    s.stop().await;
}

#[tokio::test]
async fn concurrent_snapshots_stay_within_the_quota() {
    let keys = keys_file("tenants-race");
    const QUOTA: u64 = 1_000_000;
    let s = start("tenants-race", move |a| {
        a.api_keys_file = Some(keys);
        a.snapshot_quota_bytes = QUOTA;
        a.hibernate_after_secs = 0;
    })
    .await;
    let alice = client_with_key(ALICE);
    let mut ids = Vec::new();
    for _ in 0..6 {
        let id = open_session(&alice, &s.base, &json!({"template": "python"})).await;
        session_turn(&alice, &s.base, &id, "import os\nx = os.urandom(150_000)").await;
        ids.push(id);
    }
    // Each session snapshotted at once: together they want about three times the quota.
    let mut shots = Vec::new();
    for id in &ids {
        let (c, url) = (alice.clone(), s.url(&format!("/v1/sessions/{id}/snapshot")));
        shots.push(tokio::spawn(
            async move { post(&c, &url, &json!({})).await },
        ));
    }
    let mut kept = 0;
    let mut refused = 0;
    for r in shots {
        let (status, v) = r.await.unwrap();
        match status {
            201 => kept += v["size_bytes"].as_u64().unwrap(),
            409 if error_code(&v) == "snapshot_quota_exceeded" => refused += 1,
            _ => panic!("{status}: {v}"),
        }
    }
    let (_, list) = get(&alice, &s.url("/v1/snapshots")).await;
    let listed: u64 = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["size_bytes"].as_u64().unwrap())
        .sum();
    assert!(
        listed <= QUOTA,
        "{listed} bytes kept under a quota of {QUOTA}"
    );
    assert!(kept <= QUOTA, "{kept}");
    assert!(
        refused >= 1,
        "six snapshots of ~500 kB all fit in {QUOTA} bytes?"
    );
    s.stop().await;
}

/// `(comm, nice above its process's main thread)` of every thread of every child process of
/// `pid` (the workers): a thread's own priority, whatever the test runs under (`nice`).
fn worker_threads(pid: u32) -> Vec<(String, i64)> {
    let stat = |path: std::path::PathBuf| -> Option<(String, i64)> {
        let stat = std::fs::read_to_string(path).ok()?;
        // `pid (comm) state ...`: nice is the 17th field after the comm's parenthesis.
        let (open, close) = (stat.find('(')?, stat.rfind(')')?);
        let nice = stat[close + 1..].split_whitespace().nth(16)?.parse().ok()?;
        Some((stat[open + 1..close].to_string(), nice))
    };
    // A child is listed under the thread that spawned it.
    let children: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| c.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .collect();
    let mut out = Vec::new();
    for child in &children {
        let Some((_, base)) = stat(format!("/proc/{child}/stat").into()) else {
            continue;
        };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{child}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Some((comm, nice)) = stat(task.path().join("stat")) {
                out.push((comm, nice - base));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_gives_way_and_its_thread_does_not_serve_the_next() {
    let scratch = scratch_dir("tenants-demote");
    /// Ends the server however the test ends.
    struct Server(Proc);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.child.kill();
            let _ = self.0.child.wait();
        }
    }
    let p = Server(spawn_server(&scratch, None, &[]));
    let p = &p.0;
    wait_ready_at(&p.base).await;
    let pid = p.child.id();
    let demoted = |threads: &[(String, i64)]| {
        threads
            .iter()
            .filter(|(comm, nice)| comm == "vivarium-guest" && *nice > 0)
            .count()
    };
    let c = client();
    let url = format!("{}/v1/execute", p.base);
    let hello = json!({"code": "print('hello')", "template": "python"});
    let (status, v) = post(&c, &url, &hello).await;
    assert_eq!(status, 200, "{v}");
    // A short run: its thread keeps its priority, and waits for the next job.
    assert_eq!(demoted(&worker_threads(pid)), 0);
    let long = {
        let (c, url) = (c.clone(), url.clone());
        tokio::spawn(async move {
            let body = json!({
                "code": "import time\nt = time.time()\nwhile time.time() - t < 2: pass",
                "template": "python",
            });
            post(&c, &url, &body).await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let threads = worker_threads(pid);
        if demoted(&threads) == 1 {
            assert!(threads.iter().any(|(_, nice)| *nice >= 1), "{threads:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no guest thread was demoted: {threads:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, v) = long.await.unwrap();
    assert_eq!(status, 200, "{v}");
    // Its thread ended after the job: none is left demoted to run the next one.
    let deadline = Instant::now() + Duration::from_secs(10);
    while demoted(&worker_threads(pid)) > 0 {
        assert!(
            Instant::now() < deadline,
            "a demoted thread stayed: {:?}",
            worker_threads(pid)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, v) = post(&c, &url, &hello).await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test]
async fn a_tenants_share_of_the_memory_budget_makes_room_among_its_own_sessions() {
    let dir = scratch_dir("tenants-memory");
    let keys = dir.join("keys.txt");
    std::fs::write(
        &keys,
        format!(
            "tenant small memory_bytes=200M hibernated_sessions=1\nme@small:{ALICE}\nbob:{BOB}\n"
        ),
    )
    .unwrap();
    let s = start("tenants-memory", move |a| {
        a.api_keys_file = Some(keys);
        a.hibernate_after_secs = 0;
    })
    .await;
    let (small, bob) = (client_with_key(ALICE), client_with_key(BOB));
    // Each python session is admitted for its image and a reserve: a few fit in 200 MiB;
    // then one of her own hibernates to make room (her quota allows one asleep), then 429.
    let mut refused = None;
    for _ in 0..12 {
        let (status, v) = post(
            &small,
            &s.url("/v1/sessions"),
            &json!({"template": "python"}),
        )
        .await;
        match status {
            201 => {
                let id = v["id"].as_str().unwrap();
                let t = session_turn(&small, &s.base, id, "x = 1").await;
                assert_eq!(t["status"], "ok", "{t}");
            }
            _ => {
                refused = Some((status, v));
                break;
            }
        }
    }
    let (status, v) = refused.expect("200 MiB held every session opened");
    assert_eq!(status, 429, "{v}");
    assert_eq!(error_code(&v), "quota_exceeded");
    assert_eq!(v["quota"]["quota"], "memory_bytes", "{v}");
    let u = usage(&small, &s).await;
    let (held, limit) = used(&u, "memory_bytes");
    assert!(held <= limit.unwrap(), "{u}");
    assert_eq!(used(&u, "hibernated_sessions").0, 1, "{u}");
    // Bob's share is his own.
    let (status, v) = post(&bob, &s.url("/v1/sessions"), &json!({"template": "python"})).await;
    assert_eq!(status, 201, "{v}");
    s.stop().await;
}
