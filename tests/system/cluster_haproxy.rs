//! Three Vivarium nodes (real `vivarium serve` processes, `--cluster`) behind a real HAProxy
//! on 127.0.0.1, sharing one snapshot store: a directory, then a real S3-compatible server
//! (`s3s-fs`). HAProxy is configured as `docs/operations/cluster.md` says: round robin for
//! executions, sessions stuck to the node whose response named them (`Vivarium-Session`),
//! consistent hashing on the session id when that node is down, health checks on `/readyz`.
//!
//! Scenarios, each through the proxy: executions spread over every node; a session's turns
//! stay on its node, and so do an MCP transport session's; bad input (a forged id, a header
//! that contradicts the path); `kill -9` of a node: its durable session answers the next
//! turn from another node at its last completed turn, its other session is `session_lost`,
//! the others are untouched; a drain (SIGTERM): every session it held goes on elsewhere with
//! its state; a rolling restart of all three under a steady mix of executions and turns: no
//! session lost, no 5xx but retryable 503s; a fourth node added: it takes executions, and no
//! session moves to it. The figures are printed (`benches/RESULTS.md` quotes them). An E2B
//! sandbox stays on its node and outlives a `kill -9` of it with its metadata, envs and
//! contexts, found by a list on another node. And, node to node
//! without the proxy: a session that hibernated on one node is taken by the node asked for
//! it; and with API keys, another key's session id is `session_not_found` on every node,
//! live, elsewhere or held by a dead node, and its asking moves nothing.
//!
//! HAProxy comes from Debian's package (`.ci/run` installs it); without it the test is
//! skipped, except under CI, where it fails.

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::http_support::s3::{ACCESS_KEY, BUCKET, S3Server, SECRET_KEY};
use crate::http_support::*;
use serde_json::{Value, json};

/// One test at a time: each starts three nodes, their workers and a proxy on 2 cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const TTL_MS: u64 = 1_000;
const DRAIN_DELAY_MS: u64 = 800;

