//! Runs the hostile corpus (`tests/hostile/**.py`, format in `tests/hostile/README.md`)
//! through both front doors: the CLI binary (parallel batches of child processes) and ONE real
//! server (`/v1/execute`, plus some cases as session turns), and checks containment from the
//! host side: each case's expected statuses and output, canary files unchanged and unread,
//! the loopback listener untouched, the stdlib zip unchanged, no sandbox dirs left, and this
//! process's (the server's) descriptors, threads and RSS not growing across the run.

use crate::http_support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::hostile::*;
use serde_json::{Value, json};

/// Cases run at once (guests mostly wait on deadlines; two cores).
const PARALLEL: usize = 4;

#[test]
fn corpus_is_well_formed() {
    let cases = load_corpus();
    assert!(cases.len() >= 80, "only {} cases", cases.len());
    for cat in CATEGORIES {
        let n = cases.iter().filter(|c| c.category == cat).count();
        assert!(n >= 5, "category {cat} has only {n} cases");
    }
    for c in &cases {
        assert!(
            CATEGORIES.contains(&c.category.as_str()),
            "{}: unknown category",
            c.name
        );
    }
    let counts: Vec<String> = CATEGORIES
        .iter()
        .map(|cat| {
            format!(
                "{cat}={}",
                cases.iter().filter(|c| c.category == *cat).count()
            )
        })
        .collect();
    eprintln!("corpus: {} cases ({})", cases.len(), counts.join(" "));
}

/// Runs `f` over `items` on `PARALLEL` threads, keeping the input order in the result.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..PARALLEL {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= items.len() {
                        break;
                    }
                    let r = f(&items[i]);
                    *out[i].lock().unwrap() = Some(r);
                }
            });
        }
    });
    out.into_iter()
        .map(|m| m.into_inner().unwrap().unwrap())
        .collect()
}

/// Sorts one case's problems into failures, or into known bugs (printed, not failing).
fn file_problems(
    case: &Case,
    label: String,
    problems: Vec<String>,
    failures: &mut Vec<(String, Vec<String>)>,
) {
    match (&case.known_bug, problems.is_empty()) {
        (None, true) => {}
        (None, false) => failures.push((label, problems)),
        (Some(bug), false) => eprintln!("KNOWN BUG still present in {label} ({bug}): {problems:?}"),
        (Some(bug), true) => {
            eprintln!("KNOWN BUG not reproduced in {label} ({bug}): fixed? drop the header")
        }
    }
}

fn report_failures(door: &str, failures: &[(String, Vec<String>)]) {
    if failures.is_empty() {
        return;
    }
    let mut msg = format!("{} case(s) failed through {door}:\n", failures.len());
    for (name, problems) in failures {
        msg.push_str(&format!("  {name}:\n"));
        for p in problems {
            msg.push_str(&format!("    - {p}\n"));
        }
    }
    panic!("{msg}");
}

// ---------------------------------------------------------------------------------------------
// Through the CLI binary

struct CliRun {
    scratch_base: PathBuf,
    work: PathBuf,
}

impl CliRun {
    fn run(&self, case: &Case, fx: &Fixture) -> Outcome {
        let dir = self.work.join(case.name.replace('/', "__"));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("prog.py");
        std::fs::write(&script, case.program(fx)).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vivarium"));
        cmd.arg("run").arg("--json");
        for (k, v) in &case.limits {
            cmd.arg(format!("--{}", k.replace('_', "-")))
                .arg(v.to_string());
        }
        if case.input.stdin_bytes > 0 {
            let p = dir.join("stdin");
            std::fs::write(&p, case.input.stdin()).unwrap();
            cmd.arg("--stdin").arg(p);
        }
        for (k, v) in case.input.env() {
            cmd.arg("--env").arg(format!("{k}={v}"));
        }
        for (i, (guest, content)) in case.input.uploads().into_iter().enumerate() {
            let p = dir.join(format!("upload{i}"));
            std::fs::write(&p, content).unwrap();
            cmd.arg("--file").arg(format!("{guest}={}", p.display()));
        }
        // A scratch base per child, so each child's leftovers are its own (sharing one base
        // is tested in tests/sandbox/hostile_regressions.rs).
        let base = self.scratch_base.join(case.name.replace('/', "__"));
        cmd.arg(&script)
            .env("VIVARIUM_SCRATCH", &base)
            .env(HOST_ENV_VAR, fx.values["{HOST_ENV_SECRET}"].clone())
            .env_remove("VIVARIUM_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd.spawn().expect("spawning the CLI");
        // Read both pipes on their own threads so a large report never blocks the child.
        let mut out_pipe = child.stdout.take().unwrap();
        let mut err_pipe = child.stderr.take().unwrap();
        let out_t = std::thread::spawn(move || {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut out_pipe, &mut v).ok();
            v
        });
        let err_t = std::thread::spawn(move || {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut err_pipe, &mut v).ok();
            v
        });
        let limit = Duration::from_millis(case.max_wall_ms + 30_000);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let wall_ms = started.elapsed().as_millis() as u64;
        let stdout = out_t.join().unwrap();
        let stderr = err_t.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let Some(status) = status else {
            return Outcome {
                status: "hung (killed by the runner)".into(),
                wall_ms,
                ..Default::default()
            };
        };
        match serde_json::from_slice::<Value>(&stdout) {
            Ok(v) => Outcome::from_report(&v, wall_ms),
            Err(_) => {
                let err = String::from_utf8_lossy(&stderr);
                let tail: String = err
                    .chars()
                    .rev()
                    .take(300)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                if status.code() == Some(70) {
                    Outcome::refused(format!("exit 70: {tail}"), wall_ms)
                } else {
                    Outcome {
                        status: format!("CLI died ({status})"),
                        wall_ms,
                        note: tail,
                        ..Default::default()
                    }
                }
            }
        }
    }
}

