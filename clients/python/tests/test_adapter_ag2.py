"""AG2's SandboxCodeTool backed by Vivarium: an Agent with a scripted model (AG2's own
``ag2.testing.TestConfig``) calls ``run_code`` three times; the code keeps state in a
session, calls a host tool back, fails once, and asks for a language Vivarium lacks."""

from __future__ import annotations

import importlib
import json
import os
from types import ModuleType

import pytest


def require(module: str) -> ModuleType:
    """The framework, or a skip; under CI=true a missing framework fails instead."""
    if os.environ.get("CI", "").lower() == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module)


ag2 = require("ag2")

from ag2.events import ToolCallEvent, ToolResultsEvent  # noqa: E402
from ag2.testing import TestConfig, TrackingConfig  # noqa: E402
from ag2.tools import SandboxCodeTool  # noqa: E402

from vivarium_client import AsyncClient  # noqa: E402
from vivarium_client.ag2 import VivariumCodeEnvironment  # noqa: E402


def run_code(code: str, language: str = "python") -> ToolCallEvent:
    return ToolCallEvent(name="run_code", arguments=json.dumps({"code": code, "language": language}))


async def test_agent_runs_code_through_sandbox_code_tool(server) -> None:
    prices = {"apple": 0.5, "pear": 0.75}

    def price(item: str) -> float:
        """The price of an item."""
        return prices[item]

    config = TrackingConfig(
        TestConfig(
            run_code("basket = {'apple': 4, 'pear': 2}\nprint(sum(n * tools.price(item=i) for i, n in basket.items()))"),
            run_code("print(len(basket))\nbasket['plum']"),
            run_code("echo hi", "bash"),
            "The basket costs 3.5.",
        )
    )
    async with (
        AsyncClient(server.url) as client,
        VivariumCodeEnvironment(client, persistent=True, tools=[price]) as env,
    ):
        agent = ag2.Agent("analyst", "You answer with code.", config=config, tools=[SandboxCodeTool(env)])
        reply = await agent.ask("What does my basket cost?")
        assert reply.body == "The basket costs 3.5."

        # What the model was shown after each call: the tool results.
        outputs = []
        for call in config.mock.call_args_list[1:]:
            event = call.args[0]
            assert isinstance(event, ToolResultsEvent)
            outputs.append(event.results[0].result.parts[0].content)
        assert outputs[0] == "3.5\n"
        assert outputs[1].startswith("2\nTraceback")  # the session kept `basket`
        assert "KeyError: 'plum'" in outputs[1] and outputs[1].endswith("[exit code: 1]")
        assert outputs[2] == "Language 'bash' is not enabled. Available: ['python']\n[exit code: 2]"

        schema = config.calls[0].tools[0].function
        assert schema.name == "run_code" and "Supported languages: python." in schema.description
        assert env.session is not None
    assert env.session is None


async def test_environment_takes_a_server_url(server) -> None:
    env = VivariumCodeEnvironment(server.url, persistent=True)
    try:
        assert env.client.base_url == server.url
        first = await env.run("x = 6 * 7", "python")
        second = await env.run("print(x)", "python")
        assert (first.exit_code, second.exit_code, second.output) == (0, 0, "42\n")
    finally:
        await env.aclose()
    assert env.client._http.is_closed