/// A port nothing listens on now, and never one this process was given before: a node
/// started only later (n4) keeps its port number unbound, and the kernel may hand the same
/// number to the next caller (HAProxy's frontend once took n4's, so n4 looked UP).
fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap();
    loop {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Where the nodes keep snapshots and leases.
#[derive(Clone)]
enum Store {
    Dir(PathBuf),
    S3 { endpoint: String, url: String },
}

/// One `vivarium serve --cluster` on a fixed port (kept over restarts).
struct Node {
    id: String,
    port: u16,
    scratch: PathBuf,
    child: Option<Child>,
    /// Extra environment for its process.
    env: Vec<(String, String)>,
}

impl Node {
    fn new(id: &str) -> Node {
        Node {
            id: id.to_string(),
            port: free_port(),
            scratch: scratch_dir(&format!("cluster-{id}")),
            child: None,
            env: Vec::new(),
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn start(&mut self, store: &Store) {
        self.start_with(store, &[]);
    }

    fn start_with(&mut self, store: &Store, extra: &[&str]) {
        use std::io::BufRead;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.scratch.with_extension("log"))
            .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vivarium"));
        cmd.args(["serve", "--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--cluster", "--node-id", &self.id])
            .args(["--node-ttl-ms", &TTL_MS.to_string()])
            .args(["--drain-delay-ms", &DRAIN_DELAY_MS.to_string()])
            .args(["--workers", "1", "--max-sessions", "32"])
            // Each node its own copies of the volumes and templates, as on separate machines.
            .arg("--volume-dir")
            .arg(self.scratch.with_extension("volumes"))
            .arg("--template-dir")
            .arg(self.scratch.with_extension("templates"))
            .args(extra)
            .env("VIVARIUM_SCRATCH", &self.scratch)
            .env(
                "VIVARIUM_AUDIT_LOG",
                self.scratch.with_extension("audit.jsonl"),
            )
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(log);
        match store {
            Store::Dir(dir) => {
                cmd.env("VIVARIUM_SNAPSHOT_DIR", dir);
            }
            Store::S3 { endpoint, url } => {
                cmd.env("VIVARIUM_SNAPSHOT_URL", url)
                    .env("AWS_ENDPOINT_URL", endpoint)
                    .env("AWS_REGION", "us-east-1")
                    .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
                    .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY);
            }
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("vivarium: listening on"), "{line:?}");
        self.child = Some(child);
    }

    fn kill9(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM; the process's exit status once it has drained.
    fn term(&mut self) -> Child {
        let child = self.child.take().expect("running");
        // SAFETY: kill(2) with integers; the pid is this test's child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        child
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

fn haproxy_binary() -> Option<PathBuf> {
    [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// HAProxy in front of `nodes`, configured as `docs/operations/cluster.md` shows.
struct Proxy {
    child: Child,
    port: u16,
    stats_port: u16,
    dir: PathBuf,
}

impl Proxy {
    fn start(binary: &Path, nodes: &[Node]) -> Proxy {
        let (port, stats_port) = (free_port(), free_port());
        let dir = scratch_dir("cluster-haproxy");
        std::fs::create_dir_all(&dir).unwrap();
        let servers: String = nodes
            .iter()
            .map(|n| format!("    server {} 127.0.0.1:{} check\n", n.id, n.port))
            .collect();
        let config = include_str!("../../deploy/haproxy/haproxy.cfg")
            .replace("bind *:8080", &format!("bind 127.0.0.1:{port}"))
            .replace("bind *:8404", &format!("bind 127.0.0.1:{stats_port}"))
            .replace("    # SERVERS\n", &servers);
        let cfg = dir.join("haproxy.cfg");
        std::fs::write(&cfg, config).unwrap();
        let check = Command::new(binary)
            .args(["-c", "-f"])
            .arg(&cfg)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "haproxy -c: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let child = Command::new(binary)
            .args(["-db", "-f"])
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("haproxy.log")).unwrap())
            .spawn()
            .unwrap();
        Proxy {
            child,
            port,
            stats_port,
            dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Each server's state as HAProxy's stats say (`UP`, `DOWN`, `MAINT`, ...).
    async fn states(&self, c: &reqwest::Client) -> BTreeMap<String, String> {
        let url = format!("http://127.0.0.1:{}/stats;csv", self.stats_port);
        let Ok(r) = c.get(url).send().await else {
            return BTreeMap::new();
        };
        let text = r.text().await.unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f.len() > 17 && f[0] == "nodes" && f[1] != "BACKEND" && f[1] != "FRONTEND").then(
                    || {
                        (
                            f[1].to_string(),
                            f[17].split(' ').next().unwrap_or("").to_string(),
                        )
                    },
                )
            })
            .collect()
    }

    /// Waits until HAProxy says `node` is `state` (`UP`/`DOWN`); when that happened.
    async fn wait_state(&self, c: &reqwest::Client, node: &str, state: &str) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if self.states(c).await.get(node).map(String::as_str) == Some(state) {
                return Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "{node} never {state}: {:?}",
                self.states(c).await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A response: status, the node that answered, the body.
struct Answer {
    status: u16,
    node: String,
    session_header: Option<String>,
    retry_after: bool,
    body: Value,
}

async fn send(req: reqwest::RequestBuilder) -> Answer {
    let r = req.send().await.unwrap();
    let header = |n: &str| r.headers().get(n).map(|v| v.to_str().unwrap().to_string());
    let (node, session_header) = (header("vivarium-node"), header("vivarium-session"));
    let retry_after = r.headers().contains_key("retry-after");
    let status = r.status().as_u16();
    let body = r.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        node: node.unwrap_or_default(),
        session_header,
        retry_after,
        body,
    }
}

/// `POST` through the proxy, retrying a 503 that says when (`Retry-After`), as a client
/// should, for up to 20 s; every 503 seen is counted in `retried`.
async fn post_retrying(
    c: &reqwest::Client,
    url: &str,
    body: &Value,
    retried: &AtomicU64,
) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = send(c.post(url).json(body)).await;
        if a.status == 503 && a.retry_after && Instant::now() < deadline {
            retried.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        return a;
    }
}

/// A session as the test sees it: where it lives and what it should hold.
struct Tracked {
    id: String,
    durable: bool,
    node: String,
    /// The value of `x` after its last completed turn.
    x: u64,
}

async fn open(c: &reqwest::Client, p: &Proxy, durable: bool) -> Tracked {
    let a = send(
        c.post(p.url("/v1/sessions"))
            .json(&json!({"template": "python", "durable": durable})),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        a.session_header.as_deref(),
        Some(id.as_str()),
        "names the session it made"
    );
    Tracked {
        id,
        durable,
        node: a.node,
        x: 0,
    }
}

/// One turn that adds 1 to `x` and returns it: the answer proves the state it ran on.
async fn step(c: &reqwest::Client, p: &Proxy, s: &mut Tracked, retried: &AtomicU64) -> Answer {
    let url = p.url(&format!("/v1/sessions/{}/execute", s.id));
    let code = if s.x == 0 { "x = 1\nx" } else { "x += 1\nx" };
    let a = post_retrying(c, &url, &json!({ "code": code }), retried).await;
    if a.status == 200 {
        assert_eq!(a.body["status"], "ok", "{}", a.body);
        assert_eq!(
            a.body["result"],
            (s.x + 1).to_string(),
            "{}: state lost ({})",
            s.id,
            a.body
        );
        s.x += 1;
        s.node = a.node.clone();
    }
    a
}

fn skip_or_fail(why: &str) {
    assert!(!in_ci(), "{why} (required in CI: .ci/run installs it)");
    eprintln!("SKIPPED: {why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_behind_haproxy_with_a_shared_directory() {
    let Some(haproxy) = haproxy_binary() else {
        return skip_or_fail("HAProxy is not installed");
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = scratch_dir("cluster-store");
    scenario(&haproxy, Store::Dir(dir.clone()), "directory").await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_behind_haproxy_with_s3() {
    let Some(haproxy) = haproxy_binary() else {
        return skip_or_fail("HAProxy is not installed");
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let s3 = S3Server::start();
    let store = Store::S3 {
        endpoint: s3.endpoint(),
        url: format!("s3://{BUCKET}/cluster-{:08x}", rand::random::<u32>()),
    };
    scenario(&haproxy, store, "S3 (s3s-fs)").await;
    drop(s3);
}

/// Nodes `ids` started on `store`, ready, behind a proxy that sees each of them up.
async fn behind_proxy(
    haproxy: &Path,
    store: &Store,
    c: &reqwest::Client,
    ids: &[&str],
) -> (Vec<Node>, Proxy) {
    let mut nodes: Vec<Node> = ids.iter().map(|id| Node::new(id)).collect();
    for n in &mut nodes {
        n.start(store);
    }
    for n in &nodes {
        wait_ready_at(&n.base()).await;
    }
    let proxy = Proxy::start(haproxy, &nodes);
    for n in &nodes {
        proxy.wait_state(c, &n.id, "UP").await;
    }
    (nodes, proxy)
}

/// Code mode behind the proxy: a suspended execution's resumes reach the node whose program
/// waits (`Vivarium-Execution`), and when that node dies another brings it back from the
/// shared store, its state kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_suspended_execution_follows_its_node_and_outlives_it() {
    let Some(haproxy) = haproxy_binary() else {
        return skip_or_fail("HAProxy is not installed");
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = scratch_dir("cluster-code-mode-store");
    let store = Store::Dir(dir.clone());
    let c = client();
    let (mut nodes, proxy) = behind_proxy(&haproxy, &store, &c, &["cm1", "cm2", "cm3"]).await;
    let tools = json!([{"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
    let code = "import random\nx = [random.random()]\nfor c in ['Oslo', 'Rome', 'Lima']:\n    x.append(tools.get_weather(city=c)['temp'])\nprint(x)\n";
    let a = send(
        c.post(proxy.url("/v1/execute"))
            .json(&json!({"code": code, "template": "python", "tools": tools})),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.body["status"], "suspended");
    let id = a.body["execution_id"].as_str().unwrap().to_string();
    let home = a.node.clone();
    let resume = |call: &str, temp: u32| {
        c.post(proxy.url(&format!("/v1/executions/{id}/resume")))
            .json(&json!({"results": [{"call_id": call, "result": {"temp": temp}}]}))
    };
    // Answered through the proxy: on the node where its program waits.
    let b = send(resume("call_1", 11)).await;
    assert_eq!(b.status, 200, "{}", b.body);
    assert_eq!(b.node, home, "the resume went where the program waits");
    assert_eq!(b.body["pending_calls"][0]["call_id"], "call_2");
    // Its node dies: another brings it back from the store and goes on.
    let at = nodes.iter().position(|n| n.id == home).unwrap();
    nodes[at].kill9();
    proxy.wait_state(&c, &home, "DOWN").await;
    let r = send(resume("call_2", 22)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_ne!(r.node, home);
    assert_eq!(r.body["pending_calls"][0]["call_id"], "call_3");
    let end = send(resume("call_3", 33)).await;
    assert_eq!(end.status, 200, "{}", end.body);
    let out = end.body["stdout"].as_str().unwrap();
    assert!(out.ends_with(", 11, 22, 33]\n"), "{out}");
    drop(proxy);
    drop(nodes);
    let _ = std::fs::remove_dir_all(dir);
}

/// Volumes in the shared store (S3, `s3s-fs`): a file a sandbox wrote on one node is read by
/// fresh sandboxes on the others, through the proxy, after that node was killed (`kill -9`);
/// a session's turn's write is read on another node as soon as the turn answered; the HTTP
/// file API of any node sees the same files; a delete on one node is a 404 on the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_volume_outlives_the_node_that_wrote_it() {
    let Some(haproxy) = haproxy_binary() else {
        return skip_or_fail("HAProxy is not installed");
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let s3 = S3Server::start();
    let store = Store::S3 {
        endpoint: s3.endpoint(),
        url: format!("s3://{BUCKET}/volumes-{:08x}", rand::random::<u32>()),
    };
    let c = client();
    let (mut nodes, proxy) = behind_proxy(&haproxy, &store, &c, &["vol1", "vol2", "vol3"]).await;
    let (v1, v2, v3) = (nodes[0].base(), nodes[1].base(), nodes[2].base());
    let a = send(
        c.post(proxy.url("/v1/volumes"))
            .json(&json!({"name": "work"})),
    )
    .await;
    assert_eq!(a.status, 201, "{}", a.body);
    // Made once for the cluster: a second node making the name is told it exists.
    let again = send(
        c.post(format!("{v3}/v1/volumes"))
            .json(&json!({"name": "work"})),
    )
    .await;
    assert_eq!(again.status, 409, "{}", again.body);
    let r = c
        .put(format!("{v1}/v1/volumes/work/files/in/data.csv"))
        .body("a,b\n1,2\n3,4\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let mount =
        |read_only: bool| json!([{"name": "work", "path": "/mnt/work", "read_only": read_only}]);
    let write = "import os\nrows = open('/mnt/work/in/data.csv').read().split()\nos.makedirs('/mnt/work/out', exist_ok=True)\nopen('/mnt/work/out/rows.txt', 'w').write(str(len(rows)))\nleft = open('/mnt/work/out/left-open.txt', 'w'); left.write('kept')\nprint(len(rows))";
    let w = send(
        c.post(format!("{v2}/v1/execute"))
            .json(&json!({"code": write, "volumes": mount(false)})),
    )
    .await;
    assert_eq!(
        (w.status, &w.body["stdout"]),
        (200, &json!("3\n")),
        "{}",
        w.body
    );
    assert_eq!(w.node, "vol2");
    // The writer's node dies; the others read what its run wrote, through the proxy.
    nodes[1].kill9();
    proxy.wait_state(&c, "vol2", "DOWN").await;
    let read = "print(open('/mnt/work/out/rows.txt').read() + open('/mnt/work/out/left-open.txt').read())\ntry:\n    open('/mnt/work/out/rows.txt', 'w')\nexcept OSError as e:\n    import errno; print(errno.errorcode[e.errno])";
    let mut readers = std::collections::BTreeSet::new();
    for _ in 0..4 {
        let r = send(
            c.post(proxy.url("/v1/execute"))
                .json(&json!({"code": read, "volumes": mount(true)})),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        // What the writer left open was put in place when its run ended, before its answer.
        assert_eq!(r.body["stdout"], "3kept\nEROFS\n", "{}", r.body);
        readers.insert(r.node);
    }
    assert_eq!(
        readers,
        ["vol1", "vol3"].map(String::from).into(),
        "round robin over both"
    );
    let r = c
        .get(format!("{v3}/v1/volumes/work/files/out/rows.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.text().await.unwrap(), "3");
    // A session's turn on one node; read on another as soon as the turn answered.
    let o = send(
        c.post(format!("{v1}/v1/sessions"))
            .json(&json!({"volumes": mount(false)})),
    )
    .await;
    assert_eq!(o.status, 201, "{}", o.body);
    let sid = o.body["id"].as_str().unwrap().to_string();
    for n in 1..=2 {
        let t = send(
            c.post(format!("{v1}/v1/sessions/{sid}/execute"))
                .json(&json!({
                    "code": format!("open('/mnt/work/notes.txt', 'a').write('turn {n}\\n')")
                })),
        )
        .await;
        assert_eq!(t.status, 200, "{}", t.body);
        let r = send(c.post(format!("{v3}/v1/execute")).json(&json!({
            "code": "print(open('/mnt/work/notes.txt').read(), end='')",
            "volumes": mount(true)
        })))
        .await;
        let want: String = (1..=n).map(|i| format!("turn {i}\n")).collect();
        assert_eq!(r.body["stdout"], want.as_str(), "{}", r.body);
    }
    // A file a session leaves open between turns is put in place when it closes, and then
    // reaches the store (after the fact: the close's answer does not wait for it).
    let t = send(
        c.post(format!("{v1}/v1/sessions/{sid}/execute"))
            .json(&json!({
                "code": "g = open('/mnt/work/draft.txt', 'w'); g.write('draft'); g.flush()"
            })),
    )
    .await;
    assert_eq!(t.status, 200, "{}", t.body);
    let closed = c
        .delete(format!("{v1}/v1/sessions/{sid}"))
        .send()
        .await
        .unwrap();
    assert_eq!(closed.status().as_u16(), 204);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c
            .get(format!("{v3}/v1/volumes/work/files/draft.txt"))
            .send()
            .await
            .unwrap();
        if r.status().as_u16() == 200 {
            assert_eq!(r.text().await.unwrap(), "draft");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the session's draft never reached the store"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Removed on one node: gone on the others.
    let r = c
        .delete(format!("{v3}/v1/volumes/work/files/in/data.csv"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let r = send(c.post(format!("{v1}/v1/execute")).json(&json!({
        "code": "import os; print(sorted(os.listdir('/mnt/work')), os.path.exists('/mnt/work/in/data.csv'))",
        "volumes": mount(true)
    })))
    .await;
    assert_eq!(
        r.body["stdout"], "['draft.txt', 'in', 'notes.txt', 'out'] False\n",
        "{}",
        r.body
    );
    let info = send(c.get(format!("{v1}/v1/volumes/work"))).await;
    assert_eq!(info.status, 200, "{}", info.body);
    assert_eq!(info.body["bytes"], 1 + 4 + 14 + 5, "{}", info.body);
    // Deleted on one node: not found on the others, listed by none.
    let r = c
        .delete(format!("{v3}/v1/volumes/work"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    let gone = send(c.get(format!("{v1}/v1/volumes/work"))).await;
    assert_eq!(
        (gone.status, error_code(&gone.body)),
        (404, "volume_not_found")
    );
    let gone = send(c.post(format!("{v1}/v1/execute")).json(&json!({
        "code": "print(1)", "volumes": mount(true)
    })))
    .await;
    assert_eq!(gone.status, 404, "{}", gone.body);
    let list = send(c.get(format!("{v1}/v1/volumes"))).await;
    assert_eq!(list.body["volumes"], json!([]), "{}", list.body);
    drop(proxy);
    drop(nodes);
    drop(s3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_built_on_one_node_is_served_by_every_node() {
    let Some(haproxy) = haproxy_binary() else {
        return skip_or_fail("HAProxy is not installed");
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let s3 = S3Server::start();
    let store = Store::S3 {
        endpoint: s3.endpoint(),
        url: format!("s3://{BUCKET}/templates-{:08x}", rand::random::<u32>()),
    };
    let c = client();
    let (mut nodes, proxy) = behind_proxy(&haproxy, &store, &c, &["tpl1", "tpl2", "tpl3"]).await;
    let (t1, t2, t3) = (nodes[0].base(), nodes[1].base(), nodes[2].base());
    let body = json!({
        "name": "shared", "setup": "FROM_TEMPLATE = 'built once'",
        "files": [{"path": "data/table.csv", "content": "YSxiCjEsMgo="}],
        "env": {"STAGE": "cluster"},
    });
    let b = send(c.post(format!("{t1}/v1/templates")).json(&body)).await;
    assert_eq!(b.status, 202, "{}", b.body);
    let mut ready = false;
    for _ in 0..600 {
        let g = send(c.get(format!("{t1}/v1/templates/shared"))).await;
        if g.body["status"] != "building" {
            assert_eq!(g.body["status"], "ready", "{}", g.body);
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "the build did not end");
    // The node that built it dies; the others serve it, fetching its layer once.
    nodes[0].kill9();
    proxy.wait_state(&c, "tpl1", "DOWN").await;
    let code = "import os\nprint(FROM_TEMPLATE, open('data/table.csv').read().split(), os.environ['STAGE'])";
    let mut served = std::collections::BTreeSet::new();
    for _ in 0..4 {
        let r = send(
            c.post(proxy.url("/v1/execute"))
                .json(&json!({"code": code, "template": "shared", "policy": "off"})),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(
            r.body["stdout"], "built once ['a,b', '1,2'] cluster\n",
            "{}",
            r.body
        );
        served.insert(r.node);
    }
    assert_eq!(
        served,
        ["tpl2", "tpl3"].map(String::from).into(),
        "round robin over both"
    );
    // Listed by every node; deleted on one, gone on the others.
    let list = send(c.get(format!("{t3}/v1/templates"))).await;
    let names: Vec<&str> = list.body["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["python", "scientific", "shared"], "{}", list.body);
    let r = c
        .delete(format!("{t2}/v1/templates/shared"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    // Another node trusts what it read for at most 2 s.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let gone = send(
        c.post(format!("{t3}/v1/execute"))
            .json(&json!({"code": "1", "template": "shared"})),
    )
    .await;
    assert_eq!(
        (gone.status, error_code(&gone.body)),
        (404, "template_not_found"),
        "{}",
        gone.body
    );
    drop(proxy);
    drop(nodes);
    drop(s3);
}

/// An E2B request through the proxy (`port` the sandbox plane's, `sandbox` its id), retried
/// while the answer is a 503 (a session on its way between nodes) for up to 20 s: its
/// status, the node that answered and its body as text.
async fn e2b_call(
    c: &reqwest::Client,
    p: &Proxy,
    method: reqwest::Method,
    path: &str,
    plane: Option<(u16, &str)>,
    body: Option<Value>,
) -> (u16, String, String) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let mut r = c.request(method.clone(), p.url(&format!("/e2b{path}")));
        if let Some((port, id)) = plane {
            r = r
                .header("E2b-Sandbox-Port", port.to_string())
                .header("E2b-Sandbox-Id", id);
        }
        if let Some(b) = &body {
            r = r.json(b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let node = resp
            .headers()
            .get("vivarium-node")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let text = resp.text().await.unwrap();
        if status != 503 || Instant::now() > until {
            return (status, node, text);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The stdout of an E2B cell's NDJSON answer.
fn cell_stdout(ndjson: &str) -> String {
    ndjson
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["type"] == "stdout")
        .map(|l| l["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// E2B behind the proxy: a sandbox's requests stay on its node (its id in the
/// `E2b-Sandbox-Id` header or the path); when that node is killed (`kill -9`), the sandbox
/// goes on elsewhere at its last completed cell with its metadata, envs and contexts, and a
/// list on any node finds it by its metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_e2b_sandbox_outlives_its_node_with_its_metadata_envs_and_contexts() {
    use reqwest::Method as M;
    let Some(haproxy) = haproxy_binary() else {
        return skip_or_fail("HAProxy is not installed");
    };
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = scratch_dir("cluster-e2b-store");
    let store = Store::Dir(dir.clone());
    let c = client();
    let (mut nodes, proxy) = behind_proxy(&haproxy, &store, &c, &["eb1", "eb2", "eb3"]).await;
    let new =
        json!({"templateID": "base", "metadata": {"team": "t9"}, "envVars": {"GREETING": "hi"}});
    let (st, home, body) = e2b_call(&c, &proxy, M::POST, "/v2/sandboxes", None, Some(new)).await;
    assert_eq!(st, 201, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["sandboxID"]
        .as_str()
        .unwrap()
        .to_string();
    let plane = Some((49999, id.as_str()));
    let ctx = json!({"language": "bash"});
    let (st, node, body) = e2b_call(&c, &proxy, M::POST, "/contexts", plane, Some(ctx)).await;
    assert_eq!((st, node.as_str()), (200, home.as_str()), "{body}");
    let ctx = serde_json::from_str::<Value>(&body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let cell = |code: &str, context: Option<&str>| json!({"code": code, "context_id": context});
    let (st, node, body) = e2b_call(
        &c,
        &proxy,
        M::POST,
        "/execute",
        plane,
        Some(cell("x = 41", None)),
    )
    .await;
    assert_eq!((st, node.as_str()), (200, home.as_str()), "{body}");

    // Its node dies.
    let at = nodes.iter().position(|n| n.id == home).unwrap();
    nodes[at].kill9();
    proxy.wait_state(&c, &home, "DOWN").await;
    let (st, node, body) = e2b_call(
        &c,
        &proxy,
        M::GET,
        "/v2/sandboxes?metadata=team%3Dt9",
        None,
        None,
    )
    .await;
    assert_eq!(st, 200, "{body}");
    assert_ne!(node, home);
    let listed: Value = serde_json::from_str(&body).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sandboxID"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![id.as_str()],
        "found by its metadata, without its context: {body}"
    );
    let (st, holder, body) = e2b_call(
        &c,
        &proxy,
        M::POST,
        "/execute",
        plane,
        Some(cell("print(x + 1)", None)),
    )
    .await;
    assert_eq!((st, cell_stdout(&body).as_str()), (200, "42\n"), "{body}");
    assert_ne!(holder, home);
    let (st, _, body) = e2b_call(
        &c,
        &proxy,
        M::POST,
        "/execute",
        plane,
        Some(cell("echo $GREETING", Some(&ctx))),
    )
    .await;
    assert_eq!(
        (st, cell_stdout(&body).as_str()),
        (200, "hi\n"),
        "its bash context, with the sandbox's env: {body}"
    );
    let (st, _, body) = e2b_call(&c, &proxy, M::GET, &format!("/sandboxes/{id}"), None, None).await;
    assert_eq!(st, 200, "{body}");
    let info: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (
            info["metadata"]["team"].as_str(),
            info["templateID"].as_str()
        ),
        (Some("t9"), Some("base"))
    );
    // Killed through the third node, which holds neither it nor its context: it takes the
    // sandbox over (durable) to close it, and its context goes with it.
    let third = nodes
        .iter()
        .find(|n| n.id != home && n.id != holder)
        .unwrap()
        .base();
    let r = c
        .delete(format!("{third}/e2b/sandboxes/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let gone = send(c.get(proxy.url(&format!("/v1/sessions/{ctx}")))).await;
    assert_eq!(
        gone.status, 404,
        "its context is closed with it: {}",
        gone.body
    );
    drop(proxy);
    drop(nodes);
    let _ = std::fs::remove_dir_all(dir);
}

async fn scenario(haproxy: &Path, store: Store, label: &str) {
    let c = client();
    // n4 is in the proxy's configuration from the start, and started only at the end: a
    // node added.
    let mut nodes: Vec<Node> = ["n1", "n2", "n3", "n4"]
        .into_iter()
        .map(Node::new)
        .collect();
    for n in &mut nodes[..3] {
        n.start(&store);
    }
    for n in &nodes[..3] {
        wait_ready_at(&n.base()).await;
    }
    let proxy = Proxy::start(haproxy, &nodes);
    for n in &nodes[..3] {
        proxy.wait_state(&c, &n.id, "UP").await;
    }
    proxy.wait_state(&c, "n4", "DOWN").await;
    let retried = AtomicU64::new(0);

    // Executions go to every node.
    let mut served: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..24 {
        let a = send(
            c.post(proxy.url("/v1/execute"))
                .json(&json!({"code": format!("print({i}*2)")})),
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.body["stdout"], format!("{}\n", i * 2));
        *served.entry(a.node).or_default() += 1;
    }
    eprintln!("[{label}] executions per node: {served:?}");
    assert_eq!(served.len(), 3, "every node serves executions: {served:?}");

    // Sessions until n1 holds a durable one and another one; every turn on its node.
    let mut sessions: Vec<Tracked> = Vec::new();
    let mut turns = (0u64, 0u64); // (on the session's node, all)
    for k in 0..24 {
        let has = |d: bool| {
            sessions
                .iter()
                .any(|s: &Tracked| s.node == "n1" && s.durable == d)
        };
        if k >= 6 && has(true) && has(false) {
            break;
        }
        let mut s = open(&c, &proxy, k % 2 == 0).await;
        let home = s.node.clone();
        for _ in 0..3 {
            let a = step(&c, &proxy, &mut s, &retried).await;
            assert_eq!(a.status, 200, "{}", a.body);
            turns.1 += 1;
            turns.0 += u64::from(a.node == home);
        }
        sessions.push(s);
    }
    eprintln!(
        "[{label}] affinity: {} of {} turns on the session's own node",
        turns.0, turns.1
    );
    assert_eq!(turns.0, turns.1, "a session's turns stay on its node");

    // Bad input through the proxy: the same clear errors as on one node.
    let forged = format!("s-{}", "0".repeat(32));
    let a = send(
        c.post(proxy.url(&format!("/v1/sessions/{forged}/execute")))
            .json(&json!({"code": "1"})),
    )
    .await;
    assert_eq!(
        (a.status, error_code(&a.body)),
        (404, "session_not_found"),
        "{}",
        a.body
    );
    let one = &sessions[0].id;
    let a = send(
        c.post(proxy.url(&format!("/v1/sessions/{one}/execute")))
            .header("Vivarium-Session", &forged)
            .json(&json!({"code": "1"})),
    )
    .await;
    assert_eq!(
        (a.status, error_code(&a.body)),
        (400, "invalid_request"),
        "{}",
        a.body
    );
    assert!(
        a.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("path names"),
        "{}",
        a.body
    );
    let a = send(
        c.get(proxy.url("/v1/execute"))
            .header("Vivarium-Session", "../x"),
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.body);

    // MCP through the proxy: a transport session, and the sessions its tools open, stay on
    // the node that answered its initialize (HAProxy sticks on Mcp-Session-Id).
    let mut mcp = McpClient::open_at(proxy.url("/mcp"), client()).await;
    let (body, m) = mcp
        .call("open_session", json!({"template": "python"}))
        .await;
    let text = m["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{body}"));
    let opened: Value = serde_json::from_str(text).unwrap();
    let mcp_session = opened["session_id"].as_str().unwrap().to_string();
    for k in 1..=4 {
        let code = if k == 1 {
            "y = 1\ny".to_string()
        } else {
            "y += 1\ny".to_string()
        };
        let (body, m) = mcp
            .call(
                "run_in_session",
                json!({"session_id": mcp_session, "code": code}),
            )
            .await;
        let text = m["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{body}"));
        assert!(
            text.contains(&format!("result: {k}")),
            "MCP turn {k}: {text}"
        );
    }
    eprintln!("[{label}] MCP: 4 turns of a session opened over MCP, through the proxy, in order");

    // kill -9 of n1.
    let victim = nodes.iter().position(|n| n.id == "n1").unwrap();
    let killed = Instant::now();
    nodes[victim].kill9();
    let down = proxy.wait_state(&c, "n1", "DOWN").await;
    let durable_i = sessions
        .iter()
        .position(|s| s.node == "n1" && s.durable)
        .unwrap();
    let a = step(&c, &proxy, &mut sessions[durable_i], &retried).await;
    let answered = Instant::now();
    assert_eq!(
        a.status, 200,
        "the durable session goes on elsewhere: {}",
        a.body
    );
    assert_ne!(a.node, "n1");
    eprintln!(
        "[{label}] kill -9: the proxy marked n1 down {:?} after the kill; the durable session's next turn was answered by {} {:?} after that, at its last completed turn",
        down - killed,
        a.node,
        answered - down
    );
    let lost_i = sessions
        .iter()
        .position(|s| s.node == "n1" && !s.durable)
        .unwrap();
    // Until n1's heartbeat is a TTL old it is `session_elsewhere`; then `session_lost`.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let url = proxy.url(&format!("/v1/sessions/{}/execute", sessions[lost_i].id));
        let a = send(c.post(url).json(&json!({"code": "x"}))).await;
        if a.status == 410 {
            assert_eq!(error_code(&a.body), "session_lost", "{}", a.body);
            assert!(
                a.body["error"]["message"].as_str().unwrap().contains("n1"),
                "{}",
                a.body
            );
            break;
        }
        assert_eq!(
            (a.status, error_code(&a.body)),
            (409, "session_elsewhere"),
            "{}",
            a.body
        );
        assert!(Instant::now() < deadline, "never session_lost");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sessions.remove(lost_i);
    for s in sessions.iter_mut() {
        let a = step(&c, &proxy, s, &retried).await;
        assert_eq!(a.status, 200, "{}: {}", s.id, a.body);
    }
    nodes[victim].start(&store);
    proxy.wait_state(&c, "n1", "UP").await;
    for s in sessions.iter_mut() {
        let a = step(&c, &proxy, s, &retried).await;
        assert_eq!(a.status, 200, "after n1 came back, {}: {}", s.id, a.body);
    }

    // Drain n2: every session it held goes on elsewhere, with its state.
    let on_n2: Vec<String> = sessions
        .iter()
        .filter(|s| s.node == "n2")
        .map(|s| s.id.clone())
        .collect();
    let drained = nodes.iter().position(|n| n.id == "n2").unwrap();
    let mut exiting = nodes[drained].term();
    for s in sessions.iter_mut() {
        let a = step(&c, &proxy, s, &retried).await;
        assert_eq!(a.status, 200, "during n2's drain, {}: {}", s.id, a.body);
    }
    let status = wait_exit(&mut exiting, Duration::from_secs(30));
    assert!(
        status.success(),
        "n2 exits cleanly after its drain: {status}"
    );
    for s in sessions.iter_mut() {
        let a = step(&c, &proxy, s, &retried).await;
        assert_eq!(a.status, 200, "after n2's drain, {}: {}", s.id, a.body);
        assert_ne!(a.node, "n2");
    }
    eprintln!(
        "[{label}] drain: the {} sessions n2 held went on elsewhere at their state",
        on_n2.len()
    );
    nodes[drained].start(&store);
    proxy.wait_state(&c, "n2", "UP").await;

    // A rolling restart of every node under a steady mix of executions and turns.
    let proxy = Arc::new(proxy);
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut load = Vec::new();
    for (k, s) in sessions.drain(..).enumerate() {
        let (c, p, stop, tally) = (c.clone(), proxy.clone(), stop.clone(), tally.clone());
        load.push(tokio::spawn(async move {
            let mut s = s;
            let retried = AtomicU64::new(0);
            while !stop.load(Ordering::Relaxed) {
                let a = if k % 2 == 0 {
                    step(&c, &p, &mut s, &retried).await
                } else {
                    let body = json!({"code": "print('e')"});
                    post_retrying(&c, &p.url("/v1/execute"), &body, &retried).await
                };
                tally.count(&a);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tally
                .retried
                .fetch_add(retried.load(Ordering::Relaxed), Ordering::Relaxed);
            s
        }));
    }
    let rolling = Instant::now();
    for node in nodes[..3].iter_mut() {
        let mut exiting = node.term();
        let status = wait_exit(&mut exiting, Duration::from_secs(30));
        assert!(status.success(), "{} drains cleanly: {status}", node.id);
        node.start(&store);
        proxy.wait_state(&c, &node.id, "UP").await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut survivors = Vec::new();
    for h in load {
        survivors.push(h.await.unwrap());
    }
    let t = tally.summary();
    eprintln!(
        "[{label}] rolling restart of 3 nodes in {:?}: {t:?}; {} retryable 503s retried",
        rolling.elapsed(),
        tally.retried.load(Ordering::Relaxed)
    );
    assert_eq!(
        t.get("bad").copied().unwrap_or(0),
        0,
        "no 5xx but retryable 503s, no lost state: {t:?}"
    );
    assert!(t.get("ok").copied().unwrap_or(0) > 20, "{t:?}");

    // A node added: it takes executions at once, and no session moves to it (the proxy's
    // table keeps each where it is), so it restores none.
    nodes[3].start(&store);
    proxy.wait_state(&c, "n4", "UP").await;
    let mut to_new = 0;
    for i in 0..24 {
        let body = json!({"code": format!("print({i})")});
        let a = send(c.post(proxy.url("/v1/execute")).json(&body)).await;
        assert_eq!(a.status, 200, "{}", a.body);
        to_new += usize::from(a.node == "n4");
    }
    for s in survivors.iter_mut() {
        let a = step(&c, &proxy, s, &retried).await;
        assert_eq!(a.status, 200, "after n4 joined, {}: {}", s.id, a.body);
        assert_ne!(a.node, "n4", "{} moved to the new node", s.id);
    }
    let resumed = metrics_at(&c, &nodes[3].base())
        .await
        .get("vivarium_session_events_total{event=\"resume\"}")
        .copied()
        .unwrap_or(0.0);
    assert_eq!(resumed, 0.0, "the new node restored sessions");
    eprintln!(
        "[{label}] node added: {to_new} of 24 executions on it, none of {} sessions moved to it",
        survivors.len()
    );
    assert!(to_new > 0, "the new node takes executions");
    drop(nodes);
}

/// Two nodes, `{tag}a` and `{tag}b`, on a shared directory store (returned too), started
/// with `extra_a` and `extra_b` (and `env_a` in a's environment) and ready: the
/// node-to-node tests, without a proxy.
async fn two_nodes(
    tag: &str,
    extra_a: &[&str],
    env_a: &[(&str, &str)],
    extra_b: &[&str],
) -> (PathBuf, Node, Node) {
    let dir = scratch_dir(&format!("cluster-{tag}-store"));
    let store = Store::Dir(dir.clone());
    let (mut a, mut b) = (Node::new(&format!("{tag}a")), Node::new(&format!("{tag}b")));
    a.env = env_a
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    a.start_with(&store, extra_a);
    b.start_with(&store, extra_b);
    wait_ready_at(&a.base()).await;
    wait_ready_at(&b.base()).await;
    (dir, a, b)
}

/// Opens a session on node `n` through `c` (durable or not) and runs `x = 41` in it; its id.
async fn open_with_x(c: &reqwest::Client, n: &Node, durable: bool) -> String {
    let (st, v) = post(
        c,
        &format!("{}/v1/sessions", n.base()),
        &json!({"template": "python", "durable": durable}),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_str().unwrap().to_string();
    session_turn(c, &n.base(), &id, "x = 41").await;
    id
}

/// Without a proxy: a session that hibernated on one node (its snapshot written, its lease
/// released) is taken by another node that is asked for it; the first then answers
/// `session_elsewhere` naming the second, and never serves its stale copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernated_session_is_taken_by_the_node_asked_for_it() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (dir, a, b) = two_nodes("h", &["--hibernate-after-secs", "1"], &[], &[]).await;
    let c = client();
    let id = open_with_x(&c, &a, false).await;
    // b does not take a session a holds live and that is not durable.
    let url = |n: &Node| format!("{}/v1/sessions/{id}/execute", n.base());
    let (st, v) = post(&c, &url(&b), &json!({"code": "x"})).await;
    assert_eq!((st, error_code(&v)), (409, "session_elsewhere"), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("node ha"),
        "{v}"
    );
    // Idle: a hibernates it (written, released), then b is asked for it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, info) = get(&c, &format!("{}/v1/sessions/{id}", a.base())).await;
        if info["resident"] == false {
            break;
        }
        assert!(Instant::now() < deadline, "never hibernated: {info}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (st, v) = post(&c, &url(&b), &json!({"code": "x + 1"})).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["result"], "42", "{v}");
    // a kept it as hibernated; b holds it now.
    let (st, v) = post(&c, &url(&a), &json!({"code": "x + 2"})).await;
    assert_eq!((st, error_code(&v)), (409, "session_elsewhere"), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("node hb"),
        "{v}"
    );
    let (st, v) = post(&c, &url(&b), &json!({"code": "x + 3"})).await;
    assert_eq!((st, v["result"].as_str()), (200, Some("44")), "{v}");
    // Closed through a: not a's to close (b holds it live and it is not durable); through
    // b: gone on both.
    let session = |n: &Node| format!("{}/v1/sessions/{id}", n.base());
    let r = send(c.delete(session(&a))).await;
    assert_eq!(
        (r.status, error_code(&r.body)),
        (409, "session_elsewhere"),
        "{}",
        r.body
    );
    let r = send(c.delete(session(&b))).await;
    assert_eq!(r.status, 204, "{}", r.body);
    for n in [&a, &b] {
        let (st, v) = get(&c, &session(n)).await;
        assert_eq!((st, error_code(&v)), (404, "session_not_found"), "{v}");
    }
    drop((a, b));
    let _ = std::fs::remove_dir_all(dir);
}

/// Without a proxy, the race of a take-over against a running turn: another node takes a
/// durable session over (as when the proxy's ring moves) while its node runs a turn. The
/// new node has the state of the last turn written; the turn that was running is answered
/// 503 `session_moving` (retry), not 200, since what it did was not kept; its retry on the
/// new node runs once, on the right state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_overtaken_by_a_take_over_is_not_answered_as_done() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (dir, a, b) = two_nodes("r", &[], &[], &[]).await;
    let c = client();
    let id = open_with_x(&c, &a, true).await;
    let url = |n: &Node| format!("{}/v1/sessions/{id}/execute", n.base());
    let slow = tokio::spawn(send(
        c.post(url(&a))
            .json(&json!({"code": "import time\ntime.sleep(3)\nx += 1\nx"})),
    ));
    tokio::time::sleep(Duration::from_millis(700)).await;
    // b takes it over mid-turn, at the last turn written.
    let (st, v) = post(&c, &url(&b), &json!({"code": "x"})).await;
    assert_eq!((st, v["result"].as_str()), (200, Some("41")), "{v}");
    let overtaken = slow.await.unwrap();
    assert_eq!(
        (
            overtaken.status,
            error_code(&overtaken.body),
            overtaken.retry_after
        ),
        (503, "session_moving", true),
        "{}",
        overtaken.body
    );
    // Its retry runs once, where the session is now.
    let (st, v) = post(&c, &url(&b), &json!({"code": "x += 1\nx"})).await;
    assert_eq!((st, v["result"].as_str()), (200, Some("42")), "{v}");
    // Closed through a (a durable session: a takes it over to close it), it is gone on b
    // too: b's copy finds its lease gone and is dropped.
    let r = send(c.delete(format!("{}/v1/sessions/{id}", a.base()))).await;
    assert_eq!(r.status, 204, "{}", r.body);
    let (st, v) = post(&c, &url(&b), &json!({"code": "x"})).await;
    assert_eq!((st, error_code(&v)), (404, "session_not_found"), "{v}");
    drop((a, b));
    let _ = std::fs::remove_dir_all(dir);
}

/// Without a proxy, the race of a take-over against a turn's commit: the old node has
/// written the turn's snapshot but not yet committed it through the lease (a debug build
/// waits there, `VIVARIUM_DEBUG_COMMIT_DELAY_MS`) when another node takes the session over.
/// The new node loads the last committed state; the old node's commit fails, and its turn
/// is answered 503 `session_moving`, not 200, so no answered turn is missing from the
/// state that goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_over_during_a_commit_keeps_every_answered_turn() {
    let _one = ONE_AT_A_TIME.lock().await;
    let delay = [("VIVARIUM_DEBUG_COMMIT_DELAY_MS", "1500")];
    let (dir, a, b) = two_nodes("c", &[], &delay, &[]).await;
    let c = client();
    let id = open_with_x(&c, &a, true).await;
    let url = |n: &Node| format!("{}/v1/sessions/{id}/execute", n.base());
    let started = Instant::now();
    let pending = tokio::spawn(send(c.post(url(&a)).json(&json!({"code": "x += 1\nx"}))));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (st, v) = post(&c, &url(&b), &json!({"code": "x"})).await;
    assert_eq!((st, v["result"].as_str()), (200, Some("41")), "{v}");
    let uncommitted = pending.await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "the commit waited"
    );
    assert_eq!(
        (
            uncommitted.status,
            error_code(&uncommitted.body),
            uncommitted.retry_after
        ),
        (503, "session_moving", true),
        "{}",
        uncommitted.body
    );
    let (st, v) = post(&c, &url(&b), &json!({"code": "x += 1\nx"})).await;
    assert_eq!((st, v["result"].as_str()), (200, Some("42")), "{v}");
    drop((a, b));
    let _ = std::fs::remove_dir_all(dir);
}

/// Without a proxy, with API keys: a session id is nothing to another key on any node.
/// Whether the session is live on the node asked, live on another, or held by a dead node's
/// lease, the other key gets 404 `session_not_found` (never `session_elsewhere` or
/// `session_lost`, which would say it exists), and its asking moves nothing: the owner's
/// next turn is answered where the session was, and after the node's death the owner's
/// durable session goes on elsewhere while the other one is `session_lost`, to her alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_keys_session_is_not_there_on_any_node() {
    let _one = ONE_AT_A_TIME.lock().await;
    let keys = scratch_dir("cluster-keys").join("keys.txt");
    std::fs::write(
        &keys,
        "alice:key-alice-0123456789\nbob:key-bob-0123456789\n",
    )
    .unwrap();
    let keyed = ["--api-keys-file", keys.to_str().unwrap()];
    let (dir, mut a, b) = two_nodes("k", &keyed, &[], &keyed).await;
    let (alice, bob) = (
        client_with_key("key-alice-0123456789"),
        client_with_key("key-bob-0123456789"),
    );
    let mut ids = Vec::new();
    for durable in [true, false] {
        ids.push(open_with_x(&alice, &a, durable).await);
    }
    let (durable, transient) = (ids[0].clone(), ids[1].clone());
    let turn = |n: &Node, id: &str| format!("{}/v1/sessions/{id}/execute", n.base());
    let bob_finds_nothing = |nodes: Vec<String>| {
        let (bob, ids) = (bob.clone(), ids.clone());
        async move {
            for base in &nodes {
                for id in &ids {
                    for req in [
                        bob.post(format!("{base}/v1/sessions/{id}/execute"))
                            .json(&json!({"code": "x"})),
                        bob.get(format!("{base}/v1/sessions/{id}")),
                        bob.delete(format!("{base}/v1/sessions/{id}")),
                    ] {
                        let a = send(req).await;
                        assert_eq!(
                            (a.status, error_code(&a.body)),
                            (404, "session_not_found"),
                            "{base} {id}: {}",
                            a.body
                        );
                    }
                }
            }
        }
    };

    // Live on a: bob finds nothing on either node, and nothing moved.
    bob_finds_nothing(vec![a.base(), b.base()]).await;
    for id in [&durable, &transient] {
        let r = send(alice.post(turn(&a, id)).json(&json!({"code": "x += 1\nx"}))).await;
        assert_eq!((r.status, r.node.as_str()), (200, "ka"), "{}", r.body);
        assert_eq!(r.body["result"], "42", "{}", r.body);
    }

    // a dies: its leases name a dead node. Bob still finds nothing on b, and his asking
    // takes nothing over; alice's durable session goes on at b, her other one is lost.
    a.kill9();
    tokio::time::sleep(Duration::from_millis(TTL_MS + 300)).await;
    bob_finds_nothing(vec![b.base()]).await;
    let (st, v) = post(&alice, &turn(&b, &transient), &json!({"code": "x"})).await;
    assert_eq!((st, error_code(&v)), (410, "session_lost"), "{v}");
    let (st, v) = post(&alice, &turn(&b, &durable), &json!({"code": "x + 1"})).await;
    assert_eq!((st, v["result"].as_str()), (200, Some("43")), "{v}");
    // Now live on b: still nothing to bob there.
    bob_finds_nothing(vec![b.base()]).await;
    let forged = format!("s-{}", "f".repeat(32));
    let (st, v) = post(&bob, &turn(&b, &forged), &json!({"code": "1"})).await;
    assert_eq!((st, error_code(&v)), (404, "session_not_found"), "{v}");
    drop((a, b));
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(keys.parent().unwrap());
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the node never exited after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the steady mix got back.
#[derive(Default)]
struct Tally {
    by: std::sync::Mutex<HashMap<&'static str, u64>>,
    retried: AtomicU64,
}

impl Tally {
    fn count(&self, a: &Answer) {
        let kind = match a.status {
            200 => "ok",
            _ => "bad",
        };
        if kind == "bad" {
            eprintln!("unexpected answer {} from {}: {}", a.status, a.node, a.body);
        }
        *self.by.lock().unwrap().entry(kind).or_default() += 1;
    }

    fn summary(&self) -> HashMap<&'static str, u64> {
        self.by.lock().unwrap().clone()
    }
}
