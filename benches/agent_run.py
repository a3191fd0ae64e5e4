"""An agent's whole run, as an agent feels it, in one run of this script:

* **The trivial run**: open a sandbox, then ten small blocks (an assignment, a function, a
  print, a dict...), the shape of the agent chart the Monty project publishes ("cold start
  plus ten REPL feeds"; its blocks are not published, so these are `ab_http.AGENT_CELLS`). Vivarium: `POST /v1/sessions` then ten `POST /v1/sessions/{id}/execute` over one
  keep-alive connection, with the default pre-execution check and with `policy: off`.
  Beside it: native CPython started and fed the same ten blocks through a pipe (a REPL loop,
  no isolation), and an ipykernel started and fed them (cold), and fed them warm.
* **The data-analysis run**: ten cells an assistant sends for an uploaded CSV (load, inspect,
  clean, groupby, merge, describe, a plot, a scikit-learn fit, an error and its fix). Vivarium
  as one session (open, upload, ten turns) and fresh per cell (each cell a fresh
  `/v1/execute` with the CSV as an input and the statements before it that build its state),
  beside a warm ipykernel (imports done, the CSV on disk, its namespace cleared between runs)
  and native CPython running the ten cells as one script (`python -c`, imports included).

Medians of RUNS after WARMUP, all in one run, on the default template.

    target/bench-venv/bin/python benches/agent_run.py target/release/vivarium out.json

Needs numpy, pandas, matplotlib, scikit-learn, ipykernel and jupyter_client in the running
interpreter (benches/table.sh makes that venv). Bounded: about a minute.
"""

import base64
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

from ab_http import AGENT_CELLS, start
from use_cases import median_ms, timed

RUNS = int(os.environ.get("AGENT_RUNS", "20"))
ANALYSIS_RUNS = int(os.environ.get("AGENT_ANALYSIS_RUNS", "7"))
WARMUP = 3

# The trivial run's ten blocks are `ab_http`'s (its `agent` setting times the same run, close
# included, build against build).
TRIVIAL = AGENT_CELLS

CITIES = ["Oslo", "Lima", "Pune", "Kyiv", "Rome"]


def sales_csv(rows=2000):
    """A CSV with gaps to clean: city, units, price (every 17th price missing)."""
    out = ["city,units,price"]
    for i in range(rows):
        price = "" if i % 17 == 0 else f"{5 + (i * 7) % 40}.5"
        out.append(f"{CITIES[i % 5]},{1 + (i * 13) % 9},{price}")
    return "\n".join(out) + "\n"


CSV = sales_csv()

# (code, builds state a later cell needs). The fresh-per-cell run sends, for each cell, the
# state-building cells before it and then the cell.
ANALYSIS = [
    ("import pandas as pd\ndf = pd.read_csv('sales.csv')\ndf.head()", True),
    ("df.shape, df.dtypes.to_dict(), int(df['price'].isna().sum())", False),
    ("df = df.dropna()\ndf['revenue'] = df['units'] * df['price']", True),
    ("by_city = df.groupby('city')['revenue'].sum().sort_values()\nby_city", True),
    (
        "regions = pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune', 'Kyiv', 'Rome'],"
        " 'region': ['EU', 'SA', 'AS', 'EU', 'EU']})\n"
        "m = df.merge(regions, on='city')\nm.groupby('region')['revenue'].mean()",
        True,
    ),
    ("m.describe()", False),
    ("import matplotlib.pyplot as plt\nby_city.plot(kind='bar')\nplt.show()", False),
    (
        "from sklearn.linear_model import LinearRegression\n"
        "model = LinearRegression().fit(m[['units', 'price']], m['revenue'])\n"
        "model.score(m[['units', 'price']], m['revenue'])",
        False,
    ),
    ("m['discount'].sum()", False),
    ("m['revenue'].sum()", False),
]


def fresh_cells():
    """Each cell as a fresh run: the state-building cells before it, then it."""
    out = []
    state = []
    for code, builds in ANALYSIS:
        out.append("\n".join(state + [code]))
        if builds:
            state.append(code)
    return out


class Http:
    def __init__(self, host, port):
        self.conn = http.client.HTTPConnection(host, int(port), timeout=120)

    def call(self, method, path, body=None, ctype="application/json"):
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        self.conn.request(method, path, data, {"content-type": ctype})
        r = self.conn.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw else {})


