//! Hand-written adversarial modules (`wasm/*.wat`) attack the embedding directly: each is
//! compiled by this engine, linked through the same Linker as the Python guest (WASI with our
//! shadows, `poll_oneoff`, `host::call`), instantiated in a store set up exactly like a
//! sandbox's (`Vivarium::guest_store`: same WASI context, preopens, limiter, fd cap, disk
//! quota, epoch deadline), and its export is called on a guest thread under tight limits.
//!
//! Host invariants asserted for every module: the call returns (value or trap) within its
//! deadline plus a margin; the host does not panic; the outcome is one the module's spec
//! allows; the working directory stays within the disk quota (by the quota's measure and in
//! real disk blocks); the host's descriptors do not grow once the store is dropped; the
//! scratch root is empty afterwards; the canary outside the sandbox is unchanged.

use crate::common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use vivarium::Limits;
use vivarium::Vivarium;
use vivarium::testing::HostShare;
use vivarium::testing::Interrupted;
use vivarium::testing::measure_dir;
use vivarium::testing::{SandboxSpec, run_on_guest_thread};
use wasmtime::{Trap, Val};
use wasmtime_wasi::I32Exit;

/// How a call into a module ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// The engine refused to compile the module (e.g. a table larger than the pool's slots).
    NotCompiled(String),
    /// Instantiation failed (limits refused the module's memory/table, a segment was out of
    /// bounds, an import is not linked).
    NotInstantiated(String),
    Value(i64),
    OutOfFuel,
    Timeout,
    StackOverflow,
    Exit(i32),
    /// Any other trap or host error, with its text.
    Trap(String),
}

impl Ended {
    fn kind(&self) -> &'static str {
        match self {
            Ended::NotCompiled(_) => "not_compiled",
            Ended::NotInstantiated(_) => "not_instantiated",
            Ended::Value(_) => "value",
            Ended::OutOfFuel => "fuel",
            Ended::Timeout => "timeout",
            Ended::StackOverflow => "stack_overflow",
            Ended::Exit(_) => "exit",
            Ended::Trap(_) => "trap",
        }
    }
}

pub struct Run {
    pub ended: Ended,
    pub wall: Duration,
    /// The working directory by the quota's measure, and in allocated blocks.
    pub disk_measured: u64,
    pub disk_blocks: u64,
}

fn limits(timeout_ms: u64, fuel: u64) -> Limits {
    Limits {
        timeout_ms,
        fuel,
        memory_bytes: 64 << 20,
        output_bytes: 64 << 10,
        disk_bytes: 2 << 20,
        open_files: 32,
    }
}

fn allocated_bytes(root: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if let Ok(m) = e.path().symlink_metadata() {
                total += m.blocks() * 512;
                if m.is_dir() {
                    stack.push(e.path());
                }
            }
        }
    }
    total
}

pub fn wasm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("wasm")
}

fn classify(e: &wasmtime::Error) -> Ended {
    if let Some(exit) = e.downcast_ref::<I32Exit>() {
        return Ended::Exit(exit.0);
    }
    if let Some(i) = e.downcast_ref::<Interrupted>() {
        return match i {
            Interrupted::Timeout => Ended::Timeout,
            Interrupted::Cancelled => Ended::Trap("cancelled".into()),
            Interrupted::Tool(b) => Ended::Trap(b.to_string()),
        };
    }
    match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Ended::OutOfFuel,
        Some(Trap::StackOverflow) => Ended::StackOverflow,
        Some(Trap::Interrupt) => Ended::Timeout,
        _ => Ended::Trap(format!("{e:#}").chars().take(400).collect()),
    }
}

