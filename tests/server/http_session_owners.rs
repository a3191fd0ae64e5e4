//! A session is the API key's that opened it: for any other key it is not there (404
//! `session_not_found`, as another key's snapshot is), through every front door that names
//! a session (the sessions API, Jupyter's kernels and their WebSocket, MCP's tools and
//! resources), whether it is live, hibernated, or only in the store after a restart; and
//! nothing another key asks for moves, wakes or changes it. A session opened with keys off
//! has no owner and stays usable by its id after keys are turned on. Real servers on
//! 127.0.0.1.

use std::path::Path;
use std::time::Duration;

use crate::http_support::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const ALICE: &str = "key-alice-0123456789";
const BOB: &str = "key-bob-0123456789";

/// The owner a session's own snapshot names, in a directory store.
fn own_snapshot_owner(dir: &Path, session: &str) -> Option<Value> {
    let h = Sha256::digest(format!("vivarium-session\0{session}").as_bytes());
    let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
    let bytes = std::fs::read(dir.join(format!("snap-{}.snap", &hex[..24]))).ok()?;
    let len = u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?) as usize;
    let header: Value = serde_json::from_slice(bytes.get(12..12 + len)?).ok()?;
    Some(header["owner"].clone())
}

async fn status_of(req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = req.send().await.unwrap();
    let st = r.status().as_u16();
    (st, r.json().await.unwrap_or(Value::Null))
}

