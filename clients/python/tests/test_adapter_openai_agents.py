"""The OpenAI Agents SDK's ShellTool with Vivarium as its executor: called the way the SDK
calls it, and through the SDK's Runner with its scripted model."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require(module: str) -> ModuleType:
    """The framework, or a skip; under CI=true a missing framework fails instead."""
    if os.environ.get("CI", "").lower() == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module)


agents = require("agents")

from agents import Agent, RunConfig, RunContextWrapper, Runner, ShellTool  # noqa: E402
from agents.items import ToolCallOutputItem  # noqa: E402
from agents.testing import ScriptedModel, assistant_message  # noqa: E402
from agents.tool import ShellActionRequest, ShellCallData, ShellCommandRequest  # noqa: E402
from openai.types.responses.response_function_shell_tool_call import (  # noqa: E402
    Action,
    ResponseFunctionShellToolCall,
)

from vivarium_client import AsyncClient  # noqa: E402
from vivarium_client.openai_agents import VivariumShell  # noqa: E402


def request(*commands: str, timeout_ms: int | None = None) -> ShellCommandRequest:
    action = ShellActionRequest(commands=list(commands), timeout_ms=timeout_ms)
    return ShellCommandRequest(
        ctx_wrapper=RunContextWrapper(context=None), data=ShellCallData(call_id="call-1", action=action)
    )


async def test_executor_runs_commands_in_one_session(server) -> None:
    async with VivariumShell(server.url) as shell:
        tool = ShellTool(executor=shell)
        assert tool.executor is shell
        result = await shell(request(
            "python3 -c 'print(6*7)'",
            "mkdir -p out && cd out && printf 'a\\nb\\n' > f.txt && export N=3",
            "ls | wc -l; echo n=$N; cat f.txt | grep b",
            "echo oops >&2; exit 4",
        ))
        got = [(o.stdout, o.stderr, o.outcome.type, o.exit_code) for o in result.output]
        assert got == [
            ("42\n", "", "exit", 0),
            ("", "", "exit", 0),
            ("1\nn=3\nb\n", "", "exit", 0),
            ("", "oops\n", "exit", 4),
        ]
        assert [o.command for o in result.output][0] == "python3 -c 'print(6*7)'"
        # The next call is the same terminal; a timeout is the call's timeout_ms.
        result = await shell(request("pwd", "while true; do :; done", timeout_ms=500))
        assert result.output[0].stdout == "/out\n"
        assert result.output[1].outcome.type == "timeout"
        session = shell.session
        assert session is not None
        assert await session.read_file("out/f.txt") == b"a\nb\n"
    assert shell.session is None and shell.client._http.is_closed


async def test_runner_with_a_scripted_model(server) -> None:
    call = ResponseFunctionShellToolCall(
        id="sh_1", call_id="call_1", type="shell_call", status="completed",
        action=Action(commands=["python3 -c 'print(6*7)'", "mkdir w && cd w && echo hi > a.txt && ls | wc -l"]),
    )
    model = ScriptedModel([[call], [assistant_message("There is 1 file.")]])
    async with AsyncClient(server.url) as client:
        shell = VivariumShell(client)
        agent = Agent(name="dev", model=model, tools=[ShellTool(executor=shell)])
        result = await Runner.run(agent, "count the files", run_config=RunConfig(tracing_disabled=True))
        assert result.final_output == "There is 1 file."
        outputs = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
        assert len(outputs) == 1
        text = str(outputs[0].output)
        assert "$ python3 -c 'print(6*7)'\n42\n" in text
        assert text.endswith("ls | wc -l\n1"), text
        # The model was shown the commands' output on its second call.
        second = model.calls[1]
        shown = [x for x in second.input if isinstance(x, dict) and x.get("type") == "shell_call_output"]
        assert shown and "42" in str(shown[0]["output"])
        assert shell.session is not None
        assert await shell.session.read_file("w/a.txt") == b"hi\n"
        await shell.aclose()
        assert not client._http.is_closed  # a given client stays open
