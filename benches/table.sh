#!/usr/bin/env bash
# Issue 31's goals table in one run: what a fresh sandbox and a session turn cost, beside a warm
# Jupyter kernel and native CPython, and where a turn's time goes (the Wasm floor, metering, the
# host, the checkpoint's faults, HTTP). Writes benches/results/table.md (and the JSON of each
# part beside it). About 15 minutes on 2 cores once built (the first run compiles two bench
# copies of the guest: minutes each).
#
#   benches/table.sh [VIVARIUM_BINARY]    # default target/release/vivarium, built if missing
#
# The criterion benches run with cargo's bench profile unless CARGO_BENCH_ARGS says otherwise
# (`--profile dev` with CARGO_PROFILE_DEV_OPT_LEVEL=3 is the dev profile at opt-level 3).
set -euo pipefail
cd "$(dirname "$0")/.."
RESULTS=benches/results
VENV=${VIVARIUM_BENCH_VENV:-target/bench-venv}
BIN=${1:-target/release/vivarium}
mkdir -p "$RESULTS"

if [ ! -x "$VENV/bin/python" ]; then
    echo "== making the baseline venv ($VENV)"
    python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q numpy pandas matplotlib scikit-learn ipykernel jupyter_client
PY="$("$VENV/bin/python" -c 'import sys; print(sys.executable)')"
if ! command -v wrk >/dev/null; then
    echo "== installing wrk (Debian's package) for the throughput row"
    apt-get install -y -qq wrk >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq wrk)
fi
if [ ! -x "$BIN" ]; then
    cargo build --release --quiet
fi
"$BIN" runtime fetch

echo "== in process: hello world on the default template and the metered CPU loop (criterion)"
# shellcheck disable=SC2086
VIVARIUM_BASELINE_PYTHON="$PY" cargo bench ${CARGO_BENCH_ARGS:-} --bench speed -- \
    'hello_world/(vivarium_sandbox_default_template|native_python3)|cpu_loop'
echo "== in process: a turn's layers, the Wasm floor up (benches/floor.rs)"
# shellcheck disable=SC2086
cargo bench ${CARGO_BENCH_ARGS:-} --bench floor
echo "== over HTTP: fresh sandbox, session turn, warm kernel, native (benches/use_cases.py)"
"$PY" benches/use_cases.py "$BIN" "$RESULTS/use_cases.json"
echo "== over HTTP: an agent's whole run, trivial and data analysis (benches/agent_run.py)"
"$PY" benches/agent_run.py "$BIN" "$RESULTS/agent_run.json"
echo "== over HTTP: throughput at 1, 2, 4 and 8 connections (benches/scaling.py)"
"$PY" benches/scaling.py "$BIN" "$RESULTS/scaling.json"
echo "== over HTTP: code mode's goals (benches/code_mode.py)"
"$PY" benches/code_mode.py "$BIN" "$RESULTS/code_mode.json"
"$PY" benches/report.py "$RESULTS"
cat "$RESULTS/table.md"
