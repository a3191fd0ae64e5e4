//! The runner's session lifecycle without sockets: a real [`Runner`] over the real runtime,
//! its guest code run by in-process workers (`Workers::in_process`, what `--workers 0`
//! serves with), driven through the same methods the front doors call. Each test ends by
//! checking that the session let go of everything it held, once: its registry entry, its
//! tenant's places, its memory reserve.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::{Runner, SessionTurn, Turned};
use crate::check::Policy;
use crate::engine::EngineOptions;
use crate::leakage::{LeakPolicy, Scanner};
use crate::limits::{LimitsRequest, TurnLimitsRequest};
use crate::report::Status;
use crate::snapshot::open_store;
use crate::supervisor::audit::{Action, Audit, AuditRecord};
use crate::supervisor::error::SupervisorError;
use crate::supervisor::session::{Session, SessionState};
use crate::supervisor::tenants::{Quota, Quotas, Tenants};
use crate::supervisor::{LeakageConfig, Settings};
use crate::template::Template;
use crate::vivarium::{Vivarium, VivariumOptions};
use crate::worker::Workers;

/// One runtime for the whole test binary (opening it compiles nothing once cached); its
/// scratch base is removed when the process exits.
fn host() -> Arc<Vivarium> {
    static HOST: OnceLock<Arc<Vivarium>> = OnceLock::new();
    static SCRATCH: OnceLock<PathBuf> = OnceLock::new();
    extern "C" fn remove_scratch() {
        if let Some(dir) = SCRATCH.get() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    HOST.get_or_init(|| {
        let mut opts = VivariumOptions::from_env();
        opts.scratch_base = temp_path("vivarium-runner-test");
        SCRATCH.set(opts.scratch_base.clone()).unwrap();
        // SAFETY: registers a plain function with no arguments, run once at exit.
        unsafe { libc::atexit(remove_scratch) };
        opts.engine = EngineOptions {
            max_instances: 32,
            ..EngineOptions::default()
        };
        Vivarium::open(opts).expect("opening the runtime")
    })
    .clone()
}

fn temp_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "{tag}-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ))
}

/// A test's runner, and the snapshot store and audit log it writes, removed with it.
struct Fixture {
    runner: Arc<Runner>,
    dir: PathBuf,
}

impl std::ops::Deref for Fixture {
    type Target = Arc<Runner>;
    fn deref(&self) -> &Arc<Runner> {
        &self.runner
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(self.dir.with_extension("audit.jsonl"));
    }
}

/// A runner of its own (registry, admission, tenants, a snapshot store in a temporary
/// directory), on the shared runtime, its guest code in this process.
fn runner() -> Fixture {
    let host = host();
    let dir = temp_path("vivarium-runner-store");
    let settings = Settings {
        shared_budget: false,
        memory_budget_bytes: 4 << 30,
        max_concurrency: 2,
        queue_depth: 8,
        queue_timeout: Duration::from_secs(30),
        max_sessions: 8,
        max_hibernated_sessions: 8,
        session_idle: Duration::from_secs(600),
        session_lifetime: Duration::from_secs(3600),
        turn_history: Default::default(),
        maximum: *host.maximum(),
        leakage: LeakageConfig {
            scanner: Arc::new(Scanner::new(None).expect("the built-in rules compile")),
            default: LeakPolicy::Report,
            floor: LeakPolicy::Off,
        },
        node_id: "test".into(),
        cluster_ttl: None,
        snapshot_retention: Duration::from_secs(3600),
        executions: crate::supervisor::executions::ExecutionSettings {
            max: 64,
            resident_for: Duration::from_secs(30),
            ttl: Duration::from_secs(3600),
        },
        egress: None,
        webhooks: Default::default(),
        templates: None,
    };
    let store = open_store(&dir, None).expect("a snapshot store in a temporary directory");
    let (volumes, _) = crate::volumes::VolumeStore::open(
        &dir.join("volumes"),
        crate::volumes::VolumeLimits {
            volumes: 4,
            volume_bytes: 1 << 20,
            tenant_bytes: 1 << 20,
            files: 100,
        },
    );
    let runner = Runner::new(
        &settings,
        Audit::open(Some(&dir.with_extension("audit.jsonl"))).unwrap(),
        store,
        Arc::new(volumes),
        Tenants::single(Quotas::unlimited()),
    );
    runner.set_host(host.clone(), Workers::in_process(host));
    Fixture {
        runner: Arc::new(runner),
        dir,
    }
}

