//! One fresh-sandbox execution (instantiate, execute, tear down) against spawning the native
//! interpreter for the same snippet, measured in the same run.
//!
//! The baseline is the real interpreter binary (`sys.executable` of `python3`, resolved once,
//! so a version-manager shim adds nothing) or `VIVARIUM_BASELINE_PYTHON`. Criterion excludes
//! its warm-up runs from both sides. At the end a summary line gives the medians and the ratio.
//!
//! Run: `cargo bench --bench fresh_sandbox`

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use criterion::Criterion;
use vivarium::sandbox::SandboxSpec;
use vivarium::{ExecRequest, Limits, Status, Vivarium, VivariumOptions};

const SNIPPET: &str = "print('hello world')";

fn native_python() -> PathBuf {
    if let Some(p) = std::env::var_os("VIVARIUM_BASELINE_PYTHON") {
        return p.into();
    }
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 on PATH for the baseline");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn spec() -> SandboxSpec {
    SandboxSpec {
        limits: Limits::DEFAULT,
        env: vec![],
        files: vec![],
        stdin: vec![],
        observer: None,
        cancel: Arc::new(AtomicBool::new(false)),
        setup: Default::default(),
    }
}

fn benches(c: &mut Criterion, host: &Arc<Vivarium>, python: &PathBuf) {
    let mut group = c.benchmark_group("hello_world");
    group
        .sample_size(100)
        .measurement_time(Duration::from_secs(8));
    // The sandbox alone: prepare (temp dir, WASI context, store, instance), run, drop.
    group.bench_function("vivarium_sandbox_on_this_thread", |b| {
        b.iter(|| {
            let r = host.prepare(spec()).unwrap().run(SNIPPET);
            assert_eq!(r.status, Status::Ok);
        })
    });
    // What a front door pays: the same plus a fresh guest thread.
    group.bench_function("vivarium_execute", |b| {
        b.iter(|| {
            let r = host
                .execute(ExecRequest {
                    code: SNIPPET.into(),
                    ..Default::default()
                })
                .unwrap();
            assert_eq!(r.status, Status::Ok);
        })
    });
    group.bench_function("native_python3_c", |b| {
        b.iter(|| {
            let out = Command::new(python).args(["-c", SNIPPET]).output().unwrap();
            assert!(out.status.success());
        })
    });
    group.finish();
}

/// Medians of `n` timed runs after `warm` untimed ones.
fn median_ms(n: usize, warm: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warm {
        f();
    }
    let mut t: Vec<f64> = (0..n)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[n / 2]
}

fn main() {
    // Guests need a deep native stack; criterion runs on this thread.
    std::thread::Builder::new()
        .stack_size(vivarium::engine::GUEST_THREAD_STACK_BYTES)
        .spawn(|| {
            let host = Vivarium::open(VivariumOptions::from_env()).expect("runtime");
            let python = native_python();
            let mut c = Criterion::default().configure_from_args();
            benches(&mut c, &host, &python);
            c.final_summary();

            let sandbox = median_ms(200, 20, || {
                host.prepare(spec()).unwrap().run(SNIPPET);
            });
            let execute = median_ms(200, 20, || {
                host.execute(ExecRequest {
                    code: SNIPPET.into(),
                    ..Default::default()
                })
                .unwrap();
            });
            let native = median_ms(100, 10, || {
                Command::new(&python).args(["-c", SNIPPET]).output().unwrap();
            });
            println!(
                "SUMMARY hello_world p50: vivarium sandbox {sandbox:.2} ms, vivarium execute {execute:.2} ms, native {} {native:.2} ms; native/vivarium = {:.1}x (sandbox), {:.1}x (execute)",
                python.display(),
                native / sandbox,
                native / execute
            );
        })
        .unwrap()
        .join()
        .unwrap();
}
