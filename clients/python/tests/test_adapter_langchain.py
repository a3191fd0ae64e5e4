"""LangChain's ``execute_python`` tool on Vivarium: invoked as LangChain invokes tools
(``invoke`` with args and with a model's tool call, ``ainvoke``), and in a small agent loop
around langchain_core's fake chat model, with a session and a host tool."""

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


require("langchain_core")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402

from vivarium_client import AsyncClient, Client  # noqa: E402
from vivarium_client.langchain import ExecutePythonTool  # noqa: E402


@tool
def stock(item: str) -> int:
    """How many of an item are in stock."""
    return {"apple": 3, "pear": 5}[item]


async def test_execute_python_as_langchain_runs_it(server) -> None:
    async with AsyncClient(server.url) as aclient:
        with Client(server.url) as client:
            python = ExecutePythonTool(client=client, async_client=aclient, session=True, tools=[stock])
            try:
                # The model is told the tool's argument and the host functions.
                spec = convert_to_openai_tool(python)["function"]
                assert spec["name"] == "execute_python"
                assert spec["parameters"]["required"] == ["code"]
                assert "tools.stock(item=...): How many of an item are in stock." in spec["description"]

                # invoke with args, sync; the session keeps `x` for the next call.
                assert python.invoke({"code": "x = 21\nprint('set')"}) == "set\n"
                assert python.invoke({"code": "x * 2"}) == "42\n"

                # A small agent loop: a scripted chat model calls the tool, async.
                model = GenericFakeChatModel(
                    messages=iter(
                        [
                            AIMessage(
                                content="",
                                tool_calls=[
                                    {
                                        "name": "execute_python",
                                        "args": {"code": "n = sum(tools.stock(item=i) for i in ['apple', 'pear'])\nprint(n + x)"},
                                        "id": "call_1",
                                        "type": "tool_call",
                                    }
                                ],
                            ),
                            AIMessage(
                                content="",
                                tool_calls=[
                                    {"name": "execute_python", "args": {"code": "1 / 0"}, "id": "call_2", "type": "tool_call"}
                                ],
                            ),
                            AIMessage(content="There are 29."),
                        ]
                    )
                )
                tools = {python.name: python}
                messages: list[BaseMessage] = [HumanMessage("How many fruits, plus x?")]
                while True:
                    ai = await model.ainvoke(messages)
                    messages.append(ai)
                    if not isinstance(ai, AIMessage) or not ai.tool_calls:
                        break
                    for call in ai.tool_calls:
                        messages.append(await tools[call["name"]].ainvoke(call))
                results = [m for m in messages if isinstance(m, ToolMessage)]
                assert [m.tool_call_id for m in results] == ["call_1", "call_2"]
                assert results[0].content == "29\n"
                assert "ZeroDivisionError: division by zero" in results[1].content
                assert messages[-1].content == "There are 29."
                assert python.session_id is not None
            finally:
                python.close()
            assert python.session_id is None


def test_tool_takes_a_server_url(server) -> None:
    tool_ = ExecutePythonTool(server.url)
    try:
        assert "42" in tool_.invoke({"code": "print(6 * 7)"})
        assert tool_.client is not None and tool_.client.base_url == server.url
    finally:
        tool_.close()
    by_keyword = ExecutePythonTool(client=server.url)
    assert by_keyword.base_url == server.url and by_keyword.client is None
    with Client(server.url) as given:
        assert ExecutePythonTool(given).client is given
