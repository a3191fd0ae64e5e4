//! Sessions as data (issue 13), in process, on a session of the `scientific` template
//! (`Limits::DEFAULT`) holding pandas, numpy and a 100,000-row DataFrame:
//!
//! * `fork`: `capture` + `restore_interpreter` + the new session's first turn (`x = 1`)
//!   answered (and, beside it, the same from the checkpoint's image instead of a capture);
//! * `snapshot`: `capture` + `encode` + a put into a directory store (the real `DirStore`,
//!   through `open_store`, driven by a tokio current-thread runtime's `block_on` on the bench
//!   thread: its file I/O goes to tokio's blocking pool, as in the server);
//! * `restore`: a get from that store + `decode` + `restore_interpreter` + first turn answered;
//! * the snapshot's size beside the session's written memory;
//! * `turn.checkpointed` vs `turn.no_checkpoint`: `y = df.a.sum()` through
//!   `Vivarium::session_turn` on an interpreter that keeps a rollback checkpoint, and through
//!   `Interpreter::turn` on one without (opened with the same set-up, rich outputs on);
//!   `checkpoint.refresh` times the refresh alone, after the same `turn` on the
//!   checkpointed interpreter (`checkpoint.turn_alone`: the turn itself, on memory the
//!   kernel write-protects for the tracking);
//! * `rollback`: `while True: pass` stopped at 50 ms, then `len(df)` answered, each
//!   iteration on a guest thread started with `spawn_deferring` (as the server's runner does,
//!   so the stopped instance is torn down after the answer): the figure is the time from the
//!   end of the stopped turn (its own wall time subtracted) to the next turn's answer;
//! * baselines: `open` (`open_interpreter` to its first turn answered) and `turn.plain`.
//!
//! Criterion drives each measurement (`iter_custom`, flat sampling; its estimates land under
//! `target/criterion/sessions/`). The bench also keeps every measured iteration's own time —
//! criterion's warm-up excluded: with flat sampling its last `sample_size` calls of the
//! routine are the samples — for the medians and p10/p90 of the table it prints at the end
//! and of `benches/results/sessions.json`.
//!
//! Run: `cargo bench --bench sessions`.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use faults::minor_faults;
use serde_json::json;
use spec::spec;
use vivarium::testing::{
    Interpreter, Provenance, SnapshotId, TurnLimits, decode, defer_drop, encode, open_store,
    spawn_deferring,
};
use vivarium::{Limits, Status, Template, Vivarium, VivariumOptions};

#[path = "support/faults.rs"]
mod faults;
#[path = "support/spec.rs"]
mod spec;

const TEMPLATE: Template = Template::Scientific;
const STATE: &str = "\
import pandas as pd, numpy as np
df = pd.DataFrame({'a': np.arange(100_000), 'b': np.random.rand(100_000),
                   'c': ['x%d' % (i % 100) for i in range(100_000)]})
";
const FIRST: &str = "x = 1";
const SMALL: &str = "y = df.a.sum()";
const SPIN: &str = "while True: pass";
const STOP_MS: u64 = 50;
const RESULTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/results/sessions.json");

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn turn_limits() -> TurnLimits {
    TurnLimits::from(&Limits::DEFAULT)
}

/// One session turn through `Vivarium::session_turn`, which must complete.
fn answered(host: &Vivarium, interp: &mut Interpreter, code: &str) -> Option<String> {
    let o = host
        .session_turn(interp, TEMPLATE, code, vec![], &turn_limits(), None)
        .expect("the session is alive");
    assert_eq!(o.report.status, Status::Ok, "{code}: {}", o.report.stderr);
    o.result
}

/// Every iteration's time per series, grouped by criterion's calls of the routine.
#[derive(Default)]
struct Times {
    calls: RefCell<BTreeMap<&'static str, Vec<Vec<f64>>>>,
    /// Of each series: how many of its last calls were samples (the rest warm-up).
    samples: RefCell<BTreeMap<&'static str, usize>>,
}

