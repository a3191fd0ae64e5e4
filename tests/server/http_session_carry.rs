//! What a session carries through hibernation, snapshots, forks and rollbacks, over real
//! HTTP: files held open between turns (reopened at the same descriptor and position), the
//! bounds a capture shares with the decode (what is captured always restores), and the
//! turn numbers of tracebacks (the caller's first turn is `<turn 1>`).

use crate::http_support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_turns_are_numbered_from_1_in_tracebacks() {
    let api = shared().await;
    let id = api.session(&json!({"template": "python"})).await;
    let v = api.turn(&id, &json!({"code": "1/0"})).await.expect(200);
    assert_eq!(v["turn"], 1, "{v}");
    assert!(
        v["stderr"].as_str().unwrap().contains("File \"<turn 1>\""),
        "{v}"
    );
    assert_eq!(v["error"]["type"], "ZeroDivisionError", "{v}");
    assert_eq!(v["error"]["line"], 1, "{v}");
    let v = api
        .turn(&id, &json!({"code": "x = 1\nundefined"}))
        .await
        .expect(200);
    assert!(
        v["stderr"].as_str().unwrap().contains("File \"<turn 2>\""),
        "{v}"
    );
    assert_eq!(v["error"]["line"], 2, "{v}");
}

/// A session keeps the source of what its turns defined (a traceback through a function from
/// turn 1 shows its line after many turns), not of every turn: CPython's cache of interactive
/// sources held every turn for the session's life, growing its memory and every image of it
/// (the soak of issue 47). Sources past `TRACEBACK_SOURCE_BYTES` (1 MiB), oldest first, go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_the_sources_of_its_definitions_not_of_every_turn() {
    let api = shared().await;
    let id = api.session(&json!({"template": "python"})).await;
    api.turn_ok(&id, "def f():\n    return 1 / 0  # from turn 1")
        .await;
    api.turn_ok(&id, "n = 0").await;
    for _ in 0..60 {
        api.turn_ok(&id, "n += 1").await;
    }
    let v = api.turn(&id, &json!({"code": "f()"})).await.expect(200);
    let stderr = v["stderr"].as_str().unwrap();
    assert!(stderr.contains("File \"<turn 1>\", line 2, in f"), "{v}");
    assert!(stderr.contains("return 1 / 0  # from turn 1"), "{v}");
    assert!(stderr.contains("File \"<turn 63>\", line 1"), "{v}");
    let kept = "import linecache\n\
                sorted({k[0] for k in linecache._interactive_cache if str(k[0]).startswith('<turn ')})";
    let v = api.turn_ok(&id, kept).await;
    assert_eq!(v["result"], json!("['<turn 1>', '<turn 64>']"), "{v}");

    // Five definitions with 300 KB of source each: the oldest two are past the 1 MiB kept.
    let pad = "#".repeat(300_000);
    for i in 1..=5 {
        api.turn_ok(
            &id,
            &format!("def g{i}():\n    return 1 / 0  # g{i}\n{pad}"),
        )
        .await;
    }
    for (i, shown) in [(1, false), (2, false), (3, true), (5, true)] {
        let v = api
            .turn(&id, &json!({"code": format!("g{i}()")}))
            .await
            .expect(200);
        let stderr = v["stderr"].as_str().unwrap();
        assert!(stderr.contains(&format!("line 2, in g{i}")), "{v}");
        assert_eq!(stderr.contains(&format!("# g{i}")), shown, "g{i}: {v}");
    }
}

/// `f` open for writing with 'x' flushed (position 1), `r` read from position 3, and `g`
/// open with 'y' still in Python's buffer, with a closed descriptor (`t`'s) between `f` and
/// `r`: after hibernation, a snapshot restored, a fork or a rollback, each goes on where it
/// was, at its own descriptor.
const HOLD_OPEN: &str = "f = open('a.txt', 'w'); f.write('x'); f.flush()\n\
     t = open('t.txt', 'w')\n\
     r = open('r.txt', 'w+'); r.write('0123456789'); r.flush(); r.seek(3)\n\
     g = open('b.txt', 'w'); g.write('y')\n\
     t.close()\n\
     (f.fileno(), g.fileno(), r.fileno())";
const GO_ON: &str = "f.write('y'); f.close(); g.write('z'); g.close(); got = r.read(2); r.close()\n\
     (open('a.txt').read(), open('b.txt').read(), got)";
