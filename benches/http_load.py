"""HTTP figures: hello-world executions per second and latency (wrk, keep-alive, bounded in
time) against a release `vivarium serve` on 127.0.0.1, and the RSS an idle session costs.

    python benches/http_load.py target/release/vivarium benches/results/http.json

Needs `wrk` (apt-get install -y wrk). Everything is bounded: each wrk run lasts DURATION
seconds, the session count is SESSIONS."""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import http.client

DURATION = int(os.environ.get("HTTP_BENCH_SECONDS", "10"))
SESSIONS = int(os.environ.get("HTTP_BENCH_SESSIONS", "200"))


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def wait_ready(host: str, port: int, within: float = 600.0) -> None:
    """Waits until the server at `host:port` answers `/readyz` with 200 (on a first start it
    fetches the runtime and compiles the templates first), polling every 0.2 s, at most
    `within` seconds. Every bench script starts its servers through this."""
    deadline = time.time() + within
    while time.time() < deadline:
        try:
            conn = http.client.HTTPConnection(host, int(port), timeout=5)
            conn.request("GET", "/readyz")
            r = conn.getresponse()
            r.read()
            conn.close()
            if r.status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server at {host}:{port} never became ready")


def stop(*procs: subprocess.Popen) -> None:
    """SIGTERM to every process (a server drains), then waits up to 60 s for each and kills
    the ones still there."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()


def post(conn: http.client.HTTPConnection, path: str, body: dict) -> tuple[int, dict]:
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    return r.status, (json.loads(data) if data else {})


def wrk_script(body: str) -> str:
    """A wrk Lua script that POSTs `body` as JSON and prints p50, p99 and the error count
    (`P50_US`, `P99_US`, `ERRORS`); returns its path (the caller removes it)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(
            'wrk.method = "POST"\n'
            f"wrk.body = {json.dumps(body)}\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
            "done = function(summary, latency, requests)\n"
            '  io.write(string.format("P50_US %d\\nP99_US %d\\nERRORS %d\\n", '
            "latency:percentile(50), latency:percentile(99), "
            "summary.errors.status + summary.errors.connect + summary.errors.read + "
            "summary.errors.write + summary.errors.timeout))\n"
            "end\n"
        )
        return f.name


def wrk(url: str, body: str, conns: int, threads: int) -> dict:
    script = wrk_script(body)
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{conns}", f"-d{DURATION}s", "--timeout", "10s",
         "-s", script, url],
        capture_output=True, text=True, check=True,
    ).stdout
    os.unlink(script)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = int(re.search(r"P50_US (\d+)", out).group(1)) / 1e3
    p99 = int(re.search(r"P99_US (\d+)", out).group(1)) / 1e3
    errors = int(re.search(r"ERRORS (\d+)", out).group(1))
    print(f"  wrk -c{conns}: {rps:.0f} req/s, p50 {p50:.2f} ms, p99 {p99:.2f} ms, errors {errors}",
          flush=True)
    return {"rps": rps, "p50_ms": p50, "p99_ms": p99, "errors": errors, "connections": conns}


def main() -> None:
    binary, out_path = sys.argv[1], sys.argv[2]
    env = dict(os.environ, VIVARIUM_LOG="warn")
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--max-sessions", "900",
         "--memory-budget-bytes", str(1 << 44), "--queue-depth", "256",
         "--audit-log", "/dev/null"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
    )
    try:
        addr = server.stdout.readline().split()[-1].replace("http://", "")
        host, port = addr.rsplit(":", 1)
        wait_ready(host, port)
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        url = f"http://{addr}/v1/execute"
        body = {"code": "print('hello world')"}
        status, resp = post(conn, "/v1/execute", dict(body, policy="off"))
        if status == 200:
            body["policy"] = "off"  # the pre-execution check is measured separately below
        assert post(conn, "/v1/execute", body)[1]["stdout"] == "hello world\n"
        result = {"cores": os.cpu_count()}
        print("hello world over HTTP (keep-alive):", flush=True)
        for _ in range(50):
            post(conn, "/v1/execute", body)
        result["hello_c1"] = wrk(url, json.dumps(body), 1, 1)
        result["hello_c4"] = wrk(url, json.dumps(body), 4, 2)
        if "policy" in body:
            result["hello_c4_with_check"] = wrk(url, json.dumps({"code": body["code"]}), 4, 2)
        sci = dict(body, code="import pandas as pd; print(pd.DataFrame({'a': [1, 2, 3]}).describe())",
                   template="scientific")
        status, resp = post(conn, "/v1/execute", sci)
        assert status == 200 and resp["status"] == "ok", resp
        print("pandas describe, scientific template:", flush=True)
        result["pandas_scientific_c4"] = wrk(url, json.dumps(sci), 4, 2)

        for template, n in (("python", SESSIONS), ("scientific", SESSIONS // 4)):
            time.sleep(1)
            before = rss_kib(server.pid)
            ids = []
            for _ in range(n):
                status, resp = post(conn, "/v1/sessions", {"template": template,
                                                             "limits": {"memory_bytes": 256 << 20}})
                assert status == 201, resp
                ids.append(resp["id"])
            time.sleep(1)
            after = rss_kib(server.pid)
            per = (after - before) / n / 1024
            print(f"idle sessions ({template}): {n} opened, RSS +{(after - before) / 1024:.0f} MiB, "
                  f"{per:.2f} MiB each", flush=True)
            result[f"idle_session_{template}"] = {"n": n, "rss_delta_mib": (after - before) / 1024,
                                                  "mib_per_session": per}
            for sid in ids:
                conn.request("DELETE", f"/v1/sessions/{sid}")
                conn.getresponse().read()
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