/// Compiles `bytes` (WAT text or binary) and calls `export` in a fresh guest store.
pub fn run_module(
    host: &Arc<Vivarium>,
    bytes: &[u8],
    export: &str,
    limits: Limits,
) -> Result<Run, String> {
    // WAT syntax errors are the test's fault; validation and engine refusals are outcomes.
    let wasm = wat::parse_bytes(bytes).map_err(|e| format!("parsing: {e}"))?;
    let module = match wasmtime::Module::new(host.engine().engine(), &wasm) {
        Ok(m) => m,
        Err(e) => {
            return Ok(Run {
                ended: Ended::NotCompiled(format!("{e:#}")),
                wall: Duration::ZERO,
                disk_measured: 0,
                disk_blocks: 0,
            });
        }
    };
    let pre = match host.engine().instance_pre(&module) {
        Ok(p) => Some(p),
        Err(e) => {
            let msg = format!("{e:#}");
            // A module importing what our linker lacks is refused at link time: also clean.
            return Ok(Run {
                ended: Ended::NotInstantiated(msg),
                wall: Duration::ZERO,
                disk_measured: 0,
                disk_blocks: 0,
            });
        }
    };
    let host = host.clone();
    let export = export.to_string();
    run_on_guest_thread(move || {
        let mut gs = host
            .guest_store(SandboxSpec {
                host: HostShare::unlimited(),
                packages: host.no_packages(),
                limits,
                env: vec![],
                files: vec![],
                stdin: vec![],
                observer: None,
                cancel: Arc::new(AtomicBool::new(false)),
                setup: Default::default(),
                seed: None,
                volumes: Vec::new(),
                layer: None,
            })
            .expect("a guest store");
        let started = Instant::now();
        gs.arm(limits.timeout_ms, limits.fuel);
        let ended = match pre.unwrap().instantiate(&mut gs.store) {
            Err(e) => Ended::NotInstantiated(format!("{e:#}").chars().take(300).collect()),
            Ok(instance) => match instance.get_func(&mut gs.store, &export) {
                None => Ended::NotInstantiated(format!("no export {export:?}")),
                Some(f) => {
                    let ty = f.ty(&gs.store);
                    let mut results: Vec<Val> = ty.results().map(|_| Val::I32(0)).collect();
                    match f.call(&mut gs.store, &[], &mut results) {
                        Ok(()) => Ended::Value(match results.first() {
                            Some(Val::I32(v)) => *v as i64,
                            Some(Val::I64(v)) => *v,
                            _ => 0,
                        }),
                        Err(e) => classify(&e),
                    }
                }
            },
        };
        let wall = started.elapsed();
        let root = gs.workdir.path().to_path_buf();
        Run {
            ended,
            wall,
            disk_measured: measure_dir(&root),
            disk_blocks: allocated_bytes(&root),
        }
    })
    .map_err(|_| "the host panicked on the guest thread".to_string())
}

/// A host of its own (private scratch base), and a canary outside it.
fn host() -> Arc<Vivarium> {
    static HOST: std::sync::OnceLock<Arc<Vivarium>> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let host = common::fresh_host().0;
        // First use of wasmtime-wasi's shadowed calls starts its shared tokio runtime (an
        // epoll, an eventfd, a socket pair): once per process, so before anything counts fds.
        const WARM: &str = r#"(module
            (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
            (memory (export "memory") 1)
            (data (i32.const 0) "\10\00\00\00\02\00\00\00")
            (data (i32.const 16) "ok")
            (func (export "run") (result i32) (call $w (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))"#;
        let run = run_module(&host, WARM.as_bytes(), "run", limits(FAST, FUEL)).unwrap();
        assert_eq!(run.ended, Ended::Value(0));
        host
    })
    .clone()
}

