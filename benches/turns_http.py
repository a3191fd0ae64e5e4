"""Kept turns over HTTP (issue 53): rollback, fork fan-out, what keeping turns costs, and
what it adds to a turn. One binary; every figure against a baseline of the same run.

    python benches/turns_http.py BINARY benches/results/turns_http.json

- rollback: a pandas session holding a 1,000-row DataFrame runs a turn that changes a row
  and a column, then `POST /v1/sessions/{id}/rollback` to the turn before it; p50 of the
  rollback (the turn's own p50 beside it). Again with 100 MB of session state (a NumPy
  array), each turn changing one slice of it.
- fan-out: `POST /v1/sessions/{id}/fork {"turn": k, "count": 100}` of the pandas session;
  its wall time, then the proportional set size of the server and its workers before, after
  the fan-out, and after each child changed one row.
- keeping 16 turns: two sessions run the same 16 turns that each rewrite a 1 MiB array,
  one keeping 16 states, one keeping 1; their workers' memory difference against the bytes
  the kept states say they hold (what the turns replaced).
- a turn with and without kept turns: `--keep-turns 1` and the default (16), one server
  each, interleaved round by round, at 1 and 2 connections.

Bounded: TURNS_ROUNDS rounds (default 4) of TURNS_COUNT requests (default 60) per measure,
the first 10 not counted."""

import http.client
import json
import os
import statistics
import sys
import threading
import time

from ab_http import delete, post, start
from density import rss_bytes
from http_load import stop

ROUNDS = int(os.environ.get("TURNS_ROUNDS", "4"))
COUNT = int(os.environ.get("TURNS_COUNT", "60"))
WARMUP = 10
PANDAS = "import pandas as pd\ndf = pd.DataFrame({'a': range(1000), 'b': [str(i) for i in range(1000)]})"
BIG = "import numpy as np\nbig = np.ones(100 << 20 >> 3)"


def ms(t0: float, t1: float) -> float:
    return (t1 - t0) * 1000


def turn(conn, sid: str, code: str) -> dict:
    status, r = post(conn, f"/v1/sessions/{sid}/execute", {"code": code})
    assert status == 200 and r["status"] == "ok", r
    return r


def rollbacks(conn, setup: str, change) -> tuple[list, list]:
    """Milliseconds of each changing turn and of each rollback to the turn before it."""
    status, s = post(conn, "/v1/sessions", {})
    assert status == 201, s
    base = turn(conn, s["id"], setup)["turn"]
    turns, backs = [], []
    for i in range(WARMUP + COUNT):
        t0 = time.perf_counter()
        turn(conn, s["id"], change(i))
        t1 = time.perf_counter()
        status, r = post(conn, f"/v1/sessions/{s['id']}/rollback", {"turn": base})
        t2 = time.perf_counter()
        assert status == 200, r
        if i >= WARMUP:
            turns.append(ms(t0, t1))
            backs.append(ms(t1, t2))
    delete(conn, f"/v1/sessions/{s['id']}")
    return turns, backs


def fan_out(server, conn) -> dict:
    status, s = post(conn, "/v1/sessions", {})
    sid = s["id"]
    k = turn(conn, sid, PANDAS)["turn"]
    turn(conn, sid, "df.loc[0, 'a'] = -1")
    time.sleep(1)
    before = rss_bytes(server.pid)
    t0 = time.perf_counter()
    status, r = post(conn, f"/v1/sessions/{sid}/fork", {"turn": k, "count": 100})
    t1 = time.perf_counter()
    assert status == 201, r
    kids = [c["id"] for c in r["sessions"]]
    time.sleep(1)
    made = rss_bytes(server.pid)
    for i, kid in enumerate(kids):
        turn(conn, kid, f"df.loc[{i}, 'a'] = -{i}")
    time.sleep(1)
    changed = rss_bytes(server.pid)
    for kid in kids:
        delete(conn, f"/v1/sessions/{kid}")
    delete(conn, f"/v1/sessions/{sid}")
    return {
        "fan_out_100_ms": ms(t0, t1),
        "rss_before_mib": before / 2**20,
        "rss_after_fan_out_mib": made / 2**20,
        "rss_after_each_changed_a_row_mib": changed / 2**20,
        "per_child_after_a_row_mib": (changed - before) / 100 / 2**20,
    }


