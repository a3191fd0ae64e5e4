"""Executions over several nodes behind HAProxy, beside one node, on the same cores:
`POST /v1/execute` hello world under wrk through HAProxy (deploy/haproxy/haproxy.cfg) in
front of NODES release `vivarium serve --cluster` processes sharing a snapshot directory,
then the same load straight at one node with as many workers as the cores. Prints both and
their ratio (the goal of ISSUES #14: within 15 % of what the cores allow), and writes JSON.

    python benches/cluster.py target/release/vivarium benches/results/cluster.json

CLUSTER_NODES (default 3), CLUSTER_CONNS (default 4) and CLUSTER_SECONDS (default 8, after
a 2-second warm-up that is not counted) change the run. Needs haproxy and wrk (Debian's
packages). The load generator and the proxy share the machine with the nodes.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from http_load import stop, wait_ready, wrk_script
from scaling import wrk

NODES = int(os.environ.get("CLUSTER_NODES", "3"))
CONNS = int(os.environ.get("CLUSTER_CONNS", "4"))
SECONDS = int(os.environ.get("CLUSTER_SECONDS", "8"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_node(binary: str, port: int, args: list[str], scratch: str) -> subprocess.Popen:
    env = dict(os.environ, VIVARIUM_LOG="warn", VIVARIUM_SCRATCH=scratch)
    p = subprocess.Popen(
        [binary, "serve", "--listen", f"127.0.0.1:{port}", "--queue-depth", "256",
         "--audit-log", "/dev/null"] + args,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    wait_ready("127.0.0.1", port)
    return p


def measure(url: str, script: str) -> dict:
    wrk(url, script, CONNS, 2)  # warm-up, not counted
    return wrk(url, script, CONNS, SECONDS)


def main() -> None:
    binary, out_path = sys.argv[1], sys.argv[2]
    cores = os.cpu_count() or 2
    work = tempfile.mkdtemp(prefix="vivarium-cluster-bench-")
    store = os.path.join(work, "store")
    script = wrk_script(json.dumps({"code": "print('hello world')"}))
    procs: list[subprocess.Popen] = []
    try:
        # One node, every core: the baseline.
        port = free_port()
        one = start_node(binary, port, ["--workers", str(cores)], os.path.join(work, "one"))
        single = measure(f"http://127.0.0.1:{port}/v1/execute", script)
        one.terminate()
        one.wait(timeout=60)
        print(f"one node, {cores} workers: {single['rps']:.0f} req/s, p50 {single['p50_ms']:.2f} ms,"
              f" p99 {single['p99_ms']:.2f} ms, errors {single['errors']}", flush=True)

        # NODES nodes behind HAProxy, the cores shared out between them.
        per_node = max(1, cores // NODES)
        ports = [free_port() for _ in range(NODES)]
        for i, p in enumerate(ports):
            procs.append(start_node(
                binary, p,
                ["--cluster", "--node-id", f"n{i + 1}", "--workers", str(per_node),
                 "--snapshot-dir", store],
                os.path.join(work, f"n{i + 1}")))
        front, stats = free_port(), free_port()
        servers = "".join(f"    server n{i + 1} 127.0.0.1:{p} check\n"
                          for i, p in enumerate(ports))
        with open(os.path.join(ROOT, "deploy/haproxy/haproxy.cfg")) as f:
            cfg = (f.read().replace("bind *:8080", f"bind 127.0.0.1:{front}")
                   .replace("bind *:8404", f"bind 127.0.0.1:{stats}")
                   .replace("    # SERVERS\n", servers))
        cfg_path = os.path.join(work, "haproxy.cfg")
        with open(cfg_path, "w") as f:
            f.write(cfg)
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        procs.append(subprocess.Popen([haproxy, "-db", "-f", cfg_path],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_ready("127.0.0.1", front)
        time.sleep(1.0)  # every server's first health checks
        cluster = measure(f"http://127.0.0.1:{front}/v1/execute", script)
        print(f"{NODES} nodes ({per_node} worker each) behind HAProxy: {cluster['rps']:.0f} req/s,"
              f" p50 {cluster['p50_ms']:.2f} ms, p99 {cluster['p99_ms']:.2f} ms,"
              f" errors {cluster['errors']}", flush=True)
        result = {
            "cores": cores,
            "nodes": NODES,
            "connections": CONNS,
            "one_node": single,
            "cluster": cluster,
            "cluster_over_one_node": cluster["rps"] / single["rps"],
        }
        print(f"cluster / one node: {result['cluster_over_one_node']:.2f}", flush=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
    finally:
        os.unlink(script)
        stop(*procs)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
