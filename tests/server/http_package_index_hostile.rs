//! The package index is as hostile as a package, over real HTTP, against an index this test
//! runs on 127.0.0.1 (an axum server whose pages, links, file names and bodies the test
//! chooses): a link that names a path writes nothing outside the work folder; the index's
//! credentials appear in no response, log line or audit line; first resolutions on a cold
//! cache do not race; bytecode a wheel ships never runs; the cache's cap counts the compiled
//! files; the host's `.pyc` compiles run a few at a time.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::http_support::*;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// A wheel: its file name, bytes, and metadata (served on its own, PEP 658).
struct Wheel {
    filename: String,
    bytes: Vec<u8>,
    metadata: String,
}

fn wheel(name: &str, version: &str, files: &[(&str, &[u8])]) -> Wheel {
    let dist = name.replace('-', "_");
    let info = format!("{dist}-{version}.dist-info");
    let metadata = format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n");
    let mut buf = std::io::Cursor::new(Vec::new());
    {
        let mut z = zip::ZipWriter::new(&mut buf);
        let o = zip::write::SimpleFileOptions::default();
        for (path, bytes) in files {
            z.start_file(*path, o).unwrap();
            z.write_all(bytes).unwrap();
        }
        z.start_file(format!("{info}/METADATA"), o).unwrap();
        z.write_all(metadata.as_bytes()).unwrap();
        z.start_file(format!("{info}/WHEEL"), o).unwrap();
        z.write_all(
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        .unwrap();
        z.start_file(format!("{info}/RECORD"), o).unwrap();
        z.finish().unwrap();
    }
    Wheel {
        filename: format!("{dist}-{version}-py3-none-any.whl"),
        bytes: buf.into_inner(),
        metadata,
    }
}

#[derive(Default)]
struct IndexState {
    /// Project → the links of its page (`href` as written, the link's text).
    pages: Mutex<HashMap<String, Vec<String>>>,
    /// File name, percent-decoded → its bytes.
    files: Mutex<HashMap<String, Vec<u8>>>,
    /// Projects whose page answers 500.
    broken: Mutex<Vec<String>>,
    /// The `Authorization` every request must carry, when set.
    auth: Option<String>,
    /// Every path asked for.
    requests: Mutex<Vec<String>>,
}

/// The index: `/simple/<project>/` pages, `/files/<segment>` bodies.
struct Index {
    state: Arc<IndexState>,
    addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Index {
    async fn start(auth: Option<(&str, &str)>) -> Index {
        let state = Arc::new(IndexState {
            auth: auth.map(|(u, p)| {
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
                )
            }),
            ..IndexState::default()
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Index { state, addr, task }
    }

    /// Publishes `w` under `project`, its link's last segment `segment` (as written in the
    /// `href`, percent-encoding and all) with `query` after it (then without its metadata
    /// served on its own: pip would ask for `<query>.metadata`).
    fn publish(&self, project: &str, w: &Wheel, segment: &str, query: &str) {
        let decoded = percent_decode(segment);
        let sha = hex::encode(Sha256::digest(&w.bytes));
        let meta = hex::encode(Sha256::digest(w.metadata.as_bytes()));
        self.state
            .files
            .lock()
            .unwrap()
            .insert(decoded.clone(), w.bytes.clone());
        self.state.files.lock().unwrap().insert(
            format!("{decoded}.metadata"),
            w.metadata.clone().into_bytes(),
        );
        self.state
            .pages
            .lock()
            .unwrap()
            .entry(project.to_string())
            .or_default()
            .push(if query.is_empty() {
                format!(
                    "<a href=\"../../files/{segment}#sha256={sha}\" data-dist-info-metadata=\"sha256={meta}\" data-core-metadata=\"sha256={meta}\">{}</a>",
                    w.filename
                )
            } else {
                format!(
                    "<a href=\"../../files/{segment}{query}#sha256={sha}\">{}</a>",
                    w.filename
                )
            });
    }

    fn publish_plain(&self, w: &Wheel) {
        let project = w.filename.split('-').next().unwrap().replace('_', "-");
        self.publish(&project, w, &w.filename, "");
    }

    fn host(&self) -> String {
        self.addr.to_string()
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

async fn answer(State(s): State<Arc<IndexState>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    s.requests.lock().unwrap().push(path.clone());
    if let Some(auth) = &s.auth
        && req.headers().get(header::AUTHORIZATION) != Some(&HeaderValue::from_str(auth).unwrap())
    {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"index\"")],
        )
            .into_response();
    }
    if let Some(project) = path
        .strip_prefix("/simple/")
        .map(|p| p.trim_end_matches('/'))
    {
        if s.broken.lock().unwrap().iter().any(|b| b == project) {
            return (StatusCode::INTERNAL_SERVER_ERROR, "broken").into_response();
        }
        let Some(links) = s.pages.lock().unwrap().get(project).cloned() else {
            return StatusCode::NOT_FOUND.into_response();
        };
        let body = format!("<html><body>\n{}\n</body></html>\n", links.join("\n"));
        return ([(header::CONTENT_TYPE, "text/html")], body).into_response();
    }
    if let Some(segment) = path.strip_prefix("/files/")
        && let Some(bytes) = s
            .files
            .lock()
            .unwrap()
            .get(&percent_decode(segment))
            .cloned()
    {
        return Response::new(Body::from(bytes));
    }
    StatusCode::NOT_FOUND.into_response()
}

async fn execute(c: &reqwest::Client, base: &str, packages: &[&str], code: &str) -> (u16, Value) {
    post(
        c,
        &format!("{base}/v1/execute"),
        &json!({"code": code, "packages": packages, "template": "python", "policy": "off"}),
    )
    .await
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The environment folder under `cache` that holds `module`, once it is compiled.
async fn compiled_env(cache: &Path, module: &str) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let found = std::fs::read_dir(cache.join("envs")).ok().and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.join("site").join(module).exists() && p.join("compiled").exists())
        });
        if let Some(env) = found {
            return env;
        }
        assert!(Instant::now() < deadline, "{module} never compiled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wheel_link_naming_a_path_is_refused_and_writes_nothing_anywhere() {
    let index = Index::start(None).await;
    // pip unquotes the link's whole path before taking its last part (`vivtest_trav-1.0-
    // py3-none-any.whl`), so it accepts the link; the segment itself unquotes to a path.
    let w = wheel(
        "vivtest-trav",
        "1.0",
        &[("vivtest_trav.py", b"print('planted')\n")],
    );
    index.publish(
        "vivtest-trav",
        &w,
        "..%2F..%2F..%2Fvivtest_trav-1.0-py3-none-any.whl",
        "",
    );
    let root = scratch_dir("pkg-trav");
    // The work folder is <cache>/tmp/<id>: three levels up is `root/a`.
    let cache = root.join("a/b/cache");
    let s = start("pkg-trav", {
        let (url, cache) = (format!("http://{}/simple", index.host()), cache.clone());
        move |a| {
            a.package_index = Some(url);
            a.package_cache_dir = Some(cache);
        }
    })
    .await;
    let c = client();
    let (st, v) = execute(&c, &s.base, &["vivtest-trav"], "print('ran')").await;
    assert_eq!((st, error_code(&v)), (422, "package_invalid"), "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("vivtest-trav") && msg.contains("file name"),
        "{msg}"
    );
    // No file of the index's anywhere: not where the link pointed, not in the cache.
    let planted: Vec<_> = files_under(&root)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("vivtest_trav"))
        .collect();
    assert!(planted.is_empty(), "{planted:?}");
    assert!(!files_under(&cache.join("tmp")).iter().any(|p| p.is_file()));
    // A link to a file of the host (`file:`): pip takes it, the host fetches only http(s).
    let local = wheel(
        "vivtest-local",
        "1.0",
        &[("vivtest_local.py", b"print('a host file')\n")],
    );
    let host_file = root.join(&local.filename);
    std::fs::write(&host_file, &local.bytes).unwrap();
    index.state.pages.lock().unwrap().insert(
        "vivtest-local".into(),
        vec![format!(
            "<a href=\"file://{}#sha256={}\">{}</a>",
            host_file.display(),
            hex::encode(Sha256::digest(&local.bytes)),
            local.filename
        )],
    );
    let (st, v) = execute(&c, &s.base, &["vivtest-local"], "import vivtest_local").await;
    assert_eq!((st, error_code(&v)), (422, "package_invalid"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("file: URL"),
        "{v}"
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}

/// The real binary, its log (stderr) to a file.
struct Logged {
    child: std::process::Child,
    base: String,
    log: PathBuf,
    audit: PathBuf,
}

impl Logged {
    fn spawn(scratch: &Path, extra: &[&str]) -> Logged {
        use std::io::BufRead;
        let log = scratch.with_extension("log");
        let audit = scratch.with_extension("audit.jsonl");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vivarium"))
            .args(["serve", "--listen", "127.0.0.1:0", "--workers", "1"])
            .args(extra)
            .env("VIVARIUM_SCRATCH", scratch)
            .env("VIVARIUM_AUDIT_LOG", &audit)
            .env("VIVARIUM_LOG", "debug")
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let base = line
            .trim()
            .strip_prefix("vivarium: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Logged {
            child,
            base,
            log,
            audit,
        }
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_file(&self.audit);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_credentials_appear_in_no_response_log_or_audit_line() {
    const USER: &str = "vivuser";
    const TOKEN: &str = "s3cr3t-T0KEN";
    const SIGNATURE: &str = "S1GNATURE-qs";
    let index = Index::start(Some((USER, TOKEN))).await;
    let w = wheel(
        "vivtest-auth",
        "1.0",
        &[("vivtest_auth.py", b"VALUE = 'authed'\n")],
    );
    // A signed link, its token in the query.
    index.publish(
        "vivtest-auth",
        &w,
        &w.filename,
        &format!("?sig={SIGNATURE}"),
    );
    index
        .state
        .broken
        .lock()
        .unwrap()
        .push("vivtest-down".into());
    let url = format!("http://{USER}:{TOKEN}@{}/simple/", index.host());
    let scratch = scratch_dir("pkg-secret");
    let cache = scratch.with_extension("cache");
    let server = Logged::spawn(
        &scratch,
        &[
            "--package-index",
            &url,
            "--package-cache-dir",
            cache.to_str().unwrap(),
        ],
    );
    wait_ready_at(&server.base).await;
    let c = client();
    let mut seen = Vec::new();
    // The policy shows the index by its host, never its credentials.
    let (st, v) = get(&c, &format!("{}/v1/packages", server.base)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["extra"]["index"],
        format!("http://***@{}/simple/", index.host()),
        "{v}"
    );
    seen.push(v.to_string());
    // The credentials work: pip and the host's download both send them.
    let (st, v) = execute(
        &c,
        &server.base,
        &["vivtest-auth"],
        "import vivtest_auth; print(vivtest_auth.VALUE)",
    )
    .await;
    assert_eq!((st, v["stdout"].as_str()), (200, Some("authed\n")), "{v}");
    seen.push(v.to_string());
    // An index that fails: a 502 that names the host, not the credentials.
    let (st, v) = execute(&c, &server.base, &["vivtest-down"], "print(1)").await;
    assert_eq!(
        (st, error_code(&v)),
        (502, "package_index_unreachable"),
        "{v}"
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&index.host()), "{msg}");
    seen.push(v.to_string());
    // An index that is down, with a token in its query too.
    let dead = format!("http://{USER}:{TOKEN}@127.0.0.1:9/simple/?token={SIGNATURE}");
    let s = start("pkg-secret-dead", move |a| a.package_index = Some(dead)).await;
    let (st, v) = execute(&c, &s.base, &["vivtest-auth"], "print(1)").await;
    assert_eq!(
        (st, error_code(&v)),
        (502, "package_index_unreachable"),
        "{v}"
    );
    seen.push(v.to_string());
    let (_, v) = get(&c, &s.url("/v1/packages")).await;
    assert_eq!(
        v["extra"]["index"], "http://***@127.0.0.1:9/simple/?***",
        "{v}"
    );
    seen.push(v.to_string());
    seen.extend(s.audit().iter().map(Value::to_string));
    s.stop().await;
    drop(index);
    // Everything the server wrote: its responses, its audit lines, its log.
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(log.contains("vivtest-auth"), "the log has pip's lines");
    seen.push(log);
    seen.push(std::fs::read_to_string(&server.audit).unwrap_or_default());
    for text in &seen {
        for secret in [TOKEN, SIGNATURE, USER] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_dir_all(&cache);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytecode_shipped_in_a_wheel_never_runs() {
    let index = Index::start(None).await;
    let root = scratch_dir("pkg-pyc");
    let cache = root.join("cache");
    let s = start("pkg-pyc", {
        let (url, cache) = (format!("http://{}/simple", index.host()), cache.clone());
        move |a| {
            a.package_index = Some(url);
            a.package_cache_dir = Some(cache);
        }
    })
    .await;
    let c = client();
    // Bytecode the guest's own CPython accepts: unchecked hash-based (never compared with
    // its source), and a sourceless module.
    let make = "import base64, py_compile, sys\n\
                open('m.py', 'w').write(\"VALUE = 'bytecode'\\n\")\n\
                py_compile.compile('m.py', cfile='m.pyc', invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n\
                print(sys.implementation.cache_tag)\n\
                print(base64.b64encode(open('m.pyc', 'rb').read()).decode())";
    let (st, v) = execute(&c, &s.base, &[], make).await;
    assert_eq!(st, 200, "{v}");
    let out = v["stdout"].as_str().unwrap().to_string();
    let (tag, pyc) = out.trim().split_once('\n').unwrap();
    let pyc = base64::engine::general_purpose::STANDARD
        .decode(pyc)
        .unwrap();
    let cached = format!("vivtest_pyc/__pycache__/__init__.{tag}.pyc");
    let w = wheel(
        "vivtest-pyc",
        "1.0",
        &[
            ("vivtest_pyc/__init__.py", b"VALUE = 'source'\n"),
            (&cached, &pyc),
            ("vivtest_pyc_only.pyc", &pyc),
        ],
    );
    index.publish_plain(&w);
    let (st, v) = execute(
        &c,
        &s.base,
        &["vivtest-pyc"],
        "import vivtest_pyc\nprint(vivtest_pyc.VALUE)\ntry:\n    import vivtest_pyc_only\n    print(vivtest_pyc_only.VALUE)\nexcept ImportError as e:\n    print(type(e).__name__)",
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["stdout"], "source\nModuleNotFoundError\n", "{v}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}

/// A module of `comment` bytes of comments and `functions` small functions.
fn module(comment: usize, functions: usize) -> Vec<u8> {
    let mut m = String::new();
    while m.len() < comment {
        m.push_str("# filler filler filler filler filler filler filler filler filler filler\n");
    }
    for i in 0..functions {
        m.push_str(&format!("def f{i}(a, b):\n    return a * {i} + b - {i}\n"));
    }
    m.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_cap_counts_the_compiled_files() {
    let index = Index::start(None).await;
    // More comment than code: the compiled files are smaller than the sources.
    let body = module(100_000, 400);
    let a = wheel("vivtest-cap-a", "1.0", &[("vivtest_cap_a.py", &body)]);
    let b = wheel("vivtest-cap-b", "1.0", &[("vivtest_cap_b.py", &body)]);
    index.publish_plain(&a);
    index.publish_plain(&b);
    // What one set unpacks to (its dist-info included): room for two, not for two compiled.
    let unpacked = {
        let mut z = zip::ZipArchive::new(std::io::Cursor::new(&a.bytes)).unwrap();
        (0..z.len())
            .map(|i| z.by_index(i).unwrap().size())
            .sum::<u64>()
    };
    let cap = 2 * unpacked + 1024;
    let root = scratch_dir("pkg-cap");
    let cache = root.join("cache");
    let s = start("pkg-cap", {
        let (url, cache) = (format!("http://{}/simple", index.host()), cache.clone());
        move |a| {
            a.package_index = Some(url);
            a.package_cache_dir = Some(cache);
            a.package_cache_bytes = cap;
        }
    })
    .await;
    let c = client();
    for (package, module) in [
        ("vivtest-cap-a", "vivtest_cap_a"),
        ("vivtest-cap-b", "vivtest_cap_b"),
    ] {
        let (st, v) = execute(
            &c,
            &s.base,
            &[package],
            &format!("import {module}; print({module}.f3(1, 2))"),
        )
        .await;
        assert_eq!((st, v["stdout"].as_str()), (200, Some("2\n")), "{v}");
        let env = compiled_env(&cache, &format!("{module}.py")).await;
        assert!(
            files_under(&env)
                .iter()
                .any(|p| p.extension().is_some_and(|e| e == "pyc")),
            "compiled"
        );
    }
    let held: u64 = files_under(&cache.join("envs"))
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    assert!(
        held <= cap,
        "the cache holds {held} bytes, its cap is {cap}"
    );
    // The newer set stays.
    let (st, v) = execute(
        &c,
        &s.base,
        &["vivtest-cap-b"],
        "import vivtest_cap_b; print(1)",
    )
    .await;
    assert_eq!((st, v["stdout"].as_str()), (200, Some("1\n")), "{v}");
    s.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compiles_of_six_new_sets_run_a_few_at_a_time() {
    let index = Index::start(None).await;
    let body = module(0, 4000);
    let names: Vec<String> = (0..6).map(|i| format!("vivtest-cold-{i}")).collect();
    for n in &names {
        let module = n.replace('-', "_");
        index.publish_plain(&wheel(n, "1.0", &[(&format!("{module}.py"), &body)]));
    }
    let root = scratch_dir("pkg-cold");
    let cache = root.join("cache");
    let s = start("pkg-cold", {
        let (url, cache) = (format!("http://{}/simple", index.host()), cache.clone());
        move |a| {
            a.package_index = Some(url);
            a.package_cache_dir = Some(cache);
        }
    })
    .await;
    // The compile sandboxes are the only ones in this (the supervisor's) scratch root.
    let own_root = s.scratch.join(std::process::id().to_string());
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                let n = std::fs::read_dir(&own_root)
                    .map(|d| d.flatten().filter(|e| e.path().is_dir()).count())
                    .unwrap_or(0);
                peak = peak.max(n);
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        })
    };
    let c = client();
    let runs = names.iter().map(|n| {
        let (c, base, module) = (c.clone(), s.base.clone(), n.replace('-', "_"));
        async move {
            execute(
                &c,
                &base,
                &[n],
                &format!("import {module}; print({module}.f7(1, 1))"),
            )
            .await
        }
    });
    for (st, v) in futures_util::future::join_all(runs).await {
        assert_eq!((st, v["stdout"].as_str()), (200, Some("1\n")), "{v}");
    }
    for n in &names {
        compiled_env(&cache, &format!("{}.py", n.replace('-', "_"))).await;
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let peak = sampler.join().unwrap();
    let bound = std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1));
    assert!(peak >= 1, "the compiles were seen");
    assert!(
        peak <= bound,
        "{peak} compile sandboxes at once (bound {bound})"
    );
    s.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_resolutions_on_a_cold_cache_shared_by_five_servers_do_not_race() {
    let index = Index::start(None).await;
    let names: Vec<String> = (0..20).map(|i| format!("vivtest-race-{i}")).collect();
    for n in &names {
        let module = n.replace('-', "_");
        index.publish_plain(&wheel(n, "1.0", &[(&format!("{module}.py"), b"V = 1\n")]));
    }
    const SERVERS: usize = 5;
    let root = scratch_dir("pkg-race");
    let cache = root.join("cache");
    let servers = futures_util::future::join_all((0..SERVERS).map(|i| {
        let (url, cache) = (format!("http://{}/simple", index.host()), cache.clone());
        async move {
            start(&format!("pkg-race-{i}"), move |a| {
                a.package_index = Some(url);
                a.package_cache_dir = Some(cache);
            })
            .await
        }
    }))
    .await;
    let c = client();
    // Names another resolution holds at this moment (here for good: a folder) must not
    // matter either: the placeholders standing for the built-in set, each at its fixed
    // `.part` name, where resolutions wrote them before they took names of their own.
    let (_, list) = get(&c, &servers[0].url("/v1/packages")).await;
    let builtins = list["builtin"].as_array().unwrap();
    let mut h = Sha256::new();
    for b in builtins {
        h.update(format!(
            "{}=={}\n",
            b["name"].as_str().unwrap(),
            b["version"].as_str().unwrap()
        ));
    }
    let placeholders = cache.join(format!("builtins-{}", &hex::encode(h.finalize())[..16]));
    for b in builtins {
        let dist: String = b["name"]
            .as_str()
            .unwrap()
            .split(['-', '_', '.'])
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("_");
        let version = b["version"].as_str().unwrap();
        std::fs::create_dir_all(
            placeholders.join(format!("{dist}-{version}-py3-none-any.whl.part")),
        )
        .unwrap();
    }
    // Every server starts four resolutions at once (its most), all on the same fresh cache.
    let runs = names.iter().enumerate().map(|(i, n)| {
        let (c, base, module) = (
            c.clone(),
            servers[i % SERVERS].base.clone(),
            n.replace('-', "_"),
        );
        async move {
            execute(
                &c,
                &base,
                &[n],
                &format!("import {module}; print({module}.V)"),
            )
            .await
        }
    });
    for (st, v) in futures_util::future::join_all(runs).await {
        assert_eq!((st, v["stdout"].as_str()), (200, Some("1\n")), "{v}");
    }
    for s in servers {
        s.stop().await;
    }
    let _ = std::fs::remove_dir_all(&root);
}
