"""The async client against a real server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from vivarium_client import (
    AsyncClient,
    BadRequest,
    DroppedEvent,
    NotFound,
    Overloaded,
    QuotaExceeded,
    ResultEvent,
    StdoutEvent,
    Unauthorized,
)

from .conftest import Server


@pytest.fixture
async def aclient(server: Server) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(server.url, api_key="") as c:
        yield c


async def test_execute(aclient: AsyncClient) -> None:
    r = await aclient.execute("print('hi')\n1/0", template="python")
    assert r.status == "error" and r.exit_code == 1 and r.stdout == "hi\n"
    assert r.error is not None and r.error.type == "ZeroDivisionError" and r.error.line == 2


async def test_execute_files_and_limit(aclient: AsyncClient) -> None:
    r = await aclient.execute(
        "open('b.bin','wb').write(open('a.bin','rb').read() * 2)",
        files={"a.bin": b"\x01\x02"},
        template="python",
    )
    assert r.file("b.bin") == b"\x01\x02\x01\x02"
    t = await aclient.execute("x = 'a' * (10 ** 6)\nwhile True: x += 'b'",
                              limits={"timeout_ms": 300}, template="python")
    assert t.status in ("timeout", "memory_exceeded") and t.exit_code is None


async def test_stream(aclient: AsyncClient) -> None:
    code = "import time\nfor i in range(3):\n    print(i)\n    time.sleep(0.1)\n"
    texts: list[str] = []
    last = None
    async with aclient.stream(code, template="python") as events:
        async for ev in events:
            if isinstance(ev, StdoutEvent):
                texts.append(ev.text)
            else:
                assert not isinstance(ev, DroppedEvent)
            last = ev
    assert texts == ["0\n", "1\n", "2\n"]
    assert isinstance(last, ResultEvent) and last.result.stdout == "0\n1\n2\n"
    assert events.result is last.result


async def test_session_lifecycle(aclient: AsyncClient) -> None:
    async with await aclient.open_session(template="python") as s:
        await s.execute("total = 40")
        assert (await s.execute("total + 2")).result == "42"
        await s.write_file("in.txt", "abc")
        r = await s.execute("open('out.txt','w').write(open('in.txt').read()[::-1])")
        assert r.ok
        assert await s.read_file("out.txt") == b"cba"
        assert {"in.txt", "out.txt"} <= {f.path for f in await s.list_files()}

        snap = await s.snapshot()
        await s.execute("total = 0")
        try:
            async with await aclient.restore(snap.snapshot_id) as r2:
                assert (await r2.execute("total")).result == "40"
        finally:
            await aclient.delete_snapshot(snap.snapshot_id)

        async with await s.fork() as f:
            await f.execute("total = -1")
            assert (await s.execute("total")).result == "0"
            assert (await f.execute("total")).result == "-1"
    with pytest.raises(NotFound):
        await s.execute("1")


async def test_errors(aclient: AsyncClient, keyed_server: Server) -> None:
    with pytest.raises(BadRequest) as bad:
        await aclient.execute("1", limits={"memory_bytes": 1})
    assert bad.value.code == "invalid_limit" and bad.value.field == "limits.memory_bytes"
    with pytest.raises(NotFound) as nf:
        await aclient.session("s-nope").info()
    assert nf.value.code == "session_not_found"
    async with AsyncClient(keyed_server.url, api_key="sk-not-a-key") as c:
        with pytest.raises(Unauthorized):
            await c.usage()


async def test_quota_exceeded(keyed_server: Server) -> None:
    # bob's tenant runs one thing at a time: a second run while one sleeps is refused.
    async with AsyncClient(keyed_server.url, api_key=keyed_server.keys["bob"]) as c:
        slow = asyncio.ensure_future(c.execute("import time; time.sleep(1.0)", template="python"))
        await asyncio.sleep(0.3)
        with pytest.raises(QuotaExceeded) as info:
            await c.execute("print(1)", template="python")
        e = info.value
        assert isinstance(e, Overloaded) and e.status == 429 and e.code == "quota_exceeded"
        assert e.retry_after == 1.0
        assert e.quota is not None and e.quota["quota"] == "runs" and e.quota["limit"] == 1
        assert (await slow).ok


async def test_run_async_tools_concurrently_under_gather(aclient: AsyncClient) -> None:
    active = 0
    peak = 0

    async def fetch(i: int) -> int:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.4)
        active -= 1
        return i * i

    def label(n: int) -> str:  # a sync tool beside the async one
        return f"n={n}"

    code = (
        "import asyncio\n"
        "squares = await asyncio.gather(*(tools.aio.fetch(i=i) for i in range(3)))\n"
        "print(squares, tools.label(n=sum(squares)))\n"
    )
    t0 = time.monotonic()
    r = await aclient.run(code, {"fetch": fetch, "label": label}, template="python")
    elapsed = time.monotonic() - t0
    assert r.ok, r.stderr
    assert r.stdout == "[0, 1, 4] n=5\n"
    assert peak == 3  # the round's three calls ran at once
    assert elapsed < 1.1


async def test_run_tool_error_and_session_turn(aclient: AsyncClient) -> None:
    async def find(key: str) -> str:
        raise KeyError(key)

    async with await aclient.open_session(template="python") as s:
        r = await s.run(
            "try:\n    tools.find(key='k1')\nexcept KeyError as e:\n    missing = e.args[0]\nmissing",
            [find],
        )
        assert r.ok and r.result == "'k1'"
        assert (await s.execute("missing")).result == "'k1'"


async def test_run_streamed_with_callbacks(aclient: AsyncClient) -> None:
    order: list[str] = []

    async def ping(n: int) -> int:
        order.append(f"tool:{n}")
        return n + 1

    code = (
        "import sys\n"
        "print('start')\n"
        "print('warn', file=sys.stderr)\n"
        "import asyncio\n"
        "print(await asyncio.gather(tools.aio.ping(n=1), tools.aio.ping(n=2)))\n"
    )
    r = await aclient.run(
        code,
        [ping],
        on_stdout=lambda t: order.append(f"out:{t}"),
        on_stderr=lambda t: order.append(f"err:{t}"),
        template="python",
    )
    assert r.ok, r.stderr
    assert order[:2] == ["out:start\n", "err:warn\n"]
    assert sorted(order[2:4]) == ["tool:1", "tool:2"]
    assert order[4:] == ["out:[2, 3]\n"]