impl Times {
    fn begin(&self, names: &[&'static str]) {
        let mut calls = self.calls.borrow_mut();
        for n in names {
            calls.entry(n).or_default().push(Vec::new());
        }
    }

    fn add(&self, name: &'static str, d: Duration) {
        self.calls
            .borrow_mut()
            .get_mut(name)
            .and_then(|c| c.last_mut())
            .unwrap_or_else(|| panic!("series {name} not begun"))
            .push(ms(d));
    }

    /// The measured iterations of `name`, in milliseconds, sorted.
    fn measured(&self, name: &str) -> Vec<f64> {
        let calls = self.calls.borrow();
        let Some(c) = calls.get(name) else {
            return Vec::new();
        };
        let n = self.samples.borrow().get(name).copied().unwrap_or(c.len());
        let mut v: Vec<f64> = c[c.len().saturating_sub(n)..].concat();
        v.sort_by(f64::total_cmp);
        v
    }
}

/// The `q` quantile of sorted `v`, linearly interpolated.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let at = q * (v.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
}

/// Runs one measurement under criterion: `f` does one iteration, records its parts under
/// `parts` (if any) and returns the time of the whole.
fn measure(
    c: &mut Criterion,
    times: &Times,
    name: &'static str,
    parts: &[&'static str],
    samples: usize,
    measurement: Duration,
    mut f: impl FnMut(&Times) -> Duration,
) {
    let mut names = vec![name];
    names.extend_from_slice(parts);
    let mut g = c.benchmark_group("sessions");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(samples)
        .warm_up_time(Duration::from_millis(600))
        .measurement_time(measurement);
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            times.begin(&names);
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let d = f(times);
                times.add(name, d);
                total += d;
            }
            total
        })
    });
    g.finish();
    let mut s = times.samples.borrow_mut();
    for n in &names {
        s.insert(n, samples);
    }
}

fn filesystem(path: &Path) -> String {
    let out = std::process::Command::new("findmnt")
        .args(["-no", "FSTYPE", "-T"])
        .arg(path)
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => "unknown".into(),
    }
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Mean minor page faults of `n` runs of `f` on this thread.
fn faults_per(n: i64, mut f: impl FnMut()) -> f64 {
    let before = minor_faults();
    for _ in 0..n {
        f();
    }
    (minor_faults() - before) as f64 / n as f64
}

fn tracking(i: &Interpreter) -> serde_json::Value {
    match i.checkpoint_untracked_because() {
        None => json!({"checkpoint": false}),
        Some(None) => json!({"checkpoint": true, "userfaultfd": true}),
        Some(Some(why)) => json!({"checkpoint": true, "userfaultfd": false, "why_not": why}),
    }
}

