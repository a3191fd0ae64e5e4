"""pydantic-ai code mode on Vivarium: an Agent with the ``VivariumCodeMode`` capability,
driven by pydantic-ai's ``FunctionModel`` (no network). The model sees ``run_code`` (with
the sandboxed tools' signatures) beside the tool kept native; its program calls the
agent's tools back (one with ``RunContext`` and deps, a round of calls at once), keeps
state between calls, and a failing program comes back as a retry prompt."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType

import pytest


def require(module: str) -> ModuleType:
    """The framework, or a skip; under CI=true a missing framework fails instead."""
    if os.environ.get("CI", "").lower() == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module)


pydantic_ai = require("pydantic_ai")

from pydantic_ai import Agent, RunContext  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from vivarium_client import AsyncClient, AsyncSession, NotFound  # noqa: E402
from vivarium_client.pydantic_ai import VivariumCodeMode  # noqa: E402

PROGRAM_1 = """\
import asyncio
w = get_weather(city="Paris")
hits = await asyncio.gather(*(tools.aio.search(query=q) for q in ["museums", "parks"]))
print(w["temp"], w["sky"], hits)
"""
PROGRAM_2 = "print(len(hits))\nget_weather(city='Atlantis')"


@dataclass
class Deps:
    index: dict[str, list[str]]


async def test_agent_code_mode_in_vivarium(server) -> None:
    seen: list[list[str]] = []
    returns: list[object] = []
    descriptions: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(sorted(t.name for t in info.function_tools))
        descriptions.extend(t.description or "" for t in info.function_tools if t.name == "run_code")
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        returns.extend(p.content for p in last.parts if isinstance(p, (ToolReturnPart, RetryPromptPart)))
        step = len(seen)
        if step == 1:
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": PROGRAM_1})])
        if step == 2:
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": PROGRAM_2})])
        return ModelResponse(parts=[TextPart("Paris: 18, sunny.")])

    weather_calls: list[str] = []
    async with AsyncClient(server.url) as client:
        sessions: list[AsyncSession] = []
        open_session = client.open_session

        async def recording_open_session(**options: object) -> AsyncSession:
            sessions.append(await open_session(**options))
            return sessions[-1]

        client.open_session = recording_open_session  # type: ignore[method-assign]
        agent = Agent(
            FunctionModel(model),
            deps_type=Deps,
            capabilities=[VivariumCodeMode(["get_weather", "search"], client=client)],
        )

        @agent.tool_plain
        def get_weather(city: str) -> dict[str, object]:
            """The weather in a city."""
            weather_calls.append(city)
            if city == "Atlantis":
                raise KeyError(city)
            return {"temp": 18, "sky": "sunny"}

        @agent.tool
        async def search(ctx: RunContext[Deps], query: str) -> list[str]:
            """Search the index."""
            return ctx.deps.index.get(query, [])

        @agent.tool_plain
        def notify(text: str) -> str:
            """Tell the user (kept as a native tool)."""
            return "sent"

        result = await agent.run("Weather in Paris?", deps=Deps({"museums": ["Louvre"], "parks": ["Tuileries"]}))

        # One session for the run, closed when the run ended.
        assert len(sessions) == 1
        with pytest.raises(NotFound):
            await sessions[0].info()

    assert result.output == "Paris: 18, sunny."
    assert seen == [["notify", "run_code"]] * 3  # the sandboxed tools are inside run_code
    assert "def get_weather(*, city: str) -> dict[str, Any]:" in descriptions[0]
    assert "def search(*, query: str) -> list[str]:" in descriptions[0]
    assert weather_calls == ["Paris", "Atlantis"]
    assert returns[0] == "18 sunny [['Louvre'], ['Tuileries']]\n"
    # The second program ran in the same session (hits), then failed: a retry prompt.
    assert isinstance(returns[1], str) and returns[1].startswith("2\nTraceback")
    assert "KeyError: 'Atlantis'" in returns[1]


async def test_code_mode_takes_a_server_url(server) -> None:
    capability = VivariumCodeMode(client=server.url)
    try:
        assert isinstance(capability.client, AsyncClient)
        assert capability.client.base_url == server.url
        assert (await capability.client.execute("print(6 * 7)")).stdout == "42\n"
    finally:
        await capability.aclose()
