"""MCP `initialize` flood: the supervisor's resident memory after REQUESTS `initialize` from
one API key over CONNECTIONS keep-alive connections (issue #26's goal: <= 200 MiB above idle
after 100,000), against a `vivarium serve` on 127.0.0.1 with two keys and default settings.

    python benches/mcp_flood.py target/release/vivarium benches/results/mcp_flood.json [FLAG...]

Extra arguments are passed to `vivarium serve` (e.g. `--max-mcp-sessions-per-tenant 1000000
--mcp-session-idle-secs 300` to see what uncapped sessions cost). Bounded: at most REQUESTS
requests (MCP_FLOOD_REQUESTS, 100000) and SECONDS seconds (MCP_FLOOD_SECONDS, 180). With
MCP_FLOOD_NO_KEYS=1 the server runs without API keys (every caller one tenant: the flood
stops at --max-mcp-sessions)."""

import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from http_load import rss_kib, stop, wait_ready  # noqa: E402

REQUESTS = int(os.environ.get("MCP_FLOOD_REQUESTS", "100000"))
SECONDS = float(os.environ.get("MCP_FLOOD_SECONDS", "180"))
CONNECTIONS = int(os.environ.get("MCP_FLOOD_CONNECTIONS", "8"))
KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789"}
NO_KEYS = os.environ.get("MCP_FLOOD_NO_KEYS") == "1"


def initialize(conn: http.client.HTTPConnection, key: str, i: int) -> tuple[int, str | None, bytes]:
    body = {"jsonrpc": "2.0", "id": i, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "flood", "version": "0"}}}
    conn.request("POST", "/mcp", json.dumps(body), {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {key}",
    })
    r = conn.getresponse()
    data = r.read()
    return r.status, r.getheader("mcp-session-id"), data


def flood(host: str, port: int) -> dict:
    counts = {"made": 0, "refused": 0, "other": 0}
    first_refusal: list[bytes] = []
    lock = threading.Lock()
    deadline = time.time() + SECONDS

    def worker(t: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        for i in range(t, REQUESTS, CONNECTIONS):
            if time.time() > deadline:
                break
            status, session, data = initialize(conn, KEYS["alice"], i)
            kind = "made" if status == 200 and session else "refused" if status == 429 else "other"
            with lock:
                counts[kind] += 1
                if kind == "refused" and not first_refusal:
                    first_refusal.append(data)
        conn.close()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(CONNECTIONS)]
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts["seconds"] = round(time.time() - started, 1)
    counts["refusal"] = json.loads(first_refusal[0]) if first_refusal else None
    return counts


def main() -> None:
    binary, out_path, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write("".join(f"{name}:{key}\n" for name, key in KEYS.items()))
        keys = f.name
    env = dict(os.environ, VIVARIUM_LOG="warn")
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--audit-log", "/dev/null",
         *([] if NO_KEYS else ["--api-keys-file", keys]), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
    )
    try:
        addr = server.stdout.readline().split()[-1].replace("http://", "")
        host, port = addr.rsplit(":", 1)
        wait_ready(host, port)
        time.sleep(1)
        idle = rss_kib(server.pid)
        result = flood(host, int(port))
        time.sleep(1)
        after = rss_kib(server.pid)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        result["second_caller_initialize"] = initialize(conn, KEYS["bob"], 1)[0]
        result.update(binary=binary, flags=extra, api_keys=not NO_KEYS, requests=REQUESTS,
                      connections=CONNECTIONS, idle_rss_mib=round(idle / 1024, 1),
                      after_rss_mib=round(after / 1024, 1),
                      growth_mib=round((after - idle) / 1024, 1))
        sent = result["made"] + result["refused"] + result["other"]
        print(f"{sent} initialize in {result['seconds']} s ({sent / result['seconds']:.0f}/s): "
              f"{result['made']} sessions, {result['refused']} refused, {result['other']} other; "
              f"supervisor RSS {result['idle_rss_mib']} -> {result['after_rss_mib']} MiB "
              f"(+{result['growth_mib']}); a second caller (the other key)'s initialize: "
              f"{result['second_caller_initialize']}", flush=True)
        os.makedirs(os.path.dirname(out_path) or ".", exist_ok=True)
        with open(out_path, "w") as f:
            json.dump(result, f, indent=2)
    finally:
        stop(server)
        os.unlink(keys)


if __name__ == "__main__":
    main()