fn benches(c: &mut Criterion, host: &Arc<Vivarium>, times: &Times) -> serde_json::Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store_dir: PathBuf =
        std::env::temp_dir().join(format!("vivarium-bench-snapshots-{}", std::process::id()));
    let store = open_store(&store_dir, None).expect("a directory store");
    let binding = host.binding(TEMPLATE).unwrap();
    let provenance = Provenance {
        binding: binding.clone(),
        created_at: 0,
        owner: None,
        turns: 1,
        session: None,
    };

    // The session everything starts from, with its checkpoint (what `open_interpreter`
    // gives), and one without.
    let mut src = host
        .open_interpreter(
            Limits::DEFAULT,
            TEMPLATE,
            Arc::default(),
            host.no_packages(),
            Vec::new(),
            None,
        )
        .unwrap();
    answered(host, &mut src, STATE);
    assert_eq!(
        answered(host, &mut src, "len(df)").as_deref(),
        Some("100000")
    );
    let mut bare = host
        .prepare_with(spec(host, true), TEMPLATE)
        .unwrap()
        .into_interpreter();
    let o = bare.turn(STATE, vec![], &turn_limits()).unwrap();
    assert_eq!(o.report.status, Status::Ok, "{}", o.report.stderr);
    assert_eq!(bare.checkpoint_untracked_because(), None);

    // Sizes, and the state round-trips.
    let image = host.capture(&mut src, TEMPLATE).unwrap();
    let encoded = encode(&image, &provenance);
    let (_, decoded) = decode(&encoded, &Limits::MAXIMUM).unwrap();
    assert_eq!(decoded, image);
    let mut check = host
        .restore_interpreter(TEMPLATE, decoded, Arc::default())
        .unwrap();
    assert_eq!(
        answered(host, &mut check, "len(df), df.c.iloc[-1]").as_deref(),
        Some("(100000, 'x99')")
    );
    let restored_tracking = tracking(&check);
    drop(check);
    let cp_image = src.checkpoint_image().expect("a checkpoint");
    let sizes = json!({
        "capture_pages": image.pages.len(),
        "capture_page_bytes": image.page_data.len(),
        "linear_memory_bytes": image.memory_bytes,
        "memory_peak_bytes": image.memory_peak_bytes,
        "working_dir_file_bytes": image.files.iter().map(|(_, c)| c.len()).sum::<usize>(),
        "snapshot_bytes": encoded.len(),
        "checkpoint_held_bytes": src.checkpoint_bytes(),
        "checkpoint_image_pages": cp_image.pages.len(),
    });
    drop((image, encoded, cp_image));

    // 7. Baselines.
    measure(
        c,
        times,
        "open",
        &["open.open_interpreter", "open.first_turn"],
        15,
        Duration::from_secs(4),
        |t| {
            let t0 = Instant::now();
            let mut i = host
                .open_interpreter(
                    Limits::DEFAULT,
                    TEMPLATE,
                    Arc::default(),
                    host.no_packages(),
                    Vec::new(),
                    None,
                )
                .unwrap();
            let t1 = Instant::now();
            answered(host, &mut i, FIRST);
            let t2 = Instant::now();
            t.add("open.open_interpreter", t1 - t0);
            t.add("open.first_turn", t2 - t1);
            drop(i);
            t2 - t0
        },
    );
    measure(
        c,
        times,
        "turn.plain",
        &[],
        40,
        Duration::from_secs(2),
        |_| {
            let t0 = Instant::now();
            answered(host, &mut src, FIRST);
            t0.elapsed()
        },
    );

    // 1. Fork.
    measure(
        c,
        times,
        "fork",
        &["fork.capture", "fork.restore", "fork.first_turn"],
        20,
        Duration::from_secs(3),
        |t| {
            let t0 = Instant::now();
            let image = host.capture(&mut src, TEMPLATE).unwrap();
            let t1 = Instant::now();
            let mut i = host
                .restore_interpreter(TEMPLATE, image, Arc::default())
                .unwrap();
            let t2 = Instant::now();
            answered(host, &mut i, FIRST);
            let t3 = Instant::now();
            t.add("fork.capture", t1 - t0);
            t.add("fork.restore", t2 - t1);
            t.add("fork.first_turn", t3 - t2);
            drop(i);
            t3 - t0
        },
    );
    measure(
        c,
        times,
        "fork_from_checkpoint",
        &["fork_from_checkpoint.image"],
        20,
        Duration::from_secs(3),
        |t| {
            let t0 = Instant::now();
            let image = src.checkpoint_image().unwrap();
            let t1 = Instant::now();
            let mut i = host
                .restore_interpreter(TEMPLATE, image, Arc::default())
                .unwrap();
            answered(host, &mut i, FIRST);
            let t2 = Instant::now();
            t.add("fork_from_checkpoint.image", t1 - t0);
            drop(i);
            t2 - t0
        },
    );

    // 2. Snapshot into the directory store.
    measure(
        c,
        times,
        "snapshot",
        &["snapshot.capture", "snapshot.encode", "snapshot.put"],
        20,
        Duration::from_secs(3),
        |t| {
            let id = SnapshotId::random();
            let t0 = Instant::now();
            let image = host.capture(&mut src, TEMPLATE).unwrap();
            let t1 = Instant::now();
            let bytes = encode(&image, &provenance);
            let t2 = Instant::now();
            rt.block_on(store.put(&id, bytes)).unwrap();
            let t3 = Instant::now();
            t.add("snapshot.capture", t1 - t0);
            t.add("snapshot.encode", t2 - t1);
            t.add("snapshot.put", t3 - t2);
            drop(image);
            rt.block_on(store.delete(&id)).unwrap();
            t3 - t0
        },
    );

    // 3. Restore from the directory store (the file was just written: the page cache has it).
    let id = SnapshotId::random();
    let image = host.capture(&mut src, TEMPLATE).unwrap();
    rt.block_on(store.put(&id, encode(&image, &provenance)))
        .unwrap();
    drop(image);
    measure(
        c,
        times,
        "restore",
        &[
            "restore.get",
            "restore.decode",
            "restore.restore",
            "restore.first_turn",
        ],
        20,
        Duration::from_secs(3),
        |t| {
            let t0 = Instant::now();
            let bytes = rt.block_on(store.get(&id)).unwrap().expect("stored");
            let t1 = Instant::now();
            let (header, image) = decode(&bytes, &Limits::MAXIMUM).unwrap();
            assert_eq!(header.binding, binding);
            drop(bytes);
            let t2 = Instant::now();
            let mut i = host
                .restore_interpreter(TEMPLATE, image, Arc::default())
                .unwrap();
            let t3 = Instant::now();
            answered(host, &mut i, FIRST);
            let t4 = Instant::now();
            t.add("restore.get", t1 - t0);
            t.add("restore.decode", t2 - t1);
            t.add("restore.restore", t3 - t2);
            t.add("restore.first_turn", t4 - t3);
            drop(i);
            t4 - t0
        },
    );

    // 5. What a checkpoint adds to every turn.
    measure(
        c,
        times,
        "turn.checkpointed",
        &[],
        40,
        Duration::from_secs(2),
        |_| {
            let t0 = Instant::now();
            answered(host, &mut src, SMALL);
            t0.elapsed()
        },
    );
    measure(
        c,
        times,
        "turn.no_checkpoint",
        &[],
        40,
        Duration::from_secs(2),
        |_| {
            let t0 = Instant::now();
            let o = bare.turn(SMALL, vec![], &turn_limits()).unwrap();
            let d = t0.elapsed();
            assert_eq!(o.report.status, Status::Ok, "{}", o.report.stderr);
            d
        },
    );
    measure(
        c,
        times,
        "checkpoint.refresh",
        &["checkpoint.turn_alone"],
        40,
        Duration::from_secs(1),
        |t| {
            let t0 = Instant::now();
            let o = src.turn(SMALL, vec![], &turn_limits()).unwrap();
            let t1 = Instant::now();
            assert_eq!(o.report.status, Status::Ok, "{}", o.report.stderr);
            src.refresh_checkpoint();
            let t2 = Instant::now();
            t.add("checkpoint.turn_alone", t1 - t0);
            t2 - t1
        },
    );
    // What a durable session adds to a turn's response path: a view of the checkpoint (the
    // encoding and the store write happen after the response, on other threads); the full
    // copy shown beside it for scale.
    measure(
        c,
        times,
        "durable.view",
        &["durable.image_copy"],
        40,
        Duration::from_secs(1),
        |t| {
            let t0 = Instant::now();
            let view = src.checkpoint_view().expect("a checkpoint");
            let d = t0.elapsed();
            let t1 = Instant::now();
            let image = view.into_image();
            t.add("durable.image_copy", t1.elapsed());
            drop(image);
            d
        },
    );
    // Where the tracked turn's extra time goes: the kernel's write-protect faults.
    let faults = json!({
        "checkpointed_turn_plus_refresh": faults_per(50, || {
            src.turn(SMALL, vec![], &turn_limits()).unwrap();
            src.refresh_checkpoint();
        }),
        "refresh_checkpoint_alone": faults_per(50, || src.refresh_checkpoint()),
        "turn_no_checkpoint": faults_per(50, || {
            bare.turn(SMALL, vec![], &turn_limits()).unwrap();
        }),
    });
    let src_tracking = tracking(&src);
    let checkpoint_bytes_after = src.checkpoint_bytes();
    drop(bare);

    // 6. Rollback of a stopped turn, on a deferring guest thread as in the server.
    let mut session = Some(src);
    measure(
        c,
        times,
        "rollback",
        &[
            "rollback.stopped_turn",
            "rollback.restore",
            "rollback.next_turn",
            "rollback.teardown_deferred",
        ],
        20,
        Duration::from_secs(3),
        |t| {
            let mut interp = session.take().unwrap();
            let host = host.clone();
            let (tx, rx) = mpsc::channel();
            let (done_tx, done_rx) = mpsc::channel::<()>();
            spawn_deferring(move || {
                let stop = TurnLimits {
                    timeout_ms: STOP_MS,
                    ..turn_limits()
                };
                let t0 = Instant::now();
                let stopped = host
                    .session_turn(&mut interp, TEMPLATE, SPIN, vec![], &stop, None)
                    .expect("alive");
                let t1 = Instant::now();
                let next = host
                    .session_turn(
                        &mut interp,
                        TEMPLATE,
                        "len(df)",
                        vec![],
                        &turn_limits(),
                        None,
                    )
                    .expect("alive after the rollback");
                let t2 = Instant::now();
                // Dropped after the stopped instance `session_turn` deferred.
                defer_drop(done_tx);
                let _ = tx.send((interp, stopped, next, t1 - t0, t2 - t1));
            })
            .unwrap();
            let (interp, stopped, next, first, second) = rx.recv().expect("the rollback job");
            let answered_at = Instant::now();
            let _ = done_rx.recv();
            let teardown = answered_at.elapsed();
            assert_eq!(stopped.report.status, Status::Timeout);
            assert!(stopped.rolled_back, "the session was rolled back");
            assert_eq!(next.report.status, Status::Ok, "{}", next.report.stderr);
            assert_eq!(next.result.as_deref(), Some("100000"));
            let wall = Duration::from_secs_f64(stopped.report.usage.wall_ms / 1e3);
            let restore = first.saturating_sub(wall);
            session = Some(interp);
            t.add("rollback.stopped_turn", wall);
            t.add("rollback.restore", restore);
            t.add("rollback.next_turn", second);
            t.add("rollback.teardown_deferred", teardown);
            restore + second
        },
    );
    let rolled_tracking = tracking(session.as_ref().unwrap());
    drop(session);
    let _ = std::fs::remove_dir_all(&store_dir);

    json!({
        "sizes": sizes,
        "checkpoint_held_bytes_at_end": checkpoint_bytes_after,
        "minor_faults_per_turn": faults,
        "dirty_tracking": {
            "session": src_tracking,
            "restored": restored_tracking,
            "rolled_back": rolled_tracking,
        },
        "snapshot_store": {
            "kind": "DirStore (open_store), put/get via a tokio current-thread runtime's block_on",
            "dir": store_dir.display().to_string(),
            "filesystem": filesystem(&std::env::temp_dir()),
            "put_fsyncs": true,
        },
        "scratch_filesystem": filesystem(host.scratch_root()),
    })
}

