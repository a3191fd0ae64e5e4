#!/usr/bin/env bash
# Bounded fuzzing smoke run of both targets (wasm_smith_module, hostile_python), for CI.
#
#   bash fuzz/smoke.sh                 # FUZZ_SECONDS (default 120) per target, at most 5 min
#   FUZZ_ENGINE=libfuzzer bash fuzz/smoke.sh   # cargo-fuzz/libFuzzer instead of the seeded fuzzers
#
# Engines:
# * seeded (default, stable Rust, no extra build): the #[ignore]d fuzzers of
#   tests/sandbox/fuzz_regressions.rs, random inputs from a printed seed (FUZZ_SEED to replay).
# * libfuzzer: `cargo fuzz run --sanitizer none` (needs cargo-fuzz; -Z flags through
#   RUSTC_BOOTSTRAP=1 on stable), coverage-guided, corpus kept in fuzz/corpus/<target>.
#   Falls back to the seeded engine when cargo-fuzz is missing or does not build.
#
# Findings are saved under fuzz/artifacts/<target>/ (crash-*); the script then exits non-zero.
# Once a finding is understood and fixed, copy it into fuzz/regressions/<target>/: `cargo
# test --test sandbox fuzz_regressions::` replays everything there.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS="${FUZZ_SECONDS:-120}"
if [ "$SECS" -gt 150 ]; then SECS=150; fi   # two targets: at most 5 minutes together
ENGINE="${FUZZ_ENGINE:-seeded}"
mkdir -p fuzz/artifacts

run_seeded() {
    local target="$1" test="$2"
    echo "== fuzz (seeded): $target for ${SECS}s"
    FUZZ_SECONDS="$SECS" cargo test --quiet --test sandbox -- --ignored --exact "fuzz_regressions::$test" --nocapture
}

run_libfuzzer() {
    local target="$1"
    echo "== fuzz (libFuzzer): $target for ${SECS}s"
    mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
    # Seed the corpus with the committed regression inputs.
    cp -n fuzz/regressions/"$target"/* "fuzz/corpus/$target/" 2>/dev/null || true
    (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none "$target" \
        "corpus/$target" -- -max_total_time="$SECS" -timeout=30 -rss_limit_mb=4096 \
        -artifact_prefix="artifacts/$target/" -print_final_stats=1)
}

if [ "$ENGINE" = libfuzzer ]; then
    if command -v cargo-fuzz >/dev/null && (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none >/dev/null 2>&1); then
        run_libfuzzer wasm_smith_module
        run_libfuzzer hostile_python
        exit 0
    fi
    echo "cargo-fuzz unavailable or failed to build: using the seeded fuzzers" >&2
fi
run_seeded wasm_smith_module fuzz_wasm_smith
run_seeded hostile_python fuzz_hostile_python
