"""Tool specs, answers and the error table: no server needed."""

from __future__ import annotations

import asyncio
import enum
from typing import Annotated, Any

import pytest

from vivarium_client import (
    Conflict,
    Gone,
    NotFound,
    OutputLeak,
    Overloaded,
    QuotaExceeded,
    ServiceUnavailable,
    Tool,
    ToolCall,
    VivariumError,
)
from vivarium_client.errors import error_from_body
from vivarium_client.tools import (
    answer_error,
    call_tool,
    normalize_tools,
    to_jsonable,
    type_schema,
)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_type_schemas() -> None:
    assert type_schema(Color) == {"enum": ["red", "blue"]}
    assert type_schema(Annotated[int, "How many."]) == {"type": "integer", "description": "How many."}
    assert type_schema(tuple[int, str]) == {
        "type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2, "maxItems": 2}
    assert type_schema(set[str]) == {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    assert type_schema(int | str) == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert type_schema(Any) == {}


def test_sphinx_docstring_and_explicit_names() -> None:
    def f(a: int, *, b: str = "x") -> None:
        """Does f.

        :param a: the a
        :param b: the b
        """

    t = Tool.from_function(f, name="eff")
    assert t.name == "eff" and t.description == "Does f."
    assert t.parameters["properties"]["a"]["description"] == "the a"
    assert t.parameters["properties"]["b"] == {"type": "string", "description": "the b", "default": "x"}
    assert t.parameters["required"] == ["a"]


def test_normalize_tools() -> None:
    def g() -> None: ...

    tools = normalize_tools({"renamed": Tool.from_function(g), "plain": g})
    assert set(tools) == {"renamed", "plain"} and tools["renamed"].fn is g
    with pytest.raises(ValueError):
        normalize_tools([g, g])
    with pytest.raises(TypeError):
        normalize_tools("g")  # type: ignore[arg-type]


def test_answers() -> None:
    assert answer_error("c1", KeyError("k")) == {
        "call_id": "c1", "error": {"type": "KeyError", "message": "k"}}
    assert answer_error("c2", ValueError("bad")) == {
        "call_id": "c2", "error": {"type": "ValueError", "message": "bad"}}
    assert to_jsonable({"s": {1}, "t": (1, 2), "e": Color.RED}) == {"s": [1], "t": [1, 2], "e": "red"}


def test_sync_call_of_an_async_tool_inside_a_running_loop() -> None:
    async def twice(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    tools = normalize_tools([twice])

    async def inside() -> dict[str, Any]:
        return call_tool(tools, ToolCall("call_1", "twice", {"x": 4}))

    assert asyncio.run(inside()) == {"call_id": "call_1", "result": 8}
    assert call_tool(tools, ToolCall("call_2", "twice", {"y": 1}))["error"]["type"] == "TypeError"


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (404, "session_not_found", NotFound),
        (410, "session_expired", Gone),
        (409, "session_busy", Conflict),
        (422, "output_leak", OutputLeak),
        (429, "too_many_sessions", Overloaded),
        (429, "quota_exceeded", QuotaExceeded),
        (503, "worker_lost", ServiceUnavailable),
        (None, "quota_exceeded", QuotaExceeded),  # in a stream: no status
        (418, "teapot", VivariumError),
    ],
)
def test_error_table(status: int | None, code: str, cls: type[VivariumError]) -> None:
    e = error_from_body(status, {"error": {"code": code, "message": "m"}})
    assert type(e) is cls and e.code == code and e.message == "m"
    assert e.status == (status if status is not None else cls.http_status)
