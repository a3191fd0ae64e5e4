//! Every turn undoable (issue 53): a session keeps the states after its last turns, lists
//! them, rolls back to any of them (interpreter, files, the shell's folder and variables) and
//! forks one or many sessions from any of them. Over real HTTP, with real workers.

use std::time::Duration;

use crate::http_support::*;
use serde_json::{Value, json};

/// The caller's tenant's resident sessions, from `GET /v1/usage`.
async fn resident(api: &Api) -> u64 {
    let (_, u) = get(&api.c, &api.url("/v1/usage")).await;
    u["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["quota"] == "resident_sessions")
        .unwrap_or_else(|| panic!("{u}"))["used"]
        .as_u64()
        .unwrap()
}

fn turn_numbers(v: &Value) -> Vec<u64> {
    v["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["turn"].as_u64().unwrap())
        .collect()
}

async fn bash(api: &Api, id: &str, script: &str) -> Value {
    let v = api
        .turn(id, &json!({"code": script, "language": "bash"}))
        .await
        .expect(200);
    assert_eq!(v["status"], "ok", "{script}: {v}");
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_goes_back_to_any_kept_turn_with_its_dataframe_files_folder_and_env() {
    let api = shared().await;
    let id = api.session(&json!({})).await;
    api.turn_ok(
        &id,
        "import pandas as pd, os\ndf = pd.DataFrame({'a': range(1000), 'b': [str(i) for i in range(1000)]})\n\
         open('f.txt', 'w').write('one')",
    )
    .await;
    bash(
        &api,
        &id,
        "mkdir -p sub && cd sub && export STAGE=two && echo two > ../f.txt",
    )
    .await;
    api.turn_ok(
        &id,
        "df.loc[0, 'a'] = -1\ndf = df[df.a % 2 == 0]\nopen('new.txt', 'w').write('three')",
    )
    .await;
    // A turn that fails with an exception still makes a state (it completed).
    let v = api
        .turn(&id, &json!({"code": "x = 1\n1/0"}))
        .await
        .expect(200);
    assert_eq!(v["status"], "error", "{v}");
    // A turn a limit stopped makes none: the session went back to before it.
    let v = api
        .turn(
            &id,
            &json!({"code": "while True: pass", "limits": {"timeout_ms": 300}}),
        )
        .await
        .expect(200);
    assert_eq!(v["rolled_back"], true, "{v}");
    assert_eq!(v["turn"], 5, "{v}");

    let kept = api.turns(&id).await.expect(200);
    assert_eq!(turn_numbers(&kept), [0, 1, 2, 3, 4], "{kept}");
    assert_eq!(kept["keep_turns"], 16, "{kept}");
    let turns = kept["turns"].as_array().unwrap();
    assert_eq!(turns[1]["code"], "import pandas as pd, os", "{kept}");
    assert_eq!(turns[4]["code"], "x = 1", "{kept}");
    assert_eq!(
        turns[4]["bytes"], 0,
        "the state it is in costs nothing more: {kept}"
    );
    assert!(
        turns[2]["bytes"].as_u64().unwrap() > 4096,
        "turn 3 rewrote the DataFrame's pages: {kept}"
    );

    // Back to just after turn 2: the DataFrame as turn 1 made it, the file as turn 2 wrote
    // it, no file of turn 3, and the shell in `sub` with STAGE set.
    let v = api.rollback(&id, &json!({"turn": 2})).await.expect(200);
    assert_eq!(v, json!({"turn": 2}));
    // (The shell's `cd` is the interpreter's working directory too.)
    let v = api
        .turn_ok(
            &id,
            "(len(df), int(df.a[0]), open('../f.txt').read(), os.path.exists('../new.txt'), 'x' in globals())",
        )
        .await;
    assert_eq!(v["result"], "(1000, 0, 'two\\n', False, False)", "{v}");
    assert_eq!(
        v["turn"], 3,
        "the next turn after a rollback to 2 is 3: {v}"
    );
    let v = bash(&api, &id, "pwd; echo $STAGE").await;
    assert!(
        v["stdout"].as_str().unwrap().ends_with("/sub\ntwo\n"),
        "{v}"
    );
    // The states after turn 2 are gone; the ones before and the new ones are kept.
    let kept = api.turns(&id).await.expect(200);
    assert_eq!(turn_numbers(&kept), [0, 1, 2, 3, 4], "{kept}");
    let a = api.rollback(&id, &json!({"turn": 9})).await;
    assert_eq!(a.error(), (404, "turn_not_kept"), "{:?}", a.body);

    // Back to the state it was opened in, the later one kept as a branch.
    let v = api
        .rollback(&id, &json!({"turn": 0, "branch": true}))
        .await
        .expect(200);
    let branch = v["branch"].as_str().unwrap().to_string();
    let v = api
        .turn_ok(&id, "'df' in globals(), 'pd' in globals()")
        .await;
    assert_eq!(v["result"], "(False, False)", "{v}");
    let v = api
        .turn_ok(&branch, "len(df), os.getcwd().endswith('/sub')")
        .await;
    assert_eq!(v["result"], "(1000, True)", "{v}");
    let v = bash(&api, &branch, "pwd").await;
    assert!(v["stdout"].as_str().unwrap().ends_with("/sub\n"), "{v}");

    // Hostile or malformed asks change nothing.
    for body in [
        json!({}),
        json!({"turn": "2"}),
        json!({"turn": -1}),
        json!({"turn": 1, "what": 1}),
    ] {
        let a = api.rollback(&id, &body).await;
        assert_eq!(a.status, 400, "{body}: {:?}", a.body);
    }
    let a = api
        .rollback("s-00000000000000000000000000000000", &json!({"turn": 0}))
        .await;
    assert_eq!(a.error().0, 404, "{:?}", a.body);
    let v = api.turn_ok(&id, "'pd' in globals()").await;
    assert_eq!(v["result"], "False", "{v}");
    api.close(&id).await.expect(204);
    api.close(&branch).await.expect(204);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forks_come_from_any_kept_turn_and_a_hundred_diverge_on_their_own() {
    let s = start("turn-forks", |a| {
        a.max_sessions = 120;
        a.max_concurrency = Some(2);
    })
    .await;
    let api = s.api();
    let id = api.session(&json!({"template": "python"})).await;
    for n in 1..=3 {
        api.turn_ok(&id, &format!("x = {n}\nopen('n.txt', 'w').write('{n}')"))
            .await;
    }
    // One fork of turn 2's state, while the session has moved on to turn 3.
    let one = api.fork_with(&id, &json!({"turn": 2})).await.expect(201);
    let one = one["id"].as_str().unwrap().to_string();
    let v = api.turn_ok(&one, "x, open('n.txt').read()").await;
    assert_eq!(v["result"], "(2, '2')", "{v}");
    assert_eq!(v["turn"], 3, "{v}");
    api.close(&one).await.expect(204);

    // A hundred of turn 1's state, each going its own way.
    let v = api
        .fork_with(&id, &json!({"turn": 1, "count": 100}))
        .await
        .expect(201);
    let kids: Vec<String> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kids.len(), 100);
    for (i, kid) in kids.iter().enumerate() {
        let v = api
            .turn_ok(
                kid,
                &format!("x += {i}\nopen('n.txt', 'a').write('+{i}')\nx"),
            )
            .await;
        assert_eq!(v["result"], (1 + i).to_string(), "{v}");
    }
    for (i, kid) in kids.iter().enumerate().step_by(17) {
        let v = api.turn_ok(kid, "x, open('n.txt').read()").await;
        assert_eq!(v["result"], format!("({}, '1+{i}')", 1 + i), "{v}");
    }
    let v = api.turn_ok(&id, "x, open('n.txt').read()").await;
    assert_eq!(v["result"], "(3, '3')", "the source is its own: {v}");

    // Bad asks: nothing is made.
    for (body, want) in [
        (json!({"count": 0}), 400),
        (json!({"count": 101}), 400),
        (json!({"turn": 77, "count": 2}), 404),
        (json!({"counts": 2}), 400),
    ] {
        let a = api.fork_with(&id, &body).await;
        assert_eq!(a.status, want, "{body}: {:?}", a.body);
    }
    let a = api.fork_with(&id, &json!({"turn": 77})).await;
    assert_eq!(a.error(), (404, "turn_not_kept"), "{:?}", a.body);
    assert_eq!(resident(&api).await, 101);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_turns_stay_within_their_count_bytes_quota_and_owner() {
    const ALICE: &str = "key-alice-turns-0123456789";
    const BOB: &str = "key-bob-turns-0123456789ab";
    let keys = scratch_dir("turns-keys").join("keys.txt");
    std::fs::write(
        &keys,
        format!(
            "tenant acme resident_sessions=4 hibernated_sessions=0\nalice@acme:{ALICE}\n\
             tenant other\nbob@other:{BOB}\n"
        ),
    )
    .unwrap();
    let s = start("turns-bounds", |a| {
        a.api_keys_file = Some(keys);
        a.kept_turn_bytes = 1 << 20;
    })
    .await;
    let alice = Api::keyed(&s.base, ALICE);
    let bob = Api::keyed(&s.base, BOB);
    for bad in [0, 65] {
        let a = alice
            .open(&json!({"template": "python", "keep_turns": bad}))
            .await;
        assert_eq!(a.status, 400, "{bad}: {:?}", a.body);
    }
    let id = alice
        .session(&json!({"template": "python", "keep_turns": 3}))
        .await;
    for n in 1..=5 {
        alice.turn_ok(&id, &format!("x = {n}")).await;
    }
    let kept = alice.turns(&id).await.expect(200);
    assert_eq!(turn_numbers(&kept), [3, 4, 5], "{kept}");
    assert_eq!(kept["keep_turns"], 3);
    let a = alice.rollback(&id, &json!({"turn": 2})).await;
    assert_eq!(a.error(), (404, "turn_not_kept"), "{:?}", a.body);

    // A turn that alone rewrites more than the byte budget keeps nothing before it, and
    // says so.
    alice
        .turn_ok(&id, "big = bytearray(b'x' * (3 << 20))")
        .await;
    let v = alice.turn_ok(&id, "big[:] = b'y' * (3 << 20)").await;
    assert_eq!(v["turns_dropped"], true, "{v}");
    let kept = alice.turns(&id).await.expect(200);
    assert_eq!(turn_numbers(&kept), [7], "{kept}");
    let v = alice.turn_ok(&id, "y = 1").await;
    assert_eq!(v.get("turns_dropped"), None, "{v}");
    alice.rollback(&id, &json!({"turn": 7})).await.expect(200);
    let v = alice.turn_ok(&id, "'y' in globals(), bytes(big[:1])").await;
    assert_eq!(v["result"], "(False, b'y')", "{v}");

    // Another tenant finds none of it.
    assert_eq!(bob.turns(&id).await.error(), (404, "session_not_found"));
    assert_eq!(
        bob.rollback(&id, &json!({"turn": 7})).await.error(),
        (404, "session_not_found")
    );
    assert_eq!(
        bob.fork_with(&id, &json!({"turn": 7})).await.error(),
        (404, "session_not_found")
    );

    // A fan-out past the tenant's sessions is refused whole: none of it is left.
    let a = alice.fork_with(&id, &json!({"count": 4})).await;
    assert_eq!(a.error(), (429, "quota_exceeded"), "{:?}", a.body);
    assert_eq!(resident(&alice).await, 1);
    let v = alice.fork_with(&id, &json!({"count": 3})).await.expect(201);
    assert_eq!(v["sessions"].as_array().unwrap().len(), 3, "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernated_session_wakes_with_only_the_turn_it_is_in() {
    let s = start("turns-hibernate", |a| a.hibernate_after_secs = 1).await;
    let api = s.api();
    let id = api.session(&json!({"template": "python"})).await;
    for n in 1..=3 {
        api.turn_ok(&id, &format!("x = {n}")).await;
    }
    assert_eq!(
        turn_numbers(&api.turns(&id).await.expect(200)),
        [0, 1, 2, 3]
    );
    wait_for_metric(
        &api.c,
        &s.base,
        r#"vivarium_session_events_total{event="hibernate"}"#,
        1.0,
        Duration::from_secs(15),
    )
    .await;
    // Waking keeps its state but not its kept turns (they lived with its instance).
    let kept = api.turns(&id).await.expect(200);
    assert_eq!(turn_numbers(&kept), [3], "{kept}");
    let a = api.rollback(&id, &json!({"turn": 1})).await;
    assert_eq!(a.error(), (404, "turn_not_kept"), "{:?}", a.body);
    api.turn_ok(&id, "x = 4").await;
    api.rollback(&id, &json!({"turn": 3})).await.expect(200);
    let v = api.turn_ok(&id, "x").await;
    assert_eq!(v["result"], "3", "{v}");
    let m = metrics_at(&api.c, &s.base).await;
    assert_eq!(
        m[r#"vivarium_session_events_total{event="rollback_to_turn"}"#],
        1.0
    );
    s.stop().await;
}
