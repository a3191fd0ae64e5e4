"""How throughput scales with concurrent requests, and what each request costs the kernel:
`POST /v1/execute` hello world (default template, the server's default request) under wrk
at concurrency 1, 2, 4 and 8 against a release `vivarium serve` on 127.0.0.1, with the
server's user and system CPU per request read from /proc between runs. The load generator
shares the machine. Prints the table of ISSUES #12 and writes it as JSON.

    python benches/scaling.py target/release/vivarium benches/results/scaling.json

VIVARIUM_KEEP_RESIDENT_BYTES (and any other server setting in the environment) passes
through to the server, so a setting's effect is one run beside another; SCALING_TEMPLATE
names a template for the request (default: the server's). SCALING_ARGS adds flags to
`vivarium serve` (`--workers 0` is the in-process baseline: one process, guest threads on
every core). CPU is the server's and its worker processes'. Bounded: each wrk run lasts
SCALING_SECONDS (default 8) after a 2-second warm-up run that is not counted.
"""

import json
import os
import re
import subprocess
import sys
import time
import http.client

from http_load import wait_ready, wrk_script

SECONDS = int(os.environ.get("SCALING_SECONDS", "8"))
# SCALING_PERF=1: a system-wide `perf record -g` during the concurrency-2 run, and the
# symbols that took the most CPU (kernel ones marked [k]) in the JSON.
PERF = os.environ.get("SCALING_PERF") == "1"


def perf_top(seconds: int) -> list[dict]:
    """Records every CPU for `seconds` and returns the top symbols by self time."""
    data = "/tmp/vivarium-scaling.perf"
    subprocess.run(["perf", "record", "-a", "-g", "-q", "-o", data, "--", "sleep", str(seconds)],
                   check=True, capture_output=True)
    out = subprocess.run(
        ["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "sym",
         "--percent-limit", "1.5", "-g", "none"],
        check=True, capture_output=True, text=True).stdout
    os.unlink(data)
    top = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(\S+)", line)
        if m:
            top.append({"percent": float(m.group(1)), "kernel": m.group(2) == "k",
                        "symbol": m.group(3)})
    return top
TICK = os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The live children of `pid` (the server's worker processes)."""
    kids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            kids += [int(k) for k in f.read().split()]
    return kids


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU of the server and its worker processes (all threads) so far."""
    user = system = 0.0
    for p in [pid] + children(pid):
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        user += int(fields[11]) / TICK
        system += int(fields[12]) / TICK
    return user, system


def wrk(url: str, script: str, conns: int, seconds: int) -> dict:
    out = subprocess.run(
        ["wrk", f"-t{min(conns, 2)}", f"-c{conns}", f"-d{seconds}s", "--timeout", "10s",
         "-s", script, url],
        capture_output=True, text=True, check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    p50 = int(re.search(r"P50_US (\d+)", out).group(1)) / 1e3
    p99 = int(re.search(r"P99_US (\d+)", out).group(1)) / 1e3
    errors = int(re.search(r"ERRORS (\d+)", out).group(1))
    return {"rps": rps, "requests": total, "p50_ms": p50, "p99_ms": p99, "errors": errors}


def main() -> None:
    binary, out_path = sys.argv[1], sys.argv[2]
    env = dict(os.environ, VIVARIUM_LOG="warn")
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--queue-depth", "256",
         "--audit-log", "/dev/null"] + os.environ.get("SCALING_ARGS", "").split(),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
    )
    request = {"code": "print('hello world')"}
    if os.environ.get("SCALING_TEMPLATE"):
        request["template"] = os.environ["SCALING_TEMPLATE"]
    body = json.dumps(request)
    script = wrk_script(body)
    try:
        addr = server.stdout.readline().split()[-1].replace("http://", "")
        host, port = addr.rsplit(":", 1)
        wait_ready(host, port)
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        url = f"http://{addr}/v1/execute"
        conn.request("POST", "/v1/execute", body, {"content-type": "application/json"})
        r = conn.getresponse()
        assert json.loads(r.read())["stdout"] == "hello world\n"
        rows = {}
        for c in (1, 2, 4, 8):
            wrk(url, script, c, 2)  # warm-up, not counted
            u0, s0 = cpu_seconds(server.pid)
            if PERF and c == 2:
                import threading
                profile = {}
                t = threading.Thread(target=lambda: profile.update(top=perf_top(SECONDS - 2)))
                t.start()
            row = wrk(url, script, c, SECONDS)
            u1, s1 = cpu_seconds(server.pid)
            if PERF and c == 2:
                t.join()
                row["perf_top"] = profile.get("top", [])
                for p in row["perf_top"][:8]:
                    print(f"    {p['percent']:5.1f}% {'[k]' if p['kernel'] else '[.]'} "
                          f"{p['symbol']}", flush=True)
            n = max(row["requests"], 1)
            row["cpu_ms_per_request"] = (u1 - u0 + s1 - s0) * 1e3 / n
            row["kernel_ms_per_request"] = (s1 - s0) * 1e3 / n
            rows[c] = row
            print(f"  c{c}: {row['rps']:.0f} req/s, p50 {row['p50_ms']:.2f} ms, p99 "
                  f"{row['p99_ms']:.2f} ms, CPU {row['cpu_ms_per_request']:.2f} ms/req "
                  f"(kernel {row['kernel_ms_per_request']:.2f}), errors {row['errors']}",
                  flush=True)
        result = {
            "cores": os.cpu_count(),
            "template": request.get("template", "default"),
            "keep_resident_bytes": os.environ.get("VIVARIUM_KEEP_RESIDENT_BYTES", "default"),
            "serve_args": os.environ.get("SCALING_ARGS", ""),
            "worker_processes": len(children(server.pid)),
            "rows": rows,
            "throughput_c2_over_c1": rows[2]["rps"] / rows[1]["rps"],
            "p99_c8_over_p50_c1": rows[8]["p99_ms"] / rows[1]["p50_ms"],
            "kernel_cpu_c2_over_c1": rows[2]["kernel_ms_per_request"]
            / max(rows[1]["kernel_ms_per_request"], 1e-9),
        }
        print(f"throughput c2/c1 {result['throughput_c2_over_c1']:.2f}; p99 c8 / p50 c1 "
              f"{result['p99_c8_over_p50_c1']:.1f}x; kernel CPU per request c2/c1 "
              f"{result['kernel_cpu_c2_over_c1']:.2f}", flush=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
    finally:
        os.unlink(script)
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