const WENT_ON: &str = "('xy', 'yz', '34')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_held_open_go_on_after_hibernation_snapshot_fork_and_rollback() {
    let s = start("carry-open", |a| a.hibernate_after_secs = 1).await;
    let c = client();

    // Hibernation (the sweeper, after a second idle) and the wake on the next turn.
    let id = open_session(&c, &s.base, &json!({"template": "python"})).await;
    let fds = session_turn(&c, &s.base, &id, HOLD_OPEN).await["result"].clone();
    // A gap at the closed descriptor between them.
    assert_eq!(fds, json!("(7, 10, 9)"), "{fds}");
    wait_for_metric(
        &c,
        &s.base,
        r#"vivarium_session_events_total{event="hibernate"}"#,
        1.0,
        std::time::Duration::from_secs(15),
    )
    .await;
    let (_, info) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(info["resident"], false, "{info}");
    // The same descriptors, then each file goes on.
    let v = session_turn(&c, &s.base, &id, "(f.fileno(), g.fileno(), r.fileno())").await;
    assert_eq!(v["result"], fds, "{v}");
    assert_eq!(
        session_turn(&c, &s.base, &id, GO_ON).await["result"],
        WENT_ON
    );

    // A snapshot restored, and a fork.
    let id = open_session(&c, &s.base, &json!({"template": "python"})).await;
    session_turn(&c, &s.base, &id, HOLD_OPEN).await;
    let snap = take_snapshot(&c, &s.base, &id).await;
    let (st, fork) = post(&c, &s.url(&format!("/v1/sessions/{id}/fork")), &json!({})).await;
    assert_eq!(st, 201, "{fork}");
    let restored = open_session(&c, &s.base, &json!({"snapshot": snap["snapshot_id"]})).await;
    for other in [restored, fork["id"].as_str().unwrap().to_string(), id] {
        let v = session_turn(&c, &s.base, &other, GO_ON).await;
        assert_eq!(v["result"], WENT_ON, "{other}: {v}");
    }

    // A rollback: a turn stopped by its timeout after writing to the open file comes back
    // to the state before it, file position included.
    let id = open_session(&c, &s.base, &json!({"template": "python"})).await;
    session_turn(&c, &s.base, &id, HOLD_OPEN).await;
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/execute")),
        &json!({"code": "f.write('lost'); f.flush(); r.read(); g.write('lost')\nwhile True: pass",
                "limits": {"timeout_ms": 300}}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (&v["status"], &v["rolled_back"]),
        (&json!("timeout"), &json!(true)),
        "{v}"
    );
    assert_eq!(
        session_turn(&c, &s.base, &id, GO_ON).await["result"],
        WENT_ON
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_being_listed_is_refused_with_why() {
    let s = shared().await;
    let c = client();
    let id = open_session(&c, &s.base, &json!({"template": "python"})).await;
    session_turn(&c, &s.base, &id, "import os\nit = os.scandir('.')").await;
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/snapshot")),
        &json!({}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (409, "snapshot_refused"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("os.scandir"),
        "{v}"
    );
    session_turn(&c, &s.base, &id, "it.close()").await;
    take_snapshot(&c, &s.base, &id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_too_long_for_a_snapshot_is_refused_at_capture_so_hibernation_never_strands_a_session()
 {
    let s = start("carry-long", |a| a.hibernate_after_secs = 1).await;
    let c = client();
    let id = open_session(&c, &s.base, &json!({"template": "python"})).await;
    // 1,100 bytes of path: the guest may make it, a snapshot cannot hold it.
    let deep = "import os\nos.chdir('/tmp')\nfor _ in range(11): os.mkdir('d' * 99); os.chdir('d' * 99)\nx = 1";
    session_turn(&c, &s.base, &id, deep).await;
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/snapshot")),
        &json!({}),
    )
    .await;
    assert_eq!((st, error_code(&v)), (409, "snapshot_refused"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 1024 bytes"),
        "{v}"
    );
    // The sweeper cannot hibernate it either: it stays resident and answers.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let (_, info) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(info["resident"], true, "{info}");
    assert_eq!(session_turn(&c, &s.base, &id, "x + 1").await["result"], "2");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernated_session_whose_snapshot_cannot_be_decoded_ends_once_with_why() {
    let s = start("carry-damaged", |a| a.hibernate_after_secs = 1).await;
    let c = client();
    let id = open_session(&c, &s.base, &json!({"template": "python"})).await;
    session_turn(&c, &s.base, &id, "x = 1").await;
    wait_for_metric(
        &c,
        &s.base,
        r#"vivarium_session_events_total{event="hibernate"}"#,
        1.0,
        std::time::Duration::from_secs(15),
    )
    .await;
    // Damage what the store holds (one byte of each file: the hash no longer matches).
    let mut damaged = 0;
    let mut stack = vec![s.scratch.with_extension("snapshots")];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(mut bytes) = std::fs::read(&p)
                && bytes.starts_with(b"VIVSNAP1")
            {
                let at = bytes.len() / 2;
                bytes[at] ^= 0x55;
                std::fs::write(&p, bytes).unwrap();
                damaged += 1;
            }
        }
    }
    assert_eq!(damaged, 1);
    let turn_url = s.url(&format!("/v1/sessions/{id}/execute"));
    let (st, v) = post(&c, &turn_url, &json!({"code": "x"})).await;
    assert_eq!((st, error_code(&v)), (409, "session_ended"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be restored"),
        "{v}"
    );
    // Once: the next request does not decode it again.
    let (st, v) = post(&c, &turn_url, &json!({"code": "x"})).await;
    assert_eq!((st, error_code(&v)), (404, "session_not_found"), "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_holding_files_open_make_room_for_a_new_one() {
    // Every resident place is taken by a session that holds a file open: the next open
    // hibernates the coldest to make room (it was 429 `too_many_sessions`: none could move).
    let s = start("carry-room", |a| a.max_sessions = 2).await;
    let c = client();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let id = open_session(&c, &s.base, &json!({"template": "python"})).await;
        session_turn(&c, &s.base, &id, "f = open('log.txt', 'w'); f.write('x')").await;
        ids.push(id);
    }
    let started = std::time::Instant::now();
    let third = open_session(&c, &s.base, &json!({"template": "python"})).await;
    eprintln!("the third session opened in {:?}", started.elapsed());
    session_turn(&c, &s.base, &third, "1").await;
    // The one that made room wakes with its file where it was.
    for id in &ids {
        let v = session_turn(
            &c,
            &s.base,
            id,
            "f.write('y'); f.close(); open('log.txt').read()",
        )
        .await;
        assert_eq!(v["result"], "'xy'", "{v}");
    }
    s.stop().await;
}