def vivarium(binary):
    proc, host, port = start(binary)
    h = Http(host, port)
    files = [{"path": "sales.csv", "content": base64.b64encode(CSV.encode()).decode()}]

    def session_run(blocks, policy, upload=False):
        def once():
            status, v = h.call("POST", "/v1/sessions", {})
            assert status == 201, v
            sid = v["id"]
            if upload:
                status, v = h.call("PUT", f"/v1/sessions/{sid}/files/sales.csv",
                                   CSV.encode(), "application/octet-stream")
                assert status in (200, 201, 204), v
            for code in blocks:
                body = {"code": code}
                if policy:
                    body["policy"] = policy
                status, v = h.call("POST", f"/v1/sessions/{sid}/execute", body)
                assert status == 200 and v["status"] in ("ok", "error"), v
            once.sid = sid

        def timed_once():
            t = time.perf_counter()
            once()
            took = time.perf_counter() - t
            # Closing is after the run (not an agent's wait): not timed.
            h.call("DELETE", f"/v1/sessions/{once.sid}")
            return took

        for _ in range(WARMUP):
            timed_once()
        return [timed_once() for _ in range(RUNS if not upload else ANALYSIS_RUNS)]

    def fresh_run(cells):
        def once():
            for code in cells:
                status, v = h.call("POST", "/v1/execute", {"code": code, "files": files})
                assert status == 200 and v["status"] in ("ok", "error"), v
        return timed(once, ANALYSIS_RUNS)

    def open_only():
        def once():
            status, v = h.call("POST", "/v1/sessions", {})
            assert status == 201, v
            once.sid = v["id"]
        samples = []
        for i in range(WARMUP + RUNS):
            t = time.perf_counter()
            once()
            took = time.perf_counter() - t
            h.call("DELETE", f"/v1/sessions/{once.sid}")
            if i >= WARMUP:
                samples.append(took)
        return samples

    try:
        return {
            "trivial_default_policy": median_ms(session_run(TRIVIAL, None)),
            "trivial_policy_off": median_ms(session_run(TRIVIAL, "off")),
            "open_session": median_ms(open_only()),
            "analysis_session": median_ms(session_run([c for c, _ in ANALYSIS], None, True)),
            "analysis_fresh_per_cell": median_ms(fresh_run(fresh_cells())),
        }
    finally:
        proc.terminate()
        proc.wait(timeout=30)


REPL = r"""
import sys
ns = {}
for line in sys.stdin:
    code = line.encode().decode('unicode_escape')
    try:
        exec(compile(code, '<cell>', 'exec'), ns)
    except Exception as e:
        print(repr(e))
    sys.stdout.write('\x00\n')
    sys.stdout.flush()
"""


def native_trivial(python):
    def once():
        p = subprocess.Popen([python, "-c", REPL], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        for code in TRIVIAL:
            p.stdin.write(code.encode("unicode_escape").decode() + "\n")
            p.stdin.flush()
            while p.stdout.readline() != "\x00\n":
                pass
        p.stdin.close()
        p.wait()
    return median_ms(timed(once, RUNS))


def native_analysis(python, work):
    script = "import matplotlib\nmatplotlib.use('Agg')\n" + "\n".join(
        f"try:\n    exec({code!r})\nexcept Exception as e:\n    print(repr(e))"
        for code, _ in ANALYSIS
    ).replace("plt.show()", "plt.savefig('plot.png')")

    def once():
        subprocess.run([python, "-c", script], cwd=work, check=True,
                       stdout=subprocess.DEVNULL)
    return median_ms(timed(once, ANALYSIS_RUNS, warmup=1))


def kernel(work):
    from jupyter_client.manager import start_new_kernel

    def cold():
        km, kc = start_new_kernel(kernel_name="python3", cwd=work)
        try:
            for code in TRIVIAL:
                kc.execute_interactive(code, timeout=60, output_hook=lambda m: None)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)

    cold_samples = timed(cold, min(RUNS, 5), warmup=1)
    km, kc = start_new_kernel(kernel_name="python3", cwd=work)
    imports = "import pandas as pd\nimport matplotlib.pyplot as plt\nimport sklearn.linear_model\n%matplotlib inline"
    try:
        kc.execute_interactive(imports, timeout=120, output_hook=lambda m: None)

        def feed(blocks):
            def once():
                for code in blocks:
                    kc.execute_interactive(code, timeout=60, output_hook=lambda m: None)
            return once

        def analysis():
            images = []
            for code, _ in ANALYSIS:
                kc.execute_interactive(
                    code, timeout=60,
                    output_hook=lambda m: images.append(m) if m["msg_type"] == "display_data" else None,
                )
            assert any("image/png" in m["content"]["data"] for m in images), "no PNG"

        warm = timed(feed(TRIVIAL), RUNS)
        samples = []
        for i in range(WARMUP + ANALYSIS_RUNS):
            # A new namespace each run, its imports done (not timed), as the default template.
            kc.execute_interactive("%reset -f\n" + imports, timeout=60, output_hook=lambda m: None)
            t = time.perf_counter()
            analysis()
            if i >= WARMUP:
                samples.append(time.perf_counter() - t)
        return {
            "trivial_cold": median_ms(cold_samples),
            "trivial_warm": median_ms(warm),
            "analysis_warm": median_ms(samples),
        }
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main():
    binary, out = sys.argv[1], sys.argv[2]
    python = sys.executable
    work = tempfile.mkdtemp()
    with open(os.path.join(work, "sales.csv"), "w") as f:
        f.write(CSV)
    load = os.getloadavg()
    results = {
        "vivarium": vivarium(binary),
        "native": {"trivial": native_trivial(python), "analysis": native_analysis(python, work)},
        "kernel": kernel(work),
        "runs": RUNS,
        "analysis_runs": ANALYSIS_RUNS,
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    v, k = results["vivarium"], results["kernel"]
    results["ratios"] = {
        "analysis_session_vs_warm_kernel": round(v["analysis_session"] / k["analysis_warm"], 3),
        "analysis_fresh_vs_warm_kernel": round(v["analysis_fresh_per_cell"] / k["analysis_warm"], 3),
    }
    with open(out, "w") as f:
        json.dump(results, f, indent=2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
