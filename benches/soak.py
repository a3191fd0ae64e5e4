"""The soak (issue 47): an hour of mixed load through every door of one release `vivarium
serve` on 127.0.0.1, sampling what the server holds every minute, then judging whether each
figure stayed flat after warm-up.

    target/soak_venv/bin/python benches/soak.py --minutes 60 --out benches/results/soak-<date>

(`target/soak_venv`: a venv with `e2b==2.63.0 e2b-code-interpreter==2.11.5 matplotlib`, the
E2B SDK versions `tests/server/front_e2b.rs` tests; the script says how to make it when it is
missing.) The server runs with two API keys (two tenants), egress allowed to the loopback
upstream `tests/fixtures/upstream.py`, sessions hibernating after 3 s idle and suspended
executions evicted to their journals after 3 s, so both paths turn over all the time.

The load: THREADS client threads (4), each cycling through these scenarios, each of which
cleans up what it made:

- fresh runs: `POST /v1/execute` (the `python` and `scientific` templates);
- sessions that hibernate and wake: a standing pool of POOL sessions a tenant (kept the whole
  run), each turn waits until its session is hibernated, wakes it with a turn that checks its
  state, and uploads and reads a file; now and then a fork, a snapshot restored and deleted;
- code mode: an execution with tools suspended, forked, both branches answered to the end;
  one left until it is evicted to its journal and then resumed; one cancelled;
- egress with a secret: a run and a session turn sending the secret to the upstream's
  `/echo` and `/gzip-echo` (the value must not come back);
- E2B sandboxes through the real SDK: create, cells, a code context, files, now and then
  pause / connect and a fork, kill;
- MCP: initialize, `execute_python`, `open_session` / `run_in_session` / `close_session`,
  `DELETE /mcp`;
- Jupyter kernels: create, a WebSocket, cells, close, delete;
- hostile runs: programs of the hostile corpus (`tests/hostile/{exhaustion,fs,interp,proc}`,
  those needing no placeholder nor input), judged by their `expect` header; a session turn
  past its timeout (rolled back); malformed requests (400); a client that hangs up mid-run.

Every minute (`--interval`) the threads finish their scenario and wait (the pause is a few
seconds), then the sampler reads: the supervisor's and each worker's resident memory
(`VmRSS`), open descriptors and threads (`/proc`), the snapshot store's bytes and files on
disk (`--snapshot-dir`: hibernated sessions, snapshots, journals), and the door's in-memory
records (`GET /metrics`: resident and hibernated sessions, pooled instances, sandbox
directories, memory charged, each tenant's MCP sessions, kernel sockets and suspended
executions, the number of metric series; and the E2B sandbox list of each key, which is the
key's sessions, its standing pool among them, and leaves contexts out).

Found on the way: the E2B Python SDK's context calls (`create_code_context`,
`list_code_contexts`, `restart_code_context`, `remove_code_context`) send no access token,
and a server with API keys answers them 401; the soak opens and removes its contexts over
plain HTTP with the sandbox's token and runs its cells through the SDK.

Every response status is counted, client side and in the server's
`vivarium_http_responses_total`; any 5xx is a failure and printed.

Judgement: over the samples from the end of warm-up (`--warmup`, default a quarter of the
run: 15 of 60 minutes) to the last, a least-squares line; growth is the line's rise over that
window divided by its value at the window's start. A figure passes when the growth is under
5 % or, for a figure near zero, under one unit of noise (one record, one descriptor or thread,
1 MiB of memory, 10 KiB of store). `--rejudge` judges a finished run's OUT.csv again. Both the fit's growth and last sample vs first are printed.

Outputs: OUT.csv (one row a sample), OUT.png (the plot), OUT.json (the verdicts, counts and
settings), OUT.md (the table). Bounded: at most --minutes minutes of load and --max-requests
client requests; it stops by itself."""

import argparse
import base64
import csv
import http.client
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, HERE)
from http_load import rss_kib, stop, wait_ready  # noqa: E402
from jupyter_flood import request as kernel_request, ws_connect, ws_recv, ws_send  # noqa: E402
from scaling import children  # noqa: E402

KEYS = {"alice": "soak-key-alice-0123456789", "bob": "soak-key-bob-0123456789ab"}
POOL = 3  # standing sessions a tenant, kept the whole run
TOOLS = [{
    "name": "echo",
    "description": "Gives back its argument.",
    "parameters": {"type": "object", "properties": {"i": {"type": "integer"}},
                   "required": ["i"]},
}]
LOOP = "total = 0\nfor i in range(4):\n    total += tools.echo(i=i)\nprint(total)\n"
PLACEHOLDERS = ("{CANARY", "{SECRET}", "{PORT}", "{SCRATCH}", "{AUDIT}", "{VIVARIUM_HOME}",
                "{HOST_", "{HOSTNAME}")
BASE_LIMITS = {"timeout_ms": 3000, "fuel": 5_000_000_000, "memory_bytes": 134217728,
               "output_bytes": 65536, "disk_bytes": 4194304, "open_files": 64}


class Failure(Exception):
    """A scenario saw something it should not have (not necessarily a 5xx)."""


