//! Sessions over real HTTP: state across turns, echoed results, failing turns, `exit()`,
//! files up and down, concurrency, expiry.

use std::time::Duration;

use crate::http_support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_state_and_ends_on_exit() {
    let s = start("sess", |_| {}).await;
    let c = client();
    let (st, v) = post(
        &c,
        &s.url("/v1/sessions"),
        &json!({"limits": {"memory_bytes": 256 << 20}}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    assert!(v["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(v["expires_at"].is_string());
    assert_eq!(v["limits"]["memory_bytes"], 256 << 20);
    let turn = s.url(&format!("/v1/sessions/{id}/execute"));

    let (st, v) = post(&c, &turn, &json!({"code": "x = 21\nimport math"})).await;
    assert_eq!((st, v["status"].as_str()), (200, Some("ok")), "{v}");
    assert_eq!(v["result"], serde_json::Value::Null);
    assert_eq!(v["turn"], 1);
    let (_, v) = post(&c, &turn, &json!({"code": "math.sqrt(x * x) * 2"})).await;
    assert_eq!(v["result"], "42.0", "{v}");
    assert_eq!(v["stdout"], "42.0\n");

    // A failing turn leaves the session usable.
    let (st, v) = post(&c, &turn, &json!({"code": "y = 1\nundefined_name"})).await;
    assert_eq!(st, 200);
    assert_eq!(v["status"], "error");
    assert_eq!(v["error"]["type"], "NameError");
    assert_eq!(v["ended"], serde_json::Value::Null);
    let (_, v) = post(&c, &turn, &json!({"code": "x + y", "stdin": ""})).await;
    assert_eq!(v["result"], "22", "{v}");

    // Files: upload raw bytes, use them, list, download what the code wrote.
    let r = c
        .put(s.url(&format!("/v1/sessions/{id}/files/data/in.csv")))
        .body("a,b\n1,2\n3,4\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let (_, v) = post(
        &c,
        &turn,
        &json!({"code": "rows = open('data/in.csv').read().splitlines()\nopen('out.txt','w').write(str(len(rows)))\nlen(rows)",
                "files": [{"path": "extra.bin", "content": b64(b"\x00\x01")}]}),
    )
    .await;
    assert_eq!(v["result"], "3", "{v}");
    let (st, v) = get(&c, &s.url(&format!("/v1/sessions/{id}/files"))).await;
    assert_eq!(st, 200);
    let names: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["data/in.csv", "extra.bin", "out.txt"], "{v}");
    let r = c
        .get(s.url(&format!("/v1/sessions/{id}/files/out.txt")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/plain");
    assert_eq!(r.text().await.unwrap(), "3");
    let (st, v) = get(&c, &s.url(&format!("/v1/sessions/{id}/files/missing.txt"))).await;
    assert_eq!((st, error_code(&v)), (404, "not_found"));
    let r = c
        .put(s.url(&format!("/v1/sessions/{id}/files/a%00b")))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // Per-turn limits: above the maximum names the field; memory is session-wide.
    let (st, v) = post(
        &c,
        &turn,
        &json!({"code": "1", "limits": {"timeout_ms": 1u64 << 40}}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (400, "invalid_limit"));
    assert_eq!(v["error"]["field"], "limits.timeout_ms");
    let (st, v) = post(
        &c,
        &turn,
        &json!({"code": "1", "limits": {"memory_bytes": 1}}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (400, "invalid_json"));

    // GET describes it.
    let (st, v) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(st, 200);
    assert_eq!(v["state"], "idle");
    assert_eq!(v["turns"], 5);

    // exit() ends it cleanly and says why; later turns get 409.
    let (st, v) = post(&c, &turn, &json!({"code": "print('bye')\nexit()"})).await;
    assert_eq!(st, 200);
    assert_eq!(v["stdout"], "bye\n");
    assert_eq!(v["ended"]["reason"], "quit", "{v}");
    let (_, v) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(v["state"], "ended");
    assert_eq!(v["ended"]["reason"], "quit");
    let (st, v) = post(&c, &turn, &json!({"code": "1"})).await;
    assert_eq!((st, error_code(&v)), (409, "session_ended"));
    // Its directory goes just after the response that ended it left (in its worker).
    assert_eq!(
        s.settled_sandbox_dirs().await,
        0,
        "an ended session lets its dir go"
    );

    // DELETE, then 404.
    let r = c
        .delete(s.url(&format!("/v1/sessions/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let (st, v) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!((st, error_code(&v)), (404, "session_not_found"));

    // os._exit ends a session too, with the reason (a timeout rolls it back instead:
    // `http_rollback.rs`).
    let (_, v) = post(&c, &s.url("/v1/sessions"), &json!({})).await;
    let id = v["id"].as_str().unwrap().to_string();
    let (_, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/execute")),
        &json!({"code": "import os\nos._exit(3)"}),
    )
    .await;
    assert_eq!(v["ended"]["reason"], "exit", "{v}");
    assert_eq!(v["rolled_back"], false);
    let (_, info) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(info["state"], "ended");

    let audit = s.audit();
    for action in [
        "session_open",
        "session_turn",
        "session_close",
        "file_upload",
        "file_download",
    ] {
        assert!(
            audit.iter().any(|r| r["action"] == action),
            "no {action} in the audit log"
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_turn_conflicts_and_idle_sessions_expire() {
    let s = start("expiry", |a| a.session_idle_secs = 1).await;
    let c = client();
    let (_, v) = post(&c, &s.url("/v1/sessions"), &json!({})).await;
    let id = v["id"].as_str().unwrap().to_string();
    let turn = s.url(&format!("/v1/sessions/{id}/execute"));

    // A second turn while one runs: 409.
    let slow = {
        let c = c.clone();
        let turn = turn.clone();
        tokio::spawn(async move {
            post(
                &c,
                &turn,
                &json!({"code": "import time\ntime.sleep(0.8)\n'done'"}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (st, v) = post(&c, &turn, &json!({"code": "1"})).await;
    assert_eq!((st, error_code(&v)), (409, "session_busy"));
    let (_, v) = get(&c, &s.url(&format!("/v1/sessions/{id}/files"))).await;
    assert_eq!(error_code(&v), "session_busy");
    let (st, v) = slow.await.unwrap();
    assert_eq!((st, v["result"].as_str()), (200, Some("'done'")), "{v}");

    // Left idle past the idle timeout: 410.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let (st, v) = post(&c, &turn, &json!({"code": "1"})).await;
    assert_eq!((st, error_code(&v)), (410, "session_expired"));
    let (st, _) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(st, 410);
    assert_eq!(s.sandbox_dirs(), 0);
    assert!(
        s.audit()
            .iter()
            .any(|r| r["action"] == "session_expire" && r["session_id"] == id.as_str())
    );

    let m = metrics_at(&c, &s.base).await;
    assert_eq!(
        m[r#"vivarium_sessions_closed_total{reason="expired"}"#],
        1.0
    );
    assert_eq!(m["vivarium_live_sessions"], 0.0);
    s.stop().await;
}

/// A turn whose client hangs up runs to its end and keeps its session busy until then (its
/// worker still has the interpreter); then the session is idle again with what the turn did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_client_hangs_up_holds_its_session_until_it_ends() {
    let s = shared().await;
    let c = client();
    let (_, v) = post(&c, &s.url("/v1/sessions"), &json!({})).await;
    let id = v["id"].as_str().unwrap().to_string();
    let turn = s.url(&format!("/v1/sessions/{id}/execute"));
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    let hung_up = impatient
        .post(&turn)
        .json(&json!({"code": "import time\ntime.sleep(1.5)\nx = 42"}))
        .send()
        .await;
    assert!(hung_up.is_err(), "the client gave up first: {hung_up:?}");
    let (st, v) = post(&c, &turn, &json!({"code": "1"})).await;
    assert_eq!((st, error_code(&v)), (409, "session_busy"), "{v}");
    wait_idle(&c, &s.base, &id).await;
    let v = session_turn(&c, &s.base, &id, "x").await;
    assert_eq!(v["result"], "42", "{v}");
}

/// Files the host writes into a session (an upload, a turn's `files`) count against the
/// session's disk limit when the guest writes next: the guest cannot write a full quota on
/// top of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_written_files_count_against_the_guests_disk_quota() {
    let s = shared().await;
    let c = client();
    let quota: u64 = 4 << 20;
    let (st, v) = post(
        &c,
        &s.url("/v1/sessions"),
        &json!({"limits": {"disk_bytes": quota}}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    let turn = s.url(&format!("/v1/sessions/{id}/execute"));
    // Charge the guest's estimate once with a small write of its own.
    let (_, v) = post(&c, &turn, &json!({"code": "open('a.txt', 'w').write('a')"})).await;
    assert_eq!(v["status"], "ok", "{v}");

    // 3 MiB uploaded, then 3 MiB sent with a turn's files: each fits alone, not together.
    let r = c
        .put(s.url(&format!("/v1/sessions/{id}/files/up.bin")))
        .body(vec![7u8; 3 << 20])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let write_3mib = "\
try:
    with open('mine.bin', 'wb') as f:
        f.write(b'x' * (3 << 20))
    print('written')
except OSError as e:
    print('refused', e.errno)
";
    let (_, v) = post(&c, &turn, &json!({"code": write_3mib})).await;
    assert_eq!(v["status"], "ok", "{v}");
    assert!(
        v["stdout"].as_str().unwrap().starts_with("refused"),
        "the guest wrote 3 MiB on top of a 3 MiB upload under a 4 MiB quota: {v}"
    );
    let (_, v) = post(&c, &turn, &json!({"code": "import os\nsum(os.path.getsize(n) for n in os.listdir('.') if os.path.isfile(n))"})).await;
    let used: u64 = v["result"].as_str().unwrap().parse().unwrap();
    assert!(
        used <= quota,
        "{used} bytes on disk under a {quota}-byte quota"
    );

    // The same through a turn's `files`.
    let (st, v) = post(
        &c,
        &s.url("/v1/sessions"),
        &json!({"limits": {"disk_bytes": quota}}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let turn = s.url(&format!(
        "/v1/sessions/{}/execute",
        v["id"].as_str().unwrap()
    ));
    let (_, v) = post(&c, &turn, &json!({"code": "open('a.txt', 'w').write('a')"})).await;
    assert_eq!(v["status"], "ok", "{v}");
    let (_, v) = post(
        &c,
        &turn,
        &json!({"code": write_3mib, "files": [{"path": "in.bin", "content": b64(&vec![7u8; 3 << 20])}]}),
    )
    .await;
    assert_eq!(v["status"], "ok", "{v}");
    assert!(
        v["stdout"].as_str().unwrap().starts_with("refused"),
        "the guest wrote 3 MiB on top of 3 MiB of turn files under a 4 MiB quota: {v}"
    );
}
