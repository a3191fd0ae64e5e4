"""What a user template costs, on one build (`vivarium serve` on 127.0.0.1, its own template
folder, the fixture package index `tests/fixtures/package_index.py` on 127.0.0.1):

- build: a template adding two pure-Python packages (`vivtest-greet`, which pulls
  `vivtest-base`, and `vivtest-extra`), a 1 MB file and a set-up import, timed from its
  `POST /v1/templates` until `GET /v1/templates/{name}` says `ready` (goal: at most 10 s);
  then the same inputs again (the same template, answered at once: goal milliseconds).
- fresh: a hello world (`POST /v1/execute`, `policy: off`) on that template and on
  `scientific`, the two interleaved round by round so that drift in the machine's load falls
  on both alike, at concurrency 1 and 2; timed by the client, warm-up excluded. Goal: the
  template at most 1.5x `scientific`.
- imports: a run that imports the two packages, on the template and on `scientific` with the
  same `packages` (already installed and cached: what is left is the import itself), timed
  inside the guest. Goal: the template's import costs nothing.

    python benches/templates.py BINARY benches/results/templates.json

Bounded: ROUNDS rounds of REQUESTS requests per setting (env TPL_ROUNDS, TPL_REQUESTS)."""

import base64
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from ab_http import start
from http_load import stop

ROUNDS = int(os.environ.get("TPL_ROUNDS", "5"))
REQUESTS = int(os.environ.get("TPL_REQUESTS", "300"))
WARMUP = 20
HERE = os.path.dirname(os.path.abspath(__file__))

IMPORT_CODE = """
import time
t = time.perf_counter()
import vivtest_greet, vivtest_extra
print((time.perf_counter() - t) * 1000)
"""


def post(conn: http.client.HTTPConnection, path: str, body: dict) -> tuple[int, dict]:
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def get(conn: http.client.HTTPConnection, path: str) -> tuple[int, dict]:
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def template_body(name: str) -> dict:
    data = (b"0123456789," * 100_000)[:1_000_000]
    return {
        "name": name,
        "packages": ["vivtest-greet", "vivtest-extra"],
        "files": [{"path": "data/table.csv", "content": base64.b64encode(data).decode()}],
        "setup": "import vivtest_greet, vivtest_extra\nGREETING = vivtest_greet.hello()",
    }


def build(host: str, port: int, body: dict) -> tuple[float, int, dict]:
    """Ms from the POST until the template is ready, the POST's status, the record."""
    conn = http.client.HTTPConnection(host, port, timeout=120)
    t = time.perf_counter()
    status, v = post(conn, "/v1/templates", body)
    first = status
    while v.get("status") == "building":
        time.sleep(0.01)
        _, v = get(conn, f"/v1/templates/{body['name']}")
    ms = (time.perf_counter() - t) * 1000
    assert v.get("status") == "ready", v
    return ms, first, v


def client(host, port, template, count, out, errors, warm) -> None:
    conn = http.client.HTTPConnection(host, port, timeout=60)
    body = {"code": "print('hello world')", "policy": "off", "template": template}
    for i in range(WARMUP + count):
        if i == WARMUP:
            warm.wait()
        t = time.perf_counter()
        status, r = post(conn, "/v1/execute", body)
        dt = (time.perf_counter() - t) * 1000
        if status != 200 or r.get("status") != "ok":
            errors.append((status, r))
            warm.abort()
            return
        if i >= WARMUP:
            out.append(dt)


def burst(host, port, template, conc) -> list[float]:
    out, errors = [], []
    warm = threading.Barrier(conc)
    threads = [threading.Thread(target=client,
                                args=(host, port, template, REQUESTS // conc, out, errors, warm))
               for _ in range(conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    return out


def import_ms(conn, body: dict, n: int = 15) -> float:
    got = []
    for _ in range(n):
        status, r = post(conn, "/v1/execute", body)
        assert status == 200 and r.get("status") == "ok", r
        got.append(float(r["stdout"]))
    return statistics.median(got[3:])


def main() -> None:
    binary, out_path = sys.argv[1], sys.argv[2]
    folder = tempfile.mkdtemp(prefix="vivarium-bench-templates-")
    index_dir = os.path.join(folder, "index")
    os.makedirs(index_dir)
    index = subprocess.Popen([sys.executable, os.path.join(HERE, "..", "tests", "fixtures",
                                                           "package_index.py"), index_dir],
                             stdout=subprocess.PIPE, text=True)
    index_url = f"http://127.0.0.1:{index.stdout.readline().strip()}/simple"
    server, host, port = start(binary, "--template-dir", os.path.join(folder, "templates"),
                               "--package-index", index_url,
                               "--package-cache-dir", os.path.join(folder, "packages"))
    try:
        load = os.getloadavg()
        build_ms, status, record = build(host, port, template_body("bench"))
        assert status == 202, status
        again_ms, again_status, _ = build(host, port, template_body("bench"))
        assert again_status == 200, again_status
        fresh = {}
        for conc in (1, 2):
            samples = {"scientific": [], "bench": []}
            rounds = {"scientific": [], "bench": []}
            for _ in range(ROUNDS):
                for template in samples:
                    got = burst(host, port, template, conc)
                    samples[template] += got
                    rounds[template].append(statistics.median(got))
            med = {k: statistics.median(v) for k, v in samples.items()}
            fresh[f"c{conc}"] = {
                "median_ms": med,
                "round_medians_ms": rounds,
                "ratio": med["bench"] / med["scientific"],
            }
        conn = http.client.HTTPConnection(host, port, timeout=60)
        imports = {
            "template": import_ms(conn, {"code": IMPORT_CODE, "policy": "off",
                                         "template": "bench"}),
            "scientific_with_packages": import_ms(conn, {
                "code": IMPORT_CODE, "policy": "off",
                "packages": ["vivtest-greet", "vivtest-extra"]}),
        }
        result = {
            "rounds": ROUNDS, "requests": REQUESTS,
            "load_before": load, "load_after": os.getloadavg(),
            "build_ms": build_ms, "identical_again_ms": again_ms,
            "template_bytes": record["bytes"], "build_ms_server": record["build_ms"],
            "fresh": fresh, "import_ms": imports,
        }
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"build {build_ms:.0f} ms (server {record['build_ms']} ms, {record['bytes']} bytes);"
              f" identical again {again_ms:.1f} ms")
        for conc, m in fresh.items():
            print(conc, {k: round(v, 3) for k, v in m["median_ms"].items()},
                  "ratio", round(m["ratio"], 3))
        print("import ms", {k: round(v, 3) for k, v in imports.items()})
    finally:
        stop(server)
        index.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
