//! A real S3-compatible server for tests: `s3s-fs` (which `.ci/run` installs) on 127.0.0.1
//! with a fresh data dir and one bucket.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use object_store::ObjectStore;
use object_store::aws::{AmazonS3, AmazonS3Builder};

pub const BUCKET: &str = "vivarium-snapshots";
pub const PREFIX: &str = "ci/run-1";
pub const ACCESS_KEY: &str = "vivarium-test-access";
pub const SECRET_KEY: &str = "vivarium-test-secret";

/// The `s3s-fs` binary: on PATH, or where `cargo install` puts it.
pub fn s3s_fs_binary() -> PathBuf {
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
pub struct S3Server {
    child: Option<Child>,
    root: PathBuf,
    addr: SocketAddr,
}

impl S3Server {
    pub fn start() -> S3Server {
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

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A client of the bucket of its own, to see what is really stored.
    pub fn client(&self) -> AmazonS3 {
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
    pub async fn keys(&self) -> Vec<String> {
        let objects: Vec<_> = self.client().list(None).try_collect().await.unwrap();
        let mut keys: Vec<String> = objects
            .into_iter()
            .map(|o| o.location.to_string())
            .collect();
        keys.sort();
        keys
    }

    pub fn kill(&mut self) {
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
