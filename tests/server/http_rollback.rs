//! A turn that a limit or a trap stops no longer ends the session: it goes back to its state
//! before that turn (variables, imports and files), the turn's result says `rolled_back`,
//! and the next turn runs normally. Over real HTTP.

use crate::http_support::*;
use serde_json::{Value, json};

async fn turn(api: &Api, id: &str, body: Value) -> Value {
    api.turn(id, &body).await.expect(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_turns_roll_back_to_the_state_before_them() {
    let s = start("rollback", |_| {}).await;
    let c = client();
    let api = s.api();
    let (_, v) = post(&c, &s.url("/v1/sessions"), &json!({"template": "python"})).await;
    let id = v["id"].as_str().unwrap().to_string();
    let v = turn(
        &api,
        &id,
        json!({"code": "import json\nx = [1, 2, 3]\nopen('keep.txt', 'w').write('before')"}),
    )
    .await;
    assert_eq!(v["status"], "ok", "{v}");

    let stoppers = [
        (
            "timeout",
            json!({"timeout_ms": 300}),
            "while True: x.append(0)",
        ),
        (
            "fuel_exhausted",
            json!({"fuel": 50_000_000u64}),
            "while True: x.append(0)",
        ),
        (
            "stack_overflow",
            json!({}),
            "l = []\nfor i in range(300000): l = [l]\ndel l",
        ),
    ];
    for (status, limits, code) in stoppers {
        // Each stopped turn first changes everything it can: memory, files, a new file, and
        // a file of the turn's own input.
        let code = format!(
            "x.clear(); x.append('lost'); y = 1\nopen('keep.txt', 'w').write('after')\n\
             open('new.txt', 'w').write('new')\n{code}"
        );
        let v = turn(&api, &id,
            json!({"code": code, "limits": limits, "files": [{"path": "input.txt", "content": b64(b"in")}]}),
        )
        .await;
        assert_eq!(v["status"], status, "{v}");
        assert_eq!(v["rolled_back"], true, "{v}");
        assert_eq!(v["ended"], Value::Null, "{v}");
        let v = turn(
            &api,
            &id,
            json!({"code": "import os\n(x, 'y' in dir(), open('keep.txt').read(), \
                   sorted(f for f in os.listdir('.') if f.endswith('.txt')), json.dumps(1))"}),
        )
        .await;
        assert_eq!(v["status"], "ok", "{status}: {v}");
        assert_eq!(v["rolled_back"], false);
        assert_eq!(
            v["result"], "([1, 2, 3], False, 'before', ['keep.txt'], '1')",
            "{status}: {v}"
        );
    }
    let (_, info) = get(&c, &s.url(&format!("/v1/sessions/{id}"))).await;
    assert_eq!(info["state"], "idle", "{info}");
    // An upload between turns is part of the state a rollback keeps.
    let r = c
        .put(s.url(&format!("/v1/sessions/{id}/files/up.txt")))
        .body("uploaded")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v = turn(
        &api,
        &id,
        json!({"code": "while True: pass", "limits": {"timeout_ms": 200}}),
    )
    .await;
    assert_eq!(v["rolled_back"], true);
    let v = turn(&api, &id, json!({"code": "open('up.txt').read()"})).await;
    assert_eq!(v["result"], "'uploaded'", "{v}");
    let m = metrics_at(&c, &s.base).await;
    assert_eq!(
        m.get("vivarium_session_events_total{event=\"rollback\"}"),
        Some(&4.0)
    );
    // The sandbox directories of the stopped instances are gone; one is left, the live one.
    assert_eq!(s.settled_sandbox_dirs().await, 1);

    // A file held open between turns rolls back with the rest: it goes on from where it was.
    let v = turn(
        &api,
        &id,
        json!({"code": "held = open('held.txt', 'w'); held.write('a'); held.flush()"}),
    )
    .await;
    assert_eq!(v["status"], "ok");
    let v = turn(&api, &id,
        json!({"code": "held.write('lost'); held.flush()\nwhile True: pass", "limits": {"timeout_ms": 200}}),
    )
    .await;
    assert_eq!(v["rolled_back"], true, "{v}");
    let v = turn(
        &api,
        &id,
        json!({"code": "held.write('b'); held.close(); open('held.txt').read()"}),
    )
    .await;
    assert_eq!(v["result"], "'ab'", "{v}");

    // A folder being listed between turns is state no snapshot carries: a stopped turn then
    // ends the session, as it did before rollback existed.
    let v = turn(
        &api,
        &id,
        json!({"code": "import os\nit = os.scandir('.')"}),
    )
    .await;
    assert_eq!(v["status"], "ok");
    let v = turn(
        &api,
        &id,
        json!({"code": "while True: pass", "limits": {"timeout_ms": 200}}),
    )
    .await;
    assert_eq!(v["rolled_back"], false, "{v}");
    assert_eq!(v["ended"]["reason"], "stopped", "{v}");
    s.stop().await;
}

/// A session that has plotted rolls back too: matplotlib keeps the font files it drew text
/// with open, and an open file cannot be captured, so the host closes them at the end of a
/// turn that made a figure (`vivarium_display._release_fonts`). Before, such a session ended
/// at its next stopped turn: a notebook that plotted could not survive an interrupt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_plotted_rolls_back() {
    let api = shared().await;
    for template in ["python", "scientific"] {
        let id = api.session(&json!({"template": template})).await;
        for code in [
            "import matplotlib.pyplot as plt\nplt.plot([1, 2], label='a'); plt.legend()\nplt.show()",
            "fig, ax = plt.subplots(); ax.set_title('t'); fig.savefig('chart.png')",
        ] {
            let v = turn(&api, &id, json!({"code": code})).await;
            assert_eq!(v["status"], "ok", "{template}: {v}");
            let v = turn(
                &api,
                &id,
                json!({"code": "while True: pass", "limits": {"timeout_ms": 300}}),
            )
            .await;
            assert_eq!(v["status"], "timeout", "{v}");
            assert_eq!(v["rolled_back"], true, "{template}: {code}: {v}");
            let v = turn(&api, &id, json!({"code": "len(plt.get_fignums())"})).await;
            assert_eq!(v["result"], "0", "{v}");
        }
    }
}

/// What a turn writes in memory the session grew into after its tracking began is part of
/// the state a rollback brings back: the checkpoint walks the memory the session has now
/// (`DirtyTracker::take`), which covers every page grown into since, written in the turn
/// that grew it (`filled`) or in a later one (`big`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_written_in_grown_memory_roll_back_to_their_last_completed_turn() {
    let api = shared().await;
    let id = api.session(&json!({"template": "python"})).await;
    let grow = "big = bytearray(64 << 20)\nfilled = bytes([7]) * (16 << 20)\nlen(big)";
    let v = turn(&api, &id, json!({"code": grow})).await;
    assert_eq!(v["result"], "67108864", "{v}");
    let mark = "for i in range(0, len(big), 4096): big[i] = 7\nsum(big[::4096])";
    let v = turn(&api, &id, json!({"code": mark})).await;
    assert_eq!(v["result"], "114688", "{v}");
    let v = turn(
        &api,
        &id,
        json!({"code": "big[:] = bytes(len(big))\ndel filled\nfilled = bytes(16 << 20)\nwhile True: pass", "limits": {"timeout_ms": 500}}),
    )
    .await;
    assert_eq!(v["status"], "timeout", "{v}");
    assert_eq!(v["rolled_back"], true, "{v}");
    let v = turn(
        &api,
        &id,
        json!({"code": "sum(big[::4096]), sum(filled[::4096])"}),
    )
    .await;
    assert_eq!(v["result"], "(114688, 28672)", "{v}");
    api.close(&id).await;
}
