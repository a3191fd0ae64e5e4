"""Packages on demand (issue 15): what a cached package set adds to a sandbox, how twenty
first requests for one set share a build, and the first request for plotly. Against a
release `vivarium serve` on 127.0.0.1 and, for the first two, the test suite's own package
index (`tests/fixtures/package_index.py`) on 127.0.0.1:

    python benches/packages.py target/release/vivarium benches/results/packages.json

1. Cached set: the same snippet (`print(1)`, template `python`, check off) with
   `"packages": ["vivtest-greet"]` (two wheels, resolved and built before timing) and
   without, interleaved, ROUNDS times each after a warm-up; client-side wall time, p50.
   The baseline is the same request without packages, in the same run.
2. Twenty concurrent first requests for a set not yet built (`vivtest-extra`): all served?
   How many times was the wheel fetched from the index (pip's resolver fetches it once for
   its report, the host once to unpack; twenty builds would be forty)?
3. First request for plotly from the public index (skipped when pip's index does not
   answer), with a fresh cache: resolution, download, unpacking and a `fig.show()`, wall
   time; then the same request again, cached.

Bounded: ROUNDS requests a side, 20 concurrent, 2 plotly requests."""

import concurrent.futures
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from http_load import wait_ready

ROUNDS = int(os.environ.get("PACKAGES_ROUNDS", "300"))
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "package_index.py")


def post(base, path, body):
    host, port = base.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=600)
    t = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    ms = (time.perf_counter() - t) * 1000
    conn.close()
    return r.status, json.loads(data), ms


def start_server(binary, scratch, cache, index=None):
    args = [binary, "serve", "--listen", "127.0.0.1:0", "--package-cache-dir", cache]
    if index:
        args += ["--package-index", index]
    env = dict(os.environ, VIVARIUM_SCRATCH=scratch, VIVARIUM_AUDIT_LOG=os.devnull)
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    base = p.stdout.readline().strip().removeprefix("vivarium: listening on ")
    host, port = base.split("//")[1].split(":")
    wait_ready(host, port, within=300)
    return p, base


def run(body, base):
    st, v, ms = post(base, "/v1/execute", body)
    assert st == 200 and v["status"] == "ok", (st, v)
    return ms


def main():
    binary, out = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix="vivarium-bench-packages-")
    results = {"rounds": ROUNDS, "loadavg_before": os.getloadavg()[0]}
    index_dir = os.path.join(work, "index")
    os.makedirs(index_dir)
    index = subprocess.Popen([sys.executable, FIXTURE, index_dir], stdout=subprocess.PIPE, text=True)
    index_url = f"http://127.0.0.1:{index.stdout.readline().strip()}/simple"
    server, base = start_server(binary, os.path.join(work, "scratch"), os.path.join(work, "cache"), index_url)
    try:
        plain = {"code": "print(1)", "template": "python", "policy": "off"}
        with_pkgs = dict(plain, packages=["vivtest-greet"])
        first_ms = run(with_pkgs, base)
        for _ in range(20):
            run(plain, base)
            run(with_pkgs, base)
        a, b = [], []
        for _ in range(ROUNDS):
            a.append(run(plain, base))
            b.append(run(with_pkgs, base))
        results["cached_set"] = {
            "first_request_ms": round(first_ms, 1),
            "without_packages_p50_ms": round(statistics.median(a), 3),
            "with_cached_packages_p50_ms": round(statistics.median(b), 3),
            "added_p50_ms": round(statistics.median(b) - statistics.median(a), 3),
        }
        # Twenty concurrent first requests for one set.
        body = {"code": "import vivtest_extra; print(vivtest_extra.VALUE)", "template": "python",
                "policy": "off", "packages": ["vivtest-extra"]}
        t = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(lambda _: post(base, "/v1/execute", body), range(20)))
        served = sum(1 for st, v, _ in answers if st == 200 and v["stdout"] == "42\n")
        with open(os.path.join(index_dir, "requests.log")) as f:
            fetched = sum(1 for l in f if l.strip() == "/files/vivtest_extra-2.0-py3-none-any.whl")
        results["twenty_first_requests"] = {
            "served": served,
            "wheel_fetches": fetched,
            "all_done_ms": round((time.perf_counter() - t) * 1000, 1),
        }
    finally:
        server.terminate()
        server.wait()
        index.terminate()
    # plotly from the public index.
    reachable = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "plotly"],
                               capture_output=True, timeout=60).returncode == 0
    if reachable:
        server, base = start_server(binary, os.path.join(work, "scratch2"), os.path.join(work, "cache2"))
        try:
            body = {"code": "import plotly.express as px\npx.line(x=[1, 2, 3], y=[1, 4, 9]).show()",
                    "policy": "off", "packages": ["plotly"]}
            st, v, first = post(base, "/v1/execute", body)
            assert st == 200 and v["outputs"][0]["mime"] == "text/html", v
            _, _, again = post(base, "/v1/execute", body)
            results["plotly"] = {"first_request_s": round(first / 1000, 2),
                                 "cached_request_s": round(again / 1000, 2)}
        finally:
            server.terminate()
            server.wait()
    else:
        results["plotly"] = "skipped: the public index is unreachable"
    results["loadavg_after"] = os.getloadavg()[0]
    shutil.rmtree(work, ignore_errors=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