/// Anything left under the per-case scratch bases (each CLI process removes its root).
fn leftover_dirs(base: &Path) -> Vec<PathBuf> {
    let mut left = Vec::new();
    for case_base in std::fs::read_dir(base).into_iter().flatten().flatten() {
        for r in std::fs::read_dir(case_base.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            // The base's own `.create.lock` stays; roots are folders.
            if r.path().is_dir() {
                left.push(r.path());
            }
        }
    }
    left
}

#[test]
fn corpus_through_the_cli() {
    let _counting = crate::counting();
    let started = Instant::now();
    let cases: Vec<Case> = load_corpus()
        .into_iter()
        .filter(|c| c.via.iter().any(|v| v == "cli"))
        .collect();
    let tag = format!("{}-{:08x}", std::process::id(), rand::random::<u32>());
    let scratch_base = std::env::temp_dir().join(format!("vivarium-hostile-cli-{tag}"));
    let work = std::env::temp_dir().join(format!("vivarium-hostile-work-{tag}"));
    std::fs::create_dir_all(&scratch_base).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let runtime = runtime_info();
    let fx = Fixture::new(
        "cli",
        &scratch_base,
        &scratch_base.join("no-audit-log"),
        &runtime,
    );
    let runner = CliRun {
        scratch_base: scratch_base.clone(),
        work: work.clone(),
    };
    let fds_before = open_fds();
    fx.arm_unread();
    let results = par_map(&cases, |c| runner.run(c, &fx));
    let mut failures = Vec::new();
    for (case, outcome) in cases.iter().zip(&results) {
        file_problems(
            case,
            case.name.clone(),
            judge(case, outcome, &fx),
            &mut failures,
        );
    }
    let mut host = Vec::new();
    if fx.canary_read() {
        host.push("the canary's atime moved: something read it".to_string());
    }
    host.extend(fx.host_problems());
    // Each CLI process removes its scratch root on exit.
    let left = leftover_dirs(&scratch_base);
    if !left.is_empty() {
        host.push(format!("CLI scratch left behind: {left:?}"));
    }
    let fds_after = open_fds();
    if fds_after > fds_before + 2 {
        host.push(format!("test process fds grew {fds_before} -> {fds_after}"));
    }
    if !host.is_empty() {
        failures.push(("<host after the CLI run>".into(), host));
    }
    let slowest = cases
        .iter()
        .zip(&results)
        .max_by_key(|(_, o)| o.wall_ms)
        .map(|(c, o)| format!("{} {} ms", c.name, o.wall_ms))
        .unwrap_or_default();
    eprintln!(
        "CLI: {} cases in {:.1} s (slowest {slowest}); canary atime tracked: {}",
        cases.len(),
        started.elapsed().as_secs_f64(),
        fx.atime_tracked
    );
    let _ = std::fs::remove_dir_all(&scratch_base);
    let _ = std::fs::remove_dir_all(&work);
    report_failures("the CLI", &failures);
}

// ---------------------------------------------------------------------------------------------
// Through one real server

fn http_body(case: &Case, fx: &Fixture) -> Value {
    let mut body = json!({
        "code": case.program(fx),
        "limits": case.limits,
    });
    if case.input.stdin_bytes > 0 {
        body["stdin"] = Value::String(String::from_utf8(case.input.stdin()).unwrap());
    }
    if case.input.env_vars > 0 {
        body["env"] = case
            .input
            .env()
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    if case.input.upload_files > 0 {
        body["files"] = case
            .input
            .uploads()
            .into_iter()
            .map(|(p, c)| json!({"path": p, "content": http_support::b64(&c)}))
            .collect();
    }
    body
}

async fn http_run(c: &reqwest::Client, url: &str, case: &Case, fx: &Fixture) -> Outcome {
    let started = Instant::now();
    let r = c.post(url).json(&http_body(case, fx)).send().await;
    let wall_ms = || started.elapsed().as_millis() as u64;
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                status: format!("HTTP failed: {e}"),
                wall_ms: wall_ms(),
                ..Default::default()
            };
        }
    };
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    match status {
        200 => Outcome::from_report(&v, wall_ms()),
        400..=499 => Outcome::refused(format!("HTTP {status}: {}", v["error"]), wall_ms()),
        _ => Outcome {
            status: format!("HTTP {status}"),
            wall_ms: wall_ms(),
            note: text.chars().take(300).collect(),
            ..Default::default()
        },
    }
}

