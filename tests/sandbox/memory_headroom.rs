//! `memory_bytes` is the memory the caller's code may use beyond what its sandbox starts with
//! (the template's own image, the server's cost), on every template: in executions, in
//! sessions, and in sessions forked or restored from a snapshot. Asked for 256 MiB, a program
//! gets about 256 MiB on `python` (a 40 MiB image) and on `scientific` (~170 MiB) alike.

use crate::common;

use crate::http_support::*;
use serde_json::{Value, json};
use vivarium::{Limits, Template};

const LIMIT: u64 = 256 << 20;

/// 160 MiB, kept in `x`.
const FITS: &str = "x = [bytearray(32 << 20) for _ in range(5)]\nprint(len(x) * 32)";

/// 300 MiB: more than the limit, whatever the template holds.
const TOO_MUCH: &str = "y = [bytearray(30 << 20) for _ in range(10)]";

/// How many MiB the program can take, in 4 MiB pieces, before `MemoryError`.
const MEASURE: &str = "chunks = []\ntry:\n    while True:\n        chunks.append(bytearray(4 << 20))\n\
                       except MemoryError:\n    pass\nn = len(chunks) * 4\ndel chunks\nprint(n)";

const TEMPLATES: [&str; 2] = ["python", "scientific"];

fn execute_body(template: &str, code: &str) -> Value {
    json!({"code": code, "template": template, "limits": {"memory_bytes": LIMIT}})
}

fn assert_memory_exceeded(v: &Value, what: &str) {
    assert_eq!(v["status"], "memory_exceeded", "{what}: {v}");
    assert_eq!(v["error"]["type"], "MemoryError", "{what}: {v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_execution_gets_the_memory_it_asked_for_on_every_template() {
    let s = start("headroom-exec", |_| {}).await;
    let c = client();
    let url = s.url("/v1/execute");
    let mut measured = Vec::new();
    for t in TEMPLATES {
        let (st, v) = post(&c, &url, &execute_body(t, FITS)).await;
        assert_eq!((st, v["status"].as_str()), (200, Some("ok")), "{t}: {v}");
        assert_eq!(v["stdout"], "160\n", "{t}: {v}");

        let (st, v) = post(&c, &url, &execute_body(t, TOO_MUCH)).await;
        assert_eq!(st, 200, "{t}: {v}");
        assert_memory_exceeded(&v, t);

        let (st, v) = post(&c, &url, &execute_body(t, MEASURE)).await;
        assert_eq!((st, v["status"].as_str()), (200, Some("ok")), "{t}: {v}");
        let mib: u64 = v["stdout"].as_str().unwrap().trim().parse().unwrap();
        eprintln!("{t}: {mib} MiB of headroom under memory_bytes = 256 MiB");
        // The limit, less what the set-up turn and the interpreter's own bookkeeping take,
        // plus at most the free space left inside the template's image.
        assert!(
            ((LIMIT >> 20) - 24..=(LIMIT >> 20) + 8).contains(&mib),
            "{t}: {mib} MiB of headroom for a limit of 256 MiB"
        );
        measured.push(mib);
    }
    assert!(
        measured[0].abs_diff(measured[1]) <= 16,
        "the same limit gives the same headroom on both templates: {measured:?} MiB"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_and_its_fork_and_restore_get_the_memory_asked_for() {
    let s = start("headroom-session", |_| {}).await;
    let c = client();
    for t in TEMPLATES {
        let id = open_session(
            &c,
            &s.base,
            &json!({"template": t, "limits": {"memory_bytes": LIMIT}}),
        )
        .await;
        // 160 MiB held across turns; 160 MiB more is past the limit (rolled back).
        let v = session_turn(&c, &s.base, &id, FITS).await;
        assert_eq!(v["stdout"], "160\n", "{t}: {v}");
        let turn = s.url(&format!("/v1/sessions/{id}/execute"));
        let (st, v) = post(&c, &turn, &json!({"code": FITS.replace('x', "z")})).await;
        assert_eq!(st, 200, "{t}: {v}");
        assert_memory_exceeded(&v, &format!("{t}, a second 160 MiB"));
        session_turn(&c, &s.base, &id, "del x").await;
        let (st, v) = post(&c, &turn, &json!({"code": TOO_MUCH})).await;
        assert_eq!(st, 200, "{t}: {v}");
        assert_memory_exceeded(&v, &format!("{t}, session"));

        // A fork and a restore start from the template's image too: the limit is theirs.
        let (st, fork) = post(&c, &s.url(&format!("/v1/sessions/{id}/fork")), &json!({})).await;
        assert_eq!(st, 201, "{t}: {fork}");
        let snap = take_snapshot(&c, &s.base, &id).await;
        let (st, restored) = post(
            &c,
            &s.url("/v1/sessions"),
            &json!({"snapshot": snap["snapshot_id"]}),
        )
        .await;
        assert_eq!(st, 201, "{t}: {restored}");
        for (what, copy) in [("fork", &fork), ("restore", &restored)] {
            let copy = copy["id"].as_str().unwrap();
            let v = session_turn(&c, &s.base, copy, FITS).await;
            assert_eq!(v["stdout"], "160\n", "{t}, {what}: {v}");
            let (st, v) = post(
                &c,
                &s.url(&format!("/v1/sessions/{copy}/execute")),
                &json!({"code": TOO_MUCH}),
            )
            .await;
            assert_eq!(st, 200, "{t}, {what}: {v}");
            assert_memory_exceeded(&v, &format!("{t}, {what}"));
        }
    }
    s.stop().await;
}

/// The largest `memory_bytes` plus either template's image fits an engine pool slot (wasm32's
/// 4 GiB): the maximum is grantable in full on every template.
#[test]
fn the_maximum_fits_a_pool_slot_on_every_template() {
    let host = common::host();
    for t in Template::ALL {
        host.template_pre(t).expect("the template loads");
        let image = host.starting_bytes(t, 0);
        eprintln!("{t}: the template's image is {} MiB", image >> 20);
        assert!(image > 0, "{t}");
        assert!(
            image + Limits::MAXIMUM.memory_bytes <= 4 << 30,
            "{t}: an image of {image} bytes leaves no room for the maximum"
        );
    }
}
