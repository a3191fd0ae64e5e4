"""smolagents' CodeAgent with Vivarium as its executor, driven by a scripted model: a
closure tool called back on the host, state kept between steps, an error the model sees,
variables sent in, and final_answer ending the run."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest


def require(module: str) -> ModuleType:
    """The framework, or a skip; under CI=true a missing framework fails instead."""
    if os.environ.get("CI", "").lower() == "true":
        return importlib.import_module(module)
    return pytest.importorskip(module)


smolagents = require("smolagents")

from smolagents import CodeAgent, tool  # noqa: E402
from smolagents.models import ChatMessage, MessageRole, Model  # noqa: E402

from vivarium_client import Client  # noqa: E402
from vivarium_client.smolagents import VivariumExecutor  # noqa: E402

STEPS = [
    # 1: the tool is a plain function of the program; the session keeps `temps`.
    (
        "Thought: get the temperatures.\n<code>\n"
        'temps = {c: get_temperature(c, unit) for c in ["Paris", "Oslo", "Lima"]}\n'
        "print(temps)\n"
        "len(temps)\n"
        "</code>"
    ),
    # 2: an error, which the model is shown.
    "Thought: oops.\n<code>\nprint(temps['Rome'])\n</code>",
    # 3: final_answer ends the step; nothing after it runs.
    (
        "Thought: done.\n<code>\n"
        "warmest = max(temps, key=temps.get)\n"
        'final_answer(f"{warmest} ({temps[warmest]} {unit})")\n'
        'print("not reached")\n'
        "</code>"
    ),
]


class ScriptedModel(Model):
    """A model that answers each step with the next canned code block."""

    def __init__(self, steps: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.steps: Iterator[str] = iter(steps)
        self.seen: list[str] = []

    def generate(self, messages: list[Any], stop_sequences: list[str] | None = None, **kwargs: Any) -> ChatMessage:
        self.seen.append(str(messages[-1].content if hasattr(messages[-1], "content") else messages[-1]))
        return ChatMessage(role=MessageRole.ASSISTANT, content=next(self.steps))


def test_code_agent_runs_its_steps_in_a_vivarium_session(server) -> None:
    readings = {"Paris": 18.5, "Oslo": 4.0, "Lima": 22.0}
    asked: list[tuple[str, str]] = []

    @tool
    def get_temperature(city: str, unit: str) -> float:
        """The temperature in a city now.

        Args:
            city: The city's name.
            unit: "C" or "F".
        """
        asked.append((city, unit))  # a closure: this runs on the host
        return readings[city]

    client = Client(server.url)
    executor = VivariumExecutor(client)
    model = ScriptedModel(STEPS)
    with client, CodeAgent(tools=[get_temperature], model=model, executor=executor, max_steps=5) as agent:
        answer = agent.run("Which city is warmest?", additional_args={"unit": "C"})
        session = executor.session
        assert session is not None

        assert answer == "Lima (22.0 C)"
        assert asked == [("Paris", "C"), ("Oslo", "C"), ("Lima", "C")]

        steps = [s for s in agent.memory.steps if type(s).__name__ == "ActionStep"]
        assert len(steps) == 3
        assert "{'Paris': 18.5, 'Oslo': 4.0, 'Lima': 22.0}" in steps[0].observations
        assert "Last output from code snippet:\n3" in steps[0].observations
        assert steps[1].error is not None and "KeyError" in str(steps[1].error)
        assert "KeyError" in model.seen[2]  # the model was shown the error
        assert steps[2].is_final_answer and "not reached" not in (steps[2].observations or "")

        # The session kept the state of the steps, and final_answer stopped step 3 early.
        after = session.execute("print(sorted(temps), warmest)")
        assert after.stdout == "['Lima', 'Oslo', 'Paris'] Lima\n"
    assert executor.session is None  # the agent's cleanup closed it


def test_executor_takes_a_server_url(server) -> None:
    executor = VivariumExecutor(server.url)
    try:
        assert executor.client.base_url == server.url
        out = executor("x = 6 * 7\nx")
        assert out.output == "42" and not out.is_final_answer
    finally:
        executor.cleanup()
    assert executor.session is None
    assert executor.client._http.is_closed  # the client made for the URL is closed