/// One case as a session turn, then a follow-up turn: the session must go on (`1 + 1`
/// answers 2: a turn the host stopped rolled the session back, `rolled_back`), or, when the
/// hostile turn ended it (a program exit, or a stop the session could not roll back), say so
/// (409).
async fn session_run(
    c: &reqwest::Client,
    s: &http_support::TestServer,
    case: &Case,
    fx: &Fixture,
) -> (Outcome, Vec<String>) {
    let mut problems = Vec::new();
    let mut limits = case.limits.clone();
    limits.remove("output_bytes");
    let (st, v) = http_support::post(c, &s.url("/v1/sessions"), &json!({"limits": limits})).await;
    assert_eq!(st, 201, "opening a session: {v}");
    let id = v["id"].as_str().unwrap().to_string();
    let turn = s.url(&format!("/v1/sessions/{id}/execute"));
    let started = Instant::now();
    let (st, v) = http_support::post(c, &turn, &json!({"code": case.program(fx)})).await;
    let wall_ms = started.elapsed().as_millis() as u64;
    let outcome = if st == 200 {
        Outcome::from_report(&v, wall_ms)
    } else {
        Outcome::refused(format!("HTTP {st}: {v}"), wall_ms)
    };
    let stopped = !matches!(outcome.status.as_str(), "ok" | "error" | "memory_exceeded");
    let (st2, v2) = http_support::post(c, &turn, &json!({"code": "1 + 1"})).await;
    if stopped && st == 200 && v["ended"].is_null() && v["rolled_back"] != true {
        problems.push(format!(
            "a stopped turn neither rolled back nor ended the session: {v}"
        ));
    }
    if !v["ended"].is_null() {
        if st2 != 409 {
            problems.push(format!(
                "session should have ended; follow-up answered {st2}: {v2}"
            ));
        }
    } else if st2 == 200 && v2["result"] == "2" {
        // The session goes on.
    } else if st2 == 200 && !v2["ended"].is_null() {
        // The guest sabotaged its own interpreter (poisoned builtins and the like): the next
        // turn was stopped by a limit and ended the session. Contained; the server said so.
    } else {
        problems.push(format!("session unusable after the turn: {st2} {v2}"));
    }
    let r = c
        .delete(s.url(&format!("/v1/sessions/{id}")))
        .send()
        .await
        .unwrap();
    if r.status() != 204 {
        problems.push(format!("deleting the session answered {}", r.status()));
    }
    (outcome, problems)
}

/// Cases also run as session turns (besides those whose header says `via: ... session`).
const SESSION_CASES: [&str; 8] = [
    "fs/symlink_out_read",
    "fs/stdlib_truncate",
    "door/host_call_garbage",
    "door/host_call_reentrant",
    "exhaustion/sleep_past_deadline",
    "exhaustion/fd_exhaustion",
    "interp/subclasses_walk",
    "leak/cross_run_b_read",
];