fn record() -> AuditRecord {
    AuditRecord::internal(Action::SessionTurn)
}

async fn open(runner: &Runner) -> Arc<Session> {
    let host = runner.host().unwrap();
    let (template, limits) = host
        .resolve_for(Some(Template::Python), &LimitsRequest::default())
        .unwrap();
    runner
        .open_session(
            super::Opening {
                labels: Default::default(),
                volumes: Vec::new(),
                limits,
                template,
                leakage: None,
                durable: false,
                packages: host.no_packages(),
                owner: None,
                network: None,
                layer: None,
                history: Default::default(),
            },
            &mut record(),
        )
        .await
        .expect("the session opens")
}

fn turn_of(code: &str) -> SessionTurn {
    SessionTurn {
        code: code.into(),
        stdin: Vec::new(),
        files: Vec::new(),
        limits: TurnLimitsRequest::default(),
        policy: Policy::Off,
        leakage: None,
        live: None,
        input: None,
        tools: None,
        tool_asker: None,
        env: Vec::new(),
        language: crate::guest::Language::Python,
    }
}

/// Runs `code` as a turn of session `id`, looked up as a door does; its `repr` result.
async fn turn(runner: &Runner, id: &str, code: &str) -> Result<Option<String>, SupervisorError> {
    let session = runner.session(id, None).await?;
    match runner.turn(&session, turn_of(code), &mut record()).await? {
        Turned::Ran(done) => {
            assert!(
                done.report.status == Status::Ok,
                "{code}: {:?}",
                done.report.stderr
            );
            Ok(done.result)
        }
        Turned::Denied(f) => panic!("policy off, yet denied: {f:?}"),
    }
}

async fn state(runner: &Runner, id: &str) -> (SessionState, bool) {
    let info = runner.session_info(id, None).await.unwrap();
    (info.state, info.resident)
}

