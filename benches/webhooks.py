#!/usr/bin/env python3
"""Webhooks' memory bound (issue 52): 10,000 events for dead endpoints.

Two servers of one binary, one after the other, take the same load: N hello-world
executions over HTTP at 2 connections (each makes one `execution.finished` event). The
second has the tenant's eight webhooks (the most it may have), each on a port nothing
listens on, so every delivery fails and retries while the events pile up. Reported: the
supervisor's RSS (VmRSS; the workers are other processes) after each quarter of the load,
on both servers, and what the webhooks say they hold (`pending`, `dropped`). The bound is
by construction (1,000 events waiting a webhook, the log's 1,000 a tenant): the second
server's RSS should stop growing once the queues are full, a few MB above the first's.

usage: python3 benches/webhooks.py BINARY [OUT.json]   (env WEBHOOK_EVENTS, default 10000)
"""

import http.client
import json
import os
import socket
import subprocess
import sys
import threading

from http_load import rss_kib, stop, wait_ready

EVENTS = int(os.environ.get("WEBHOOK_EVENTS", "10000"))
HOOKS = 8


def request(host, port, method, path, body=None):
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request(method, path, json.dumps(body) if body is not None else None,
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, json.loads(data or b"null")


def dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def load(host, port, count):
    def client(n):
        conn = http.client.HTTPConnection(host, port, timeout=60)
        body = json.dumps({"code": "print('hello')", "template": "python", "policy": "off"})
        for _ in range(n):
            conn.request("POST", "/v1/execute", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            assert r.status == 200, r.status
    threads = [threading.Thread(target=client, args=(count // 2,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run(binary, hooks):
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--audit-log", "/dev/null",
         "--webhook-allow-private", "127.0.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=dict(os.environ, VIVARIUM_LOG="warn"),
    )
    addr = server.stdout.readline().split()[-1].replace("http://", "")
    host, port = addr.rsplit(":", 1)
    port = int(port)
    wait_ready(host, port)
    for _ in range(hooks):
        st, v = request(host, port, "POST", "/v1/webhooks",
                        {"url": f"http://127.0.0.1:{dead_port()}/hook"})
        assert st == 201, v
    load(host, port, 200)  # warm-up
    points = [(0, rss_kib(server.pid))]
    for q in range(1, 5):
        load(host, port, EVENTS // 4)
        points.append((q * EVENTS // 4, rss_kib(server.pid)))
    _, listed = request(host, port, "GET", "/v1/webhooks")
    _, page = request(host, port, "GET", "/v1/events?limit=1")
    stop(server)
    return {"rss_kib": points, "webhooks": listed, "first_kept_seq": page["events"][0]["seq"]}


def main():
    binary = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else None
    result = {"events": EVENTS, "without": run(binary, 0), "with_dead_webhooks": run(binary, HOOKS)}
    print(f"{'events':>8} {'RSS without':>12} {'RSS with 8 dead webhooks':>26}")
    for (n, a), (_, b) in zip(result["without"]["rss_kib"], result["with_dead_webhooks"]["rss_kib"]):
        print(f"{n:>8} {a / 1024:>10.1f} MB {b / 1024:>24.1f} MB")
    hooks = result["with_dead_webhooks"]["webhooks"]
    print("each webhook: pending", [h["pending"] for h in hooks], "dropped",
          [h["dropped"] for h in hooks], "delivered", sum(h["delivered"] for h in hooks))
    print("the log keeps from seq", result["with_dead_webhooks"]["first_kept_seq"])
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
