"""The E2B door's goals table (issue 30), with the real E2B Python SDK (`e2b-code-interpreter`
2.11.5, configured only by E2B_API_URL / E2B_SANDBOX_URL) against a release `vivarium serve`
on 127.0.0.1, every figure beside its baseline measured in the same run on the same server:

- `sandbox.run_code("1 + 1")` (NDJSON streamed through the SDK, parsed into an Execution)
  beside a native session turn of the same snippet, `POST /v1/sessions/{id}/execute` with
  httpx (the library the SDK itself uses) on a kept-alive connection; the two interleaved,
  call by call, so both see the same machine. Both go through the HTTP transport the SDK
  itself uses (`e2b.api.client_sync.get_transport`, pyqwest over HTTP/1.1), so the
  difference is the door and the SDK's NDJSON parsing, not two HTTP libraries;
- `Sandbox.create()` to the first `run_code` result beside the native `POST /v1/sessions`
  and its first turn (the sandbox's set-up turn included on the E2B side: it is what a user
  waits for).

Warm-up excluded (WARMUP calls of each first); medians and p90.

    target/e2b_venv/bin/python benches/e2b_door.py target/release/vivarium benches/results/e2b.json

(`target/e2b_venv` is the venv `cargo test --test server front_e2b` makes.) Bounded:
N run_code pairs (env E2B_N, default 300) and CREATES create pairs (default 30); under a
minute."""

import json
import os
import statistics
import subprocess
import sys
import time

import httpx

N = int(os.environ.get("E2B_N", "300"))
CREATES = int(os.environ.get("E2B_CREATES", "30"))
WARMUP = 20


def start(binary):
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--audit-log", "/dev/null"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    addr = server.stdout.readline().split("http://", 1)[1].split()[0]
    base = f"http://{addr}"
    for _ in range(600):
        try:
            if httpx.get(f"{base}/readyz").status_code == 200:
                return server, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit("the server never became ready")


def summary(xs):
    xs = sorted(xs)
    return {"p50_ms": round(statistics.median(xs), 3),
            "p90_ms": round(xs[int(len(xs) * 0.9)], 3), "n": len(xs)}


def main():
    binary, out = sys.argv[1], sys.argv[2]
    server, base = start(binary)
    os.environ.update(E2B_API_KEY="bench", E2B_API_URL=f"{base}/e2b",
                      E2B_SANDBOX_URL=f"{base}/e2b")
    from e2b import ConnectionConfig
    from e2b.api.client_sync import get_transport
    from e2b_code_interpreter import Sandbox

    load_before = os.getloadavg()
    try:
        transport = get_transport(ConnectionConfig(), http_version="1.1")
        http = httpx.Client(base_url=base, timeout=60, transport=transport)
        sid = http.post("/v1/sessions", json={}).json()["id"]
        sbx = Sandbox.create()
        e2b, native = [], []
        for i in range(WARMUP + N):
            t = time.perf_counter()
            assert sbx.run_code("1 + 1").text == "2"
            a = time.perf_counter() - t
            t = time.perf_counter()
            r = http.post(f"/v1/sessions/{sid}/execute", json={"code": "1 + 1", "policy": "off"}).json()
            b = time.perf_counter() - t
            assert r["result"] == "2", r
            if i >= WARMUP:
                e2b.append(a * 1000)
                native.append(b * 1000)
        sbx.kill()
        http.delete(f"/v1/sessions/{sid}")

        created, opened = [], []
        for i in range(CREATES + 2):
            t = time.perf_counter()
            s = Sandbox.create()
            assert s.run_code("1 + 1").text == "2"
            a = time.perf_counter() - t
            s.kill()
            t = time.perf_counter()
            sid = http.post("/v1/sessions", json={}).json()["id"]
            r = http.post(f"/v1/sessions/{sid}/execute",
                          json={"code": "1 + 1", "policy": "off"}).json()
            b = time.perf_counter() - t
            assert r["result"] == "2", r
            http.delete(f"/v1/sessions/{sid}")
            if i >= 2:
                created.append(a * 1000)
                opened.append(b * 1000)
    finally:
        server.terminate()
        server.wait()
    result = {
        "run_code": summary(e2b),
        "native_turn": summary(native),
        "run_code_overhead_p50_ms": round(statistics.median(e2b) - statistics.median(native), 3),
        "create_to_first_result": summary(created),
        "native_open_to_first_turn": summary(opened),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
