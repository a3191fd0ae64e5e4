"""Masking bounded (issue 47): the largest response a run may receive, masked for 32 secrets of
8 KiB, against the same request without secrets; and another caller's `GET /healthz` while
those requests run, against the same server idle. Every figure beside its baseline, in one
run, against a release `vivarium serve` on 127.0.0.1 and the loopback upstream
(`tests/fixtures/upstream.py`).

The worst case for a search: the 32 values are alike but for their last 8 bytes, and the body
is their common prefix's byte (`/huge?fill=k`), so a window-by-window search would compare
~8 KiB at every byte for every value; one automaton pass reads each byte once.

- `fetch_ms`: one `urllib.request.urlopen(url).read()` of the body, timed inside the program
  (`time.perf_counter`), as turns of two sessions, one with the secrets and one without,
  rounds alternating; goal: with <= 2x without (medians);
- `healthz_p99_ms`: a second client asks for `/healthz` every 10 ms while the secret-laden
  fetches run, alone before them (idle), and while the same fetches without secrets run
  (what fetching 16 MiB costs a 2-core machine by itself); goal: during <= 2x idle.

    python benches/egress_masking.py target/release/vivarium benches/results/egress_masking.json

Bounded: ROUNDS (env MASK_ROUNDS, default 9) rounds of each; a few minutes."""

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from http_load import stop, wait_ready

ROUNDS = int(os.environ.get("MASK_ROUNDS", "9"))
INTERVAL = 0.01
LIMIT = 16 << 20  # --egress-response-bytes, the default
# The response's headers count against the limit too: room left for them.
BODY = LIMIT - 4096
PREFIX = "k" * ((8 << 10) - 8)
SECRETS = {f"S{i}": {"value": f"{PREFIX}{i:08d}", "hosts": ["127.0.0.1"]} for i in range(32)}


def start(binary: str) -> tuple[subprocess.Popen, str, int]:
    args = [binary, "serve", "--listen", "127.0.0.1:0", "--audit-log", "/dev/null",
            "--egress-allow", "127.0.0.1", "--egress-allow-private", "127.0.0.1",
            "--egress-response-bytes", str(LIMIT)]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    addr = server.stdout.readline().split("http://", 1)[1].split()[0]
    host, port = addr.rsplit(":", 1)
    wait_ready(host, int(port))
    return server, host, int(port)


def post(conn, path, body):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def session(conn, secrets: bool) -> str:
    """A session, with the secrets or without: the secrets' set-up (the leakage scan's and the
    host scrub's automata over 256 KiB of values) is paid once, at its start, not in the
    turns measured."""
    body = {"template": "python"}
    if secrets:
        body["secrets"] = SECRETS
    st, v = post(conn, "/v1/sessions", body)
    assert st == 201, v
    return v["id"]


def fetch(conn, url: str, sid: str) -> float:
    code = ("import time, urllib.request\n"
            "t = time.perf_counter()\n"
            f"b = urllib.request.urlopen({url!r}, timeout=60).read()\n"
            "print(time.perf_counter() - t, len(b))\n"
            "del b\n")
    st, v = post(conn, f"/v1/sessions/{sid}/execute", {"code": code, "limits": {"timeout_ms": 120000}})
    assert st == 200 and v["status"] == "ok", v
    took, n = v["stdout"].split()
    assert int(n) == BODY, v
    return float(took)


class Poller(threading.Thread):
    """GET /healthz every INTERVAL seconds, each answer's time kept, until stopped."""

    def __init__(self, host, port):
        super().__init__(daemon=True)
        self.host, self.port, self.times, self.done = host, port, [], threading.Event()

    def run(self):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        while not self.done.is_set():
            t = time.perf_counter()
            conn.request("GET", "/healthz")
            r = conn.getresponse()
            r.read()
            assert r.status == 200
            self.times.append(time.perf_counter() - t)
            time.sleep(INTERVAL)


def p99(xs):
    return round(statistics.quantiles(xs, n=100)[-1] * 1e3, 3)


def main() -> None:
    binary, out = sys.argv[1], sys.argv[2]
    updir = tempfile.mkdtemp(prefix="egress-masking-bench-")
    here = os.path.dirname(os.path.abspath(__file__))
    up = subprocess.Popen(
        [sys.executable, os.path.join(here, "..", "tests", "fixtures", "upstream.py"), updir],
        stdout=subprocess.PIPE, text=True)
    ports = json.loads(up.stdout.readline())
    url = f"http://127.0.0.1:{ports['http']}/huge?bytes={BODY}&fill=k"
    result = {"rounds": ROUNDS, "body_bytes": BODY, "secrets": 32, "secret_bytes": 8 << 10,
              "load_average_before": os.getloadavg()}
    try:
        server, host, port = start(binary)
        try:
            conn = http.client.HTTPConnection(host, port, timeout=300)
            # Idle: the poller alone, as long as a round of fetches takes.
            with_secrets, without = session(conn, True), session(conn, False)
            fetch(conn, url, with_secrets)  # warm-up (the masker's automaton, the connection)
            fetch(conn, url, without)
            idle = Poller(host, port)
            idle.start()
            time.sleep(5)
            idle.done.set()
            idle.join()
            # Alternating, nothing else asking: the cost of masking.
            plain, masked = [], []
            for i in range(ROUNDS):
                pair = [(masked, with_secrets), (plain, without)]
                for into, secrets in (pair if i % 2 else pair[::-1]):
                    into.append(fetch(conn, url, secrets))
            # Then the poller while fetches of one kind run back to back.
            during_plain = Poller(host, port)
            during_plain.start()
            plain_only = [fetch(conn, url, without) for _ in range(ROUNDS)]
            during_plain.done.set()
            during_plain.join()
            during = Poller(host, port)
            during.start()
            masked_only = [fetch(conn, url, with_secrets) for _ in range(ROUNDS)]
            during.done.set()
            during.join()
        finally:
            stop(server)
    finally:
        up.kill()
        up.wait()
    med = lambda xs: round(statistics.median(xs) * 1e3, 3)
    result.update({
        "fetch_ms_median": {"with_secrets": med(masked), "without": med(plain),
                            "ratio": round(statistics.median(masked) / statistics.median(plain), 3),
                            "while_polled": {"with_secrets": med(masked_only),
                                             "without": med(plain_only)}},
        "healthz_p99_ms": {"idle": p99(idle.times), "during_masked_fetches": p99(during.times),
                           "during_plain_fetches": p99(during_plain.times),
                           "ratio_to_idle": round(p99(during.times) / p99(idle.times), 3),
                           "ratio_to_plain": round(p99(during.times) / p99(during_plain.times), 3),
                           "samples": {"idle": len(idle.times), "during": len(during.times),
                                       "during_plain": len(during_plain.times)}},
        "healthz_p50_ms": {"idle": med(idle.times), "during_masked_fetches": med(during.times),
                           "during_plain_fetches": med(during_plain.times)},
        "load_average_after": os.getloadavg(),
    })
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
