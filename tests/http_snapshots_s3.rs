//! Snapshots in S3-compatible object storage, over real HTTP: a real S3 server (`s3s-fs`, which
//! `.ci/run` installs) on 127.0.0.1 with a fresh data dir, Vivarium's server started with
//! `snapshot_url = s3://…`; snapshot, list, inspect, restore, delete, each checked in the
//! bucket through the S3 API too; then the S3 server stopped: a snapshot is a 503
//! `snapshot_store_unavailable` and the session goes on.
//!
//! One test function: the `AWS_*` variables are set once, before any other thread starts.

mod http_support;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use http_support::*;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::{Value, json};

const BUCKET: &str = "vivarium-snapshots";
const PREFIX: &str = "ci/run-1";
const ACCESS_KEY: &str = "vivarium-test-access";
const SECRET_KEY: &str = "vivarium-test-secret";

/// The `s3s-fs` binary: on PATH, or where `cargo install` puts it.
fn s3s_fs_binary() -> PathBuf {
    let mut places: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        places.push(PathBuf::from(home).join("bin"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        places.push(PathBuf::from(home).join(".cargo/bin"));
    }
    places
        .into_iter()
        .map(|dir| dir.join("s3s-fs"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the S3 server `s3s-fs` is not installed (not on PATH nor in ~/.cargo/bin): \
                 `.ci/run` installs it (cargo install --locked s3s-fs --features binary)"
            )
        })
}

/// A running `s3s-fs` with its data dir; killed and removed on drop (a failing test too).
struct S3Server {
    child: Option<Child>,
    root: PathBuf,
    addr: SocketAddr,
}

impl S3Server {
    fn start() -> S3Server {
        let binary = s3s_fs_binary();
        let root = std::env::temp_dir().join(format!(
            "vivarium-s3-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        // s3s-fs keeps a bucket as a directory of its root: this is how a bucket is made.
        std::fs::create_dir_all(root.join(BUCKET)).unwrap();
        let port = {
            let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            probe.local_addr().unwrap().port()
        };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let child = Command::new(&binary)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(&root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let mut server = S3Server {
            child: Some(child),
            root,
            addr,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            if let Some(status) = server.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("s3s-fs exited at start: {status}");
            }
            assert!(Instant::now() < deadline, "s3s-fs never listened on {addr}");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A client of the bucket of its own, to see what is really stored.
    fn client(&self) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_bucket_name(BUCKET)
            .with_region("us-east-1")
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .build()
            .unwrap()
    }

    /// Every object's key in the bucket, listed through the S3 API.
    async fn keys(&self) -> Vec<String> {
        let objects: Vec<_> = self.client().list(None).try_collect().await.unwrap();
        let mut keys: Vec<String> = objects
            .into_iter()
            .map(|o| o.location.to_string())
            .collect();
        keys.sort();
        keys
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

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