/// Every case through `/v1/execute`, `PARALLEL` at a time.
async fn execute_pass(
    cases: &Arc<Vec<Case>>,
    fx: &Arc<Fixture>,
    c: &reqwest::Client,
    url: &str,
    failures: &mut Vec<(String, Vec<String>)>,
    walls: &mut Vec<(u64, String)>,
) {
    fx.arm_unread();
    let sem = Arc::new(tokio::sync::Semaphore::new(PARALLEL));
    let mut set = tokio::task::JoinSet::new();
    for i in 0..cases.len() {
        let (cases, fx, c, url, sem) = (
            cases.clone(),
            fx.clone(),
            c.clone(),
            url.to_string(),
            sem.clone(),
        );
        set.spawn(async move {
            let _permit = sem.acquire().await.unwrap();
            let case = &cases[i];
            let o = http_run(&c, &url, case, &fx).await;
            (i, judge(case, &o, &fx), o.wall_ms)
        });
    }
    while let Some(r) = set.join_next().await {
        let (i, problems, wall) = r.expect("a case task panicked");
        walls.push((wall, cases[i].name.clone()));
        file_problems(&cases[i], cases[i].name.clone(), problems, failures);
    }
    if fx.canary_read() {
        failures.push((
            "<host after a pass>".into(),
            vec!["the canary's atime moved: something read it".into()],
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::await_holding_lock,
    reason = "the guard only serialises this binary's tests; nothing else takes the lock"
)]
async fn corpus_through_one_server() {
    let _counting = crate::counting();
    let started = Instant::now();
    let cases: Arc<Vec<Case>> = Arc::new(
        load_corpus()
            .into_iter()
            .filter(|c| c.via.iter().any(|v| v == "http"))
            .collect(),
    );
    let s = http_support::start("hostile", |a| {
        a.max_concurrency = Some(PARALLEL);
    })
    .await;
    let runtime = tokio::task::spawn_blocking(runtime_info).await.unwrap();
    let fx = Arc::new(Fixture::new("http", &s.scratch, &s.audit_log, &runtime));
    let c = http_support::client();
    let url = s.url("/v1/execute");

    // Pass 1 warms everything up (instantiation paths, pooled slots, allocator arenas, the
    // client's connections) and must pass too; pass 2 is measured against it.
    let mut failures = Vec::new();
    let mut walls = Vec::new();
    execute_pass(&cases, &fx, &c, &url, &mut failures, &mut walls).await;
    let settle = Instant::now();
    while s.sandbox_dirs() > 0 && settle.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fds_before = open_fds();
    let threads_before = threads();
    let rss_before = rss_bytes();
    walls.clear();
    execute_pass(&cases, &fx, &c, &url, &mut failures, &mut walls).await;
    failures.sort();
    let (st, _) = http_support::get(&c, &s.url("/healthz")).await;
    if st != 200 {
        failures.push((
            "<server after /v1/execute>".into(),
            vec![format!("/healthz answered {st}")],
        ));
    }

    // A few cases as session turns, one after another.
    let all = load_corpus();
    let session_cases: Vec<&Case> = all
        .iter()
        .filter(|c| {
            SESSION_CASES.contains(&c.name.as_str()) || c.via.iter().any(|v| v == "session")
        })
        .collect();
    for case in &session_cases {
        let (o, mut problems) = session_run(&c, &s, case, &fx).await;
        problems.extend(judge(case, &o, &fx));
        file_problems(
            case,
            format!("{} (session)", case.name),
            problems,
            &mut failures,
        );
    }

    // Host-side containment over the whole run.
    let mut host = Vec::new();
    if fx.canary_read() {
        host.push("the canary's atime moved: something read it".to_string());
    }
    host.extend(fx.host_problems());
    let (st, _) = http_support::get(&c, &s.url("/healthz")).await;
    if st != 200 {
        host.push(format!("/healthz answered {st}"));
    }
    // Sandboxes are dropped on their guest threads just after the reply; give them a moment.
    let settle = Instant::now();
    while (s.sandbox_dirs() > 0 || threads() > threads_before)
        && settle.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if s.sandbox_dirs() > 0 {
        host.push(format!(
            "{} sandbox dirs left in the server's scratch",
            s.sandbox_dirs()
        ));
    }
    let (fds_after, threads_after, rss_after) = (open_fds(), threads(), rss_bytes());
    if fds_after > fds_before + 2 {
        host.push(format!(
            "fds grew {fds_before} -> {fds_after}: {:?}",
            fd_targets()
        ));
    }
    if threads_after > threads_before + 2 {
        host.push(format!("threads grew {threads_before} -> {threads_after}"));
    }
    // Measured over the second pass only: a leak grows it, a warm pool does not.
    if rss_after > rss_before + (128 << 20) {
        host.push(format!(
            "RSS grew {} MiB -> {} MiB",
            rss_before >> 20,
            rss_after >> 20
        ));
    }
    if !host.is_empty() {
        failures.push(("<host after the server run>".into(), host));
    }
    walls.sort();
    eprintln!(
        "server: 2 x {} cases + {} session turns in {:.1} s (slowest of pass 2 {:?}); over pass 2 + sessions: fds {fds_before}->{fds_after}, threads {threads_before}->{threads_after}, RSS {}->{} MiB",
        cases.len(),
        session_cases.len(),
        started.elapsed().as_secs_f64(),
        walls.last(),
        rss_before >> 20,
        rss_after >> 20
    );
    let _ = std::io::stderr().flush();
    drop(fx);
    report_failures("the server", &failures);
    // Scratch roots are created under `<scratch>/.create.lock`, a file that outlives the server
    // by design; `TestServer::stop` asserts the folder is empty.
    let _ = std::fs::remove_file(s.scratch.join(".create.lock"));
    s.stop().await;
}

/// What this process's descriptors point at (for failure messages).
fn fd_targets() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .map(|e| {
            let t = std::fs::read_link(e.path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            format!("{}={t}", e.file_name().to_string_lossy())
        })
        .collect()
}
