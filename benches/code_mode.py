"""Code mode's goals table (issue 28), against a release `vivarium serve` on 127.0.0.1, every
figure beside baselines measured in the same run on the same server:

- a tool call's round trip inside a running program, streamed: the client answers each
  `tool_call` event at `tool-results` and times from its answer leaving to the next call's
  event arriving (caller -> guest -> caller: the guest's loop, the door, the worker seam, SSE);
- the same with suspend/resume over plain HTTP: each `resume` request, from sending it to the
  next `suspended` response;
- 100 sequential calls in one program, end to end (execute to the final result), both ways;
- 10 calls under `asyncio.gather`: how many suspensions, and the time;
- a resume after `kill -9` and a restart (the journal replayed), beside a resume of the same
  execution still resident;
- baselines: a hello world `POST /v1/execute` (a fresh sandbox over HTTP: the floor of any
  request that runs code), and the same 100-iteration program with no tool call.

Medians of ROUNDS rounds, warm-up excluded (the first round of each).

    python benches/code_mode.py target/release/vivarium benches/results/code_mode.json

Bounded: ROUNDS (env CODE_MODE_ROUNDS, default 7) rounds of each; about two minutes."""

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from http_load import stop, wait_ready

ROUNDS = int(os.environ.get("CODE_MODE_ROUNDS", "7"))
CALLS = 100

TOOLS = [
    {
        "name": "echo",
        "description": "Gives back its argument.",
        "parameters": {
            "type": "object",
            "properties": {"i": {"type": "integer"}},
            "required": ["i"],
        },
    }
]

LOOP = f"total = 0\nfor i in range({CALLS}):\n    total += tools.echo(i=i)\nprint(total)\n"
LOOP_NO_TOOLS = f"total = 0\nfor i in range({CALLS}):\n    total += i\nprint(total)\n"
GATHER = (
    "import asyncio\n"
    "r = await asyncio.gather(*(tools.aio.echo(i=i) for i in range(10)))\n"
    "print(sum(r))\n"
)


def start(binary: str, store: str) -> tuple[subprocess.Popen, str, int]:
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--audit-log", "/dev/null"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, VIVARIUM_LOG="warn", VIVARIUM_SNAPSHOT_DIR=store),
    )
    addr = server.stdout.readline().split()[-1].replace("http://", "")
    host, port = addr.rsplit(":", 1)
    wait_ready(host, int(port))
    return server, host, int(port)


class Client:
    def __init__(self, host: str, port: int):
        self.conn = http.client.HTTPConnection(host, port, timeout=120)

    def post(self, path: str, body: dict) -> dict:
        self.conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        if r.status >= 300:
            raise SystemExit(f"{path}: {r.status} {data[:300]!r}")
        return json.loads(data)


def answers(calls: list) -> list:
    return [{"call_id": c["call_id"], "result": c["arguments"]["i"]} for c in calls]


def by_resume(c: Client, code: str) -> tuple[float, list[float], int, dict]:
    """Runs `code` answering every round by resume: total seconds, each resume's seconds,
    the number of suspensions, the final result."""
    t0 = time.perf_counter()
    v = c.post("/v1/execute", {"code": code, "template": "python", "tools": TOOLS})
    resumes, suspensions = [], 0
    while v.get("status") == "suspended":
        suspensions += 1
        t = time.perf_counter()
        v = c.post(f"/v1/executions/{v['execution_id']}/resume", {"results": answers(v["pending_calls"])})
        resumes.append(time.perf_counter() - t)
    return time.perf_counter() - t0, resumes, suspensions, v


def by_stream(host: str, port: int, code: str) -> tuple[float, list[float], dict]:
    """Runs `code` over server-sent events, answering each `tool_call` at `tool-results`:
    total seconds, each round trip (answer sent -> next call's event), the final result."""
    stream = http.client.HTTPConnection(host, port, timeout=120)
    answer = Client(host, port)
    t0 = time.perf_counter()
    stream.request(
        "POST",
        "/v1/execute",
        json.dumps({"code": code, "template": "python", "tools": TOOLS}),
        {"Content-Type": "application/json", "Accept": "text/event-stream"},
    )
    r = stream.getresponse()
    trips, sent, event, result = [], None, None, None
    while True:
        line = r.fp.readline()
        if not line:
            break
        line = line.decode().rstrip("\n")
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:") and event == "tool_call":
            call = json.loads(line[5:])
            if sent is not None:
                trips.append(time.perf_counter() - sent)
            sent = time.perf_counter()
            answer.post(
                f"/v1/executions/{call['execution_id']}/tool-results",
                {"call_id": call["call_id"], "result": call["arguments"]["i"]},
            )
        elif line.startswith("data:") and event == "result":
            result = json.loads(line[5:])
            break
    stream.close()
    return time.perf_counter() - t0, trips, result