class Stats:
    """Every response's status, by scenario; failures with their first words."""

    def __init__(self, max_requests: int):
        self.lock = threading.Lock()
        self.statuses: Counter = Counter()
        self.by_scenario: Counter = Counter()
        self.failures: Counter = Counter()
        self.failure_examples: dict[str, str] = {}
        self.server_errors: list[str] = []
        self.requests = 0
        self.max_requests = max_requests

    def status(self, scenario: str, status: int, what: str, body: bytes) -> None:
        with self.lock:
            self.requests += 1
            self.statuses[status] += 1
            self.by_scenario[(scenario, status)] += 1
            if status >= 500:
                line = f"5xx: {status} {what} ({scenario}): {body[:300]!r}"
                self.server_errors.append(line)
                print(line, flush=True)

    def fail(self, scenario: str, why: str) -> None:
        key = f"{scenario}: {why.splitlines()[0][:120] if why else '?'}"
        with self.lock:
            self.failures[key] += 1
            if key not in self.failure_examples:
                self.failure_examples[key] = why[:2000]
                print(f"failure {key}", flush=True)

    def exhausted(self) -> bool:
        return self.requests >= self.max_requests


class Client:
    """One keep-alive connection as one API key; every response counted."""

    def __init__(self, host: str, port: int, key: str, stats: Stats, scenario: str = "?"):
        self.host, self.port, self.key, self.stats = host, port, key, stats
        self.scenario = scenario
        self.conn = http.client.HTTPConnection(host, port, timeout=120)

    def raw(self, method: str, path: str, body: bytes | None = None,
            headers: dict | None = None) -> tuple[int, dict, bytes]:
        h = {"Authorization": f"Bearer {self.key}"}
        h.update(headers or {})
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body, h)
                r = self.conn.getresponse()
                data = r.read()
                break
            except (ConnectionError, http.client.HTTPException, socket.timeout) as e:
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
                if attempt or isinstance(e, socket.timeout):
                    raise
        self.stats.status(self.scenario, r.status, f"{method} {path}", data)
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data

    def call(self, method: str, path: str, body=None, expect=(200, 201, 202, 204),
             token: str | None = None, sandbox: str | None = None) -> dict:
        """A JSON request; `token` and `sandbox` make it one to an E2B sandbox's code
        interpreter (port 49999) with its access token."""
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload else {}
        if sandbox:
            headers.update({"X-Access-Token": token, "E2b-Sandbox-Id": sandbox,
                            "E2b-Sandbox-Port": "49999"})
        st, _, data = self.raw(method, path, payload, headers)
        v = json.loads(data) if data and data[:1] in b"{[" else {}
        if expect and st not in expect:
            raise Failure(f"{method} {path}: {st} {data[:300]!r}")
        return v if isinstance(v, dict) else {"list": v}

    def status_of(self, method: str, path: str, body: bytes, headers=None) -> int:
        return self.raw(method, path, body, headers)[0]


def ok(v: dict, stdout: str | None = None) -> dict:
    if v.get("status") != "ok":
        raise Failure(f"status {v.get('status')}: {json.dumps(v)[:300]}")
    if stdout is not None and v.get("stdout") != stdout:
        raise Failure(f"stdout {v.get('stdout')!r}, wanted {stdout!r}")
    return v


# --- scenarios: each takes (ctx, n) and cleans up what it made -------------------------------

def fresh_runs(ctx, n):
    c = ctx.client("fresh")
    ok(c.call("POST", "/v1/execute", {"code": "print(sum(range(10)))", "template": "python"}),
       "45\n")
    ok(c.call("POST", "/v1/execute", {
        "code": "import pandas as pd\ndf = pd.read_csv('data.csv')\nprint(int(df.b.sum()))",
        "files": [{"path": "data.csv", "content": base64.b64encode(b"a,b\n1,2\n3,4\n").decode()}],
    }), "6\n")
    if n % 3 == 0:
        ok(c.call("POST", "/v1/execute", {"code": "import json\nprint(json.dumps({'n': %d}))" % n,
                                          "template": "python", "policy": "warn"}))


def hibernate_wake(ctx, n):
    c = ctx.client("sessions")
    sid, counter = ctx.pool_session(c, n)
    # Wait until it has hibernated (3 s idle), then wake it with a turn that checks its state.
    deadline = time.time() + 30
    while c.call("GET", f"/v1/sessions/{sid}").get("resident", True):
        if time.time() > deadline:
            raise Failure(f"session {sid} did not hibernate within 30 s")
        time.sleep(0.5)
    v = ok(c.call("POST", f"/v1/sessions/{sid}/execute", {"code": "count += 1\ncount"}))
    if v.get("result") != str(counter + 1):
        raise Failure(f"woken session {sid}: count {v.get('result')}, wanted {counter + 1}")
    ctx.pool_counted(c.key, n, counter + 1)
    data = os.urandom(2048)
    c.raw("PUT", f"/v1/sessions/{sid}/files/blob.bin", data)
    st, _, back = c.raw("GET", f"/v1/sessions/{sid}/files/blob.bin")
    if st != 200 or back != data:
        raise Failure(f"file back {st}, {len(back)} bytes")
    if n % 2 == 0:
        fork = c.call("POST", f"/v1/sessions/{sid}/fork")["id"]
        ok(c.call("POST", f"/v1/sessions/{fork}/execute", {"code": "count = -1\ncount"}))
        c.call("DELETE", f"/v1/sessions/{fork}")
    else:
        snap = c.call("POST", f"/v1/sessions/{sid}/snapshot")["snapshot_id"]
        restored = c.call("POST", "/v1/sessions", {"snapshot": snap})["id"]
        v = ok(c.call("POST", f"/v1/sessions/{restored}/execute", {"code": "count"}))
        if v.get("result") != str(counter + 1):
            raise Failure(f"restored {v.get('result')}")
        c.call("DELETE", f"/v1/sessions/{restored}")
        c.call("DELETE", f"/v1/snapshots/{snap}")