/// Rows of the table: series, label, the goal in ms (if any).
#[rustfmt::skip]
const ROWS: &[(&str, &str, Option<f64>)] = &[
    ("fork", "1. fork: capture+restore+first turn", Some(20.0)),
    ("fork.capture", "   capture", None),
    ("fork.restore", "   restore_interpreter", None),
    ("fork.first_turn", "   first turn (x = 1)", None),
    ("fork_from_checkpoint", "   alt: fork from checkpoint_image", None),
    ("fork_from_checkpoint.image", "     checkpoint_image", None),
    ("snapshot", "2. snapshot: capture+encode+put", Some(100.0)),
    ("snapshot.capture", "   capture", None),
    ("snapshot.encode", "   encode", None),
    ("snapshot.put", "   DirStore put (fsync)", None),
    ("restore", "3. restore: get+decode+restore+turn", Some(50.0)),
    ("restore.get", "   DirStore get", None),
    ("restore.decode", "   decode", None),
    ("restore.restore", "   restore_interpreter", None),
    ("restore.first_turn", "   first turn (x = 1)", None),
    ("turn.checkpointed", "5. turn y=df.a.sum(), checkpoint", None),
    ("turn.no_checkpoint", "   same turn, no checkpoint", None),
    ("checkpoint.turn_alone", "   Interpreter::turn on tracked memory", None),
    ("checkpoint.refresh", "   refresh_checkpoint alone", None),
    ("durable.view", "5b. durable: on the response path (view)", Some(2.0)),
    ("durable.image_copy", "   the copy made later, off the path", None),
    ("rollback", "6. rollback: stopped turn -> answer", Some(50.0)),
    ("rollback.stopped_turn", "   the stopped turn's own wall", None),
    ("rollback.restore", "   restore (rest of session_turn)", None),
    ("rollback.next_turn", "   next turn len(df)", None),
    ("rollback.teardown_deferred", "   teardown, after the answer", None),
    ("open", "7. open_interpreter + first turn", None),
    ("open.open_interpreter", "   open_interpreter", None),
    ("open.first_turn", "   first turn (x = 1)", None),
    ("turn.plain", "   plain turn x = 1 (session_turn)", None),
];