def median_ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 3)


def main() -> None:
    binary, out = sys.argv[1], sys.argv[2]
    store = tempfile.mkdtemp(prefix="vivarium-code-mode-")
    server, host, port = start(binary, store)
    c = Client(host, port)
    rows = {k: [] for k in [
        "hello", "loop_no_tools", "resume_total", "resume_each", "stream_total",
        "stream_trip", "gather_total", "gather_suspensions",
    ]}
    try:
        for rnd in range(ROUNDS + 1):
            print(f"round {rnd}", file=sys.stderr, flush=True)
            hello = []
            for _ in range(20):
                t = time.perf_counter()
                c.post("/v1/execute", {"code": "print('hello world')", "template": "python"})
                hello.append(time.perf_counter() - t)
            t = time.perf_counter()
            v = c.post("/v1/execute", {"code": LOOP_NO_TOOLS, "template": "python"})
            no_tools = time.perf_counter() - t
            assert v["stdout"] == f"{sum(range(CALLS))}\n", v
            total, resumes, n, v = by_resume(c, LOOP)
            assert n == CALLS and v["stdout"] == f"{sum(range(CALLS))}\n", v
            s_total, trips, result = by_stream(host, port, LOOP)
            assert result and result["stdout"] == f"{sum(range(CALLS))}\n", result
            g_total, _, g_n, v = by_resume(c, GATHER)
            assert v["stdout"] == "45\n", v
            if rnd == 0:
                continue  # warm-up
            rows["hello"] += hello
            rows["loop_no_tools"].append(no_tools)
            rows["resume_total"].append(total)
            rows["resume_each"] += resumes
            rows["stream_total"].append(s_total)
            rows["stream_trip"] += trips
            rows["gather_total"].append(g_total)
            rows["gather_suspensions"].append(g_n)

        # A resume after kill -9: the same program stopped at its 50th round, resumed by a
        # fresh server (replaying 49 answered rounds), beside resuming it while resident.
        def to_round(k: int) -> dict:
            v = c.post("/v1/execute", {"code": LOOP, "template": "python", "tools": TOOLS})
            for _ in range(k - 1):
                v = c.post(f"/v1/executions/{v['execution_id']}/resume", {"results": answers(v["pending_calls"])})
            return v

        resident, replayed = [], []
        for _ in range(3):
            v = to_round(50)
            t = time.perf_counter()
            c.post(f"/v1/executions/{v['execution_id']}/resume", {"results": answers(v["pending_calls"])})
            resident.append(time.perf_counter() - t)
        for _ in range(3):
            v = to_round(50)
            server.kill()
            server.wait()
            server, host, port = start(binary, store)
            c = Client(host, port)
            t = time.perf_counter()
            after = c.post(f"/v1/executions/{v['execution_id']}/resume", {"results": answers(v["pending_calls"])})
            replayed.append(time.perf_counter() - t)
            assert after["pending_calls"][0]["call_id"] == "call_51", after
    finally:
        stop(server)

    report = {
        "rounds": ROUNDS,
        "calls": CALLS,
        "hello_world_ms": median_ms(rows["hello"]),
        "loop_without_tools_ms": median_ms(rows["loop_no_tools"]),
        "stream_round_trip_ms": median_ms(rows["stream_trip"]),
        "resume_round_trip_ms": median_ms(rows["resume_each"]),
        "stream_100_calls_ms": median_ms(rows["stream_total"]),
        "resume_100_calls_ms": median_ms(rows["resume_total"]),
        "gather_10_suspensions": statistics.median(rows["gather_suspensions"]),
        "gather_10_ms": median_ms(rows["gather_total"]),
        "resume_resident_ms": median_ms(resident),
        "resume_after_kill_9_ms": median_ms(replayed),
    }
    print(json.dumps(report, indent=2))
    with open(out, "w") as f:
        json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
