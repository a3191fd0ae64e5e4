//! Snapshots in S3-compatible object storage, over real HTTP: a real S3 server (`s3s-fs`, which
//! `.ci/run` installs) on 127.0.0.1 with a fresh data dir, Vivarium's server started with
//! `snapshot_url = s3://…`; snapshot, list, inspect, restore, delete, each checked in the
//! bucket through the S3 API too; then the S3 server stopped: a snapshot is a 503
//! `snapshot_store_unavailable` and the session goes on.
//!
//! One test function: the `AWS_*` variables are set once, before any other thread starts.

use std::time::{Duration, Instant};

use crate::http_support::s3::*;
use crate::http_support::*;
use object_store::ObjectStoreExt;
use object_store::path::Path as ObjectPath;
use serde_json::{Value, json};

async fn turn(c: &reqwest::Client, s: &TestServer, id: &str, code: &str) -> Value {
    session_turn(c, &s.base, id, code).await
}

#[test]
fn snapshots_live_in_s3_and_a_store_that_is_down_is_a_503() {
    let mut s3 = S3Server::start();
    // SAFETY: the only test of this binary, before it starts any thread (the runtime below,
    // the server's): nothing reads the environment concurrently.
    unsafe {
        std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
        std::env::set_var("AWS_REGION", "us-east-1");
        std::env::set_var("AWS_ENDPOINT_URL", s3.endpoint());
        std::env::remove_var("AWS_ENDPOINT");
        std::env::remove_var("AWS_ENDPOINT_URL_S3");
        std::env::remove_var("AWS_SESSION_TOKEN");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(scenario(&mut s3));
}

async fn scenario(s3: &mut S3Server) {
    let s = start("snap-s3", |args| {
        args.snapshot_url = Some(format!("s3://{BUCKET}/{PREFIX}"));
    })
    .await;
    let c = client();
    let (st, v) = post(&c, &s.url("/v1/sessions"), &json!({"template": "python"})).await;
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    turn(&c, &s, &id, "x = 41").await;

    // A snapshot is one object, <prefix>/<id>.snap, in the bucket.
    let snap = take_snapshot(&c, &s.base, &id).await;
    let snap_id = snap["snapshot_id"].as_str().unwrap().to_string();
    let key = format!("{PREFIX}/{snap_id}.snap");
    assert_eq!(s3.keys().await, vec![key.clone()]);
    let stored = s3
        .client()
        .head(&ObjectPath::from(key.as_str()))
        .await
        .unwrap();
    assert_eq!(Some(stored.size), snap["size_bytes"].as_u64(), "{snap}");

    // Listed, and inspected from its header (a ranged GET).
    let (st, list) = get(&c, &s.url("/v1/snapshots")).await;
    assert_eq!(st, 200, "{list}");
    let listed: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["snapshot_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, vec![snap_id.as_str()], "{list}");
    let (st, one) = get(&c, &s.url(&format!("/v1/snapshots/{snap_id}"))).await;
    assert_eq!(st, 200, "{one}");
    assert_eq!(one["size_bytes"], snap["size_bytes"], "{one}");

    // Restored from the bucket, the state is there.
    let (st, restored) = post(&c, &s.url("/v1/sessions"), &json!({"snapshot": snap_id})).await;
    assert_eq!(st, 201, "{restored}");
    let r = restored["id"].as_str().unwrap().to_string();
    assert_eq!(turn(&c, &s, &r, "x + 1").await["result"], "42");

    // Deleted: gone from the bucket, and a second delete finds nothing.
    let url = s.url(&format!("/v1/snapshots/{snap_id}"));
    let resp = c.delete(&url).send().await.unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(s3.keys().await, Vec::<String>::new());
    let resp = c.delete(&url).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    let (st, v) = get(&c, &url).await;
    assert_eq!((st, error_code(&v)), (404, "snapshot_not_found"));
    let (st, list) = get(&c, &s.url("/v1/snapshots")).await;
    assert_eq!((st, list), (200, json!([])));

    // The store goes down: a snapshot is a 503 that loses nothing, and the session goes on.
    s3.kill();
    let started = Instant::now();
    let (st, v) = post(
        &c,
        &s.url(&format!("/v1/sessions/{id}/snapshot")),
        &json!({}),
    )
    .await;
    assert_eq!(
        (st, error_code(&v)),
        (503, "snapshot_store_unavailable"),
        "{v}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "a store that is down answers within its few retries: {:?}",
        started.elapsed()
    );
    let (st, v) = get(&c, &s.url("/v1/snapshots")).await;
    assert_eq!(
        (st, error_code(&v)),
        (503, "snapshot_store_unavailable"),
        "{v}"
    );
    assert_eq!(turn(&c, &s, &id, "x + 1").await["result"], "42");
    assert_eq!(turn(&c, &s, &r, "x").await["result"], "41");

    s.stop().await;
}