def answers(calls, k=1):
    return [{"call_id": x["call_id"], "result": x["arguments"]["i"] * k} for x in calls]


def finish(c, v, k=1):
    while v.get("status") == "suspended":
        v = c.call("POST", f"/v1/executions/{v['execution_id']}/resume",
                   {"results": answers(v["pending_calls"], k)})
    return v


def code_mode(ctx, n):
    c = ctx.client("code_mode")
    v = c.call("POST", "/v1/execute", {"code": LOOP, "template": "python", "tools": TOOLS})
    if v.get("status") != "suspended":
        raise Failure(f"not suspended: {json.dumps(v)[:300]}")
    v = c.call("POST", f"/v1/executions/{v['execution_id']}/resume",
               {"results": answers(v["pending_calls"])})
    fork = c.call("POST", f"/v1/executions/{v['execution_id']}/fork")
    ok(finish(c, fork, 10), "60\n")  # 0 answered as itself, then 1, 2 and 3 times ten
    ok(finish(c, v), "6\n")
    # One evicted to its journal (3 s) and resumed from it; one cancelled.
    v = c.call("POST", "/v1/execute", {"code": LOOP, "template": "python", "tools": TOOLS})
    if n % 2 == 0:
        time.sleep(4)
        ok(finish(c, v), "6\n")
    else:
        c.call("DELETE", f"/v1/executions/{v['execution_id']}")
    # Session turns take tools too.
    sid = c.call("POST", "/v1/sessions", {"template": "python"})["id"]
    ok(finish(c, c.call("POST", f"/v1/sessions/{sid}/execute", {"code": LOOP, "tools": TOOLS})),
       "6\n")
    c.call("DELETE", f"/v1/sessions/{sid}")


EGRESS = (
    "import os, urllib.request\n"
    "req = urllib.request.Request('{url}', headers={{'Authorization': 'Bearer ' + os.environ['TOKEN']}})\n"
    "body = urllib.request.urlopen(req).read().decode()\n"
    "print(len(body) > 0, 'TOKEN' in os.environ)\n"
    "print(body)\n"
)


def egress(ctx, n):
    c = ctx.client("egress")
    value = "tok-" + os.urandom(12).hex()
    secrets = {"TOKEN": {"value": value, "hosts": ["127.0.0.1"]}}
    path = "/gzip-echo" if n % 2 else "/echo"
    v = ok(c.call("POST", "/v1/execute", {
        "code": EGRESS.format(url=f"{ctx.upstream}{path}"), "template": "python",
        "secrets": secrets}))
    if value in json.dumps(v):
        raise Failure("the secret's value came back to the program")
    if not v["stdout"].startswith("True True"):
        raise Failure(f"egress stdout {v['stdout'][:200]!r}")
    sid = c.call("POST", "/v1/sessions", {"template": "python", "secrets": secrets})["id"]
    for _ in range(2):
        v = ok(c.call("POST", f"/v1/sessions/{sid}/execute",
                      {"code": EGRESS.format(url=f"{ctx.upstream}/echo")}))
        if value in json.dumps(v):
            raise Failure("the secret's value came back in a session turn")
    c.call("DELETE", f"/v1/sessions/{sid}")


def e2b(ctx, n):
    from e2b_code_interpreter import Context, Sandbox
    key = ctx.key_for(n)
    sbx = Sandbox.create(timeout=120, api_key=key, metadata={"soak": str(n)})
    try:
        if sbx.run_code("x = 20\nx + 1").text != "21":
            raise Failure("e2b run_code")
        # The SDK's context calls send no access token (only `run_code` does), and a server
        # with API keys answers them 401: contexts over plain HTTP, with the sandbox's token.
        c = ctx.client("e2b")
        cx = Context.from_json(c.call("POST", "/e2b/contexts", {}, token=sbx._envd_access_token,
                                      sandbox=sbx.sandbox_id))
        if sbx.run_code("y = 2\ny * 3", context=cx).text != "6":
            raise Failure("e2b context")
        sbx.files.write("data.csv", "a,b\n1,2\n")
        if sbx.files.read("data.csv") != "a,b\n1,2\n":
            raise Failure("e2b files")
        if sbx.run_code("import pandas as pd\nint(pd.read_csv('data.csv').b.sum())").text != "2":
            raise Failure("e2b pandas")
        if n % 2:  # otherwise the kill ends it
            c.call("DELETE", f"/e2b/contexts/{cx.id}", token=sbx._envd_access_token,
                   sandbox=sbx.sandbox_id)
        if n % 3 == 0:
            sbx.pause()
            again = Sandbox.connect(sbx.sandbox_id, api_key=key)
            if again.run_code("x").text != "20":
                raise Failure("e2b resumed")
        if n % 4 == 1:
            (one,) = sbx.fork(count=1, timeout=60)
            if isinstance(one, Exception):
                raise Failure(f"e2b fork: {one}")
            one.kill()
    finally:
        sbx.kill()


