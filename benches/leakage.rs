//! What the output-leakage scan costs: 1 MiB of ordinary program output through every rule
//! (clean, and with secrets in it), and the whole added work of `redact` on a hello world
//! (building the request's guard, scanning and rewriting its report). Beside them, in the same
//! run, the floor any scan pays: copying the same 1 MiB once.
//!
//!   cargo bench --bench leakage

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput};
use vivarium::testing::Guard;
use vivarium::{LeakPolicy, Report, Scanner, Status};

/// About 1 MiB of what programs print: DataFrame rows, floats, a traceback, log lines with
/// words the rules look for (`token`, `key`, `api`), and base64 as from a PNG.
fn ordinary_output() -> String {
    let mut out = String::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let b64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    while out.len() < 1 << 20 {
        for i in 0..20 {
            out.push_str(&format!(
                "{i:>4}  {:>12.6}  {:>10}  2024-{:02}-{:02}  Oslo\n",
                (next() % 1_000_000) as f64 / 997.0,
                next() % 100_000,
                1 + next() % 12,
                1 + next() % 28
            ));
        }
        out.push_str("Traceback (most recent call last):\n  File \"<string>\", line 3, in <module>\nKeyError: 'missing_key'\n");
        out.push_str("INFO token_count=1532 api_version=2024-06-01 cache key hit ratio 0.93\n");
        let line: String = (0..76)
            .map(|_| b64[(next() % 64) as usize] as char)
            .collect();
        for _ in 0..8 {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

fn report(stdout: String) -> Report {
    Report {
        status: Status::Ok,
        exit_code: Some(0),
        stdout,
        stderr: String::new(),
        truncated: Default::default(),
        error: None,
        detail: None,
        files: Vec::new(),
        usage: Default::default(),
        outputs: Vec::new(),
        leaks: None,
        network: None,
    }
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let scanner = Arc::new(Scanner::new(None).expect("built-in rules"));
    let env = vec![(
        "SERVICE_TOKEN".to_string(),
        "tok-9f8e7d6c5b4a3210".to_string(),
    )];
    let guard = Guard::new(scanner.clone(), LeakPolicy::Redact, &env, &[]);
    let clean = ordinary_output();
    let mut dirty = clean.clone();
    for at in [1000, 300_000, 700_000] {
        let at = dirty[..at].rfind('\n').unwrap() + 1;
        dirty.insert_str(
            at,
            "github ghp_R2d4kPq8ZtW1xY7bN3mC5vL9sA0fH6jE2uTo aws AKIAQYLPMN5HHHFPZAM2\n",
        );
    }

    let mut g = c.benchmark_group("leakage_1mib");
    g.throughput(Throughput::Bytes(clean.len() as u64));
    g.bench_function("copy_baseline", |b| b.iter(|| black_box(clean.clone())));
    g.bench_function("redact_clean", |b| {
        b.iter_batched(
            || report(clean.clone()),
            |mut r| black_box(guard.apply(&mut r, None)),
            criterion::BatchSize::LargeInput,
        )
    });
    g.bench_function("redact_with_secrets", |b| {
        b.iter_batched(
            || report(dirty.clone()),
            |mut r| black_box(guard.apply(&mut r, None)),
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("leakage_hello_world");
    g.bench_function("guard_and_redact", |b| {
        b.iter_batched(
            || report("hello\n".to_string()),
            |mut r| {
                let guard = Guard::new(scanner.clone(), LeakPolicy::Redact, &env, &[]);
                black_box(guard.apply(&mut r, None))
            },
            criterion::BatchSize::SmallInput,
        )
    });
    g.bench_function("off", |b| {
        b.iter_batched(
            || report("hello\n".to_string()),
            |mut r| {
                let guard = Guard::new(scanner.clone(), LeakPolicy::Off, &env, &[]);
                black_box(guard.apply(&mut r, None))
            },
            criterion::BatchSize::SmallInput,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("leakage_rules");
    g.sample_size(10);
    g.bench_function("compile_all", |b| {
        b.iter(|| black_box(Scanner::new(None).unwrap()))
    });
    g.finish();
    c.final_summary();
}
