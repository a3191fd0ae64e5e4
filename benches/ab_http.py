"""Two builds side by side over HTTP: a hello world (`POST /v1/execute`, default template,
`policy: off`; `hello_checked`: with the default check, in its own set-up turn), a session
turn (`POST /v1/sessions/{id}/execute`, checked as by default; `turn_off`: the same turn with
`policy: off`, so the check's own cost is the difference), opening a session (`open`:
`POST /v1/sessions`, default template; its close is not timed) and a trivial agent run
(`agent`: open, ten small cells checked as by default, close, timed whole: the Monty
project's "cold start plus ten feeds") at concurrency 1 and 2, each build
its own release-like `vivarium serve` on 127.0.0.1, the builds interleaved round by round so
that drift in the machine's load falls on both alike. Every request is timed by the client
(keep-alive, one connection per client thread); warm-up requests are excluded. Beside the
latencies, the minor page faults per request of the server and its worker processes (from
`/proc/PID/stat`, counted after every client's warm-up).

    python benches/ab_http.py BEFORE_BINARY AFTER_BINARY benches/results/ab_http.json

Bounded: ROUNDS rounds of REQUESTS requests per setting and build (env AB_ROUNDS,
AB_REQUESTS; an agent run counts as one); AB_KINDS picks settings (comma-separated)."""

import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

from http_load import stop, wait_ready
from scaling import children

ROUNDS = int(os.environ.get("AB_ROUNDS", "3"))
REQUESTS = int(os.environ.get("AB_REQUESTS", "200"))
WARMUP = 20


def post(conn: http.client.HTTPConnection, path: str, body: dict) -> tuple[int, dict]:
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def start(binary: str, *flags: str) -> tuple[subprocess.Popen, str, int]:
    """`binary serve` on a free port of 127.0.0.1 with `flags`, once it is ready."""
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--audit-log", "/dev/null", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=dict(os.environ, VIVARIUM_LOG="warn"),
    )
    addr = server.stdout.readline().split()[-1].replace("http://", "")
    host, port = addr.rsplit(":", 1)
    wait_ready(host, int(port))
    return server, host, int(port)


