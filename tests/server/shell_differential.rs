//! The shell's differential test through a real server (issue 49): every command of
//! tests/shell/corpus.txt run by this machine's bash + GNU coreutils and, with
//! `language: "bash"`, by the sandbox's own shell, each in a fresh copy of the same fixture
//! tree; stdout byte for byte and the exit status must agree for at least 95 % of them.
//!
//! The comparison is tests/shell/differential.py's `--server` mode (one implementation of
//! the corpus format, the fixture and the normalisation, also used by hand with
//! `--host-python`): it runs bash on the host as the reference and posts each command to
//! `/v1/execute`, four at a time.

use std::process::Command;

use crate::http_support::*;
use serde_json::Value;

/// At least this share of the corpus must match bash (the "done when").
const REQUIRED_PERCENT: f64 = 95.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_corpus_matches_bash_and_gnu_coreutils() {
    let api = shared().await;
    let root = env!("CARGO_MANIFEST_DIR");
    let out = scratch_dir("shell-differential").with_extension("json");
    let base = api.base.clone();
    let json_path = out.clone();
    let run = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(format!("{root}/tests/shell/differential.py"))
            .args(["--server", &base, "--jobs", "4", "--json"])
            .arg(&json_path)
            .output()
            .expect("python3 runs tests/shell/differential.py")
    })
    .await
    .unwrap();
    let printed = String::from_utf8_lossy(&run.stdout);
    // Every mismatch with its diff, then the per-area summary.
    println!("{printed}");
    eprintln!("{}", String::from_utf8_lossy(&run.stderr));
    let report: Value = serde_json::from_slice(
        &std::fs::read(&out).unwrap_or_else(|e| panic!("no report ({e}): {printed}")),
    )
    .unwrap();
    let _ = std::fs::remove_file(&out);
    let total = report["total"].as_u64().unwrap();
    let matched = report["matched"].as_u64().unwrap();
    assert!(total >= 250, "the corpus has {total} commands");
    // The reference itself must have worked: bash ran every entry (an entry whose bash
    // status is not a number timed out or could not start).
    let results = report["results"].as_array().unwrap();
    for r in results {
        assert!(
            r["bash"]["status"].is_i64(),
            "bash did not finish {}: {r}",
            r["entry"]
        );
    }
    let percent = 100.0 * matched as f64 / total as f64;
    assert!(
        percent >= REQUIRED_PERCENT,
        "{matched}/{total} ({percent:.1} %) of the corpus matched bash; {REQUIRED_PERCENT} % \
         needed (the mismatches are printed above)"
    );
}
