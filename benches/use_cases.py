"""The use cases an assistant's `execute_python` calls are made of, timed four ways in one run:
a fresh Vivarium sandbox over HTTP (release `vivarium serve` on 127.0.0.1, keep-alive), the same
code as a turn of a kept Vivarium session over HTTP (what freshness costs is the first ÷ the
second), native CPython spawned with the same snippet (`python -c`, imports included: a fresh
process is what a fresh sandbox replaces), and a warm Jupyter kernel (`ipykernel` driven by
`jupyter_client`, its imports already done: the inner loop of an E2B-style code interpreter,
with no isolation and no fresh state). Then a 1-million-row CSV (the same generator as the
small one) uploaded to a session: `pd.read_csv` and `groupby().sum()` as turns, beside the
same two statements in native CPython after its imports and in the warm kernel. Medians of
RUNS after WARMUP runs each, every figure beside its baselines. `benches/floor.rs` splits a
turn's time below HTTP (Wasm floor, metering, host, faults); `benches/report.py` joins both.

    python benches/use_cases.py target/release/vivarium benches/results/use_cases.json

Needs, in the running interpreter, numpy, pandas, matplotlib, scikit-learn, ipykernel and
jupyter_client (benches/run.sh makes that venv). Bounded: RUNS per case, a few seconds each.
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from ab_http import minor_faults
from http_load import wait_ready

RUNS = int(os.environ.get("USE_CASE_RUNS", "15"))
WARMUP = 3

CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Rome"]


def make_csv(rows: int) -> str:
    """The bench's CSV (`benches/floor.rs` makes the same bytes)."""
    return "city,temp,rain\n" + "".join(
        f"{CITIES[i % 5]},{(i * 7) % 35},{(i * 13) % 20}\n" for i in range(rows)
    )


CSV = make_csv(1000)
BIG_ROWS = 1_000_000
BIG_RUNS = int(os.environ.get("USE_CASE_BIG_RUNS", "7"))
# The 1-million-row CSV as two turns (a session keeps `big`), and natively after imports.
BIG_STEPS = [
    ("read_csv", "big = pd.read_csv('big.csv')"),
    ("groupby", "g = big.groupby('city').sum()"),
]

# (name, snippet for Vivarium and the kernel, snippet for native python -c, inputs).
# Native CPython's `plt.show()` under Agg draws nothing, so its plot saves a PNG instead:
# the same figure rendered to the same bytes Vivarium and the kernel return.
PLOT = (
    "import numpy as np\nimport matplotlib.pyplot as plt\n"
    "x = np.linspace(0, 10, 1000)\nplt.plot(x, np.sin(x))\n"
)
CASES = [
    ("hello world", "print('hello world')", None),
    (
        "CSV uploaded, pd.read_csv + groupby().sum()",
        "import pandas as pd\ndf = pd.read_csv('data.csv')\nprint(df.groupby('city').sum())",
        None,
    ),
    (
        "matplotlib 1,000-point line plot, PNG back",
        PLOT + "plt.show()",
        PLOT + "import io\nplt.savefig(io.BytesIO(), format='png')",
    ),
    (
        "linear regression with scikit-learn (fit + predict)",
        "import numpy as np\nfrom sklearn.linear_model import LinearRegression\n"
        "X = np.random.rand(200, 3)\ny = X @ [1.5, -2.0, 0.7] + 0.1\n"
        "m = LinearRegression().fit(X, y)\nprint(m.coef_.round(3), m.predict(X[:2]).round(3))",
        None,
    ),
    ("a = 10 / 0, structured ZeroDivisionError", "a = 10 / 0", None),
]


def median_ms(samples):
    return round(statistics.median(samples) * 1e3, 2)