class Mcp:
    def __init__(self, c: Client):
        self.c, self.next = c, 2
        st, h, data = c.raw("POST", "/mcp", json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "soak", "version": "0"}}}).encode(), self.headers())
        if st != 200 or "mcp-session-id" not in h:
            raise Failure(f"mcp initialize {st} {data[:200]!r}")
        self.session = h["mcp-session-id"]
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def headers(self):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if getattr(self, "session", None):
            h.update({"mcp-session-id": self.session, "mcp-protocol-version": "2025-06-18"})
        return h

    def send(self, body) -> bytes:
        return self.c.raw("POST", "/mcp", json.dumps(body).encode(), self.headers())[2]

    def tool(self, name, arguments) -> tuple[bool, str]:
        i, self.next = self.next, self.next + 1
        data = self.send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                          "params": {"name": name, "arguments": arguments}}).decode()
        for line in data.splitlines():
            d = line[5:].strip() if line.startswith("data:") else line
            if '"result"' in d:
                r = json.loads(d)["result"]
                return bool(r.get("isError")), r["content"][0]["text"]
        raise Failure(f"mcp {name}: no result in {data[:300]!r}")

    def close(self):
        self.c.raw("DELETE", "/mcp", None, self.headers())


def mcp(ctx, n):
    m = Mcp(ctx.client("mcp"))
    try:
        err, text = m.tool("execute_python", {"code": "print(6 * 7)"})
        if err or "42" not in text:
            raise Failure(f"mcp execute_python: {text[:200]}")
        err, text = m.tool("open_session", {"template": "python"})
        if err:
            raise Failure(f"mcp open_session: {text[:200]}")
        sid = json.loads(text)["session_id"]
        err, text = m.tool("run_in_session", {"session_id": sid, "code": "x = 41\nx + 1"})
        if err or "42" not in text:
            raise Failure(f"mcp run_in_session: {text[:200]}")
        err, text = m.tool("close_session", {"session_id": sid})
        if err:
            raise Failure(f"mcp close_session: {text[:200]}")
    finally:
        m.close()


def kernel(ctx, n):
    c = ctx.client("kernel")
    kid = c.call("POST", "/api/kernels", {"name": "vivarium-python"})["id"]
    try:
        ws = ws_connect(ctx.host, ctx.port, f"/api/kernels/{kid}/channels?token={c.key}")
        ws.settimeout(60)
        try:
            for code, want in (("a = 6", None), ("a * 7", "42")):
                msg_id, text = kernel_request(code)
                ws_send(ws, text)
                got, replied = None, False
                while not replied:
                    m = json.loads(ws_recv(ws) or "{}")
                    if m.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    if m.get("msg_type") == "execute_result":
                        got = m["content"]["data"].get("text/plain")
                    elif m.get("msg_type") == "execute_reply":
                        replied = True
                        if m["content"].get("status") != "ok":
                            raise Failure(f"kernel reply {m['content']}")
                if want is not None and got != want:
                    raise Failure(f"kernel result {got!r}")
        finally:
            ws.close()
    finally:
        c.call("DELETE", f"/api/kernels/{kid}")


def hostile_corpus() -> list[tuple[str, str, dict, set]]:
    """(name, code, limits, expected statuses) of the corpus programs the soak can run as
    they are: no placeholder, no generated input, no known bug, not refused up front."""
    out = []
    for cat in ("exhaustion", "fs", "interp", "proc"):
        d = os.path.join(ROOT, "tests", "hostile", cat)
        for name in sorted(os.listdir(d)):
            if not name.endswith(".py"):
                continue
            code = open(os.path.join(d, name)).read()
            head = {}
            for line in code.splitlines():
                if not line.startswith("# ") or ":" not in line:
                    break
                k, v = line[2:].split(":", 1)
                head[k.strip()] = v.strip()
            expect = set(head.get("expect", "").split())
            if (any(p in code for p in PLACEHOLDERS) or "input" in head or "known-bug" in head
                    or "refused" in expect or not expect):
                continue
            limits = dict(BASE_LIMITS)
            for pair in head.get("limits", "").split():
                k, v = pair.split("=")
                limits[k] = int(v)
            out.append((f"{cat}/{name}", code, limits, expect))
    return out


