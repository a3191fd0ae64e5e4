"""The sync client against a real server."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Literal, Optional

import pytest

from vivarium_client import (
    BadRequest,
    Client,
    NotFound,
    PolicyDenied,
    ResultEvent,
    StderrEvent,
    StdoutEvent,
    Tool,
    Unauthorized,
    VivariumError,
    tool,
)
from vivarium_client.tools import function_schema

from .conftest import Server


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with Client(server.url, api_key="") as c:
        yield c


# Executions ---------------------------------------------------------------------------


def test_execute_stdout_and_exit_code(client: Client) -> None:
    r = client.execute("import sys\nprint(sum(range(1, 11)))\nprint('warn', file=sys.stderr)",
                       template="python")
    assert r.ok and r.status == "ok"
    assert r.exit_code == 0
    assert r.stdout == "55\n"
    assert r.stderr == "warn\n"
    assert r.error is None
    assert r.id is not None and r.id.startswith("ex-")
    assert r.usage.fuel > 0 and r.usage.wall_ms > 0


def test_exit_code_of_sys_exit(client: Client) -> None:
    r = client.execute("import sys; sys.exit(3)", template="python")
    assert r.status == "error" and r.exit_code == 3 and not r.ok


def test_python_error_is_parsed(client: Client) -> None:
    r = client.execute("x = 1\nd = {}\nd['missing']", template="python")
    assert r.status == "error"
    assert r.exit_code == 1
    assert r.error is not None
    assert r.error.type == "KeyError"
    assert r.error.message == "'missing'"
    assert r.error.line == 3
    assert "Traceback" in r.error.traceback


def test_limit_breach_is_a_status(client: Client) -> None:
    r = client.execute("while True:\n    pass", limits={"timeout_ms": 300}, template="python")
    assert r.status == "timeout"
    assert r.exit_code is None
    assert r.detail is not None and "300" in r.detail


def test_files_in_and_out_as_bytes(client: Client) -> None:
    blob = bytes(range(256))
    r = client.execute(
        "data = open('in/blob.bin', 'rb').read()\n"
        "text = open('notes.txt').read()\n"
        "open('out.bin', 'wb').write(data[::-1])\n"
        "open('upper.txt', 'w').write(text.upper())\n"
        "print(len(data))",
        files={"in/blob.bin": blob, "notes.txt": "héllo"},
        template="python",
    )
    assert r.ok, r.stderr
    assert r.stdout == "256\n"
    assert r.file("out.bin") == blob[::-1]
    assert r.file("upper.txt").decode() == "HÉLLO"
    by_path = {f.path: f for f in r.files}
    assert by_path["upper.txt"].media_type == "text/plain"
    assert "in/blob.bin" not in by_path  # only what the run created or changed
    with pytest.raises(KeyError):
        r.file("nope")


def test_stdin_and_env(client: Client) -> None:
    r = client.execute("import os\nprint(input().upper(), os.environ['MODE'])",
                       stdin="abc\n", env={"MODE": "demo"}, leakage="off", template="python")
    assert r.stdout == "ABC demo\n"


def test_stream_chunks_arrive_live_and_in_order(client: Client) -> None:
    code = (
        "import sys, time\n"
        "for i in range(4):\n"
        "    print(i)\n"
        "    print('e' + str(i), file=sys.stderr)\n"
        "    time.sleep(0.15)\n"
    )
    seen: list[tuple[float, object]] = []
    with client.stream(code, template="python") as events:
        for ev in events:
            seen.append((time.monotonic(), ev))
    kinds = [type(ev).__name__ for _, ev in seen]
    assert kinds[-1] == "ResultEvent"
    out = [ev.text for _, ev in seen if isinstance(ev, StdoutEvent)]
    err = [ev.text for _, ev in seen if isinstance(ev, StderrEvent)]
    assert "".join(out) == "0\n1\n2\n3\n"
    assert "".join(err) == "e0\ne1\ne2\ne3\n"
    # Live: the first chunk came well before the result (the program slept 0.6 s in all).
    first = next(t for t, ev in seen if isinstance(ev, StdoutEvent))
    assert seen[-1][0] - first > 0.3
    final = seen[-1][1]
    assert isinstance(final, ResultEvent)
    assert final.result.stdout == "0\n1\n2\n3\n" and final.result.ok
    assert events.result is final.result


def test_stream_refusal_is_raised(client: Client) -> None:
    with pytest.raises(PolicyDenied) as info:
        for _ in client.stream("import os\nos.system('ls')", policy="deny"):
            pass
    assert info.value.code == "policy_denied"
    assert info.value.findings and info.value.findings[0]["rule"] == "os_system"


def test_check(client: Client) -> None:
    bad = client.check("def f(:\n  pass")
    assert not bad.ok and bad.errors and bad.errors[0].line == 1
    found = client.check("import os\nos.system('ls')")
    assert found.ok and [f.rule for f in found.findings] == ["os_system"]


def test_packages_and_usage(client: Client) -> None:
    pk = client.packages()
    numpy = pk.get("numpy")
    assert numpy is not None and "numpy" in numpy.imports
    assert "allowed" in pk.extra
    u = client.usage()
    assert u.tenant == "default"
    assert u.quota("runs") is not None


def test_events_and_webhooks(client: Client) -> None:
    r = client.execute("print('evented')", template="python")
    assert r.ok
    page = client.events(type="execution.finished")
    mine = [e for e in page.events if e.execution_id == r.id]
    assert mine and mine[0].status == "ok" and mine[0].usage is not None and mine[0].usage.fuel > 0
    assert all(e.type == "execution.finished" for e in page.events)
    later = client.events(after=page.events[-1].seq)
    assert all(e.seq > page.events[-1].seq for e in later.events)
    # The test server allows no private range: a loopback webhook is refused, naming it.
    with pytest.raises(BadRequest, match="127.0.0.1"):
        client.add_webhook("http://127.0.0.1:9/hook")
    assert client.webhooks() == []


def test_volumes_keep_files_beyond_any_sandbox(client: Client) -> None:
    name = f"vol-{uuid.uuid4().hex[:8]}"
    info = client.create_volume(name)
    assert info.name == name and info.bytes == 0
    try:
        up = client.write_volume_file(name, "/raw/sales.csv", "id,value\n1,10\n")
        assert up.size == 14
        assert client.read_volume_file(name, "raw/sales.csv") == b"id,value\n1,10\n"
        assert client.make_volume_dir(name, "empty").kind == "dir"
        entries = client.list_volume(name, depth=2)
        assert [(e.path, e.kind) for e in entries] == [
            ("empty", "dir"), ("raw", "dir"), ("raw/sales.csv", "file")
        ]
        assert name in [v.name for v in client.volumes()]
        assert client.volume_info(name).bytes == 14
        client.remove_volume_path(name, "raw")
        with pytest.raises(NotFound):
            client.read_volume_file(name, "raw/sales.csv")
        with pytest.raises(BadRequest, match="path"):
            client.write_volume_file(name, "a//b", b"x")
        # Mounted: read-only into an execution, writable into a session.
        client.write_volume_file(name, "in.csv", "a,b\n1,2\n")
        r = client.execute("print(open('/data/in.csv').read().count(','))", template="python",
                           volumes=[{"name": name, "path": "/data", "read_only": True}])
        assert r.ok and r.stdout == "2\n", r
        with client.open_session(template="python",
                                 volumes=[{"name": name, "path": "/work"}]) as s:
            assert s.info().volumes == [{"name": name, "path": "/work", "read_only": False}]
            assert s.execute("open('/work/out.txt', 'w').write('from a session')").ok
        assert client.read_volume_file(name, "out.txt") == b"from a session"
    finally:
        client.delete_volume(name)
    with pytest.raises(NotFound, match="volume_not_found"):
        client.volume_info(name)


# Sessions -----------------------------------------------------------------------------


def test_session_variables_persist(client: Client) -> None:
    with client.open_session(template="python") as s:
        assert s.id.startswith("s-")
        first = s.execute("x = 21")
        assert first.turn == 1 and first.result is None
        r = s.execute("x * 2")
        assert r.result == "42" and r.turn == 2 and r.session_id == s.id
        info = s.info()
        assert info.turns == 2 and info.state == "idle" and info.template == "python"


def test_session_files_written_and_read_back(client: Client) -> None:
    with client.open_session(template="python") as s:
        entry = s.write_file("data/in.bin", b"\x00\xffabc")
        assert entry.path == "data/in.bin" and entry.size == 5
        r = s.execute("d = open('data/in.bin','rb').read()\nopen('out.txt','w').write(d[2:].decode())")
        assert r.ok, r.stderr
        paths = {f.path for f in s.list_files()}
        assert {"data/in.bin", "out.txt"} <= paths
        assert s.read_file("out.txt") == b"abc"
        assert s.read_file("data/in.bin") == b"\x00\xffabc"
        with pytest.raises(NotFound):
            s.read_file("nope.txt")


def test_turn_stopped_by_a_limit_rolls_back(client: Client) -> None:
    with client.open_session(template="python") as s:
        s.execute("x = 1")
        r = s.execute("x = 2\nwhile True: pass", limits={"timeout_ms": 300})
        assert r.status == "timeout" and r.rolled_back
        assert s.execute("x").result == "1"


def test_a_sessions_metrics(client: Client) -> None:
    with client.open_session(template="python") as s:
        s.execute("x = list(range(10**5))")
        s.execute("len(x)")
        m = s.metrics()
        assert m.session_id == s.id and m.turns == 2 and len(m.samples) == 2
        assert m.fuel > 0 and m.memory_peak_bytes >= m.samples[0].memory_bytes > 0
        assert m.egress.requests == 0


def test_snapshot_then_restore(client: Client) -> None:
    with client.open_session(template="python") as s:
        s.execute("import json\nstate = {'n': 1}")
        s.write_file("kept.txt", "kept")
        snap = s.snapshot()
        assert snap.snapshot_id.startswith("snap-") and snap.turns == 1
        s.execute("state['n'] = 99")
        try:
            assert snap.snapshot_id in {x.snapshot_id for x in client.list_snapshots()}
            assert client.get_snapshot(snap.snapshot_id).size_bytes == snap.size_bytes
            with client.restore(snap) as restored:
                assert restored.id != s.id
                assert restored.execute("json.dumps(state)").result == "'{\"n\": 1}'"
                assert restored.read_file("kept.txt") == b"kept"
            assert s.execute("state['n']").result == "99"
        finally:
            client.delete_snapshot(snap)
        with pytest.raises(NotFound) as info:
            client.get_snapshot(snap.snapshot_id)
        assert info.value.code == "snapshot_not_found"


def test_fork_diverges(client: Client) -> None:
    with client.open_session(template="python") as s:
        s.execute("items = [1]")
        with s.fork() as f:
            assert f.id != s.id
            f.execute("items.append('fork')")
            s.execute("items.append('orig')")
            assert f.execute("items").result == "[1, 'fork']"
            assert s.execute("items").result == "[1, 'orig']"


def test_turns_rollback_and_fan_out(client: Client) -> None:
    with client.open_session(template="python") as s:
        for n in (1, 2, 3):
            s.execute(f"x = {n}")
        kept = s.turns()
        assert [t.turn for t in kept] == [0, 1, 2, 3]
        assert kept[2].code == "x = 2" and kept[-1].bytes == 0
        with s.fork(turn=1) as f:
            assert f.execute("x").result == "1"
        kids = s.fan_out(3, turn=2)
        assert [k.execute("x").result for k in kids] == ["2", "2", "2"]
        for k in kids:
            k.close()
        branch = s.rollback(1, branch=True)
        assert branch is not None
        with branch:
            assert branch.execute("x").result == "3"
        r = s.execute("x")
        assert (r.result, r.turn) == ("1", 2)
        assert s.rollback(0) is None
        with pytest.raises(NotFound):
            s.rollback(3)


def test_close(client: Client) -> None:
    s = client.open_session(template="python")
    s.execute("1")
    s.close()
    with pytest.raises(NotFound) as info:
        s.execute("1")
    assert info.value.code == "session_not_found" and info.value.status == 404
    s.close()  # already gone: fine
    with pytest.raises(NotFound):
        s.close(missing_ok=False)


def test_session_run_hands_output_at_the_end(client: Client) -> None:
    got: list[str] = []
    with client.open_session(template="python") as s:
        r = s.run("print('one')\nprint(tools.add(a=1))", [add], on_stdout=got.append)
    assert r.ok and got == ["one\n2\n"]


def test_add_packages_to_a_session(client: Client) -> None:
    with client.open_session(template="python") as s:
        s.execute("kept = 7")
        try:
            pins = s.add_packages("humanize>=4")
        except VivariumError as e:  # the package index is out of reach from here
            if e.code in ("package_index_unreachable", "package_resolution_timeout"):
                pytest.skip(str(e))
            raise
        assert [p.name for p in pins] == ["humanize"] and len(pins[0].sha256) == 64
        r = s.execute("import humanize\nprint(humanize.intcomma(1234567), kept)")
        assert r.stdout == "1,234,567 7\n", r.stderr


def test_attach_to_existing_session(client: Client) -> None:
    with client.open_session(template="python") as s:
        s.execute("v = 'here'")
        assert client.session(s.id).execute("v").result == "'here'"


# Errors -------------------------------------------------------------------------------


def test_bad_limit_is_bad_request(client: Client) -> None:
    with pytest.raises(BadRequest) as info:
        client.execute("1", limits={"timeout_ms": 10**9})
    e = info.value
    assert e.status == 400 and e.code == "invalid_limit"
    assert e.field == "limits.timeout_ms"
    assert e.request_id


def test_unknown_field_is_invalid_json(client: Client) -> None:
    with pytest.raises(BadRequest) as info:
        client.execute("1", no_such_field=True)
    assert info.value.code == "invalid_json"


def test_unknown_session_is_not_found(client: Client) -> None:
    with pytest.raises(NotFound) as info:
        client.session("s-00000000000000000000000000000000").execute("1")
    assert info.value.code == "session_not_found"
    assert isinstance(info.value, VivariumError)


def test_wrong_key_is_unauthorized(keyed_server: Server) -> None:
    with Client(keyed_server.url, api_key="sk-wrong") as c:
        with pytest.raises(Unauthorized) as info:
            c.execute("print(1)")
    assert info.value.status == 401 and info.value.code == "unauthorized"
    with Client(keyed_server.url, api_key=keyed_server.keys["alice"]) as c:
        assert c.execute("print(1)", template="python").stdout == "1\n"
        assert c.usage().key_id == "alice"


def test_api_key_from_environment(keyed_server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIVARIUM_URL", keyed_server.url)
    monkeypatch.setenv("VIVARIUM_API_KEY", keyed_server.keys["alice"])
    with Client() as c:
        assert c.base_url == keyed_server.url
        assert c.usage().tenant == "alice"


# Code mode ----------------------------------------------------------------------------

CITIES = {"Paris": 18, "Oslo": 4}


def get_weather(city: str) -> dict[str, int]:
    """The weather in a city."""
    return {"temp": CITIES[city]}  # KeyError for an unknown city


def add(a: int, b: int = 1) -> int:
    """Adds two numbers."""
    return a + b


def test_run_two_tools_one_raising_keyerror(client: Client) -> None:
    calls: list[tuple[str, dict[str, object]]] = []

    def weather(city: str) -> dict[str, int]:
        calls.append(("weather", {"city": city}))
        return get_weather(city)

    code = (
        "t = tools.weather(city='Paris')['temp']\n"
        "try:\n"
        "    tools.weather(city='Atlantis')\n"
        "except KeyError as e:\n"
        "    print('caught', type(e).__name__, e.args[0])\n"
        "print(t + tools.add(a=2))\n"
    )
    r = client.run(code, {"weather": weather, "add": add}, template="python")
    assert r.ok, r.stderr
    assert r.stdout == "caught KeyError Atlantis\n21\n"
    assert calls == [("weather", {"city": "Paris"}), ("weather", {"city": "Atlantis"})]


def test_run_uncaught_tool_error_reaches_the_result(client: Client) -> None:
    class QuotaGone(Exception):
        pass

    def book(room: str) -> str:
        raise QuotaGone(f"no room {room}")

    r = client.run("tools.book(room='A1')", [book], template="python")
    assert r.status == "error"
    assert r.error is not None and r.error.type.endswith("ToolError")
    assert "QuotaGone" in r.stderr and "no room A1" in r.stderr


def test_run_async_tools_under_gather(client: Client) -> None:
    async def double(x: int) -> int:
        await asyncio.sleep(0.01)
        return 2 * x

    code = (
        "import asyncio\n"
        "r = await asyncio.gather(*(tools.aio.double(x=i) for i in range(4)))\n"
        "print(r)\n"
    )
    r = client.run(code, [double], template="python")
    assert r.stdout == "[0, 2, 4, 6]\n", r.stderr


def test_run_in_a_session_turn(client: Client) -> None:
    with client.open_session(template="python") as s:
        r = s.run("w = tools.get_weather(city='Oslo')\nw['temp'] * 10", [get_weather])
        assert r.ok and r.result == "40" and r.turn == 1
        # The tool's result lives on in the session.
        assert s.execute("w").result == "{'temp': 4}"
        # And through Client.run(session=...)
        r2 = client.run("tools.add(a=w['temp'], b=1)", [add], session=s.id)
        assert r2.result == "5"


def test_run_streamed_with_on_stdout(client: Client) -> None:
    order: list[str] = []

    def mark(label: str) -> str:
        order.append(f"tool:{label}")
        return label.upper()

    code = "print('before')\nprint(tools.mark(label='x'))\nprint('after')\n"
    r = client.run(code, [mark], on_stdout=lambda t: order.append(f"out:{t}"), template="python")
    assert r.ok and r.stdout == "before\nX\nafter\n"
    # Output arrived live: 'before' reached us before the tool ran.
    assert order == ["out:before\n", "tool:x", "out:X\n", "out:after\n"]


def test_run_without_tools_is_execute(client: Client) -> None:
    got: list[str] = []
    r = client.run("print('plain')", on_stdout=got.append, template="python")
    assert r.ok and r.stdout == "plain\n" and got == ["plain\n"]


def test_tool_spec_from_typed_signature() -> None:
    def search(
        query: str,
        limit: int = 10,
        score: Optional[float] = None,
        tags: list[str] | None = None,
        mode: Literal["fast", "exact"] = "fast",
        meta: dict[str, int] | None = None,
        strict: bool = False,
    ) -> list[str]:
        """Search the index.

        Args:
            query: What to look for.
            limit: How many results at most.
        """
        return []

    t = Tool.from_function(search)
    assert t.name == "search"
    assert t.description == "Search the index."
    assert t.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "description": "How many results at most.", "default": 10},
            "score": {"type": ["number", "null"], "default": None},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                     "default": None},
            "mode": {"type": "string", "enum": ["fast", "exact"], "default": "fast"},
            "meta": {"anyOf": [{"type": "object", "additionalProperties": {"type": "integer"}},
                               {"type": "null"}], "default": None},
            "strict": {"type": "boolean", "default": False},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert t.spec()["name"] == "search" and t.spec()["description"] == "Search the index."
    assert function_schema(lambda **kw: None) == {
        "type": "object", "properties": {}, "additionalProperties": True}


def test_tool_decorator_and_schema_checked_by_the_server(client: Client) -> None:
    @tool(name="lookup", description="Looks a key up.")
    def lookup_fn(key: str, n: int = 1) -> str:
        return key * n

    assert isinstance(lookup_fn, Tool) and lookup_fn("ab", 2) == "abab"
    code = (
        "print(tools.lookup(key='ab', n=3))\n"
        "try:\n"
        "    tools.lookup(key=5)\n"
        "except TypeError as e:\n"
        "    print('TypeError')\n"
    )
    r = client.run(code, [lookup_fn], template="python")
    assert r.stdout == "ababab\nTypeError\n", r.stderr


def test_interrupt_in_a_tool_cancels_the_execution(client: Client) -> None:
    class Stop(BaseException):  # not an Exception: not answered, it ends run()
        pass

    def boom() -> None:
        raise Stop

    before = client.usage().quota("suspended_executions")
    assert before is not None
    with pytest.raises(Stop):
        client.run("tools.boom()", [boom], template="python")
    after = client.usage().quota("suspended_executions")
    assert after is not None and after.used == before.used  # cancelled, not left waiting


def test_suspend_and_resume_by_hand(client: Client) -> None:
    stop = client.execute("print(tools.add(a=1, b=2))", tools=[add], template="python")
    assert stop.suspended and stop.execution_id
    assert [(c.name, c.arguments) for c in stop.pending_calls] == [("add", {"a": 1, "b": 2})]
    done = client.resume(stop.execution_id, [{"call_id": stop.pending_calls[0].call_id, "result": 3}])
    assert done.ok and done.stdout == "3\n"