struct Canary(PathBuf);
const SECRET: &[u8] = b"wasm-canary-secret";
impl Canary {
    fn new() -> Canary {
        let p = std::env::temp_dir().join(format!("vivarium-wasm-canary-{}", common::rand_u32()));
        std::fs::write(&p, SECRET).unwrap();
        Canary(p)
    }
}
impl Drop for Canary {
    fn drop(&mut self) {
        assert_eq!(std::fs::read(&self.0).unwrap(), SECRET, "canary changed");
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `file`'s `export` under `limits` and asserts the host invariants; `allowed` lists the
/// outcome kinds the module's spec allows. Returns the run for module-specific checks.
fn attack(file: &str, export: &str, limits: Limits, allowed: &[&str]) -> Run {
    let _counting = crate::counting();
    let host = host();
    let canary = Canary::new();
    let bytes = std::fs::read(wasm_dir().join(file)).unwrap();
    // Warm the path once so first-use allocations are not counted as growth.
    let fds_before = common::open_fds();
    let run = run_module(&host, &bytes, export, limits)
        .unwrap_or_else(|e| panic!("{file}:{export}: {e}"));
    let margin = Duration::from_millis(1_500);
    assert!(
        run.wall <= Duration::from_millis(limits.timeout_ms) + margin,
        "{file}:{export}: took {:?} under a {} ms deadline",
        run.wall,
        limits.timeout_ms
    );
    assert!(
        allowed.contains(&run.ended.kind()),
        "{file}:{export}: ended {:?}, allowed {allowed:?}",
        run.ended
    );
    let quota_slack = 3 * 4096 + 20480;
    assert!(
        run.disk_measured <= limits.disk_bytes + quota_slack,
        "{file}:{export}: working directory measures {} bytes, quota {}",
        run.disk_measured,
        limits.disk_bytes
    );
    assert!(
        run.disk_blocks <= limits.disk_bytes + (256 << 10),
        "{file}:{export}: working directory holds {} bytes of disk blocks, quota {}",
        run.disk_blocks,
        limits.disk_bytes
    );
    assert_eq!(
        host.live_sandbox_dirs(),
        0,
        "{file}:{export}: sandbox dir left behind"
    );
    let fds_after = common::open_fds();
    assert!(
        fds_after <= fds_before + 1,
        "{file}:{export}: host fds grew {fds_before} -> {fds_after}"
    );
    drop(canary);
    eprintln!("{file}:{export}: {:?} in {:?}", run.ended, run.wall);
    run
}

const FAST: u64 = 1_000;
const FUEL: u64 = 2_000_000_000;

#[test]
fn every_wat_file_has_a_test() {
    let src = std::fs::read_to_string(file!()).unwrap();
    for e in std::fs::read_dir(wasm_dir()).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".wat") {
            assert!(
                src.contains(&format!("\"{name}\"")),
                "{name} is not attacked by any test"
            );
        }
    }
}

#[test]
fn memory_grow_loop_stops_at_the_limit() {
    let l = limits(FAST, FUEL);
    let run = attack("memory_grow_loop.wat", "run", l, &["value"]);
    let Ended::Value(pages) = run.ended else {
        unreachable!()
    };
    assert_eq!(
        pages as u64,
        l.memory_bytes / 65536,
        "grew to {pages} pages"
    );
}

#[test]
fn huge_memory_grows_are_refused() {
    let run = attack(
        "memory_grow_huge.wat",
        "run",
        limits(FAST, FUEL),
        &["value"],
    );
    assert_eq!(run.ended, Ended::Value(0));
}

#[test]
fn a_memory_minimum_above_the_limit_is_not_instantiated() {
    attack(
        "memory_min_too_big.wat",
        "run",
        limits(FAST, FUEL),
        &["not_instantiated"],
    );
}

#[test]
fn table_grow_loop_stops_at_the_limit() {
    let run = attack("table_grow_loop.wat", "run", limits(FAST, FUEL), &["value"]);
    let Ended::Value(n) = run.ended else {
        unreachable!()
    };
    assert!(
        n as usize <= vivarium::testing::MAX_TABLE_ELEMENTS,
        "table of {n}"
    );
    assert!(
        n as usize + 10_000 > vivarium::testing::MAX_TABLE_ELEMENTS,
        "table of {n}"
    );
    // Wasmtime charges fuel per element of a table.grow: an absurd delta runs out of fuel
    // (or is refused) before anything is allocated.
    attack(
        "table_grow_loop.wat",
        "grow_absurd",
        limits(FAST, FUEL),
        &["value", "fuel"],
    );
}

#[test]
fn a_table_minimum_above_the_limit_is_not_instantiated() {
    attack(
        "table_min_too_big.wat",
        "run",
        limits(FAST, FUEL),
        &["not_compiled", "not_instantiated"],
    );
}

#[test]
fn data_segments_out_of_bounds_fail_cleanly() {
    attack(
        "data_segment_oob.wat",
        "run",
        limits(FAST, FUEL),
        &["not_instantiated"],
    );
    attack(
        "data_segment_straddle.wat",
        "run",
        limits(FAST, FUEL),
        &["trap"],
    );
    // Wasmtime charges fuel per byte of a bulk operation: a 4 GiB copy may run out of fuel
    // before its bounds check; with fuel to spare it traps out of bounds.
    attack(
        "bulk_memory_oob.wat",
        "run",
        limits(FAST, FUEL),
        &["trap", "fuel"],
    );
    attack(
        "bulk_memory_oob.wat",
        "run",
        limits(FAST, 1 << 40),
        &["trap"],
    );
}