def hostile(ctx, n):
    c = ctx.client("hostile")
    name, code, limits, expect = ctx.corpus[n % len(ctx.corpus)]
    v = c.call("POST", "/v1/execute", {"code": code, "template": "python", "limits": limits})
    if v.get("status") not in expect:
        raise Failure(f"{name}: status {v.get('status')} not in {sorted(expect)}")
    kind = n % 4
    if kind == 0:  # a session turn past its timeout: rolled back, state kept
        sid = c.call("POST", "/v1/sessions", {"template": "python"})["id"]
        ok(c.call("POST", f"/v1/sessions/{sid}/execute", {"code": "x = 1"}))
        v = c.call("POST", f"/v1/sessions/{sid}/execute",
                   {"code": "x = 2\nwhile True: pass", "limits": {"timeout_ms": 300}})
        if not v.get("rolled_back"):
            raise Failure(f"not rolled back: {json.dumps(v)[:200]}")
        if ok(c.call("POST", f"/v1/sessions/{sid}/execute", {"code": "x"})).get("result") != "1":
            raise Failure("rolled-back state")
        c.call("DELETE", f"/v1/sessions/{sid}")
    elif kind == 1:  # malformed requests: 400, never 5xx
        for body in (b"{not json", json.dumps({"code": 5}).encode(),
                     json.dumps({"code": "1", "files": [{"path": "../x", "content": "AA=="}]}).encode(),
                     json.dumps({"code": "1", "limits": {"timeout_ms": 10**15}}).encode()):
            st = c.status_of("POST", "/v1/execute", body, {"Content-Type": "application/json"})
            if st != 400:
                raise Failure(f"malformed request: {st}")
    elif kind == 2:  # a client that hangs up mid-run
        s = socket.create_connection((ctx.host, ctx.port))
        body = json.dumps({"code": "import time\ntime.sleep(1)", "template": "python"})
        s.sendall((f"POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {c.key}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
        time.sleep(0.2)
        s.close()
    else:  # network refused: a metadata address and a host not allowed
        v = ok(c.call("POST", "/v1/execute", {"code": (
            "import urllib.request\n"
            "for u in ('http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/'):\n"
            "    try:\n        urllib.request.urlopen(u, timeout=2)\n        print('REACHED', u)\n"
            "    except Exception as e:\n        print('refused', type(e).__name__)\n"),
            "template": "python"}))
        if "REACHED" in v["stdout"]:
            raise Failure(f"reached: {v['stdout']}")


SCENARIOS = [fresh_runs, hibernate_wake, fresh_runs, code_mode, egress, e2b, fresh_runs, mcp,
             kernel, hibernate_wake, hostile]


class Ctx:
    def __init__(self, host, port, upstream, stats):
        self.host, self.port, self.upstream, self.stats = host, port, upstream, stats
        self.corpus = hostile_corpus()
        self.local = threading.local()
        self.pool_lock = threading.Lock()
        self.pool: dict[tuple[str, int], list] = {}  # (key, slot) -> [session id, count, lock]

    def key_for(self, n: int) -> str:
        return list(KEYS.values())[n % len(KEYS)]

    def client(self, scenario: str) -> Client:
        clients = getattr(self.local, "clients", None)
        if clients is None:
            clients = self.local.clients = {}
        key = self.key_for(self.local.n)
        c = clients.get(key)
        if c is None:
            c = clients[key] = Client(self.host, self.port, key, self.stats)
        c.scenario = scenario
        return c

    def pool_session(self, c: Client, n: int) -> tuple[str, int]:
        """A standing session of the key's pool, held by this thread until pool_counted."""
        slot = (c.key, n % POOL)
        with self.pool_lock:
            entry = self.pool.setdefault(slot, [None, 0, threading.Lock()])
        entry[2].acquire()
        if entry[0] is None:
            entry[0] = c.call("POST", "/v1/sessions", {"template": "python"})["id"]
            ok(c.call("POST", f"/v1/sessions/{entry[0]}/execute", {"code": "count = 0"}))
            entry[1] = 0
        self.local.held = entry
        return entry[0], entry[1]

    def pool_counted(self, key: str, n: int, count: int) -> None:
        self.local.held[1] = count

    def release(self) -> None:
        held = getattr(self.local, "held", None)
        if held is not None:
            self.local.held = None
            held[2].release()


class Gate:
    """Lets the sampler stop the load between scenarios, so a sample sees only what stays."""

    def __init__(self, threads: int):
        self.cond = threading.Condition()
        self.paused = self.stopped = False
        self.waiting = 0
        self.threads = threads

    def checkpoint(self) -> bool:
        """Waits while the load is paused; whether to go on (False once stopped)."""
        with self.cond:
            if self.paused:
                self.waiting += 1
                self.cond.notify_all()
                while self.paused:
                    self.cond.wait()
                self.waiting -= 1
            return not self.stopped

    def pause(self, within: float) -> bool:
        with self.cond:
            self.paused = True
            return self.cond.wait_for(lambda: self.waiting >= self.threads, within)

    def resume(self, stop: bool = False) -> None:
        with self.cond:
            self.paused = False
            self.stopped = stop
            self.cond.notify_all()

    def leave(self) -> None:
        with self.cond:
            self.threads -= 1
            self.cond.notify_all()


def load(ctx: Ctx, gate: Gate, t: int, pause_s: float) -> None:
    ctx.local.n = 0
    i = t * 3  # threads start at different places of the cycle
    try:
        # Until the sampler stops it after its last sample (taken paused, as every other: the
        # threads' connections still open), or the request bound.
        while gate.checkpoint() and not ctx.stats.exhausted():
            scenario = SCENARIOS[i % len(SCENARIOS)]
            ctx.local.n = i // len(SCENARIOS) * 7 + t
            try:
                scenario(ctx, ctx.local.n)
            except Exception as e:  # noqa: BLE001 - every failure is counted and shown
                why = f"{type(e).__name__}: {e}"
                if not isinstance(e, Failure):
                    why += "\n" + traceback.format_exc()
                ctx.stats.fail(scenario.__name__, why)
            finally:
                ctx.release()
            i += 1
            time.sleep(pause_s)
    finally:
        gate.leave()


# --- sampling --------------------------------------------------------------------------------

def proc_figures(pid: int) -> tuple[int, int, int]:
    """(RSS KiB, open descriptors, threads) of `pid`; None for what cannot be read."""
    rss = threads = None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except PermissionError:
        fds = None
    return rss, fds, threads


def du(path: str) -> tuple[int, int]:
    total = files = 0
    for root, _, names in os.walk(path):
        for f in names:
            try:
                total += os.stat(os.path.join(root, f)).st_blocks * 512
                files += 1
            except OSError:
                pass
    return total, files


def metrics(host: str, port: int) -> tuple[dict, int]:
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out, series = {}, 0
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
            series += 1
    return out, series


def e2b_count(host: str, port: int) -> int:
    n = 0
    for key in KEYS.values():
        conn = http.client.HTTPConnection(host, port, timeout=60)
        conn.request("GET", "/e2b/v2/sandboxes?limit=100", headers={"X-API-Key": key})
        r = conn.getresponse()
        data = r.read()
        conn.close()
        if r.status == 200:
            n += len(json.loads(data))
    return n


def quota_sum(m: dict, quota: str) -> float:
    return sum(v for k, v in m.items()
               if k.startswith("vivarium_tenant_quota_used{") and f'quota="{quota}"' in k)


def sample(server_pid: int, host: str, port: int, store: str, started: float,
           stats: Stats, five_before: float) -> dict:
    rss, fds, threads = proc_figures(server_pid)
    w_rss = w_fds = w_threads = 0
    w_max = 0
    workers = children(server_pid)
    for w in workers:
        try:
            r, f, t = proc_figures(w)
        except FileNotFoundError:
            continue
        w_rss += r or 0
        w_fds += f or 0
        w_threads += t or 0
        w_max = max(w_max, r or 0)
    store_bytes, store_files = du(store)
    m, series = metrics(host, port)
    five = sum(v for k, v in m.items()
               if k.startswith('vivarium_http_responses_total{code="5'))
    return {
        "minute": round((time.time() - started) / 60, 2),
        "supervisor_rss_mib": round(rss / 1024, 1),
        "supervisor_fds": fds,
        "supervisor_threads": threads,
        "workers": len(workers),
        "workers_rss_mib": round(w_rss / 1024, 1),
        "worker_rss_max_mib": round(w_max / 1024, 1),
        "workers_fds": w_fds,
        "workers_threads": w_threads,
        "store_mib": round(store_bytes / 2**20, 2),
        "store_files": store_files,
        "live_sessions": m.get("vivarium_live_sessions", 0),
        "hibernated_sessions": m.get("vivarium_hibernated_sessions", 0),
        "pooled_instances": m.get("vivarium_pooled_instances", 0),
        "sandbox_dirs": m.get("vivarium_sandbox_dirs", 0),
        "memory_charged_mib": round(m.get("vivarium_memory_charged_bytes", 0) / 2**20, 1),
        "mcp_sessions": quota_sum(m, "mcp_sessions"),
        "kernel_sockets": quota_sum(m, "kernel_sockets"),
        "suspended_executions": quota_sum(m, "suspended_executions"),
        "snapshot_quota_mib": round(quota_sum(m, "snapshot_bytes") / 2**20, 2),
        "e2b_sandboxes": e2b_count(host, port),
        "metric_series": series,
        "requests": stats.requests,
        "server_5xx": five - five_before,
        "workers_restarted": m.get("vivarium_workers_restarted_total", 0),
        "load1": os.getloadavg()[0],
    }


# (figure, unit of noise for a figure near zero)
JUDGED = [
    ("supervisor_rss_mib", 1), ("supervisor_fds", 1), ("supervisor_threads", 1),
    ("workers_rss_mib", 1), ("workers_fds", 1), ("workers_threads", 1),
    ("store_mib", 0.01), ("store_files", 1),
    ("live_sessions", 1), ("hibernated_sessions", 1), ("pooled_instances", 1),
    ("sandbox_dirs", 1), ("memory_charged_mib", 1), ("mcp_sessions", 1), ("kernel_sockets", 1),
    ("suspended_executions", 1), ("snapshot_quota_mib", 0.01), ("e2b_sandboxes", 1),
    ("metric_series", 1),
]


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    return slope, my - slope * mx


def judge(rows: list[dict], warmup: float) -> list[dict]:
    window = [r for r in rows if r["minute"] >= warmup - 0.5]
    out = []
    for name, noise in JUDGED:
        pts = [(r["minute"], float(r[name])) for r in window if r[name] is not None]
        if len(pts) < 2:
            out.append({"figure": name, "verdict": "n/a"})
            continue
        xs, ys = zip(*pts)
        slope, icpt = fit(xs, ys)
        start, end = icpt + slope * xs[0], icpt + slope * xs[-1]
        rise = end - start
        allowed = max(0.05 * abs(start), noise)
        out.append({
            "figure": name, "at_warmup": ys[0], "last": ys[-1],
            "min": min(ys), "max": max(ys),
            "fit_start": round(start, 3), "fit_end": round(end, 3),
            "fit_growth_pct": round(100 * rise / start, 2) if start else None,
            "last_vs_warmup_pct": round(100 * (ys[-1] - ys[0]) / ys[0], 2) if ys[0] else None,
            "allowed_rise": round(allowed, 3),
            "verdict": "PASS" if rise < allowed else "FAIL",
        })
    return out


def plot(rows: list[dict], warmup: float, path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = [r["minute"] for r in rows]
    panels = [
        ("supervisor: resident memory (MiB)", ["supervisor_rss_mib"]),
        ("workers: resident memory (MiB)", ["workers_rss_mib", "worker_rss_max_mib"]),
        ("memory charged to the budget (MiB)", ["memory_charged_mib"]),
        ("open descriptors", ["supervisor_fds", "workers_fds"]),
        ("threads", ["supervisor_threads", "workers_threads"]),
        ("snapshot store (MiB)", ["store_mib", "snapshot_quota_mib"]),
        ("records", ["store_files", "live_sessions", "hibernated_sessions", "pooled_instances",
                     "sandbox_dirs", "mcp_sessions", "kernel_sockets", "suspended_executions",
                     "e2b_sandboxes"]),
        ("metric series", ["metric_series"]),
        ("load average (1 min), 2 cores", ["load1"]),
    ]
    fig, axes = plt.subplots(3, 3, figsize=(16, 11), sharex=True)
    for ax, (label, names) in zip(axes.flat, panels):
        for name in names:
            ax.plot(x, [r[name] if r[name] is not None else float("nan") for r in rows],
                    marker=".", label=name)
        ax.axvline(warmup, color="grey", linestyle="--", linewidth=1)
        ax.set_title(label)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(0, lo), hi * 1.05 if hi > 0 else 1)
    for ax in axes[-1]:
        ax.set_xlabel("minute")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def start_server(binary: str, keys: str, store: str, log: str, upstream_ca: str):
    args = [binary, "serve", "--listen", "127.0.0.1:0", "--api-keys-file", keys,
            "--audit-log", "/dev/null", "--snapshot-dir", store,
            "--hibernate-after-secs", "3", "--suspended-resident-secs", "3",
            "--egress-allow", "127.0.0.1", "--egress-allow-private", "127.0.0.1/32",
            "--egress-ca-bundle", upstream_ca,
            "--session-lifetime-secs", "86400"]
    env = dict(os.environ, VIVARIUM_LOG="warn")
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(log, "w"), env=env,
                              text=True)
    line = server.stdout.readline()
    if "http://" not in line:
        raise SystemExit(f"the server did not start ({line!r}); see {log}")
    host, port = line.split("http://", 1)[1].split()[0].rsplit(":", 1)
    wait_ready(host, int(port))
    return server, host, int(port)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=60)
    p.add_argument("--interval", type=float, default=60, help="seconds between samples")
    p.add_argument("--warmup", type=float, default=None, help="minutes (default: a quarter)")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--pause-ms", type=float, default=50, help="each thread, between scenarios")
    p.add_argument("--max-requests", type=int, default=400_000)
    p.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "vivarium"))
    p.add_argument("--out", required=True, help="path prefix: OUT.csv, OUT.png, OUT.json, OUT.md")
    p.add_argument("--rejudge", action="store_true",
                   help="run nothing: judge OUT.csv again, rewriting OUT.json, OUT.md, OUT.png")
    a = p.parse_args()
    if a.rejudge:
        return rejudge(a.out, a.warmup)
    warmup = a.warmup if a.warmup is not None else a.minutes / 4
    try:
        import e2b_code_interpreter  # noqa: F401
        import matplotlib  # noqa: F401
    except ImportError as e:
        raise SystemExit(f"{e}: run with a venv that has them, e.g.\n  python3 -m venv "
                         "target/soak_venv && target/soak_venv/bin/pip install e2b==2.63.0 "
                         "e2b-code-interpreter==2.11.5 matplotlib")
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    work = tempfile.mkdtemp(prefix="vivarium-soak-")
    store = os.path.join(work, "snapshots")
    keys = os.path.join(work, "keys")
    with open(keys, "w") as f:
        f.write("".join(f"{k}:{v}\n" for k, v in KEYS.items()))
    up = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "fixtures", "upstream.py"),
                           os.path.join(work, "upstream")], stdout=subprocess.PIPE, text=True)
    ports = json.loads(up.stdout.readline())
    log = os.path.join(work, "server.log")
    server, host, port = start_server(a.binary, keys, store, log, ports["ca"])
    base = f"http://{host}:{port}"
    os.environ.update(E2B_API_URL=f"{base}/e2b", E2B_SANDBOX_URL=f"{base}/e2b",
                      E2B_API_KEY=KEYS["alice"])
    os.environ.pop("E2B_DOMAIN", None)
    os.environ.pop("E2B_DEBUG", None)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    print(f"soak: {a.minutes} min, {a.threads} threads, sample every {a.interval} s, warm-up "
          f"{warmup} min; server {base} (pid {server.pid}, {a.binary}, HEAD {commit}); "
          f"work dir {work}", flush=True)

    # The server's count of 5xx before the load: `wait_ready`'s polls of `/readyz` while the
    # runtime loaded were 503s, rightly.
    five_before = sum(v for k, v in metrics(host, port)[0].items()
                      if k.startswith('vivarium_http_responses_total{code="5'))
    stats = Stats(a.max_requests)
    ctx = Ctx(host, port, f"http://127.0.0.1:{ports['http']}", stats)
    gate = Gate(a.threads)
    started = time.time()
    until = started + a.minutes * 60
    threads = [threading.Thread(target=load, args=(ctx, gate, t, a.pause_ms / 1000),
                                daemon=True) for t in range(a.threads)]
    rows = []
    csv_path = a.out + ".csv"
    try:
        for t in threads:
            t.start()
        next_at = started
        with open(csv_path, "w", newline="") as f:
            writer = None
            while True:
                now = time.time()
                final = now >= until or not any(t.is_alive() for t in threads)
                if not final and now < next_at:
                    time.sleep(min(1.0, next_at - now))
                    continue
                quiet = gate.pause(180)
                time.sleep(5)  # idle sessions hibernate (3 s), evictions land
                row = sample(server.pid, host, port, store, started, stats, five_before)
                row["quiet"] = quiet
                gate.resume(stop=final)
                rows.append(row)
                if writer is None:
                    writer = csv.DictWriter(f, fieldnames=list(row))
                    writer.writeheader()
                writer.writerow(row)
                f.flush()
                print(f"[{row['minute']:6.2f} min] sup {row['supervisor_rss_mib']} MiB "
                      f"{row['supervisor_fds']} fds {row['supervisor_threads']} thr | workers "
                      f"{row['workers']} {row['workers_rss_mib']} MiB {row['workers_fds']} fds "
                      f"{row['workers_threads']} thr | store {row['store_mib']} MiB "
                      f"{row['store_files']} files | live {row['live_sessions']:.0f} hib "
                      f"{row['hibernated_sessions']:.0f} mcp {row['mcp_sessions']:.0f} susp "
                      f"{row['suspended_executions']:.0f} e2b {row['e2b_sandboxes']} | "
                      f"{row['requests']} req, 5xx {row['server_5xx']:.0f}, failures "
                      f"{sum(stats.failures.values())}, load {row['load1']:.2f}", flush=True)
                if final:
                    break
                next_at += a.interval
        for t in threads:
            t.join(timeout=300)
        final_metrics, _ = metrics(host, port)
    finally:
        stop(server)
        up.kill()
        up.wait()
    panics = sum(1 for line in open(log, errors="replace") if "panic" in line)
    five_server = sum(v for k, v in final_metrics.items()
                      if k.startswith('vivarium_http_responses_total{code="5')) - five_before
    summary = {
        "commit": commit, "binary": a.binary, "minutes": a.minutes, "interval_s": a.interval,
        "warmup_min": warmup, "threads": a.threads, "requests": stats.requests,
        "statuses": {str(k): v for k, v in sorted(stats.statuses.items())},
        "by_scenario": {f"{s} {st}": n for (s, st), n in sorted(stats.by_scenario.items())},
        "client_5xx": sum(n for s, n in stats.statuses.items() if s >= 500),
        "server_5xx": five_server, "server_5xx_before_load": five_before,
        "server_responses": {k: v for k, v in final_metrics.items()
                             if k.startswith("vivarium_http_responses_total")},
        "failures": dict(stats.failures), "failure_examples": stats.failure_examples,
        "server_errors": stats.server_errors[:50], "server_log_panic_lines": panics,
        "server_log": log, "load_average_end": os.getloadavg(),
    }
    passed = report(a.out, rows, warmup, summary)
    shutil.rmtree(os.path.join(work, "snapshots"), ignore_errors=True)
    sys.exit(0 if passed else 1)


