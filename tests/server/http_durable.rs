//! Sessions that outlive their server: every session is kept over a graceful restart, and a
//! durable one (`"durable": true`) over `kill -9`; each comes back, under the same id, at
//! its last completed turn, on its next request. Real servers on 127.0.0.1, the second a
//! fresh process where it matters.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Where a session's own snapshot is in a directory store (its id is derived from the
/// session id, so any server finds it).
fn own_snapshot(dir: &Path, session: &str) -> PathBuf {
    let h = Sha256::digest(format!("vivarium-session\0{session}").as_bytes());
    let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("snap-{}.snap", &hex[..24]))
}

/// The `turns` its header records, once the file is there.
fn stored_turns(path: &Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    let len = u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?) as usize;
    let header: Value = serde_json::from_slice(bytes.get(12..12 + len)?).ok()?;
    header["turns"].as_u64()
}

/// Waits (at most 10 s) until the snapshot at `path` records `turns` turns: a durable
/// session's own snapshot lands off the response path, within moments.
async fn wait_stored(path: &Path, turns: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while stored_turns(path) != Some(turns) {
        assert!(Instant::now() < deadline, "turn {turns} was never stored");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_session_is_kept_over_a_graceful_restart() {
    let dir = scratch_dir("keep-store");
    let d = dir.clone();
    let a = start("keep-a", move |args| args.snapshot_dir = Some(d)).await;
    let c = client();
    let (_, v) = post(&c, &a.url("/v1/sessions"), &json!({"template": "python"})).await;
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(v["durable"], false);
    session_turn(&c, &a.base, &id, "x = 5\nopen('f.txt', 'w').write('kept')").await;
    a.stop().await;
    assert!(
        own_snapshot(&dir, &id).exists(),
        "shutdown kept the session"
    );

    let d = dir.clone();
    let b = start("keep-b", move |args| args.snapshot_dir = Some(d)).await;
    let (st, info) = get(&c, &b.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(st, 200, "{info}");
    assert_eq!(info["turns"], 1);
    let v = session_turn(&c, &b.base, &id, "x + 1, open('f.txt').read()").await;
    assert_eq!(v["result"], "(6, 'kept')");
    assert_eq!(v["turn"], 2);
    // A session's own snapshot is not a snapshot callers see.
    let (_, list) = get(&c, &b.url("/v1/snapshots")).await;
    assert_eq!(list, json!([]));
    // Closing it removes it from the store too: it does not come back again.
    let r = c
        .delete(b.url(&format!("/v1/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let deadline = Instant::now() + Duration::from_secs(5);
    while own_snapshot(&dir, &id).exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!own_snapshot(&dir, &id).exists());
    let (st, v) = get(&c, &b.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!((st, error_code(&v)), (404, "session_not_found"));
    // An id that was never a session is simply not found.
    let (st, _) = get(
        &c,
        &b.url("/v1/sessions/s-00000000000000000000000000000000"),
    )
    .await;
    assert_eq!(st, 404);
    b.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_session_survives_kill_9_at_its_last_completed_turn() {
    let dir = scratch_dir("durable-store");
    let scratch = scratch_dir("durable");
    let Proc {
        child: mut first,
        base,
    } = spawn_server(&scratch, Some(&dir), &[]);
    wait_ready_at(&base).await;
    let c = client();
    let (st, v) = post(
        &c,
        &format!("{base}/v1/sessions"),
        &json!({"template": "python", "durable": true}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["durable"], true);
    let id = v["id"].as_str().unwrap().to_string();
    session_turn(&c, &base, &id, "import json\nx = 1").await;
    session_turn(
        &c,
        &base,
        &id,
        "x = 2\nopen('d.txt', 'w').write(json.dumps(x))",
    )
    .await;
    // Its snapshot lands off the response path, within moments.
    let own = own_snapshot(&dir, &id);
    wait_stored(&own, 2).await;
    first.kill().unwrap();
    first.wait().unwrap();

    let Proc {
        child: mut second,
        base,
    } = spawn_server(&scratch, Some(&dir), &[]);
    wait_ready_at(&base).await;
    let v = session_turn(&c, &base, &id, "x, open('d.txt').read()").await;
    assert_eq!(v["result"], "(2, '2')");
    assert_eq!(v["turn"], 3);
    // Still durable: this turn is stored too.
    wait_stored(&own, 3).await;
    second.kill().unwrap();
    second.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(scratch.with_extension("audit.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cancelled_by_shutdown_rolls_back_and_the_session_comes_back_before_it() {
    let dir = scratch_dir("cancel-store");
    let d = dir.clone();
    let a = start("cancel-a", move |args| {
        args.snapshot_dir = Some(d);
        args.shutdown_grace_ms = 300;
    })
    .await;
    let c = client();
    let (_, v) = post(&c, &a.url("/v1/sessions"), &json!({"template": "python"})).await;
    let id = v["id"].as_str().unwrap().to_string();
    session_turn(&c, &a.base, &id, "n = 1").await;
    // A long turn that changes the state, still running when the server is told to stop.
    let long = {
        let (c, url) = (c.clone(), a.url(&format!("/v1/sessions/{id}/execute")));
        tokio::spawn(async move {
            post(
                &c,
                &url,
                &json!({"code": "n = 2\nimport time\ntime.sleep(30)"}),
            )
            .await
        })
    };
    wait_busy(&c, &a.base, &id).await;
    a.stop().await;
    let (st, v) = long.await.unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "cancelled", "{v}");
    assert_eq!(v["rolled_back"], true, "{v}");

    let d = dir.clone();
    let b = start("cancel-b", move |args| args.snapshot_dir = Some(d)).await;
    let v = session_turn(&c, &b.base, &id, "n").await;
    assert_eq!(v["result"], "1", "the cancelled turn left nothing: {v}");
    b.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A durable session's own snapshot follows a rollback to a kept turn: after `kill -9` it
/// comes back at the turn it went back to. What it kept of its turns stayed with the
/// process that died: its list starts again at that state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_session_comes_back_after_kill_9_at_the_turn_it_rolled_back_to() {
    let dir = scratch_dir("durable-rollback-store");
    let scratch = scratch_dir("durable-rollback");
    let Proc {
        child: mut first,
        base,
    } = spawn_server(&scratch, Some(&dir), &[]);
    wait_ready_at(&base).await;
    let api = Api::at(&base);
    let id = api
        .session(&json!({"template": "python", "durable": true}))
        .await;
    for n in 1..=3 {
        api.turn_ok(&id, &format!("x = {n}\nopen('n.txt', 'w').write('{n}')"))
            .await;
    }
    let own = own_snapshot(&dir, &id);
    wait_stored(&own, 3).await;
    api.rollback(&id, &json!({"turn": 1})).await.expect(200);
    wait_stored(&own, 1).await;
    first.kill().unwrap();
    first.wait().unwrap();

    let Proc {
        child: mut second,
        base,
    } = spawn_server(&scratch, Some(&dir), &[]);
    wait_ready_at(&base).await;
    let api = Api::at(&base);
    let v = api.turn_ok(&id, "x, open('n.txt').read()").await;
    assert_eq!(v["result"], "(1, '1')", "{v}");
    assert_eq!(v["turn"], 2, "{v}");
    let kept = api.turns(&id).await.expect(200);
    let turns: Vec<u64> = kept["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2], "{kept}");
    let a = api.rollback(&id, &json!({"turn": 0})).await;
    assert_eq!(a.error(), (404, "turn_not_kept"), "{:?}", a.body);
    second.kill().unwrap();
    second.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(scratch.with_extension("audit.jsonl"));
}