def minor_faults(pid: int) -> int:
    """Minor page faults so far of `pid` and its children (the worker processes)."""
    total = 0
    for p in [pid] + children(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                total += int(f.read().rsplit(")", 1)[1].split()[7])
        except FileNotFoundError:
            pass
    return total


# The ten cells of the trivial agent run: small blocks as an assistant sends them.
AGENT_CELLS = [
    "x = 1", "y = x + 1", "print(x, y)", "items = [i * i for i in range(10)]", "sum(items)",
    "def f(n):\n    return n * 2", "f(21)", "d = {'a': 1, 'b': 2}", "sorted(d)", "len(items)",
]


def session_run(conn: http.client.HTTPConnection, cells: list[str]) -> bool:
    """Opens a session, runs `cells` in it, closes it; whether every step succeeded."""
    status, s = post(conn, "/v1/sessions", {})
    ok = status == 201
    if ok:
        for code in cells:
            status, r = post(conn, f"/v1/sessions/{s['id']}/execute", {"code": code})
            ok = ok and status == 200 and r.get("status") == "ok"
        ok = delete(conn, f"/v1/sessions/{s['id']}") and ok
    return ok


def delete(conn: http.client.HTTPConnection, path: str) -> bool:
    """Whether `DELETE path` answered 204 (its body read, so the connection can go on)."""
    conn.request("DELETE", path)
    r = conn.getresponse()
    r.read()
    return r.status == 204


def client(host: str, port: int, kind: str, count: int, out: list, errors: list,
           warm: threading.Barrier) -> None:
    conn = http.client.HTTPConnection(host, port, timeout=60)
    if kind in ("open", "agent"):
        for i in range(WARMUP + count):
            if i == WARMUP:
                warm.wait()
            t = time.perf_counter()
            if kind == "agent":
                ok = session_run(conn, AGENT_CELLS)
                dt = (time.perf_counter() - t) * 1000
            else:
                status, s = post(conn, "/v1/sessions", {})
                dt = (time.perf_counter() - t) * 1000
                ok = status == 201
                ok = ok and delete(conn, f"/v1/sessions/{s['id']}")
            if not ok:
                errors.append(kind)
            elif i >= WARMUP:
                out.append(dt)
        return
    if kind in ("turn", "turn_off"):
        status, s = post(conn, "/v1/sessions", {})
        assert status == 201, s
        path, body = f"/v1/sessions/{s['id']}/execute", {"code": "x = 1\nprint(x)"}
        if kind == "turn_off":
            body["policy"] = "off"
    else:
        path, body = "/v1/execute", {"code": "print('hello world')", "policy": "off"}
        if kind == "hello_checked":
            del body["policy"]
    for i in range(WARMUP + count):
        if i == WARMUP:
            warm.wait()
        t = time.perf_counter()
        status, r = post(conn, path, body)
        dt = (time.perf_counter() - t) * 1000
        if status != 200 or r.get("status") != "ok":
            errors.append(status)
        elif i >= WARMUP:
            out.append(dt)
    if kind in ("turn", "turn_off"):
        conn.request("DELETE", path.rsplit("/", 1)[0])
        conn.getresponse().read()


def guarded(*args) -> None:
    """`client`, whose failure breaks the warm-up barrier: the run stops loudly, not hangs."""
    try:
        client(*args)
    except Exception:
        args[-1].abort()
        raise


def measure(pid: int, host: str, port: int, kind: str, conc: int) -> tuple[list, list, float]:
    """The latencies, the errors and the minor faults per request after the warm-up."""
    out, errors = [], []
    warm = threading.Barrier(conc + 1)
    threads = [threading.Thread(target=guarded,
                                args=(host, port, kind, REQUESTS // conc, out, errors, warm))
               for _ in range(conc)]
    for t in threads:
        t.start()
    warm.wait()
    faults = minor_faults(pid)
    for t in threads:
        t.join()
    faults = minor_faults(pid) - faults
    return out, errors, faults / max(1, (REQUESTS // conc) * conc)


def main() -> None:
    builds = {"before": sys.argv[1], "after": sys.argv[2]}
    out_path = sys.argv[3]
    kinds = os.environ.get("AB_KINDS", "hello,hello_checked,turn,turn_off,open,agent")
    settings = [(k, c) for k in kinds.split(",") for c in (1, 2)]
    samples = {b: {f"{k}_c{c}": [] for k, c in settings} for b in builds}
    faults = {b: {f"{k}_c{c}": [] for k, c in settings} for b in builds}
    errors = {b: 0 for b in builds}
    loads = []
    for rnd in range(ROUNDS):
        order = list(builds) if rnd % 2 == 0 else list(reversed(builds))
        for b in order:
            server, host, port = start(builds[b])
            try:
                for k, c in settings:
                    got, errs, per_request = measure(server.pid, host, port, k, c)
                    samples[b][f"{k}_c{c}"] += got
                    faults[b][f"{k}_c{c}"].append(per_request)
                    errors[b] += len(errs)
            finally:
                stop(server)
            loads.append(os.getloadavg()[0])
    result = {"cores": os.cpu_count(), "rounds": ROUNDS, "requests": REQUESTS,
              "load_avg_1m": loads, "errors": errors, "settings": {}}
    print(f"{'setting':<14} {'before p50':>11} {'after p50':>10} {'ratio':>6}   "
          "(p90 before/after; minor faults a request before/after)")
    for k, c in settings:
        name = f"{k}_c{c}"
        b, a = samples["before"][name], samples["after"][name]
        row = {
            "before_p50_ms": statistics.median(b), "after_p50_ms": statistics.median(a),
            "before_p90_ms": statistics.quantiles(b, n=10)[-1],
            "after_p90_ms": statistics.quantiles(a, n=10)[-1],
            "n": [len(b), len(a)],
            "before_faults_per_request": statistics.median(faults["before"][name]),
            "after_faults_per_request": statistics.median(faults["after"][name]),
        }
        row["ratio_p50"] = row["after_p50_ms"] / row["before_p50_ms"]
        result["settings"][name] = row
        print(f"{name:<14} {row['before_p50_ms']:>9.2f}ms {row['after_p50_ms']:>8.2f}ms "
              f"{row['ratio_p50']:>6.3f}   ({row['before_p90_ms']:.2f}/{row['after_p90_ms']:.2f} ms; "
              f"{row['before_faults_per_request']:.0f}/{row['after_faults_per_request']:.0f})")
    print(f"errors {errors}; 1-minute load average after each server: {[round(x, 2) for x in loads]}")
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
