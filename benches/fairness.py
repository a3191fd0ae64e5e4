"""Fairness between tenants: another tenant's hello world while one tenant keeps four times
the run slots of CPU-bound runs queued, against the same hello world on the idle server,
in one run of a release `vivarium serve` on 127.0.0.1 (2 keys, default settings otherwise).

    python benches/fairness.py target/release/vivarium benches/results/fairness.json

Bounded: BACKLOG_SECONDS of backlog (each run RUN_SECONDS long), SAMPLES hello worlds each
phase. Prints and writes p50 and p99 of both phases, their ratio, and the 429s seen."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import http.client

sys.path.insert(0, os.path.dirname(__file__))
from http_load import stop, wait_ready  # noqa: E402

RUN_SECONDS = float(os.environ.get("FAIR_RUN_SECONDS", "5"))
SAMPLES = int(os.environ.get("FAIR_SAMPLES", "60"))
ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef"


def post(port: int, key: str, body: dict) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request(
        "POST",
        "/v1/execute",
        json.dumps(body),
        {"content-type": "application/json", "authorization": f"Bearer {key}"},
    )
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, json.loads(data) if data else {}


HELLO = {"code": "print('hello')", "template": "scientific"}


def hello_worlds(port: int, n: int) -> tuple[list[float], int]:
    """n hello worlds one after another as bob: latencies in ms, and the count of non-200s."""
    lat, bad = [], 0
    for _ in range(n):
        t = time.perf_counter()
        status, _ = post(port, BOB, HELLO)
        lat.append((time.perf_counter() - t) * 1e3)
        bad += status != 200
        time.sleep(0.02)
    return lat, bad


def pct(v: list[float], p: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main() -> None:
    exe, out = sys.argv[1], sys.argv[2]
    cores = os.cpu_count() or 2
    keys = tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False)
    keys.write(f"alice:{ALICE}\nbob:{BOB}\n")
    keys.close()
    scratch = tempfile.mkdtemp(prefix="vivarium-fair-")
    proc = subprocess.Popen(
        [exe, "serve", "--listen", "127.0.0.1:0", "--api-keys-file", keys.name],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "VIVARIUM_SCRATCH": scratch},
        text=True,
    )
    try:
        port = int(proc.stdout.readline().strip().rsplit(":", 1)[1])
        wait_ready("127.0.0.1", port)
        for _ in range(20):  # warm-up
            post(port, BOB, HELLO)
        idle, idle_bad = hello_worlds(port, SAMPLES)

        # Alice: 4x the slots of RUN_SECONDS CPU-bound runs, kept topped up while bob runs.
        busy = {
            "code": f"import time\nt = time.time()\nwhile time.time() - t < {RUN_SECONDS}: pass",
            "template": "python",
            "limits": {"timeout_ms": int(RUN_SECONDS * 4000)},
        }
        stopping = threading.Event()
        alice_status: list[int] = []

        def alice() -> None:
            while not stopping.is_set():
                alice_status.append(post(port, ALICE, busy)[0])

        threads = [threading.Thread(target=alice) for _ in range(4 * cores)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        loaded, loaded_bad = hello_worlds(port, SAMPLES)
        stopping.set()
        for t in threads:
            t.join()
    finally:
        stop(proc)
        os.unlink(keys.name)
    res = {
        "cores": cores,
        "run_seconds": RUN_SECONDS,
        "samples": SAMPLES,
        "idle_p50_ms": statistics.median(idle),
        "idle_p99_ms": pct(idle, 99),
        "loaded_p50_ms": statistics.median(loaded),
        "loaded_p99_ms": pct(loaded, 99),
        "p50_ratio": statistics.median(loaded) / statistics.median(idle),
        "bob_non_200": idle_bad + loaded_bad,
        "alice_runs": len(alice_status),
        "alice_non_200": sum(s != 200 for s in alice_status),
    }
    print(json.dumps(res, indent=2))
    with open(out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
