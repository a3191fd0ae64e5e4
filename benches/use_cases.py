"""The use cases an assistant's `execute_python` calls are made of, timed three ways in one run:
a fresh Vivarium sandbox over HTTP (release `vivarium serve` on 127.0.0.1, keep-alive), native
CPython spawned with the same snippet (`python -c`, imports included: a fresh process is what a
fresh sandbox replaces), and a warm Jupyter kernel (`ipykernel` driven by `jupyter_client`, its
imports already done: the inner loop of an E2B-style code interpreter, with no isolation and no
fresh state). Medians of RUNS after WARMUP runs each, every figure beside its baselines.

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

from http_load import wait_ready

RUNS = int(os.environ.get("USE_CASE_RUNS", "15"))
WARMUP = 3

CSV = "city,temp,rain\n" + "".join(
    f"{c},{(i * 7) % 35},{(i * 13) % 20}\n"
    for i, c in enumerate(["Oslo", "Lima", "Pune", "Kyiv", "Rome"] * 200)
)

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


def timed(fn):
    for _ in range(WARMUP):
        fn()
    out = []
    for _ in range(RUNS):
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
        return timed(once), first

    try:
        results = {}
        for name, code, _ in CASES:
            default, v = run(code, None)
            minimal, _ = run(code, "python")
            results[name] = {
                "default": median_ms(default),
                "python": median_ms(minimal),
                "status": v["status"],
            }
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


def kernel():
    from jupyter_client.manager import start_new_kernel

    work = tempfile.mkdtemp()
    with open(os.path.join(work, "data.csv"), "w") as f:
        f.write(CSV)
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
        return results
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main():
    binary, out = sys.argv[1], sys.argv[2]
    loadavg = os.getloadavg()
    viv = vivarium_http(binary)
    nat = native(sys.executable)
    ker = kernel()
    rows = []
    for name, _, _ in CASES:
        rows.append({
            "case": name,
            "vivarium_default_ms": viv[name]["default"],
            "vivarium_python_ms": viv[name]["python"],
            "native_spawn_ms": nat[name],
            "warm_kernel_ms": ker[name],
            "status": viv[name]["status"],
        })
    result = {
        "runs": RUNS,
        "warmup": WARMUP,
        "loadavg_before": loadavg,
        "native_python": sys.version.split()[0],
        "rows": rows,
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