fn main() {
    let loadavg_before = read_trim("/proc/loadavg");
    // Guests need a deep native stack; criterion runs on this thread.
    let extra = std::thread::Builder::new()
        .stack_size(vivarium::testing::GUEST_THREAD_STACK_BYTES)
        .spawn(|| {
            let host = Vivarium::open(VivariumOptions::from_env()).expect("runtime");
            host.template_pre(TEMPLATE).expect("scientific template");
            let times = Times::default();
            let mut c = Criterion::default().configure_from_args();
            let extra = benches(&mut c, &host, &times);
            c.final_summary();
            (times, extra)
        })
        .unwrap()
        .join();
    let (times, extra) = extra.unwrap();

    let mut table = serde_json::Map::new();
    println!(
        "\n{:<40} {:>9} {:>9} {:>9} {:>5} {:>7}",
        "sessions (ms)", "median", "p10", "p90", "n", "goal"
    );
    let mut complete = true;
    for (name, label, goal) in ROWS {
        let v = times.measured(name);
        if v.is_empty() {
            complete = false;
            continue;
        }
        let (p10, p50, p90) = (quantile(&v, 0.1), quantile(&v, 0.5), quantile(&v, 0.9));
        let goal_s = goal.map_or(String::new(), |g| format!("≤{g}"));
        println!(
            "{label:<40} {p50:>9.2} {p10:>9.2} {p90:>9.2} {:>5} {goal_s:>7}",
            v.len()
        );
        table.insert(
            name.to_string(),
            json!({"median_ms": p50, "p10_ms": p10, "p90_ms": p90, "n": v.len(), "goal_ms": goal}),
        );
    }
    let diff = |a: &str, b: &str| {
        let (a, b) = (times.measured(a), times.measured(b));
        quantile(&a, 0.5) - quantile(&b, 0.5)
    };
    let per_turn = diff("turn.checkpointed", "turn.no_checkpoint");
    println!(
        "{:<40} {per_turn:>9.2} {:>9} {:>9} {:>5} {:>7}",
        "   difference of the medians", "", "", "", "≤2"
    );
    let sizes = &extra["sizes"];
    println!(
        "\n4. snapshot {} bytes; capture {} pages = {} bytes; linear memory {} bytes; \
         checkpoint holds {} bytes",
        sizes["snapshot_bytes"],
        sizes["capture_pages"],
        sizes["capture_page_bytes"],
        sizes["linear_memory_bytes"],
        sizes["checkpoint_held_bytes"]
    );
    println!("dirty tracking: {}", extra["dirty_tracking"]);
    println!(
        "minor page faults per turn: {}",
        extra["minor_faults_per_turn"]
    );
    println!(
        "snapshot store: {} on {}",
        extra["snapshot_store"]["dir"], extra["snapshot_store"]["filesystem"]
    );

    if !complete {
        println!("(not every measurement ran: {RESULTS} left as it was)");
        return;
    }
    let out = json!({
        "template": "scientific",
        "limits": "Limits::DEFAULT",
        "state": STATE,
        "machine": {
            "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
            "kernel": read_trim("/proc/sys/kernel/osrelease"),
            "loadavg_before": loadavg_before,
            "loadavg_after": read_trim("/proc/loadavg"),
        },
        "measurements_ms": table,
        "checkpoint_cost_per_turn_ms": per_turn,
        "extra": extra,
    });
    std::fs::write(RESULTS, serde_json::to_string_pretty(&out).unwrap() + "\n").unwrap();
    println!("wrote {RESULTS}");
}
