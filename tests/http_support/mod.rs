//! Shared by the `http_*` tests: starts the real server in-process on 127.0.0.1 (port 0) on
//! a runtime of its own, with a scratch dir of its own, and small HTTP helpers.
#![allow(dead_code)]

pub mod clients;
pub mod s3;

#[allow(unused_imports)]
pub use clients::{browser_python, npm_prefix, venv_python};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use vivarium::server::{ServeArgs, bind};

pub struct TestServer {
    pub addr: SocketAddr,
    pub base: String,
    pub scratch: PathBuf,
    pub audit_log: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

/// The real `vivarium serve` binary, on 127.0.0.1 port 0, its scratch under `scratch`, its
/// snapshots in `snapshot_dir` (or its own default), with `extra` flags.
pub struct Proc {
    pub child: std::process::Child,
    pub base: String,
}

pub fn spawn_server(scratch: &Path, snapshot_dir: Option<&Path>, extra: &[&str]) -> Proc {
    use std::io::BufRead;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_vivarium"));
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .args(extra)
        .env("VIVARIUM_SCRATCH", scratch)
        .env("VIVARIUM_AUDIT_LOG", scratch.with_extension("audit.jsonl"))
        .env("VIVARIUM_VOLUME_DIR", scratch.with_extension("volumes"))
        .env("VIVARIUM_TEMPLATE_DIR", scratch.with_extension("templates"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    if let Some(dir) = snapshot_dir {
        cmd.env("VIVARIUM_SNAPSHOT_DIR", dir);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("vivarium: listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    Proc { child, base }
}

/// Waits until the server at `base` answers `/readyz` with 200 (a fresh process may first
/// load or build its templates).
pub async fn wait_ready_at(base: &str) {
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(180);
    while !matches!(c.get(format!("{base}/readyz")).send().await, Ok(r) if r.status() == 200) {
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until session `id` at `base` is running a turn (`state` is `busy`): a turn's check
/// runs first, so a request sent is not yet a turn running.
pub async fn wait_busy(c: &reqwest::Client, base: &str, id: &str) {
    api_of(c, base).wait_state(id, "busy").await
}

/// Waits until session `id` at `base` is `idle` again (a turn whose client hung up runs on
/// until the worker is done).
pub async fn wait_idle(c: &reqwest::Client, base: &str, id: &str) {
    api_of(c, base).wait_state(id, "idle").await
}

/// Runs `code` as a turn of session `id` at `base`; asserts it answered 200 with status `ok`.
pub async fn session_turn(c: &reqwest::Client, base: &str, id: &str, code: &str) -> Value {
    api_of(c, base).turn_ok(id, code).await
}

/// Opens a session on the server at `base` with `body` (asserting 201); its id.
pub async fn open_session(c: &reqwest::Client, base: &str, body: &Value) -> String {
    api_of(c, base).session(body).await
}

/// Snapshots session `id` on the server at `base` (asserting 201); the snapshot's info.
pub async fn take_snapshot(c: &reqwest::Client, base: &str, id: &str) -> Value {
    api_of(c, base).snapshot(id).await.expect(201)
}

/// The [`Api`] of the server at `base` through client `c`.
fn api_of(c: &reqwest::Client, base: &str) -> Api {
    Api {
        c: c.clone(),
        base: base.to_string(),
    }
}

/// A new directory under the system's temporary one, for a test's server or files; it and
/// its siblings named after it (`NAME.audit.jsonl`, `NAME.snapshots`, `NAME.keys.txt`, …) are
/// removed when the test process exits, whether or not the test got as far as removing them.
pub fn scratch_dir(tag: &str) -> PathBuf {
    static MADE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    extern "C" fn remove_made() {
        let made = std::mem::take(&mut *MADE.lock().unwrap_or_else(|e| e.into_inner()));
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        let names: Vec<String> = made
            .iter()
            .filter_map(|d| Some(d.file_name()?.to_str()?.to_string()))
            .collect();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if names
                .iter()
                .any(|n| *name == **n || name.starts_with(&format!("{n}.")))
            {
                let path = entry.path();
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
            }
        }
    }
    // SAFETY: registers a plain function with no arguments, run once at exit.
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(remove_made);
    });
    let dir = std::env::temp_dir().join(format!(
        "vivarium-http-{tag}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    MADE.lock().unwrap().push(dir.clone());
    dir
}

/// Starts a server with the defaults changed by `configure`, and waits until it is ready.
pub async fn start(tag: &str, configure: impl FnOnce(&mut ServeArgs)) -> TestServer {
    let scratch = scratch_dir(tag);
    let mut args = ServeArgs::defaults();
    args.scratch_dir = Some(scratch.clone());
    let audit_log = scratch.with_extension("audit.jsonl");
    args.audit_log = Some(audit_log.clone());
    args.snapshot_dir = Some(scratch.with_extension("snapshots"));
    args.volume_dir = Some(scratch.with_extension("volumes"));
    args.template_dir = Some(scratch.with_extension("templates"));
    args.listen = "127.0.0.1:0".parse().unwrap();
    // Workers run this crate's binary (the test's own executable is the test harness).
    args.worker_exe = Some(env!("CARGO_BIN_EXE_vivarium").into());
    configure(&mut args);
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || -> anyhow::Result<()> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let server = bind(args).await?;
            addr_tx.send(server.addr()).unwrap();
            server
                .run_until(async move {
                    let _ = stop_rx.await;
                })
                .await
        })
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("server did not bind");
    let server = TestServer {
        addr,
        base: format!("http://{addr}"),
        scratch,
        audit_log,
        stop: Some(stop_tx),
        thread: Some(thread),
    };
    server.wait_ready().await;
    server
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        let c = client();
        loop {
            if let Ok(r) = c.get(self.url("/readyz")).send().await
                && r.status() == 200
            {
                return;
            }
            assert!(Instant::now() < deadline, "server never became ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sandbox dirs present under this server's scratch dir (any process's).
    pub fn sandbox_dirs(&self) -> usize {
        count_sandbox_dirs(&self.scratch)
    }

    /// Sandbox dirs left once teardowns in flight had 5 s to finish: the server removes a
    /// sandbox's directory just after its response has left.
    pub async fn settled_sandbox_dirs(&self) -> usize {
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while self.sandbox_dirs() > 0 && std::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.sandbox_dirs()
    }

    /// Graceful shutdown; then checks nothing is left in the scratch dir.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let thread = self.thread.take().unwrap();
        tokio::task::spawn_blocking(move || thread.join().unwrap().unwrap())
            .await
            .unwrap();
        let left: Vec<_> = std::fs::read_dir(&self.scratch)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            // The base's creation lock is shared by every process using the base and stays.
            .filter(|p| !p.ends_with(".create.lock"))
            .collect();
        assert!(left.is_empty(), "left behind after shutdown: {left:?}");
        let _ = std::fs::remove_dir_all(&self.scratch);
        let _ = std::fs::remove_dir_all(self.scratch.with_extension("snapshots"));
        let _ = std::fs::remove_dir_all(self.scratch.with_extension("volumes"));
        let _ = std::fs::remove_file(&self.audit_log);
    }

    /// The audit log's records so far.
    pub fn audit(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.audit_log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("audit lines are JSON"))
            .collect()
    }
}

pub fn count_sandbox_dirs(scratch: &std::path::Path) -> usize {
    let Ok(roots) = std::fs::read_dir(scratch) else {
        return 0;
    };
    roots
        .flatten()
        .filter(|r| r.path().is_dir())
        .map(|r| {
            // A kept checker's directory (`.checker-…`) is the host's, not a sandbox's.
            std::fs::read_dir(r.path())
                .map(|d| {
                    d.flatten()
                        .filter(|e| {
                            e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.')
                        })
                        .count()
                })
                .unwrap_or(0)
        })
        .sum()
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// [`client`], as API key `key` (`Authorization: Bearer KEY` on every request).
pub fn client_with_key(key: &str) -> reqwest::Client {
    let auth = format!("Bearer {key}").parse().unwrap();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .default_headers(
            [(reqwest::header::AUTHORIZATION, auth)]
                .into_iter()
                .collect(),
        )
        .build()
        .unwrap()
}

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

/// POSTs JSON; returns the status and the JSON body.
pub async fn post(c: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let r = c.post(url).json(body).send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, v)
}

/// POSTs raw bytes as JSON content.
pub async fn post_raw(c: &reqwest::Client, url: &str, body: &'static str) -> (u16, Value) {
    let r = c
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"));
    (status, v)
}

pub async fn get(c: &reqwest::Client, url: &str) -> (u16, Value) {
    let r = c.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, v)
}

/// Asserts an error body of the documented shape and returns its code.
pub fn error_code(v: &Value) -> &str {
    let e = &v["error"];
    assert!(e["message"].is_string(), "no error.message in {v}");
    e["code"]
        .as_str()
        .unwrap_or_else(|| panic!("no error.code in {v}"))
}

/// The `/metrics` of the server at `base`, parsed (see [`parse_metrics`]).
pub async fn metrics_at(c: &reqwest::Client, base: &str) -> std::collections::HashMap<String, f64> {
    let r = c.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    parse_metrics(&r.text().await.unwrap())
}

/// Waits until metric `key` of the server at `base` reads `want`, for at most `within`.
pub async fn wait_for_metric(
    c: &reqwest::Client,
    base: &str,
    key: &str,
    want: f64,
    within: Duration,
) {
    let deadline = Instant::now() + within;
    loop {
        let got = metrics_at(c, base).await.get(key).copied();
        if got == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{key} is {got:?}, not {want}, after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Parses Prometheus text into `name{labels}` → value.
pub fn parse_metrics(text: &str) -> std::collections::HashMap<String, f64> {
    let mut out = std::collections::HashMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (key, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad metrics line {line:?}"));
        let v: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        out.insert(key.to_string(), v);
    }
    out
}

/// An MCP session over the server's streamable HTTP transport, spoken as plain JSON-RPC:
/// `initialize`, the `initialized` notification, then tool calls.
pub struct McpClient {
    client: reqwest::Client,
    url: String,
    session: String,
    next_id: u64,
}

const MCP_ACCEPT: &str = "application/json, text/event-stream";

impl McpClient {
    /// Opens a session on `server`'s `/mcp`.
    pub async fn open(server: &impl Served) -> McpClient {
        McpClient::open_with(server, client()).await
    }

    /// Opens a session on `server`'s `/mcp` as API key `key` (sent as a bearer token on
    /// every request).
    pub async fn open_with_key(server: &impl Served, key: &str) -> McpClient {
        McpClient::open_with(server, client_with_key(key)).await
    }

    /// Opens a session on `server`'s `/mcp` through `client`.
    pub async fn open_with(server: &impl Served, client: reqwest::Client) -> McpClient {
        McpClient::open_at(format!("{}/mcp", server.base_url()), client).await
    }

    /// Opens a session at the MCP endpoint `url` (a server's, or a proxy's) through `client`.
    pub async fn open_at(url: String, client: reqwest::Client) -> McpClient {
        let init = client
            .post(&url)
            .header("accept", MCP_ACCEPT)
            .json(
                &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "vivarium-tests", "version": "0"}}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(init.status(), 200, "MCP initialize");
        let session = init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let mut mcp = McpClient {
            client,
            url,
            session,
            next_id: 2,
        };
        mcp.send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        mcp
    }

    async fn send(&mut self, body: Value) -> String {
        self.client
            .post(&self.url)
            .header("accept", MCP_ACCEPT)
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Sends request `method` with `params`; returns the JSON-RPC message that answers it
    /// (its `result` or its `error`).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let body = self
            .send(
                serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            )
            .await;
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no answer to {method} in {body}"))
    }

    /// Calls tool `name` with `arguments`; returns the raw response body (server-sent
    /// events) and the JSON-RPC message that carries the result.
    pub async fn call(&mut self, name: &str, arguments: Value) -> (String, Value) {
        let id = self.next_id;
        self.next_id += 1;
        let body = self
            .send(
                serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}),
            )
            .await;
        let message = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .find(|d| d.contains("\"result\""))
            .map(|d| serde_json::from_str(d).unwrap())
            .unwrap_or_else(|| panic!("no result in {body}"));
        (body, message)
    }
}

/// Whether the tests run under CI (`CI=true`, as `.ci/run` sets), where a missing part fails.
/// A keys file (in `tag`'s scratch directory) of two tenants, a key each: `alice` of `acme`
/// (`alice_key`) and `bob` of `other` (`bob_key`).
pub fn two_tenant_keys(tag: &str, alice_key: &str, bob_key: &str) -> PathBuf {
    let path = scratch_dir(tag).join("keys.txt");
    std::fs::write(
        &path,
        format!("tenant acme\nalice@acme:{alice_key}\ntenant other\nbob@other:{bob_key}\n"),
    )
    .unwrap();
    path
}

pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The default server of this test binary: one `vivarium serve` with the default
/// configuration, started by the first test that asks and kept until the process exits
/// (its scratch, snapshots and audit log are removed then, as every [`scratch_dir`] is). For tests that only make
/// requests and check their answers; a test that counts the server's own totals (metrics,
/// audit lines, sandbox directories, what is left after shutdown) or changes a setting
/// starts its own with [`start`].
pub async fn shared() -> Api {
    static SHARED: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    let base = SHARED
        .get_or_init(|| async {
            let server = start("shared", |_| {}).await;
            let base = server.base.clone();
            // Its thread and runtime live on until the process exits: never told to stop.
            std::mem::forget(server);
            base
        })
        .await;
    Api::at(base)
}

/// A typed client of one server's `/v1` API: a method per endpoint, taking what the
/// endpoint names (a session id, code, a path) and answering with the status and the JSON
/// body exactly as the server sent them, so tests assert the wire, not a client's view of it.
#[derive(Clone)]
pub struct Api {
    pub c: reqwest::Client,
    pub base: String,
}

/// An answer: its status and its body (JSON, or the text as a JSON string).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

impl Answer {
    /// The body, asserting the status is `want`.
    pub fn expect(self, want: u16) -> Value {
        assert_eq!(self.status, want, "{}", self.body);
        self.body
    }

    /// The status and the error code, asserting the documented error shape.
    pub fn error(&self) -> (u16, &str) {
        (self.status, error_code(&self.body))
    }
}

impl Api {
    /// The API of the server at `base`, with no key.
    pub fn at(base: &str) -> Api {
        Api {
            c: client(),
            base: base.to_string(),
        }
    }

    /// The API of the server at `base`, as API key `key`.
    pub fn keyed(base: &str, key: &str) -> Api {
        Api {
            c: client_with_key(key),
            base: base.to_string(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn answer(r: reqwest::RequestBuilder) -> Answer {
        let r = r.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer { status, body }
    }

    async fn post(&self, path: &str, body: &Value) -> Answer {
        Api::answer(self.c.post(self.url(path)).json(body)).await
    }

    /// `POST /v1/execute`.
    pub async fn execute(&self, body: &Value) -> Answer {
        self.post("/v1/execute", body).await
    }

    /// `POST /v1/execute` of `code` alone; asserts 200 and status `ok`.
    pub async fn run(&self, code: &str) -> Value {
        let v = self
            .execute(&serde_json::json!({ "code": code }))
            .await
            .expect(200);
        assert_eq!(v["status"], "ok", "{code}: {v}");
        v
    }

    /// `POST /v1/check` of `code`.
    pub async fn check(&self, code: &str) -> Answer {
        self.post("/v1/check", &serde_json::json!({ "code": code }))
            .await
    }

    /// `POST /v1/sessions`.
    pub async fn open(&self, body: &Value) -> Answer {
        self.post("/v1/sessions", body).await
    }

    /// `POST /v1/sessions` with `body`; asserts 201 and returns the session's id.
    pub async fn session(&self, body: &Value) -> String {
        let v = self.open(body).await.expect(201);
        v["id"].as_str().unwrap().to_string()
    }

    /// `POST /v1/sessions/{id}/execute`.
    pub async fn turn(&self, id: &str, body: &Value) -> Answer {
        self.post(&format!("/v1/sessions/{id}/execute"), body).await
    }

    /// A turn of `code` alone in session `id`; asserts 200 and status `ok`.
    pub async fn turn_ok(&self, id: &str, code: &str) -> Value {
        let v = self
            .turn(id, &serde_json::json!({ "code": code }))
            .await
            .expect(200);
        assert_eq!(v["status"], "ok", "{code}: {v}");
        v
    }

    /// `GET /v1/sessions/{id}`.
    pub async fn info(&self, id: &str) -> Answer {
        Api::answer(self.c.get(self.url(&format!("/v1/sessions/{id}")))).await
    }

    /// `DELETE /v1/sessions/{id}`.
    pub async fn close(&self, id: &str) -> Answer {
        Api::answer(self.c.delete(self.url(&format!("/v1/sessions/{id}")))).await
    }

    /// `POST /v1/sessions/{id}/snapshot`.
    pub async fn snapshot(&self, id: &str) -> Answer {
        self.post(
            &format!("/v1/sessions/{id}/snapshot"),
            &serde_json::json!({}),
        )
        .await
    }

    /// `POST /v1/sessions/{id}/fork`.
    pub async fn fork(&self, id: &str) -> Answer {
        self.post(&format!("/v1/sessions/{id}/fork"), &serde_json::json!({}))
            .await
    }

    /// `POST /v1/sessions/{id}/fork` with `body` (`turn`, `count`).
    pub async fn fork_with(&self, id: &str, body: &Value) -> Answer {
        self.post(&format!("/v1/sessions/{id}/fork"), body).await
    }

    /// `GET /v1/sessions/{id}/turns`.
    pub async fn turns(&self, id: &str) -> Answer {
        Api::answer(self.c.get(self.url(&format!("/v1/sessions/{id}/turns")))).await
    }

    /// `POST /v1/sessions/{id}/rollback` with `body` (`turn`, `branch`).
    pub async fn rollback(&self, id: &str, body: &Value) -> Answer {
        self.post(&format!("/v1/sessions/{id}/rollback"), body)
            .await
    }

    /// `GET /v1/sessions/{id}/files`.
    pub async fn files(&self, id: &str) -> Answer {
        Api::answer(self.c.get(self.url(&format!("/v1/sessions/{id}/files")))).await
    }

    /// `PUT /v1/sessions/{id}/files/{path}` of `bytes`.
    pub async fn upload(&self, id: &str, path: &str, bytes: Vec<u8>) -> Answer {
        let url = self.url(&format!("/v1/sessions/{id}/files/{path}"));
        Api::answer(self.c.put(url).body(bytes)).await
    }

    /// `GET /v1/sessions/{id}/files/{path}`: the status and the raw bytes.
    pub async fn download(&self, id: &str, path: &str) -> (u16, Vec<u8>) {
        let url = self.url(&format!("/v1/sessions/{id}/files/{path}"));
        let r = self.c.get(url).send().await.unwrap();
        (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
    }

    /// Waits until session `id` is in `state` (`idle`, `busy`, `ended`).
    pub async fn wait_state(&self, id: &str, state: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let info = self.info(id).await.body;
            if info["state"] == state {
                return;
            }
            assert!(Instant::now() < deadline, "never {state}: {info}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A server a test talks to: one of its own ([`TestServer`]) or the shared one ([`Api`]).
pub trait Served {
    /// `http://127.0.0.1:PORT`.
    fn base_url(&self) -> &str;
}

impl Served for TestServer {
    fn base_url(&self) -> &str {
        &self.base
    }
}

impl Served for Api {
    fn base_url(&self) -> &str {
        &self.base
    }
}

impl TestServer {
    /// This server's [`Api`], with no key.
    pub fn api(&self) -> Api {
        Api::at(&self.base)
    }
}

/// The fixture package index (`tests/fixtures/package_index.py`: a PEP 503 simple index of
/// wheels it makes from source it writes) on 127.0.0.1, killed on drop.
pub struct PackageIndex {
    child: std::process::Child,
    pub dir: PathBuf,
    pub url: String,
}

impl PackageIndex {
    pub fn start(tag: &str) -> PackageIndex {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let dir = scratch_dir(&format!("index-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/package_index.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut port = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        let url = format!("http://127.0.0.1:{}/simple", port.trim());
        PackageIndex { child, dir, url }
    }

    /// How many times `path` was fetched.
    pub fn gets(&self, path: &str) -> usize {
        std::fs::read_to_string(self.dir.join("requests.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == path)
            .count()
    }

    /// How many times `path` was fetched by a client whose User-Agent starts with `agent`
    /// (pip's is `pip/`; the host's own downloader, `resolve.py`'s urllib, `Python-urllib/`).
    pub fn gets_by(&self, path: &str, agent: &str) -> usize {
        std::fs::read_to_string(self.dir.join("agents.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .filter(|(p, a)| *p == path && a.starts_with(agent))
            .count()
    }
}

impl Drop for PackageIndex {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Polls user template `name` at `base` until its build ends; its record (any status).
pub async fn template_built(c: &reqwest::Client, base: &str, name: &str) -> Value {
    for _ in 0..600 {
        let (st, v) = get(c, &format!("{base}/v1/templates/{name}")).await;
        assert_eq!(st, 200, "{v}");
        if v["status"] != "building" {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("template {name} still building after a minute");
}
