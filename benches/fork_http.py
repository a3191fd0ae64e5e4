"""A session fork over HTTP, two builds side by side: `POST /v1/sessions/{id}/fork` of a
session holding a 1,000-row DataFrame (default template), then the fork's first turn
(`print(len(df))`), then its close, each build its own `vivarium serve` on 127.0.0.1 (one
connection, keep-alive), the builds interleaved round by round. The issue's goal is the fork
and its first answered turn together.

    python benches/fork_http.py BEFORE_BINARY AFTER_BINARY benches/results/fork_http.json

Bounded: FORK_ROUNDS rounds (default 3) of FORK_COUNT forks (default 40) per build, the
first 5 of each round not counted. FORK_DURABLE=1 forks a durable session: its image then
crosses the worker channel both ways and the fork's first own snapshot is written."""

import json
import os
import statistics
import sys
import time
import http.client

from ab_http import post, start
from http_load import stop

ROUNDS = int(os.environ.get("FORK_ROUNDS", "3"))
COUNT = int(os.environ.get("FORK_COUNT", "40"))
WARMUP = 5
DURABLE = os.environ.get("FORK_DURABLE") == "1"


def forks(binary: str) -> tuple[list, list]:
    """Milliseconds of each fork and of each fork's first turn, after the warm-up."""
    server, host, port = start(binary)
    try:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        status, s = post(conn, "/v1/sessions", {"durable": DURABLE})
        assert status == 201, s
        status, r = post(conn, f"/v1/sessions/{s['id']}/execute",
                         {"code": "import pandas as pd\ndf = pd.DataFrame({'a': range(1000)})"})
        assert status == 200 and r["status"] == "ok", r
        fork_ms, turn_ms = [], []
        for i in range(WARMUP + COUNT):
            t0 = time.perf_counter()
            status, f = post(conn, f"/v1/sessions/{s['id']}/fork", {})
            t1 = time.perf_counter()
            assert status == 201, f
            status, r = post(conn, f"/v1/sessions/{f['id']}/execute", {"code": "print(len(df))"})
            t2 = time.perf_counter()
            assert status == 200 and r["stdout"] == "1000\n", r
            conn.request("DELETE", f"/v1/sessions/{f['id']}")
            conn.getresponse().read()
            if i >= WARMUP:
                fork_ms.append((t1 - t0) * 1000)
                turn_ms.append((t2 - t1) * 1000)
        return fork_ms, turn_ms
    finally:
        stop(server)


def main() -> None:
    before, after, out = sys.argv[1], sys.argv[2], sys.argv[3]
    runs = {"before": ([], []), "after": ([], [])}
    for _ in range(ROUNDS):
        for name, binary in (("before", before), ("after", after)):
            f, t = forks(binary)
            runs[name][0].extend(f)
            runs[name][1].extend(t)
    result = {}
    for name, (f, t) in runs.items():
        both = [a + b for a, b in zip(f, t)]
        result[name] = {
            "fork_p50_ms": statistics.median(f),
            "first_turn_p50_ms": statistics.median(t),
            "fork_and_turn_p50_ms": statistics.median(both),
            "fork_and_turn_p90_ms": statistics.quantiles(both, n=10)[-1],
            "forks": len(f),
        }
    b, a = result["before"], result["after"]
    print("measure              before     after   ratio")
    for key in ("fork_p50_ms", "first_turn_p50_ms", "fork_and_turn_p50_ms", "fork_and_turn_p90_ms"):
        print(f"{key:20} {b[key]:7.2f}ms {a[key]:7.2f}ms  {a[key] / b[key]:.3f}")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