#[test]
fn infinite_loops_stop_by_fuel_and_by_deadline() {
    for file in [
        "infinite_loop.wat",
        "infinite_loop_calls.wat",
        "infinite_loop_host_calls.wat",
    ] {
        // Little fuel, long deadline: fuel stops it (a loop of host calls burns little fuel
        // per second of wall time, so the deadline may come first).
        let allowed: &[&str] = if file.contains("host") {
            &["fuel", "timeout"]
        } else {
            &["fuel"]
        };
        attack(file, "run", limits(3_000, 200_000_000), allowed);
        // Plenty of fuel, short deadline: the epoch deadline stops it.
        let run = attack(file, "run", limits(500, u64::MAX / 2), &["timeout"]);
        assert!(
            run.wall >= Duration::from_millis(450),
            "{file} stopped early: {:?}",
            run.wall
        );
    }
}

#[test]
fn deep_recursion_overflows_the_wasm_stack_only() {
    let l = limits(5_000, 50_000_000_000);
    attack("deep_recursion.wat", "run", l, &["stack_overflow"]);
    attack(
        "deep_recursion_big_frames.wat",
        "run",
        l,
        &["stack_overflow"],
    );
    attack("recursion_through_host.wat", "run", l, &["stack_overflow"]);
}

#[test]
fn ordinary_traps_end_only_the_call() {
    for export in ["run", "div0", "load_oob", "null_indirect"] {
        attack("traps.wat", export, limits(FAST, FUEL), &["trap"]);
    }
}

#[test]
fn wasi_calls_without_an_exported_memory_fail_cleanly() {
    attack(
        "no_memory_export.wat",
        "run",
        limits(FAST, FUEL),
        &["value", "trap"],
    );
}