def keeping_cost(binary: str) -> dict:
    """Workers' memory of a session keeping 16 states against one keeping 1, same turns."""
    held = {}
    kept_bytes = 0
    for keep in (1, 16):
        server, host, port = start(binary)
        try:
            conn = http.client.HTTPConnection(host, port, timeout=120)
            status, s = post(conn, "/v1/sessions", {"template": "python", "keep_turns": keep})
            assert status == 201, s
            turn(conn, s["id"], "buf = bytearray(1 << 20)")
            time.sleep(0.5)
            start_rss = rss_bytes(server.pid)
            for i in range(16):
                turn(conn, s["id"], f"buf[:] = bytes([{i + 1}]) * (1 << 20)")
            time.sleep(0.5)
            held[keep] = rss_bytes(server.pid) - start_rss
            conn.request("GET", f"/v1/sessions/{s['id']}/turns")
            listed = json.loads(conn.getresponse().read())
            if keep == 16:
                kept_bytes = sum(t["bytes"] for t in listed["turns"])
        finally:
            stop(server)
    return {
        "kept_states": 16,
        "kept_bytes_listed_mib": kept_bytes / 2**20,
        "rss_keep_16_minus_keep_1_mib": (held[16] - held[1]) / 2**20,
        "ratio_to_listed": (held[16] - held[1]) / kept_bytes if kept_bytes else None,
    }


def turn_cost(binary: str) -> dict:
    """Turn p50 at 1 and 2 connections with --keep-turns 1 and 16, interleaved."""
    out = {}
    for conns in (1, 2):
        samples = {1: [], 16: []}
        for _ in range(ROUNDS):
            for keep in (1, 16):
                server, host, port = start(binary, "--keep-turns", str(keep))
                try:
                    lock = threading.Lock()

                    def run():
                        c = http.client.HTTPConnection(host, port, timeout=60)
                        status, s = post(c, "/v1/sessions", {})
                        turn(c, s["id"], PANDAS)
                        for i in range(WARMUP + COUNT):
                            t0 = time.perf_counter()
                            turn(c, s["id"], f"df.loc[{i % 1000}, 'a'] = {i}\ntotal = int(df.a.sum())")
                            t1 = time.perf_counter()
                            if i >= WARMUP:
                                with lock:
                                    samples[keep].append(ms(t0, t1))

                    threads = [threading.Thread(target=run) for _ in range(conns)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                finally:
                    stop(server)
        one, sixteen = statistics.median(samples[1]), statistics.median(samples[16])
        out[f"c{conns}"] = {"keep_1_p50_ms": one, "keep_16_p50_ms": sixteen, "ratio": sixteen / one}
    return out


def main() -> None:
    binary, out = sys.argv[1], sys.argv[2]
    result = {}
    server, host, port = start(binary, "--max-sessions", "120")
    try:
        conn = http.client.HTTPConnection(host, port, timeout=120)
        t, b = [], []
        for _ in range(ROUNDS):
            tt, bb = rollbacks(conn, PANDAS, lambda i: f"df.loc[{i}, 'a'] = -{i}\ndf['c'] = df.a * 2")
            t += tt
            b += bb
        result["rollback_pandas"] = {
            "turn_p50_ms": statistics.median(t),
            "rollback_p50_ms": statistics.median(b),
            "rollback_p90_ms": statistics.quantiles(b, n=10)[-1],
        }
        t, b = rollbacks(conn, BIG, lambda i: f"big[{i} * 100000:({i} + 1) * 100000] = {i}")
        result["rollback_100mb"] = {
            "turn_p50_ms": statistics.median(t),
            "rollback_p50_ms": statistics.median(b),
            "rollback_p90_ms": statistics.quantiles(b, n=10)[-1],
        }
        result["fan_out"] = fan_out(server, conn)
    finally:
        stop(server)
    result["keeping_16_turns"] = keeping_cost(binary)
    result["turn_cost"] = turn_cost(binary)
    load = os.getloadavg()
    result["load_average_after"] = load
    print(json.dumps(result, indent=2))
    with open(out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