def report(out: str, rows: list[dict], warmup: float, summary: dict) -> bool:
    """Judges `rows`, writes OUT.json (`summary` with the verdicts), OUT.md and OUT.png;
    whether the soak passed."""
    verdicts = judge(rows, warmup)
    five_client, five_server = summary["client_5xx"], summary["server_5xx"]
    passed = all(v["verdict"] == "PASS" for v in verdicts) and not five_server and not five_client
    summary.update(verdicts=verdicts, passed=passed, warmup_min=warmup)
    title = (f"vivarium soak: {rows[-1]['minute']:.0f} min, {summary['requests']} requests, HEAD "
             f"{summary['commit']}, 5xx {five_client}/{five_server:.0f} (client/server)")
    plot(rows, warmup, out + ".png", title)
    with open(out + ".json", "w") as f:
        json.dump(summary, f, indent=2)
    lines = [
        f"Judged from minute {warmup:g} to {rows[-1]['minute']:.1f} ({len(rows)} samples in all): "
        "growth of a least-squares line over the window, beside last sample vs the first in it.",
        "",
        "| figure | at warm-up | last | min–max | fit growth | last vs warm-up | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        if v["verdict"] == "n/a":
            lines.append(f"| {v['figure']} | — | — | — | — | — | n/a |")
            continue
        pct = lambda x: "—" if x is None else f"{x:+.1f} %"
        lines.append(f"| {v['figure']} | {v['at_warmup']:g} | {v['last']:g} | {v['min']:g}–"
                     f"{v['max']:g} | {pct(v['fit_growth_pct'])} ({v['fit_end'] - v['fit_start']:+.2f}) "
                     f"| {pct(v['last_vs_warmup_pct'])} | {v['verdict']} |")
    failures = summary["failures"]
    lines += ["", f"Requests: {summary['requests']} (client side, E2B SDK calls not counted "
              f"there); statuses {summary['statuses']}; 5xx: {five_client} client side, "
              f"{five_server:.0f} in the server's `vivarium_http_responses_total`; scenario "
              f"failures: {sum(failures.values())}; panic lines in the server's log: "
              f"{summary['server_log_panic_lines']}."]
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    for k, n in failures.items():
        print(f"failure x{n}: {summary['failure_examples'][k][:600]}")
    print("SOAK", "PASS" if passed else "FAIL", flush=True)
    return passed


def rejudge(out: str, warmup: float | None) -> None:
    """Judges a finished soak again from OUT.csv and OUT.json (after a change to the rule)."""
    with open(out + ".csv") as f:
        rows = [{k: (None if v == "" else v == "True" if v in ("True", "False") else float(v))
                 for k, v in r.items()} for r in csv.DictReader(f)]
    with open(out + ".json") as f:
        summary = json.load(f)
    report(out, rows, warmup if warmup is not None else summary["warmup_min"], summary)

if __name__ == "__main__":
    main()
