//! Sessions as data over real HTTP: snapshot, restore (in this server and in a fresh server
//! process), fork, and every way a snapshot is refused: damaged, truncated, re-signed with a
//! foreign binding, another key's, a session busy or holding a file open.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::http_support::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

async fn open(c: &reqwest::Client, s: &TestServer, body: Value) -> String {
    open_session(c, &s.base, &body).await
}

fn snapshot_file(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.snap"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_survives_snapshot_restore_and_fork_and_each_diverges() {
    let s = start("snap", |_| {}).await;
    let c = client();
    let id = open(&c, &s, json!({"template": "python"})).await;
    session_turn(
        &c,
        &s.base,
        &id,
        "import json, random\nrandom.seed(7)\ndata = {'rows': list(range(500))}\n\
         open('notes.txt', 'w').write('kept')",
    )
    .await;

    let snap = take_snapshot(&c, &s.base, &id).await;
    let snap_id = snap["snapshot_id"].as_str().unwrap().to_string();
    assert!(snap_id.starts_with("snap-"));
    assert_eq!(snap["template"], "python");
    assert_eq!(snap["turns"], 1);
    let size = snap["size_bytes"].as_u64().unwrap();
    assert!(
        size > 0 && size < 8 << 20,
        "only what differs, compressed: {size}"
    );

    // What the original draws next, to compare with the restored session's.
    let next = session_turn(&c, &s.base, &id, "random.random()").await["result"].clone();

    let (st, restored) = post(&c, &s.url("/v1/sessions"), &json!({"snapshot": snap_id})).await;
    assert_eq!(st, 201, "{restored}");
    assert_eq!(restored["turns"], 1);
    assert_eq!(restored["template"], "python");
    let r = restored["id"].as_str().unwrap().to_string();
    let v = session_turn(
        &c,
        &s.base,
        &r,
        "len(data['rows']), json.dumps([1]), open('notes.txt').read()",
    )
    .await;
    assert_eq!(v["result"], "(500, '[1]', 'kept')");
    // The generator goes on from where the snapshot left it.
    assert_eq!(
        session_turn(&c, &s.base, &r, "random.random()").await["result"],
        next
    );
    let (_, files) = get(&c, &s.url(&format!("/v1/sessions/{r}/files"))).await;
    assert!(files.to_string().contains("notes.txt"), "{files}");

    // A fork: a new live session with the same state, then each goes its own way.
    let (st, fork) = post(&c, &s.url(&format!("/v1/sessions/{r}/fork")), &json!({})).await;
    assert_eq!(st, 201, "{fork}");
    let f = fork["id"].as_str().unwrap().to_string();
    assert_ne!(f, r);
    session_turn(
        &c,
        &s.base,
        &r,
        "data['rows'].append(1); open('notes.txt', 'w').write('r')",
    )
    .await;
    session_turn(&c, &s.base, &f, "data['rows'].clear()").await;
    let probe = "len(data['rows']), open('notes.txt').read()";
    assert_eq!(
        session_turn(&c, &s.base, &r, probe).await["result"],
        "(501, 'r')"
    );
    assert_eq!(
        session_turn(&c, &s.base, &f, probe).await["result"],
        "(0, 'kept')"
    );
    assert_eq!(
        session_turn(&c, &s.base, &id, probe).await["result"],
        "(500, 'kept')"
    );

    // Listing, inspecting, deleting.
    let (st, list) = get(&c, &s.url("/v1/snapshots")).await;
    assert_eq!(st, 200);
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["snapshot_id"], snap_id);
    let (st, one) = get(&c, &s.url(&format!("/v1/snapshots/{snap_id}"))).await;
    assert_eq!((st, one["size_bytes"].as_u64()), (200, Some(size)));
    let r = c
        .delete(s.url(&format!("/v1/snapshots/{snap_id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let (st, v) = get(&c, &s.url(&format!("/v1/snapshots/{snap_id}"))).await;
    assert_eq!((st, error_code(&v)), (404, "snapshot_not_found"));
    let (st, v) = post(&c, &s.url("/v1/sessions"), &json!({"snapshot": snap_id})).await;
    assert_eq!((st, error_code(&v)), (404, "snapshot_not_found"));
    for bad in [
        "snap-../../etc/passwd",
        "nope",
        "snap-0123456789abcdef0123456G",
    ] {
        let (st, v) = post(&c, &s.url("/v1/sessions"), &json!({"snapshot": bad})).await;
        assert_eq!((st, error_code(&v)), (404, "snapshot_not_found"), "{bad}");
    }
    // A restore names its snapshot only: its limits and template come with it.
    let (st, v) = post(
        &c,
        &s.url("/v1/sessions"),
        &json!({"snapshot": "snap-0123456789abcdef01234567", "template": "python"}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (400, "invalid_request"));

    let actions: Vec<String> = s
        .audit()
        .iter()
        .map(|r| r["action"].as_str().unwrap().to_string())
        .collect();
    for a in [
        "session_snapshot",
        "session_restore",
        "session_fork",
        "snapshot_delete",
    ] {
        assert!(actions.iter().any(|x| x == a), "{a} in {actions:?}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_busy_or_holding_a_folder_open_is_not_snapshotted() {
    let s = shared().await;
    let c = client();
    let id = s.session(&json!({"template": "python"})).await;
    session_turn(&c, &s.base, &id, "import os\nit = os.scandir('.')").await;
    let url = s.url(&format!("/v1/sessions/{id}/snapshot"));
    let (st, v) = post(&c, &url, &json!({})).await;
    assert_eq!((st, error_code(&v)), (409, "snapshot_refused"), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("open"));
    // The session is untouched and goes on.
    session_turn(&c, &s.base, &id, "it.close()").await;

    let slow = {
        let (c, u) = (c.clone(), s.url(&format!("/v1/sessions/{id}/execute")));
        tokio::spawn(
            async move { post(&c, &u, &json!({"code": "import time; time.sleep(3)"})).await },
        )
    };
    wait_busy(&c, &s.base, &id).await;
    let (st, v) = post(&c, &url, &json!({})).await;
    assert_eq!((st, error_code(&v)), (409, "session_busy"));
    assert_eq!(slow.await.unwrap().0, 200);
    let (st, _) = post(&c, &url, &json!({})).await;
    assert_eq!(st, 201);
}

/// Rewrites a snapshot file's header with `edit` and signs it again, as someone with write
/// access to the store could.
fn resign(path: &Path, edit: impl FnOnce(&mut Value)) {
    let bytes = std::fs::read(path).unwrap();
    let len = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&bytes[12..12 + len]).unwrap();
    edit(&mut header);
    let header = serde_json::to_vec(&header).unwrap();
    let mut out = bytes[..8].to_vec();
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&bytes[12 + len..bytes.len() - 32]);
    let hash = Sha256::digest(&out);
    out.extend_from_slice(&hash);
    std::fs::write(path, out).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_foreign_and_other_keys_snapshots_are_refused_and_nothing_loads() {
    let keys = scratch_dir("snap-keys").join("keys.txt");
    std::fs::write(
        &keys,
        "alice:key-alice-0123456789\nbob:key-bob-0123456789\n",
    )
    .unwrap();
    let path = keys.clone();
    let s = start("snap-bad", move |a| a.api_keys_file = Some(path)).await;
    let dir = s.scratch.with_extension("snapshots");
    let alice = client_with_key("key-alice-0123456789");
    let bob = client_with_key("key-bob-0123456789");
    let id = open(&alice, &s, json!({"template": "python"})).await;
    session_turn(&alice, &s.base, &id, "x = 41").await;
    let take = || async {
        take_snapshot(&alice, &s.base, &id).await["snapshot_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let snap = take().await;

    // Another key sees nothing of it.
    let (st, v) = get(&bob, &s.url(&format!("/v1/snapshots/{snap}"))).await;
    assert_eq!((st, error_code(&v)), (404, "snapshot_not_found"));
    let (st, v) = post(&bob, &s.url("/v1/sessions"), &json!({"snapshot": snap})).await;
    assert_eq!((st, error_code(&v)), (404, "snapshot_not_found"));
    let (_, list) = get(&bob, &s.url("/v1/snapshots")).await;
    assert_eq!(list, json!([]));
    let r = bob
        .delete(s.url(&format!("/v1/snapshots/{snap}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let (_, list) = get(&alice, &s.url("/v1/snapshots")).await;
    assert_eq!(list.as_array().unwrap().len(), 1);

    let restore = |snap: String| {
        let (alice, url) = (alice.clone(), s.url("/v1/sessions"));
        async move { post(&alice, &url, &json!({"snapshot": snap})).await }
    };
    let open_before = s.sandbox_dirs();

    // A flipped byte anywhere, and a cut, are caught by the hash.
    let file = snapshot_file(&dir, &snap);
    let good = std::fs::read(&file).unwrap();
    for at in [20, good.len() / 2, good.len() - 40] {
        let mut bad = good.clone();
        bad[at] ^= 1;
        std::fs::write(&file, &bad).unwrap();
        let (st, v) = restore(snap.clone()).await;
        assert_eq!(
            (st, error_code(&v)),
            (422, "snapshot_invalid"),
            "flip at {at}: {v}"
        );
    }
    std::fs::write(&file, &good[..good.len() / 3]).unwrap();
    let (st, v) = restore(snap.clone()).await;
    assert_eq!((st, error_code(&v)), (422, "snapshot_invalid"), "{v}");

    // Re-signed with another template build or runtime: 409, it cannot be restored here.
    std::fs::write(&file, &good).unwrap();
    resign(&file, |h| {
        h["binding"]["template_key"] = json!("0".repeat(64))
    });
    let (st, v) = restore(snap.clone()).await;
    assert_eq!((st, error_code(&v)), (409, "snapshot_incompatible"), "{v}");
    std::fs::write(&file, &good).unwrap();
    resign(&file, |h| {
        h["binding"]["runtime_sha256"] = json!("1".repeat(64))
    });
    let (st, v) = restore(snap.clone()).await;
    assert_eq!((st, error_code(&v)), (409, "snapshot_incompatible"));
    // Re-signed to ask for more than this server allows, or to name a file outside.
    std::fs::write(&file, &good).unwrap();
    resign(&file, |h| h["limits"]["memory_bytes"] = json!(1u64 << 40));
    let (st, v) = restore(snap.clone()).await;
    assert_eq!((st, error_code(&v)), (422, "snapshot_invalid"), "{v}");
    std::fs::write(&file, &good).unwrap();
    resign(&file, |h| h["owner"] = json!("bob"));
    let (st, v) = post(&bob, &s.url("/v1/sessions"), &json!({"snapshot": snap})).await;
    // Whoever can write the store can hand a snapshot to another key: that is the store's
    // trust, stated in SECURITY.md; what it holds is still checked in full.
    assert_eq!(st, 201, "{v}");

    // Nothing was loaded by the refusals: no session, no directory.
    assert_eq!(s.sandbox_dirs(), open_before + 1);
    // The original session is untouched, and a fresh snapshot of it restores.
    let snap2 = take().await;
    let (st, v) = restore(snap2).await;
    assert_eq!(st, 201, "{v}");
    let r = v["id"].as_str().unwrap();
    assert_eq!(
        session_turn(&alice, &s.base, r, "x + 1").await["result"],
        "42"
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(keys.parent().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_restores_in_a_fresh_server_process_with_a_fitted_model() {
    // A store of its own, which outlives the first server.
    let dir = scratch_dir("snap-store");
    let d = dir.clone();
    let s = start("snap-proc", move |a| a.snapshot_dir = Some(d)).await;
    let c = client();
    // The default template: the scientific stack.
    let id = open(&c, &s, json!({})).await;
    session_turn(
        &c,
        &s.base,
        &id,
        "import numpy as np\nfrom sklearn.linear_model import LinearRegression\n\
         X = np.arange(20).reshape(-1, 1); y = 3 * X.ravel() + 2\n\
         model = LinearRegression().fit(X, y)\nimport os; os.makedirs('out', exist_ok=True)\n\
         open('out/a.txt', 'w').write('from the first process')",
    )
    .await;
    let snap = take_snapshot(&c, &s.base, &id).await["snapshot_id"]
        .as_str()
        .unwrap()
        .to_string();
    s.stop().await;

    let scratch = scratch_dir("snap-proc2");
    let Proc { mut child, base } = spawn_server(&scratch, Some(&dir), &[]);
    wait_ready_at(&base).await;
    let (st, v) = post(
        &c,
        &format!("{base}/v1/sessions"),
        &json!({"snapshot": snap}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["template"], "scientific");
    let r = v["id"].as_str().unwrap();
    let v = session_turn(
        &c,
        &base,
        r,
        "round(float(model.predict(np.array([[100]]))[0]), 6), open('out/a.txt').read()",
    )
    .await;
    assert_eq!(v["result"], "(302.0, 'from the first process')");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(scratch.with_extension("audit.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_and_the_retention_hold() {
    let s = start("snap-quota", |a| {
        a.snapshot_quota_bytes = 1_500_000;
        a.snapshot_retention_secs = 1;
    })
    .await;
    let c = client();
    let id = open(&c, &s, json!({"template": "python"})).await;
    // About 1 MB of memory that does not compress: one snapshot fits the quota, two do not.
    session_turn(&c, &s.base, &id, "import os\nblob = os.urandom(900_000)").await;
    let url = s.url(&format!("/v1/sessions/{id}/snapshot"));
    let (st, first) = post(&c, &url, &json!({})).await;
    assert_eq!(st, 201, "{first}");
    assert!(first["size_bytes"].as_u64().unwrap() > 750_000, "{first}");
    let (st, v) = post(&c, &url, &json!({})).await;
    assert_eq!(
        (st, error_code(&v)),
        (409, "snapshot_quota_exceeded"),
        "{v}"
    );
    // Past its retention (1 s here), the sweeper deletes it, and the quota is free again.
    let snap = first["snapshot_id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (st, _) = get(&c, &s.url(&format!("/v1/snapshots/{snap}"))).await;
        if st == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "never swept");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (st, v) = post(&c, &url, &json!({})).await;
    assert_eq!(st, 201, "{v}");
    s.stop().await;
}
