"""Network by exception's goals table (issue 29), against a release `vivarium serve` on
127.0.0.1 whose egress allows the loopback upstream (`tests/fixtures/upstream.py`, the same
server for both sides), every figure beside its baseline measured in the same run:

- one `urllib.request.urlopen(url).read()` of a small response (`/data.csv`, 39 bytes),
  timed inside the program with `time.perf_counter`, in a session turn (the request crosses
  the door, the worker seam and the supervisor's client); the baseline is the same snippet
  run by the machine's own CPython, natively, against the same upstream;
- 100 sequential requests in one program, timed the same way on both sides: what the host
  adds beyond the upstream's own time is the difference of the two totals;
- a hello world `POST /v1/execute` with and without egress configured on the server (a run
  that makes no request should pay nothing for the feature).

Medians of ROUNDS rounds (each round N requests), the first round excluded as warm-up.

    python benches/egress.py target/release/vivarium benches/results/egress.json

Bounded: ROUNDS (env EGRESS_ROUNDS, default 7) rounds; about a minute."""

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from http_load import stop, wait_ready

ROUNDS = int(os.environ.get("EGRESS_ROUNDS", "7"))
N = 100
HELLO = 200

SNIPPET = (
    "import time, urllib.request\n"
    "def timed(url, n):\n"
    "    each = []\n"
    "    for _ in range(n):\n"
    "        t = time.perf_counter()\n"
    "        urllib.request.urlopen(url).read()\n"
    "        each.append(time.perf_counter() - t)\n"
    "    return each\n"
)


def start(binary: str, egress: bool) -> tuple[subprocess.Popen, str, int]:
    args = [binary, "serve", "--listen", "127.0.0.1:0", "--audit-log", "/dev/null"]
    if egress:
        args += ["--egress-allow", "127.0.0.1", "--egress-allow-private", "127.0.0.1",
                 "--egress-max-requests", "1000"]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    addr = line.split("http://", 1)[1].split()[0]
    host, port = addr.rsplit(":", 1)
    wait_ready(host, int(port))
    return server, host, int(port)


def post(conn, path, body):
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = conn.getresponse()
    return r.status, json.loads(r.read() or b"{}")


def ms(xs):
    return round(statistics.median(xs) * 1e3, 3)


def main() -> None:
    binary, out = sys.argv[1], sys.argv[2]
    updir = tempfile.mkdtemp(prefix="egress-bench-")
    here = os.path.dirname(os.path.abspath(__file__))
    up = subprocess.Popen(
        [sys.executable, os.path.join(here, "..", "tests", "fixtures", "upstream.py"), updir],
        stdout=subprocess.PIPE, text=True)
    ports = json.loads(up.stdout.readline())
    url = f"http://127.0.0.1:{ports['http']}/data.csv"
    result = {"rounds": ROUNDS, "requests_per_round": N, "url": url}
    try:
        # Native: the machine's CPython, the same snippet, the same upstream.
        native = subprocess.run(
            [sys.executable, "-c", SNIPPET + (
                "import json\n"
                f"rounds = [timed({url!r}, {N}) for _ in range({ROUNDS} + 1)][1:]\n"
                "print(json.dumps(rounds))\n")],
            capture_output=True, text=True, check=True)
        native_rounds = json.loads(native.stdout)
        server, host, port = start(binary, True)
        try:
            conn = http.client.HTTPConnection(host, port)
            st, s = post(conn, "/v1/sessions", {"template": "python"})
            assert st == 201, s
            sid = s["id"]
            st, v = post(conn, f"/v1/sessions/{sid}/execute", {"code": SNIPPET})
            assert st == 200 and v["status"] == "ok", v
            guest_rounds = []
            for _ in range(ROUNDS + 1):
                st, v = post(conn, f"/v1/sessions/{sid}/execute", {
                    "code": f"import json\nprint(json.dumps(timed({url!r}, {N})))",
                    "limits": {"timeout_ms": 60000}})
                assert st == 200 and v["status"] == "ok", v
                guest_rounds.append(json.loads(v["stdout"]))
            guest_rounds = guest_rounds[1:]
            hello_egress = hello(conn)
        finally:
            stop(server)
        server, host, port = start(binary, False)
        try:
            hello_plain = hello(http.client.HTTPConnection(host, port))
        finally:
            stop(server)
    finally:
        up.kill()
        up.wait()
    each_guest = [x for r in guest_rounds for x in r]
    each_native = [x for r in native_rounds for x in r]
    total_guest = [sum(r) for r in guest_rounds]
    total_native = [sum(r) for r in native_rounds]
    result.update({
        "urlopen_p50_ms": {"through_the_host": ms(each_guest), "native": ms(each_native),
                           "added": round(ms(each_guest) - ms(each_native), 3)},
        "urlopen_p90_ms": {
            "through_the_host": round(statistics.quantiles(each_guest, n=10)[-1] * 1e3, 3),
            "native": round(statistics.quantiles(each_native, n=10)[-1] * 1e3, 3)},
        "100_requests_total_ms": {"through_the_host": ms(total_guest), "native": ms(total_native),
                                  "beyond_native": round(ms(total_guest) - ms(total_native), 3)},
        "hello_world_p50_ms": {"egress_configured": hello_egress, "egress_off": hello_plain},
        "load_average": os.getloadavg(),
    })
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


def hello(conn) -> float:
    times = []
    for i in range(HELLO + 20):
        t = time.perf_counter()
        st, v = post(conn, "/v1/execute", {"code": "print('hello world')"})
        dt = time.perf_counter() - t
        assert st == 200 and v["stdout"] == "hello world\n", v
        if i >= 20:
            times.append(dt)
    return ms(times)


if __name__ == "__main__":
    main()