/// Calls every export of `wasi_oob_pointers.wat` on ONE instance, one after another (a
/// trap ends only that call), re-arming the deadline and fuel before each.
#[test]
fn every_wasi_import_with_hostile_pointers() {
    let _counting = crate::counting();
    let host = host();
    let canary = Canary::new();
    let fds_before = common::open_fds();
    let text = std::fs::read(wasm_dir().join("wasi_oob_pointers.wat")).unwrap();
    let bytes = wat::parse_bytes(&text).unwrap();
    let module = wasmtime::Module::new(host.engine().engine(), &bytes).unwrap();
    let pre = host.engine().instance_pre(&module).unwrap();
    let names: Vec<String> = module
        .exports()
        .filter(|e| e.ty().func().is_some())
        .map(|e| e.name().to_string())
        .collect();
    assert!(names.len() > 3000, "{} exports", names.len());
    let l = limits(1_000, FUEL);
    drop(module);
    let h = host.clone();
    let (tally, slowest, disk_measured, disk_blocks) = run_on_guest_thread(move || {
        let mut gs = h
            .guest_store(SandboxSpec {
                host: HostShare::unlimited(),
                packages: h.no_packages(),
                limits: l,
                env: vec![],
                files: vec![],
                stdin: vec![],
                observer: None,
                cancel: Arc::new(AtomicBool::new(false)),
                setup: Default::default(),
                seed: None,
                volumes: Vec::new(),
                layer: None,
            })
            .unwrap();
        gs.arm(l.timeout_ms, l.fuel);
        let instance = pre.instantiate(&mut gs.store).unwrap();
        let mut tally = std::collections::BTreeMap::<String, usize>::new();
        let mut slowest = (Duration::ZERO, String::new());
        for name in &names {
            let f = instance
                .get_typed_func::<(), i32>(&mut gs.store, name)
                .unwrap();
            gs.arm(l.timeout_ms, l.fuel);
            let started = Instant::now();
            let ended = match f.call(&mut gs.store, ()) {
                Ok(v) => Ended::Value(v as i64),
                Err(e) => classify(&e),
            };
            let took = started.elapsed();
            if took > slowest.0 {
                slowest = (took, format!("{name}: {ended:?}"));
            }
            let key = match &ended {
                Ended::Trap(t) => {
                    // "... <wasm function N>: WHY: details": keep WHY.
                    let why = t.rsplit(">: ").next().unwrap_or(t);
                    let why = why
                        .split(": ")
                        .take(if why.starts_with("In func") { 2 } else { 1 })
                        .collect::<Vec<_>>()
                        .join(": ");
                    format!("trap: {}", why.chars().take(90).collect::<String>())
                }
                other => other.kind().to_string(),
            };
            *tally.entry(key).or_default() += 1;
            assert!(
                !matches!(ended, Ended::NotCompiled(_) | Ended::NotInstantiated(_)),
                "{name}: {ended:?}"
            );
        }
        let root = gs.workdir.path().to_path_buf();
        (tally, slowest, measure_dir(&root), allocated_bytes(&root))
    })
    .expect("the host panicked");
    eprintln!("wasi_oob_pointers: {tally:#?}\nslowest {slowest:?}");
    assert!(
        slowest.0 < Duration::from_millis(l.timeout_ms + 500),
        "slowest call {slowest:?}"
    );
    assert!(
        disk_measured <= l.disk_bytes + (32 << 10),
        "workdir measures {disk_measured}"
    );
    assert!(
        disk_blocks <= l.disk_bytes + (256 << 10),
        "workdir holds {disk_blocks}"
    );
    assert_eq!(host.live_sandbox_dirs(), 0);
    assert!(
        common::open_fds() <= fds_before + 1,
        "fds grew {fds_before} -> {}: {:?}",
        common::open_fds(),
        fd_targets()
    );
    drop(canary);
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

#[test]
fn path_open_stops_at_the_descriptor_cap() {
    let l = limits(FAST, FUEL);
    let run = attack("path_open_fd_exhaustion.wat", "run", l, &["value"]);
    let Ended::Value(v) = run.ended else {
        unreachable!()
    };
    let (errno, opened) = (v >> 16, v & 0xFFFF);
    assert_eq!(
        errno, 33,
        "path_open ended with errno {errno} after {opened} opens"
    );
    // Seven descriptors are open before the guest opens any (stdio and four preopens).
    assert_eq!(opened as u32, l.open_files - 7);
}

#[test]
fn fd_write_stops_at_the_disk_quota() {
    let l = limits(5_000, FUEL);
    let run = attack("fd_write_quota.wat", "run", l, &["value"]);
    let Ended::Value(kib) = run.ended else {
        unreachable!()
    };
    assert!(
        (kib as u64) << 10 <= l.disk_bytes,
        "wrote {kib} KiB under a {} byte quota",
        l.disk_bytes
    );
}

#[test]
fn fd_seek_then_write_stays_within_the_quota() {
    let run = attack(
        "fd_seek_write_sparse.wat",
        "run",
        limits(5_000, FUEL),
        &["value"],
    );
    let Ended::Value(v) = run.ended else {
        unreachable!()
    };
    assert_ne!(
        v >> 16,
        0,
        "a 1-byte write at 1 TiB was allowed under a 2 MiB quota"
    );
}

#[test]
fn a_file_on_a_reused_stdio_descriptor_stays_within_the_quota() {
    let l = limits(5_000, FUEL);
    let run = attack("fd_write_reused_stdio_fd.wat", "run", l, &["value"]);
    let Ended::Value(kib) = run.ended else {
        unreachable!()
    };
    assert!(
        (kib as u64) << 10 <= l.disk_bytes,
        "wrote {kib} KiB under a {} byte quota",
        l.disk_bytes
    );
}

#[test]
fn the_host_door_survives_hostile_arguments() {
    attack("host_call_abuse.wat", "run", limits(FAST, FUEL), &["value"]);
    attack(
        "host_call_abuse.wat",
        "flood",
        limits(FAST, FUEL),
        &["fuel", "timeout"],
    );
}

#[test]
fn poll_oneoff_rejects_bad_arguments_at_once() {
    let run = attack(
        "poll_oneoff_abuse.wat",
        "run",
        limits(2_000, FUEL),
        &["value"],
    );
    assert!(
        run.wall < Duration::from_millis(1_000),
        "took {:?}",
        run.wall
    );
}

#[test]
fn poll_oneoff_sleeps_stop_at_the_deadline() {
    for export in ["sleep", "sleep_abs", "sleep_never", "sleep_many"] {
        let run = attack(
            "poll_oneoff_abuse.wat",
            export,
            limits(300, FUEL),
            &["timeout"],
        );
        assert!(
            run.wall < Duration::from_millis(300 + 200),
            "{export}: {:?} past a 300 ms deadline",
            run.wall
        );
    }
}
