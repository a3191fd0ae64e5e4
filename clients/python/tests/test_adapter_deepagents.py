"""deepagents with Vivarium as its sandbox backend: the backend's own file methods (which
deepagents builds on ``execute`` and the file transfers) against a real server, and a deep
agent driven by a scripted model whose file tools and ``execute`` run in one session."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

import pytest


def require(module: str) -> ModuleType:
    """The framework, or a skip; under CI=true a missing framework fails instead."""
    if os.environ.get("CI", "").lower() == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module)


deepagents = require("deepagents")

from deepagents import create_deep_agent  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402

from vivarium_client import Client  # noqa: E402
from vivarium_client.deepagents import VivariumSandbox  # noqa: E402


@pytest.fixture
def sandbox(server) -> Iterator[VivariumSandbox]:
    with VivariumSandbox(server.url) as sb:
        yield sb


def test_execute_is_a_bash_turn_of_one_session(sandbox: VivariumSandbox) -> None:
    r = sandbox.execute("python3 -c 'print(6*7)'")
    assert (r.output, r.exit_code, r.truncated) == ("42\n", 0, False)
    # A terminal: cd and export stay; stdout then stderr; bash's exit statuses.
    assert sandbox.execute("mkdir -p work && cd work && export N=7").exit_code == 0
    r = sandbox.execute('pwd; echo "n=$N"; echo oops >&2; exit 3')
    assert r.exit_code == 3
    assert r.output == "/work\nn=7\noops\n"
    assert sandbox.execute("nosuchcommand").exit_code == 127
    # deepagents' timeout (seconds) is the turn's time limit.
    r = sandbox.execute("while true; do :; done", timeout=1)
    assert r.exit_code == 124 and "timeout" in r.output
    assert sandbox.execute("echo still here").output == "still here\n"
    assert sandbox.id == sandbox.session.id and sandbox.id.startswith("s-")


def test_inherited_file_methods(sandbox: VivariumSandbox) -> None:
    assert sandbox.write("/notes/a.txt", "alpha\nbeta\ngamma\n").error is None
    assert sandbox.write("/notes/sub/b.py", "print('beta')\n").error is None
    # Where deepagents' absolute paths land: the session's / (file API and shell alike).
    assert sandbox.session is not None
    assert sandbox.session.read_file("notes/a.txt") == b"alpha\nbeta\ngamma\n"
    assert sandbox.execute("cat /notes/sub/b.py").output == "print('beta')\n"

    ls = sandbox.ls("/notes")
    assert ls.error is None and ls.entries is not None
    assert sorted((e["path"], e["is_dir"]) for e in ls.entries) == [
        ("/notes/a.txt", False), ("/notes/sub", True)]

    read = sandbox.read("/notes/a.txt", offset=1, limit=1)
    assert read.error is None and read.file_data is not None
    assert "beta" in read.file_data["content"] and "alpha" not in read.file_data["content"]
    assert sandbox.read("/notes/missing.txt").error is not None

    edit = sandbox.edit("/notes/a.txt", "beta", "BETA")
    assert edit.error is None and edit.occurrences == 1
    assert sandbox.session.read_file("notes/a.txt") == b"alpha\nBETA\ngamma\n"
    assert sandbox.edit("/notes/a.txt", "nothere", "x").error is not None

    grep = sandbox.grep("beta", "/notes")
    assert grep.error is None and grep.matches is not None
    assert [(m["path"], m["line"], m["text"]) for m in grep.matches] == [
        ("/notes/sub/b.py", 1, "print('beta')")]

    glob = sandbox.glob("**/*.py", "/notes")
    assert glob.error is None and glob.matches is not None
    assert [m["path"] for m in glob.matches] == ["/notes/sub/b.py"]

    assert sandbox.delete("/notes/sub").error is None
    assert sandbox.execute("ls /notes").output == "a.txt\n"


def test_file_transfers(server, sandbox: VivariumSandbox) -> None:
    data = bytes(range(256))
    up = sandbox.upload_files([("/bin.dat", data), ("rel/x.txt", b"x\n")])
    assert [(u.path, u.error) for u in up] == [("/bin.dat", None), ("rel/x.txt", None)]
    assert sandbox.execute("wc -c < /bin.dat; cat /rel/x.txt").output == "256\nx\n"
    down = sandbox.download_files(["/bin.dat", "/missing.txt"])
    assert down[0].content == data and down[0].error is None
    assert down[1].content is None and down[1].error == "file_not_found"
    # A given client and session are used as they are, and left open.
    with Client(server.url) as client:
        with client.open_session() as session:
            session.write_file("given.txt", "mine\n")
            sb = VivariumSandbox(client, session=session)
            assert sb.execute("cat given.txt").output == "mine\n"
            sb.close()
            assert session.execute("print(1)").stdout == "1\n"


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers each call with the next scripted message."""

    script: list[AIMessage]
    seen: list[list[BaseMessage]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        message = self.script[len(self.seen) - 1] if len(self.seen) <= len(self.script) else (
            AIMessage(content="out of script"))
        return ChatResult(generations=[ChatGeneration(message=message)])


def call(name: str, n: int, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c{n}"}])


def test_deep_agent_works_in_a_vivarium_session(server) -> None:
    script = [
        call("write_file", 1, file_path="/project/app.py", content="def answer():\n    return 41\n"),
        call("write_file", 2, file_path="/project/README.md", content="# app\nanswer is 41\n"),
        call("ls", 3, path="/project"),
        call("edit_file", 4, file_path="/project/app.py", old_string="return 41", new_string="return 6*7"),
        call("read_file", 5, file_path="/project/app.py"),
        call("grep", 6, pattern="answer", path="/project", output_mode="files_with_matches"),
        call("execute", 7, command="python3 -c 'print(6*7)'"),
        call("execute", 8, command="cd /project && ls | wc -l"),
        call("execute", 9, command="python3 -c 'import app; print(app.answer())'"),
        call("execute", 10, command="echo no such file >&2; exit 2"),
        AIMessage(content="Done: answer() returns 42."),
    ]
    model = ScriptedChatModel(script=script, seen=[])
    with VivariumSandbox(server.url) as sandbox:
        agent = create_deep_agent(model=model, backend=sandbox)
        state = agent.invoke({"messages": [{"role": "user", "content": "fix answer()"}]})
        seen = {m.tool_call_id: str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)}
        assert state["messages"][-1].content == "Done: answer() returns 42."

        ok = "\n\n[Command succeeded with exit code 0]"
        assert seen == {
            "c1": "Updated file /project/app.py",
            "c2": "Updated file /project/README.md",
            "c3": "['/project/README.md', '/project/app.py']",
            "c4": "Successfully replaced 1 instance(s) of the string in '/project/app.py'",
            "c5": "@@ lines 1-2 of 2 @@\ndef answer():\n    return 6*7",
            "c6": "/project/README.md\n/project/app.py",
            "c7": "42" + ok,
            "c8": "2" + ok,  # the cd held for the pipeline: two files in /project
            # The session kept that cd: the next command runs in /project, where app imports.
            "c9": "42" + ok,
            "c10": "no such file\n\n[Command failed with exit code 2]",
        }

        # The files are in the session afterwards.
        assert sandbox.session is not None
        assert sandbox.session.read_file("project/app.py") == b"def answer():\n    return 6*7\n"
        names = sorted(f.path for f in sandbox.session.list_files())
        assert "project/README.md" in names and "project/app.py" in names, names
    assert len(model.seen) == len(script)


async def test_deep_agent_async_with_parallel_tool_calls(server) -> None:
    # One model turn asking for three tools at once: deepagents runs them concurrently
    # (threads over the sync backend); the session takes them one at a time.
    parallel = AIMessage(content="", tool_calls=[
        {"name": "write_file", "args": {"file_path": f"/p/{n}.txt", "content": f"{n}\n"}, "id": f"w{n}"}
        for n in range(3)
    ])
    script = [
        parallel,
        call("execute", 4, command="cat /p/*.txt | wc -l"),
        AIMessage(content="three files"),
    ]
    model = ScriptedChatModel(script=script, seen=[])
    with VivariumSandbox(server.url) as sandbox:
        agent = create_deep_agent(model=model, backend=sandbox)
        state = await agent.ainvoke({"messages": [{"role": "user", "content": "write three"}]})
        seen = {m.tool_call_id: str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)}
        assert seen == {
            "w0": "Updated file /p/0.txt",
            "w1": "Updated file /p/1.txt",
            "w2": "Updated file /p/2.txt",
            "c4": "3\n\n[Command succeeded with exit code 0]",
        }
        assert state["messages"][-1].content == "three files"
