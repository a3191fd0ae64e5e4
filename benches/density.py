"""Density (issue 18): how many sessions one server holds, what it costs, and how fast a
hibernated one comes back. Against a release `vivarium serve` on 127.0.0.1 with its defaults
(memory budget 3/4 of RAM, 64 resident sessions, hibernation after 60 s idle), on the default
template:

    python benches/density.py target/release/vivarium benches/results/density.json

1. Opens SESSIONS sessions one after another, each with pandas imported and a 1,000-row
   DataFrame (`df`), counting any 429; the server hibernates the coldest idle session each
   time it needs a resident place.
2. Reads what the server and its workers hold in RAM (their PSS summed), its gauges (resident, hibernated, bytes charged, bytes in the
   store) and the snapshot directory's size.
3. First turn of a hibernated session (`len(df)`, client-side wall time, WAKES of them,
   sessions picked at random among the hibernated), beside the same turn on a resident
   session measured in the same run (the baseline; warm-up excluded).

Bounded: SESSIONS sessions, WAKES wakes, RESIDENT_TURNS baseline turns."""

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import http.client

from http_load import stop, wait_ready
from scaling import children

SESSIONS = int(os.environ.get("DENSITY_SESSIONS", "1000"))
WAKES = int(os.environ.get("DENSITY_WAKES", "60"))
RESIDENT_TURNS = int(os.environ.get("DENSITY_RESIDENT_TURNS", "60"))

SETUP = (
    "import pandas as pd\n"
    "df = pd.DataFrame({'a': range(1000), 'b': [i * 0.5 for i in range(1000)],"
    " 'c': [f'row{i}' for i in range(1000)]})\n"
    "len(df)"
)


def rss_bytes(pid: int) -> int:
    """What the server and its worker processes hold in RAM: the sum of their proportional
    set sizes (a page the processes share, such as the template's image, counted once in
    all), from `/proc/PID/smaps_rollup`. The supervisor alone is a fraction of it: the
    sessions' memory is in the workers."""
    total = 0
    for p in [pid] + children(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except FileNotFoundError:
            pass
    return total


def request(conn, method, path, body=None):
    payload = json.dumps(body) if body is not None else None
    headers = {"content-type": "application/json"} if body is not None else {}
    conn.request(method, path, payload, headers)
    r = conn.getresponse()
    data = r.read()
    try:
        return r.status, json.loads(data) if data else {}
    except ValueError:
        return r.status, data.decode()


def metrics(conn) -> dict:
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main():
    binary, out_path = sys.argv[1], sys.argv[2]
    snaps = tempfile.mkdtemp(prefix="vivarium-density-snaps-")
    env = dict(os.environ, VIVARIUM_SNAPSHOT_DIR=snaps, VIVARIUM_AUDIT_LOG="/dev/null")
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    try:
        addr = server.stdout.readline().strip().removeprefix("vivarium: listening on http://")
        host, port = addr.rsplit(":", 1)
        wait_ready(host, port)
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        rss_idle = rss_bytes(server.pid)
        gauges0 = metrics(conn)

        ids, refused, t0 = [], 0, time.time()
        for i in range(SESSIONS):
            st, v = request(conn, "POST", "/v1/sessions", {})
            if st != 201:
                refused += 1
                continue
            sid = v["id"]
            st, v = request(conn, "POST", f"/v1/sessions/{sid}/execute", {"code": SETUP})
            if st != 200 or v.get("result") != "1000":
                raise RuntimeError(f"session {i}: {st} {v}")
            ids.append(sid)
            if (i + 1) % 100 == 0:
                print(f"density: {i + 1} sessions open, {time.time() - t0:.0f} s", flush=True)
        open_secs = time.time() - t0
        rss_all = rss_bytes(server.pid)
        g = metrics(conn)
        store_bytes = du(snaps)

        # Baseline: the same turn on a resident session (the newest is resident).
        resident = ids[-1]
        for _ in range(5):
            request(conn, "POST", f"/v1/sessions/{resident}/execute", {"code": "len(df)"})
        base = []
        for _ in range(RESIDENT_TURNS):
            s = time.perf_counter()
            st, v = request(conn, "POST", f"/v1/sessions/{resident}/execute", {"code": "len(df)"})
            base.append((time.perf_counter() - s) * 1e3)
            assert st == 200 and v["result"] == "1000", v

        # First turns of hibernated sessions.
        random.seed(18)
        cold = [sid for sid in random.sample(ids[:-80], min(len(ids) - 80, WAKES * 3))
                if request(conn, "GET", f"/v1/sessions/{sid}")[1].get("resident") is False]
        wakes = []
        for sid in cold[:WAKES]:
            s = time.perf_counter()
            st, v = request(conn, "POST", f"/v1/sessions/{sid}/execute", {"code": "len(df)"})
            wakes.append((time.perf_counter() - s) * 1e3)
            assert st == 200 and v["result"] == "1000", v
        g2 = metrics(conn)
        load = os.getloadavg()
        result = {
            "sessions_asked": SESSIONS,
            "sessions_open": len(ids),
            "refused_429": refused,
            "open_all_secs": round(open_secs, 1),
            "per_session_open_ms": round(open_secs * 1e3 / max(1, len(ids)), 1),
            "rss_idle_bytes": rss_idle,
            "rss_with_all_bytes": rss_all,
            "resident_sessions": g["vivarium_live_sessions"],
            "hibernated_sessions": g["vivarium_hibernated_sessions"],
            "hibernated_bytes": g["vivarium_hibernated_bytes"],
            "charged_bytes": g["vivarium_memory_charged_bytes"],
            "budget_bytes": g["vivarium_memory_budget_bytes"],
            "snapshot_dir_bytes": store_bytes,
            "old_rule_sessions": int(gauges0["vivarium_memory_budget_bytes"] // ((512 + 100) << 20)),
            "wake_turn_ms": {"p50": round(statistics.median(wakes), 2),
                             "p10": round(pct(wakes, 10), 2), "p90": round(pct(wakes, 90), 2),
                             "n": len(wakes)},
            "resident_turn_ms": {"p50": round(statistics.median(base), 2),
                                 "p10": round(pct(base, 10), 2), "p90": round(pct(base, 90), 2),
                                 "n": len(base)},
            "wake_seconds_server_mean": round(
                g2["vivarium_session_wake_seconds_sum"] / max(1, g2["vivarium_session_wake_seconds_count"]), 4),
            "loadavg_after": [round(x, 2) for x in load],
        }
        print(json.dumps(result, indent=2))
        with open(out_path, "w") as f:
            json.dump(result, f, indent=2)
    finally:
        stop(server)
        shutil.rmtree(snaps, ignore_errors=True)


if __name__ == "__main__":
    main()