/// Polls until session `id` is in `want`.
async fn wait_for(runner: &Runner, id: &str, want: SessionState) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while state(runner, id).await.0 != want {
        assert!(Instant::now() < deadline, "session {id} never {want:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts a turn of `code` in session `id` on a task of its own and waits until it runs.
async fn running_turn(
    runner: &Fixture,
    id: &str,
    code: &'static str,
) -> tokio::task::JoinHandle<Result<Option<String>, SupervisorError>> {
    let (r, owned) = (runner.runner.clone(), id.to_string());
    let task = tokio::spawn(async move { turn(&r, &owned, code).await });
    wait_for(runner, id, SessionState::Busy).await;
    task
}

/// Everything sessions held is given back: no session resident or hibernated, no place
/// taken under the tenant's quotas, no memory charged (a closed interpreter may be dropped
/// off the caller's thread, so this waits a little).
async fn assert_all_freed(runner: &Runner) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let tenant = runner.tenant(None);
    loop {
        let (resident, hibernated, _) = runner.sessions.counts();
        let held = (
            resident,
            hibernated,
            tenant.used(Quota::ResidentSessions),
            tenant.used(Quota::HibernatedSessions),
            runner.admission.budget().charged(),
        );
        if held == (0, 0, 0, 0, 0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still held (resident, hibernated, resident places, hibernated places, bytes): {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_its_state_across_turns_and_frees_everything_when_closed() {
    let runner = runner();
    let s = open(&runner).await;
    assert_eq!(state(&runner, &s.id).await, (SessionState::Idle, true));
    assert_eq!(turn(&runner, &s.id, "x = 41").await.unwrap(), None);
    assert_eq!(
        turn(&runner, &s.id, "x + 1").await.unwrap().as_deref(),
        Some("42")
    );
    assert_eq!(runner.session_info(&s.id, None).await.unwrap().turns, 2);
    runner.close_session(&s.id, None).await.unwrap();
    assert!(matches!(
        turn(&runner, &s.id, "x").await,
        Err(SupervisorError::SessionNotFound(_))
    ));
    assert!(matches!(
        runner.close_session(&s.id, None).await,
        Err(SupervisorError::SessionNotFound(_))
    ));
    assert_all_freed(&runner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_turn_while_one_runs_is_refused_and_the_session_goes_on() {
    let runner = runner();
    let s = open(&runner).await;
    let first = running_turn(&runner, &s.id, "import time\ntime.sleep(0.6)\ny = 7").await;
    assert!(matches!(
        turn(&runner, &s.id, "1").await,
        Err(SupervisorError::SessionBusy(_))
    ));
    first.await.unwrap().unwrap();
    assert_eq!(state(&runner, &s.id).await, (SessionState::Idle, true));
    assert_eq!(
        turn(&runner, &s.id, "y").await.unwrap().as_deref(),
        Some("7")
    );
    runner.close_session(&s.id, None).await.unwrap();
    assert_all_freed(&runner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_close_during_a_turn_ends_the_session_and_frees_it_once_the_turn_is_done() {
    let runner = runner();
    let s = open(&runner).await;
    let running = {
        let (runner, id) = (runner.runner.clone(), s.id.clone());
        tokio::spawn(async move {
            let session = runner.session(&id, None).await?;
            let t = turn_of("import time\ntime.sleep(5)");
            runner.turn(&session, t, &mut record()).await
        })
    };
    wait_for(&runner, &s.id, SessionState::Busy).await;
    let closing = Instant::now();
    runner.close_session(&s.id, None).await.unwrap();
    // Closed at once for every caller, while its worker still finishes the turn.
    assert!(matches!(
        runner.session_info(&s.id, None).await,
        Err(SupervisorError::SessionNotFound(_))
    ));
    // The close stops the turn in its worker rather than waiting for its 5 s.
    let ended = running.await.unwrap();
    assert!(closing.elapsed() < Duration::from_secs(4));
    match ended {
        Ok(Turned::Ran(done)) => assert_eq!(done.report.status, Status::Cancelled),
        Ok(Turned::Denied(_)) => panic!("policy off, yet denied"),
        Err(e) => panic!("{e:?}"),
    }
    assert_all_freed(&runner).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_session_does_not_hibernate_and_an_idle_one_wakes_with_its_state() {
    let runner = runner();
    let s = open(&runner).await;
    turn(&runner, &s.id, "z = [1, 2, 3]").await.unwrap();
    let running = running_turn(&runner, &s.id, "import time\ntime.sleep(0.6)").await;
    runner.hibernate_idle(Duration::ZERO).await;
    assert_eq!(state(&runner, &s.id).await, (SessionState::Busy, true));
    running.await.unwrap().unwrap();

    runner.hibernate_idle(Duration::ZERO).await;
    assert_eq!(state(&runner, &s.id).await, (SessionState::Idle, false));
    assert_eq!(runner.sessions.counts().0, 0);
    let tenant = runner.tenant(None);
    assert_eq!(
        (
            tenant.used(Quota::ResidentSessions),
            tenant.used(Quota::HibernatedSessions)
        ),
        (0, 1)
    );
    assert_eq!(
        turn(&runner, &s.id, "sum(z)").await.unwrap().as_deref(),
        Some("6")
    );
    assert_eq!(state(&runner, &s.id).await, (SessionState::Idle, true));
    runner.close_session(&s.id, None).await.unwrap();
    assert_all_freed(&runner).await;
}

/// A hibernation and a close of the same idle session, at once, any number of times: the
/// session ends closed every time, never brought back by the hibernation's filing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hibernation_racing_a_close_never_brings_the_session_back() {
    let runner = runner();
    for round in 0..4 {
        let s = open(&runner).await;
        turn(&runner, &s.id, "v = 1").await.unwrap();
        let hibernating = {
            let runner = runner.runner.clone();
            tokio::spawn(async move { runner.hibernate_idle(Duration::ZERO).await })
        };
        if round % 2 == 1 {
            tokio::task::yield_now().await;
        }
        runner.close_session(&s.id, None).await.unwrap();
        hibernating.await.unwrap();
        assert!(
            matches!(
                runner.session_info(&s.id, None).await,
                Err(SupervisorError::SessionNotFound(_))
            ),
            "round {round}: the closed session is back"
        );
        assert_all_freed(&runner).await;
    }
}

/// A turn whose caller went away (its future dropped, as when an HTTP client hangs up) runs
/// on in its worker and holds the session until it is done; then the session is idle with
/// what the turn did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_caller_goes_away_holds_the_session_until_it_is_done() {
    let runner = runner();
    let s = open(&runner).await;
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        turn(&runner, &s.id, "import time\ntime.sleep(0.8)\nw = 'done'"),
    )
    .await;
    assert!(gave_up.is_err(), "the caller gave up first: {gave_up:?}");
    assert_eq!(state(&runner, &s.id).await.0, SessionState::Busy);
    assert!(matches!(
        turn(&runner, &s.id, "1").await,
        Err(SupervisorError::SessionBusy(_))
    ));
    wait_for(&runner, &s.id, SessionState::Idle).await;
    assert_eq!(
        turn(&runner, &s.id, "w").await.unwrap().as_deref(),
        Some("'done'")
    );
    runner.close_session(&s.id, None).await.unwrap();
    assert_all_freed(&runner).await;
}

/// A fork is made in its source's worker (the image does not cross the channel), and is
/// admitted with what the source weighs now, as one made from an image would be: the
/// tenant's memory share counts the source's grown memory twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_is_made_beside_its_source_and_counts_what_the_source_weighs() {
    let runner = runner();
    let s = open(&runner).await;
    let started = s.footprint();
    turn(&runner, &s.id, "b = bytearray(64 << 20)\nb[-1] = 7")
        .await
        .unwrap();
    let grown = runner.session(&s.id, None).await.unwrap().footprint();
    // The memory grew by the bytearray, less what the heap had free.
    assert!(grown >= started + (48 << 20), "{started} -> {grown}");
    let tenant = runner.tenant(None);
    let before = tenant.used(Quota::MemoryBytes);
    let held = runner.workers().unwrap().local_interpreters();
    let f = runner
        .fork_session(&s.id, None, &mut record())
        .await
        .unwrap();
    assert_eq!(f.footprint(), grown);
    assert!(
        tenant.used(Quota::MemoryBytes) - before >= grown,
        "the fork's share {} is less than what its source weighs, {grown}",
        tenant.used(Quota::MemoryBytes) - before
    );
    assert_eq!(
        runner.workers().unwrap().local_interpreters(),
        held.map(|n| n + 1)
    );
    // The same state, then each its own.
    assert_eq!(
        turn(&runner, &f.id, "b[-1] = 8\nlen(b), b[-1]")
            .await
            .unwrap()
            .as_deref(),
        Some("(67108864, 8)")
    );
    assert_eq!(
        turn(&runner, &s.id, "b[-1]").await.unwrap().as_deref(),
        Some("7")
    );
    runner.close_session(&f.id, None).await.unwrap();
    runner.close_session(&s.id, None).await.unwrap();
    assert_all_freed(&runner).await;
    assert_eq!(runner.workers().unwrap().local_interpreters(), Some(0));
}

/// A fork whose caller goes away while its worker makes it holds the source until the
/// worker is done, and the fork it made is closed again: no interpreter is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_whose_caller_goes_away_leaves_no_interpreter_behind() {
    let runner = runner();
    let s = open(&runner).await;
    // 64 MiB written, so making the fork takes long enough to be seen holding its source.
    turn(&runner, &s.id, "x = 5\nb = b'v' * (64 << 20)")
        .await
        .unwrap();
    let r = runner.runner.clone();
    let id = s.id.clone();
    let forking = tokio::spawn(async move { r.fork_session(&id, None, &mut record()).await });
    wait_for(&runner, &s.id, SessionState::Busy).await;
    forking.abort();
    assert!(forking.await.is_err_and(|e| e.is_cancelled()));
    wait_for(&runner, &s.id, SessionState::Idle).await;
    assert_eq!(
        turn(&runner, &s.id, "x").await.unwrap().as_deref(),
        Some("5")
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while runner.workers().unwrap().local_interpreters() != Some(1) {
        assert!(Instant::now() < deadline, "an orphaned fork is still held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(runner.sessions.counts().0, 1);
    runner.close_session(&s.id, None).await.unwrap();
    assert_all_freed(&runner).await;
}