/// Session `id` as Jupyter names it: a UUID.
fn kernel_id(id: &str) -> String {
    let h = id.strip_prefix("s-").unwrap();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Every way `bob` could name session `id` over HTTP and Jupyter's API: each is a 404
/// `session_not_found`, and his kernel list does not show it.
async fn bob_finds_nothing(s: &TestServer, bob: &reqwest::Client, id: &str) {
    let kid = kernel_id(id);
    let sess = |p: &str| s.url(&format!("/v1/sessions/{id}{p}"));
    let kern = |p: &str| s.url(&format!("/api/kernels/{kid}{p}"));
    let asks = [
        ("info", bob.get(sess(""))),
        (
            "turn",
            bob.post(sess("/execute")).json(&json!({"code": "x"})),
        ),
        ("files", bob.get(sess("/files"))),
        ("download", bob.get(sess("/files/f.txt"))),
        ("upload", bob.put(sess("/files/g.txt")).body("bob was here")),
        ("snapshot", bob.post(sess("/snapshot"))),
        ("fork", bob.post(sess("/fork"))),
        ("close", bob.delete(sess(""))),
        ("kernel info", bob.get(kern(""))),
        ("kernel interrupt", bob.post(kern("/interrupt"))),
        ("kernel restart", bob.post(kern("/restart"))),
        ("kernel shutdown", bob.delete(kern(""))),
    ];
    for (what, req) in asks {
        let (st, v) = status_of(req).await;
        assert_eq!(
            (st, error_code(&v)),
            (404, "session_not_found"),
            "{what}: {v}"
        );
    }
    let (st, kernels) = get(bob, &s.url("/api/kernels")).await;
    assert_eq!(st, 200);
    assert!(
        kernels.as_array().unwrap().iter().all(|k| k["id"] != kid),
        "{kernels}"
    );
    let ws = format!(
        "{}/api/kernels/{kid}/channels?token={BOB}",
        s.base.replace("http://", "ws://")
    );
    match tokio_tungstenite::connect_async(ws).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 404),
        other => panic!("bob's kernel connection: {:?}", other.map(|_| ())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_keys_session_is_not_there_live_hibernated_or_stored() {
    let dir = scratch_dir("owners");
    let keys = dir.join("keys.txt");
    std::fs::write(&keys, format!("alice:{ALICE}\nbob:{BOB}\n")).unwrap();
    let store = dir.join("store");
    // A session opened with keys off, kept over the restart into a server with keys.
    let d = store.clone();
    let s = start("owners-0", move |a| a.snapshot_dir = Some(d)).await;
    let legacy = open_session(&client(), &s.base, &json!({"template": "python"})).await;
    session_turn(&client(), &s.base, &legacy, "y = 1").await;
    s.stop().await;
    assert_eq!(own_snapshot_owner(&store, &legacy), Some(Value::Null));

    let (k, d) = (keys.clone(), store.clone());
    let s = start("owners-a", move |a| {
        a.api_keys_file = Some(k);
        a.snapshot_dir = Some(d);
        a.hibernate_after_secs = 2;
    })
    .await;
    let (alice, bob) = (client_with_key(ALICE), client_with_key(BOB));
    // It has no owner: it stays usable by whoever has its id, as it was (an upgrade or
    // turning keys on loses no session), and no key's kernel list shows it.
    let v = session_turn(&bob, &s.base, &legacy, "y += 1\ny").await;
    assert_eq!(v["result"], "2", "{v}");
    let v = session_turn(&alice, &s.base, &legacy, "y += 1\ny").await;
    assert_eq!(v["result"], "3", "{v}");
    let (_, kernels) = get(&alice, &s.url("/api/kernels")).await;
    assert_eq!(kernels, json!([]));
    let id = open_session(
        &alice,
        &s.base,
        &json!({"template": "python", "durable": true}),
    )
    .await;
    session_turn(
        &alice,
        &s.base,
        &id,
        "x = 41\nopen('f.txt', 'w').write('alice')",
    )
    .await;
    assert_eq!(own_snapshot_owner(&store, &id), Some(json!("alice")));

    // Live.
    bob_finds_nothing(&s, &bob, &id).await;
    let (_, kernels) = get(&alice, &s.url("/api/kernels")).await;
    assert!(
        kernels
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k["id"] == kernel_id(&id))
    );
    let (_, kernels) = get(&bob, &s.url("/api/kernels")).await;
    assert_eq!(kernels, json!([]));

    // Over MCP: every session tool and the session's files as resources.
    let mut mcp = McpClient::open_with_key(&s, BOB).await;
    for (tool, args) in [
        ("run_in_session", json!({"session_id": id, "code": "x"})),
        ("close_session", json!({"session_id": id})),
        ("snapshot_session", json!({"session_id": id})),
        ("fork_session", json!({"session_id": id})),
    ] {
        let (_, m) = mcp.call(tool, args).await;
        let text = m["result"]["content"][0]["text"].as_str().unwrap_or("");
        assert!(
            m["result"]["isError"] == true && text.contains("session_not_found"),
            "{tool}: {m}"
        );
    }
    let m = mcp
        .request(
            "resources/read",
            json!({"uri": format!("vivarium://sessions/{id}/files/f.txt")}),
        )
        .await;
    assert!(
        m["error"]["message"]
            .as_str()
            .is_some_and(|t| t.contains("session_not_found")),
        "{m}"
    );

    // Nothing bob asked changed it: alice's state, her file, and bob's upload is not there.
    let v = session_turn(
        &alice,
        &s.base,
        &id,
        "import os\nx + 1, open('f.txt').read(), os.path.exists('g.txt')",
    )
    .await;
    assert_eq!(v["result"], "(42, 'alice', False)", "{v}");

    // Hibernated: bob still finds nothing, and his asking does not wake it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while get(&alice, &s.url(&format!("/v1/sessions/{id}"))).await.1["resident"] != false {
        assert!(std::time::Instant::now() < deadline, "never hibernated");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bob_finds_nothing(&s, &bob, &id).await;
    let (st, info) = get(&alice, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!((st, &info["resident"]), (200, &json!(false)), "{info}");
    s.stop().await;

    // Only in the store, on a fresh server: the same, and alice's session comes back.
    let (k, d) = (keys.clone(), store.clone());
    let s = start("owners-b", move |a| {
        a.api_keys_file = Some(k);
        a.snapshot_dir = Some(d);
    })
    .await;
    bob_finds_nothing(&s, &bob, &id).await;
    let m = metrics_at(&alice, &s.base).await;
    assert_eq!(m["vivarium_live_sessions"], 0.0, "bob brought nothing back");
    let v = session_turn(&alice, &s.base, &id, "x + 2, open('f.txt').read()").await;
    assert_eq!(v["result"], "(43, 'alice')", "{v}");
    // Closed by its owner, it is gone for her too.
    let r = alice
        .delete(s.url(&format!("/v1/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    s.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