def timed(fn, runs=RUNS, warmup=WARMUP):
    """The times of `runs` calls of `fn`, after `warmup` calls not timed."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def vivarium_http(binary):
    import base64

    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--audit-log", os.devnull],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    addr = proc.stdout.readline().split()[-1].replace("http://", "")
    host, port = addr.rsplit(":", 1)
    wait_ready(host, port)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    files = [{"path": "data.csv", "content": base64.b64encode(CSV.encode()).decode()}]

    def run(code, template):
        body = {"code": code, "files": files, "policy": "off"}
        if template:
            body["template"] = template
        payload = json.dumps(body)

        def once():
            conn.request("POST", "/v1/execute", payload, {"content-type": "application/json"})
            r = conn.getresponse()
            v = json.loads(r.read())
            assert r.status == 200, v
            if "plt.show" in code:
                assert v["outputs"] and v["outputs"][0]["mime"] == "image/png", v
            return v

        first = once()
        for _ in range(WARMUP):
            once()
        faults = minor_faults(proc.pid)
        out = timed(once, warmup=0)
        first["faults_per_request"] = (minor_faults(proc.pid) - faults) / RUNS
        return out, first

    def session():
        """A session of the default template with data.csv and big.csv uploaded."""
        status, v = call("POST", "/v1/sessions", json.dumps({}).encode())
        assert status == 201, v
        sid = v["id"]
        for name, content in (("data.csv", CSV), ("big.csv", make_csv(BIG_ROWS))):
            status, v = call("PUT", f"/v1/sessions/{sid}/files/{name}", content.encode(),
                             "application/octet-stream")
            assert status in (200, 201, 204), v
        return sid

    def call(method, path, body, ctype="application/json"):
        conn.request(method, path, body, {"content-type": ctype})
        r = conn.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else {})

    def turns(sid, code, runs=RUNS):
        payload = json.dumps({"code": code, "policy": "off"}).encode()

        def once():
            status, v = call("POST", f"/v1/sessions/{sid}/execute", payload)
            assert status == 200 and v["status"] in ("ok", "error"), v
            if "plt.show" in code:
                assert v["outputs"] and v["outputs"][0]["mime"] == "image/png", v
            return v

        once()
        return timed(once, runs)

    try:
        results = {}
        sid = session()
        for name, code, _ in CASES:
            default, v = run(code, None)
            minimal, _ = run(code, "python")
            turn = turns(sid, code)
            results[name] = {
                "default": median_ms(default),
                "default_faults_per_request": v["faults_per_request"],
                "python": median_ms(minimal),
                "turn": median_ms(turn),
                "status": v["status"],
            }
        big = {}
        for step, code in BIG_STEPS:
            big[step] = median_ms(turns(sid, code, BIG_RUNS))
        results["big"] = big
        return results
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def native(python):
    work = tempfile.mkdtemp()
    with open(os.path.join(work, "data.csv"), "w") as f:
        f.write(CSV)
    env = dict(os.environ, MPLBACKEND="Agg")
    results = {}
    for name, code, native_code in CASES:
        argv = [python, "-c", native_code or code]
        samples = timed(lambda: subprocess.run(argv, cwd=work, env=env, capture_output=True))
        results[name] = median_ms(samples)
    return results


NATIVE_BIG = """
import json, statistics, sys, time
import pandas as pd
steps = json.loads(sys.argv[1])
runs, warmup = int(sys.argv[2]), int(sys.argv[3])
out = {}
ns = {"pd": pd}
for name, code in steps:
    for _ in range(warmup):
        exec(code, ns)
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        exec(code, ns)
        t.append(time.perf_counter() - t0)
    out[name] = round(statistics.median(t) * 1e3, 2)
print(json.dumps(out))
"""


def native_big(python):
    """The 1-million-row steps in one native process, after its imports."""
    work = tempfile.mkdtemp()
    with open(os.path.join(work, "big.csv"), "w") as f:
        f.write(make_csv(BIG_ROWS))
    r = subprocess.run(
        [python, "-c", NATIVE_BIG, json.dumps(BIG_STEPS), str(BIG_RUNS), str(WARMUP)],
        cwd=work, capture_output=True, text=True, check=True,
    )
    return json.loads(r.stdout)


def kernel():
    from jupyter_client.manager import start_new_kernel

    work = tempfile.mkdtemp()
    with open(os.path.join(work, "data.csv"), "w") as f:
        f.write(CSV)
    with open(os.path.join(work, "big.csv"), "w") as f:
        f.write(make_csv(BIG_ROWS))
    km, kc = start_new_kernel(kernel_name="python3", cwd=work)
    try:
        kc.execute_interactive(
            "import numpy, pandas, matplotlib.pyplot, sklearn.linear_model\n%matplotlib inline",
            timeout=120,
        )
        results = {}
        for name, code, _ in CASES:
            images = []

            def once():
                images.clear()
                kc.execute_interactive(
                    code,
                    timeout=60,
                    output_hook=lambda m: images.append(m)
                    if m["msg_type"] == "display_data"
                    else None,
                )

            samples = timed(once)
            if "plt.show" in code:
                assert any("image/png" in m["content"]["data"] for m in images), "no PNG"
            results[name] = median_ms(samples)
        big = {}
        for step, code in BIG_STEPS:
            kc.execute_interactive("import pandas as pd", timeout=60)
            out = timed(lambda: kc.execute_interactive(code, timeout=120), BIG_RUNS)
            big[step] = median_ms(out)
        results["big"] = big
        return results
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main():
    binary, out = sys.argv[1], sys.argv[2]
    loadavg = os.getloadavg()
    viv = vivarium_http(binary)
    nat = native(sys.executable)
    nat_big = native_big(sys.executable)
    ker = kernel()
    rows = []
    for name, _, _ in CASES:
        rows.append({
            "case": name,
            "vivarium_default_ms": viv[name]["default"],
            "vivarium_python_ms": viv[name]["python"],
            "vivarium_default_faults_per_request": viv[name]["default_faults_per_request"],
            "vivarium_turn_ms": viv[name]["turn"],
            "native_spawn_ms": nat[name],
            "warm_kernel_ms": ker[name],
            "status": viv[name]["status"],
        })
    big = [
        {
            "step": step,
            "vivarium_turn_ms": viv["big"][step],
            "native_after_imports_ms": nat_big[step],
            "warm_kernel_ms": ker["big"][step],
        }
        for step, _ in BIG_STEPS
    ]
    result = {
        "runs": RUNS,
        "warmup": WARMUP,
        "big_runs": BIG_RUNS,
        "big_rows": BIG_ROWS,
        "loadavg_before": loadavg,
        "loadavg_after": os.getloadavg(),
        "native_python": sys.version.split()[0],
        "rows": rows,
        "big": big,
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
