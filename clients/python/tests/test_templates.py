"""User templates (``/v1/templates``) against a real server: build one, run and open sessions
from it, list, rebuild, fail, delete; sync and async. No packages: the test server has no
package index.

Names and inputs are unique per test (a uuid), and every template made is deleted after
its test, so the suite also runs against a long-lived server (``$VIVARIUM_URL``), where
templates outlive it and count against the tenant's quota.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from vivarium_client import (
    AsyncClient,
    BadRequest,
    Client,
    Conflict,
    NotFound,
    TemplateBuildFailed,
    TemplateInfo,
    VivariumError,
)

from .conftest import Server


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with Client(server.url, api_key="") as c:
        yield c


@pytest.fixture
def made(client: Client) -> Iterator[list[str]]:
    """Names of templates a test made: deleted at its end (whatever became of them)."""
    names: list[str] = []
    yield names
    for name in names:
        try:
            client.wait_template(name, timeout=60)
        except VivariumError:
            pass
        try:
            client.delete_template(name)
        except NotFound:
            pass


def build_reporting(client: Client, made: list[str]) -> tuple[TemplateInfo, str]:
    """A template with a file, two commands, set-up code and an env var; its token."""
    name = unique("tpl")
    token = uuid.uuid4().hex
    made.append(name)
    info = client.build_template(
        name,
        from_="python",
        files={"data/in.txt": "hello"},
        commands=["mkdir -p out", "echo hi > out/x"],
        setup=f"import json\nTOKEN = {token!r}\n",
        env={"MODE": "fast"},
    )
    return info, token


USE = (
    "import os\n"
    "print(TOKEN, os.environ['MODE'], open('data/in.txt').read(), open('out/x').read().strip(),"
    " json.dumps([1]))"
)


def test_build_then_execute_and_open_a_session(client: Client, made: list[str]) -> None:
    info, token = build_reporting(client, made)
    assert info.ready and info.status == "ready" and not info.failed
    assert not info.builtin and info.from_ == "python" and info.base == "python"
    assert len(info.id) == 64 and info.version == 1
    assert info.env == ["MODE"] and info.workdir is None and info.packages == []
    assert info.error is None and info.build_ms is not None and info.bytes > 0
    steps = [s.step for s in info.log]
    assert "commands[0]" in steps and "commands[1]" in steps and "setup" in steps
    assert info.raw["from"] == "python"

    # A run from it: what setup defined and imported, the env, the file, the commands' output.
    r = client.execute(USE, template=info.name)
    assert r.ok, r.stderr
    assert r.stdout == f"{token} fast hello hi [1]\n"
    # The request's env is laid over the template's.
    r = client.execute("import os\nprint(os.environ['MODE'])", template=info.name, env={"MODE": "slow"})
    assert r.ok and r.stdout == "slow\n", r.stderr

    # A session from it, whose state then goes on from the template's.
    with client.open_session(template=info.name) as s:
        s.execute("x = TOKEN.upper()")
        assert s.execute("x, json.dumps({'a': 1})").result == repr((token.upper(), '{"a": 1}'))
        assert s.read_file("out/x") == b"hi\n"

    # Read back, alone and in the list after the built-ins.
    got = client.template(info.name)
    assert got.ready and got.id == info.id and got.log == info.log
    listed = client.templates()
    assert [t.name for t in listed[:2]] == ["python", "scientific"]
    assert all(t.builtin and t.ready and t.id == "" for t in listed[:2])
    mine = [t for t in listed[2:] if t.name == info.name]
    assert len(mine) == 1 and mine[0].id == info.id and not mine[0].builtin


def test_identical_inputs_answer_the_ready_template_at_once(
    client: Client, made: list[str]
) -> None:
    name = unique("same")
    made.append(name)
    setup = f"MARK = {uuid.uuid4().hex!r}"
    started = client.build_template(name, from_="python", setup=setup, wait=False)
    assert started.name == name and started.status == "building" and started.build_ms is None
    first = client.wait_template(started)
    assert first.ready and first.id == started.id

    again = client.build_template(name, from_="python", setup=setup, wait=False)
    assert again.ready and again.id == first.id and again.version == first.version

    # Other inputs under the same name: a new version.
    changed = client.build_template(name, from_="python", setup=setup + "\nMORE = 1")
    assert changed.ready and changed.id != first.id and changed.version == first.version + 1
    r = client.execute("print(MORE)", template=name)
    assert r.ok and r.stdout == "1\n", r.stderr


def test_a_failed_build_raises_naming_its_step(client: Client, made: list[str]) -> None:
    name = unique("bad")
    made.append(name)
    with pytest.raises(TemplateBuildFailed) as caught:
        client.build_template(name, from_="python", commands=["echo before", "exit 3"])
    e = caught.value
    assert e.step == "commands[1]" and e.reason is not None and "3" in e.reason
    assert "commands[1]" in str(e) and name in str(e) and e.code == "template_failed"
    assert e.template.failed and e.template.name == name and e.template.error is not None
    assert [s.step for s in e.template.log][:1] == ["commands[0]"]
    assert e.template.log[0].stdout == "before\n"

    # It is kept, failed; a run from it is refused.
    assert client.template(name).failed
    with pytest.raises(Conflict) as refused:
        client.execute("print(1)", template=name)
    assert refused.value.code == "template_failed" and refused.value.status == 409


def test_a_failing_first_command(client: Client, made: list[str]) -> None:
    name = unique("bad")
    made.append(name)
    with pytest.raises(TemplateBuildFailed, match=r"commands\[0\]") as caught:
        client.build_template(name, from_="python", commands=["exit 3"])
    assert caught.value.step == "commands[0]"


def test_delete_then_use_is_not_found(client: Client, made: list[str]) -> None:
    info, _ = build_reporting(client, made)
    client.delete_template(info)
    with pytest.raises(NotFound) as gone:
        client.execute("print(1)", template=info.name)
    assert gone.value.code == "template_not_found" and gone.value.status == 404
    assert gone.value.field == "template"
    with pytest.raises(NotFound) as again:
        client.template(info.name)
    assert again.value.code == "template_not_found"
    with pytest.raises(NotFound):
        client.delete_template(info.name)
    assert info.name not in [t.name for t in client.templates()]


def test_refusals(client: Client, made: list[str]) -> None:
    with pytest.raises(BadRequest):
        client.delete_template("python")
    orphan, path, text = unique("orphan"), unique("path"), unique("str")
    made.extend([orphan, path, text])  # none should be made: deleted if one was
    with pytest.raises(NotFound) as unknown:
        client.build_template(orphan, from_=unique("nothing"))
    assert unknown.value.code == "template_not_found"
    with pytest.raises(BadRequest):
        client.build_template("no spaces allowed", from_="python")
    with pytest.raises(BadRequest) as bad_path:
        client.build_template(path, from_="python", files={"../escape": b"x"})
    assert bad_path.value.code == "invalid_path"
    with pytest.raises(TypeError):
        client.build_template(text, commands="echo hi")  # type: ignore[arg-type]


# Async ---------------------------------------------------------------------------------


@pytest.fixture
async def aclient(server: Server) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(server.url, api_key="") as c:
        yield c


async def test_async_build_and_execute(aclient: AsyncClient) -> None:
    name, bad = unique("async"), unique("async-bad")
    token = uuid.uuid4().hex
    seed = b"\x00seed"
    try:
        info = await aclient.build_template(
            name,
            from_="python",
            files={"seed.txt": seed},
            commands=["echo made > made.txt"],
            setup=f"TOKEN = {token!r}",
            env={"FLAVOUR": "async"},
        )
        assert info.ready and info.name == name and info.env == ["FLAVOUR"]
        r = await aclient.execute(
            "import os\nprint(TOKEN, os.environ['FLAVOUR'], open('made.txt').read().strip(),"
            " open('seed.txt', 'rb').read())",
            template=name,
        )
        assert r.ok, r.stderr
        assert r.stdout == f"{token} async made {seed!r}\n"
        assert name in [t.name for t in await aclient.templates()]
        async with await aclient.open_session(template=name) as s:
            assert (await s.execute("TOKEN")).result == repr(token)
        with pytest.raises(TemplateBuildFailed, match=r"setup"):
            await aclient.build_template(bad, from_="python", setup="1/0")
    finally:
        for n in (name, bad):
            try:
                await aclient.delete_template(n)
            except NotFound:
                pass
