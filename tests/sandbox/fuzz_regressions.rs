//! Replays every committed fuzz regression input (`fuzz/regressions/<target>/*`) through the
//! same harness the fuzzers use (`fuzz/harness.rs`), and holds the stable, seeded fuzzers that
//! `fuzz/smoke.sh` runs when cargo-fuzz/libFuzzer is not available:
//!
//! ```sh
//! FUZZ_SECONDS=150 FUZZ_SEED=1 cargo test --test sandbox -- --ignored --nocapture fuzz_regressions::fuzz_wasm_smith
//! FUZZ_SECONDS=150 cargo test --test sandbox -- --ignored --nocapture fuzz_regressions::fuzz_hostile_python
//! ```
//!
//! A finding is saved under `fuzz/artifacts/<target>/crash-<hash>` (copy it into
//! `fuzz/regressions/<target>/` once understood and fixed).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::harness::*;
use rand::{Rng, SeedableRng};

const TARGETS: [&str; 2] = ["wasm_smith_module", "hostile_python"];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join("regressions").join(target);
    assert!(dir.is_dir(), "{} is missing", dir.display());
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    v.sort();
    v
}

/// A `hostile_python` regression may be the raw input (its program depends on the corpus as it
/// was) or, more stable, the composed program itself (`*.py`).
fn run_input(target: &str, data: &[u8], canary: &Canary) -> Result<String, String> {
    match target {
        "wasm_smith_module" => run_wasm_input(data).map(|t| format!("{t:?}")),
        "hostile_python" => run_python(&compose_python(data), canary),
        _ => unreachable!(),
    }
}

#[test]
fn committed_regressions_replay_clean() {
    let canary = Canary::new();
    let mut failures = Vec::new();
    let mut n = 0;
    for target in TARGETS {
        for p in inputs(target) {
            n += 1;
            let data = std::fs::read(&p).unwrap();
            let r = if p.extension().is_some_and(|e| e == "py") {
                run_python(&String::from_utf8_lossy(&data), &canary)
            } else {
                run_input(target, &data, &canary)
            };
            if let Err(e) = r {
                failures.push(format!("{}: {e}", p.display()));
            }
        }
    }
    eprintln!("replayed {n} regression inputs");
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Saves a finding where cargo-fuzz would, and returns its path.
fn save_artifact(target: &str, data: &[u8]) -> PathBuf {
    use sha2::{Digest, Sha256};
    let dir = fuzz_dir().join("artifacts").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!(
        "crash-{}",
        hex::encode(&Sha256::digest(data)[..10])
    ));
    std::fs::write(&p, data).unwrap();
    p
}

/// Random inputs for `seconds` (env `FUZZ_SECONDS`), from `FUZZ_SEED` (else a fresh seed,
/// printed); stops at the first violated invariant, saved as an artifact.
fn seeded_fuzz(target: &str, default_secs: u64, max_len: usize) {
    let secs: u64 = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_secs);
    let seed: u64 = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("{target}: seed {seed}, {secs} s");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    warm_up();
    let canary = Canary::new();
    let inv = Invariants::baseline();
    let started = Instant::now();
    let mut execs = 0u64;
    let mut tally = Tally::default();
    let mut statuses = std::collections::BTreeMap::<String, u64>::new();
    while started.elapsed() < Duration::from_secs(secs) {
        let len = rng.gen_range(16..=max_len);
        let mut data = vec![0u8; len];
        rng.fill(&mut data[..]);
        let r = match target {
            "wasm_smith_module" => run_wasm_input(&data).map(|t| {
                tally += t;
                String::new()
            }),
            _ => run_python(&compose_python(&data), &canary).inspect(|s| {
                *statuses.entry(s.clone()).or_default() += 1;
            }),
        };
        execs += 1;
        let r = r.and_then(|_| {
            if execs.is_multiple_of(25) {
                inv.check_process()
            } else {
                Ok(())
            }
        });
        if let Err(e) = r {
            let p = save_artifact(target, &data);
            if target == "hostile_python" {
                std::fs::write(p.with_extension("py"), compose_python(&data)).unwrap();
            }
            panic!(
                "{target}: finding after {execs} executions: {e}\n  input saved to {}",
                p.display()
            );
        }
    }
    inv.check_process().unwrap();
    canary.check().unwrap();
    eprintln!(
        "{target}: {execs} executions in {:.0} s, no finding; {tally:?} {statuses:?}",
        started.elapsed().as_secs_f64()
    );
}

#[test]
#[ignore = "a bounded fuzzing run (fuzz/smoke.sh); set FUZZ_SECONDS"]
fn fuzz_wasm_smith() {
    seeded_fuzz("wasm_smith_module", 60, 4096);
}

#[test]
#[ignore = "a bounded fuzzing run (fuzz/smoke.sh); set FUZZ_SECONDS"]
fn fuzz_hostile_python() {
    seeded_fuzz("hostile_python", 60, 64);
}

/// Prints the program a `hostile_python` input composes, and what it did:
/// `FUZZ_INPUT=fuzz/artifacts/hostile_python/crash-… cargo test --test sandbox -- --ignored --nocapture fuzz_regressions::show_python_input`
#[test]
#[ignore = "a tool: set FUZZ_INPUT"]
fn show_python_input() {
    let path = std::env::var("FUZZ_INPUT").expect("FUZZ_INPUT");
    let code = compose_python(&std::fs::read(path).unwrap());
    println!("--- program ---\n{code}\n--- outcome ---");
    let canary = Canary::new();
    println!("{:?}", run_python(&code, &canary));
}
