"""Code-mode tools: Python callables turned into the API's tool specs, and called back.

A tool spec is ``{"name", "description", "parameters"}`` with ``parameters`` a JSON Schema
of an object whose properties are the function's keyword arguments. :meth:`Tool.from_function`
builds it from a signature's type hints (``str``, ``int``, ``float``, ``bool``, ``list[X]``,
``dict[str, X]``, ``Optional[X]``, ``X | Y``, ``Literal[...]``, enums, ``Annotated[X, "doc"]``);
parameters without a default are required. The description is the docstring's text, and a
Google-style ``Args:`` section (or ``:param x:`` lines) describes each parameter.

Calling a tool (:func:`call_tool`, :func:`acall_tool`) gives the answer the API takes:
``{"call_id", "result"}``, or ``{"call_id", "error": {"type", "message"}}`` when the
callable raised, so the program gets that exception.
"""

from __future__ import annotations

import asyncio
import collections.abc
import concurrent.futures
import dataclasses
import enum
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union, overload

from .results import ToolCall

__all__ = [
    "Tool",
    "ToolsArg",
    "tool",
    "function_schema",
    "normalize_tools",
    "tool_specs",
    "to_jsonable",
    "answer_result",
    "answer_error",
    "call_tool",
    "acall_tool",
]

JSON = dict[str, Any]


@dataclass(frozen=True)
class Tool:
    """One tool: its spec (``name``, ``description``, ``parameters``) and the callable that
    answers it (``fn``, sync or async; ``None`` for a spec only)."""

    name: str
    description: str = ""
    parameters: JSON = field(
        default_factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )
    fn: Callable[..., Any] | None = field(default=None, compare=False)

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> Tool:
        """A tool from a callable's name, docstring and signature."""
        doc, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
        return cls(
            name=name or getattr(fn, "__name__", None) or type(fn).__name__,
            description=doc if description is None else description,
            parameters=function_schema(fn, param_docs),
            fn=fn,
        )

    def spec(self) -> JSON:
        """The tool as the API takes it."""
        out: JSON = {"name": self.name, "parameters": self.parameters}
        if self.description:
            out["description"] = self.description
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            raise TypeError(f"tool {self.name!r} has no function")
        return self.fn(*args, **kwargs)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: ``@tool`` or ``@tool(name=..., description=...)`` makes a :class:`Tool`."""
    if fn is not None:
        return Tool.from_function(fn, name=name, description=description)

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool.from_function(f, name=name, description=description)

    return wrap


ToolsArg = Union[
    Mapping[str, Union[Callable[..., Any], Tool]],
    Sequence[Union[Callable[..., Any], Tool]],
    None,
]
"""What ``run(tools=...)`` takes: a mapping name -> callable/Tool, or a sequence of them."""


def normalize_tools(tools: ToolsArg) -> dict[str, Tool]:
    """Every tool by its name (a mapping's key renames its tool); duplicates are an error."""
    if tools is None:
        return {}
    out: dict[str, Tool] = {}
    items: list[tuple[str | None, Any]]
    if isinstance(tools, Mapping):
        items = [(str(k), v) for k, v in tools.items()]
    elif isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise TypeError("tools must be a mapping of name -> callable, or a sequence of callables")
    else:
        items = [(None, v) for v in tools]
    for key, value in items:
        if isinstance(value, Tool):
            t = value if key is None or key == value.name else dataclasses.replace(value, name=key)
        elif isinstance(value, Mapping) and "name" in value:
            t = Tool(
                name=str(key or value["name"]),
                description=str(value.get("description", "")),
                parameters=dict(value.get("parameters") or Tool("_").parameters),
            )
        elif callable(value):
            t = Tool.from_function(value, name=key)
        else:
            raise TypeError(f"not a tool: {value!r}")
        if t.name in out:
            raise ValueError(f"two tools are named {t.name!r}")
        out[t.name] = t
    return out


def tool_specs(tools: Any) -> list[JSON]:
    """The ``tools`` field of a request from callables, :class:`Tool` s or spec dicts."""
    return [t.spec() for t in normalize_tools(tools).values()]


# Schemas ------------------------------------------------------------------------------

_SIMPLE: dict[Any, JSON] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    bytes: {"type": "string"},
}


def _nullable(schema: JSON) -> JSON:
    t = schema.get("type")
    if isinstance(t, str) and set(schema) <= {"type", "description"}:
        return {**schema, "type": [t, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def type_schema(tp: Any) -> JSON:
    """The JSON Schema of a type hint (``{}``, any JSON, for what it cannot say)."""
    if tp is inspect.Parameter.empty or tp is Any or tp is object:
        return {}
    if tp in _SIMPLE:
        return dict(_SIMPLE[tp])
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        inner = type_schema(args[0])
        docs = [a for a in args[1:] if isinstance(a, str)]
        return {**inner, "description": docs[0]} if docs else inner
    if origin is Union or (hasattr(types, "UnionType") and isinstance(tp, types.UnionType)):
        members = [a for a in args if a is not type(None)]
        inner = type_schema(members[0]) if len(members) == 1 else {
            "anyOf": [type_schema(m) for m in members]
        }
        return _nullable(inner) if len(members) < len(args) else inner
    if origin is typing.Literal:
        values = list(args)
        out: JSON = {"enum": values}
        kinds = {type(v) for v in values}
        if len(kinds) == 1 and next(iter(kinds)) in _SIMPLE:
            out = {**_SIMPLE[next(iter(kinds))], **out}
        return out
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    if tp in (list, tuple, set, frozenset) or origin in (
        list, tuple, set, frozenset, collections.abc.Sequence, collections.abc.Iterable,
        collections.abc.Set, collections.abc.MutableSequence,
    ) or tp in (collections.abc.Sequence, collections.abc.Iterable):
        out = {"type": "array"}
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            out["prefixItems"] = [type_schema(a) for a in args]
            out["minItems"] = out["maxItems"] = len(args)
        elif args:
            out["items"] = type_schema(args[0])
        if origin in (set, frozenset, collections.abc.Set) or tp in (set, frozenset):
            out["uniqueItems"] = True
        return out
    if tp in (dict, collections.abc.Mapping) or origin in (
        dict, collections.abc.Mapping, collections.abc.MutableMapping
    ):
        out = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            out["additionalProperties"] = type_schema(args[1])
        return out
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        required = sorted(getattr(tp, "__required_keys__", hints))
        return {
            "type": "object",
            "properties": {k: type_schema(v) for k, v in hints.items()},
            "required": required,
        }
    return {}


def function_schema(fn: Callable[..., Any], param_docs: Mapping[str, str] | None = None) -> JSON:
    """The ``parameters`` schema of a callable: each keyword-capable parameter a property,
    those without a default required; ``**kwargs`` allows other properties."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to the raw annotations
        hints = {}
    docs = dict(param_docs or {})
    properties: dict[str, JSON] = {}
    required: list[str] = []
    extra = False
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            extra = True
            continue
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            continue
        hint = hints.get(p.name, p.annotation)
        schema = type_schema(hint)
        if p.name in docs and "description" not in schema:
            schema["description"] = docs[p.name]
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        else:
            try:
                json.dumps(p.default)
                schema["default"] = p.default.value if isinstance(p.default, enum.Enum) else p.default
            except (TypeError, ValueError):
                pass
        properties[p.name] = schema
    out: JSON = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = extra
    return out


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?|Notes?)\s*:\s*$")
_GOOGLE_ARG = re.compile(r"^\s*(\*{0,2}[A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^\s*:param\s+(?:[^:]*\s)?([A-Za-z_]\w*)\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (the text before any section) and each parameter's description."""
    lines = doc.splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    last: str | None = None
    for line in lines:
        m = _SECTION.match(line.strip())
        if m and not line.startswith((" ", "\t")):
            section, last = m.group(1).lower(), None
            continue
        sm = _SPHINX_ARG.match(line)
        if sm:
            section, last = "sphinx", sm.group(1)
            params[last] = sm.group(2).strip()
            continue
        if line.strip().startswith(":"):
            section, last = "sphinx", None
            continue
        if section is None:
            desc.append(line)
        elif section in ("args", "arguments", "parameters", "params"):
            gm = _GOOGLE_ARG.match(line)
            indent = len(line) - len(line.lstrip())
            if gm and (last is None or indent <= _indent_of(lines, last)):
                last = gm.group(1).lstrip("*")
                params[last] = gm.group(2).strip()
            elif last is not None and line.strip():
                params[last] = (params[last] + " " + line.strip()).strip()
        elif section == "sphinx" and last is not None and line.strip():
            params[last] = (params[last] + " " + line.strip()).strip()
    return "\n".join(desc).strip(), params


def _indent_of(lines: list[str], name: str) -> int:
    for line in lines:
        m = _GOOGLE_ARG.match(line)
        if m and m.group(1).lstrip("*") == name:
            return len(line) - len(line.lstrip())
    return 0


# Calling tools ------------------------------------------------------------------------


def _json_default(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)  # pydantic v2
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    return str(obj)


def to_jsonable(value: Any) -> Any:
    """``value`` as JSON the API carries: pydantic models, dataclasses, enums, sets, tuples,
    bytes and dates are converted; anything else unknown becomes its ``str``."""
    return json.loads(json.dumps(value, default=_json_default))


def answer_result(call_id: str, value: Any) -> JSON:
    return {"call_id": call_id, "result": to_jsonable(value)}


def answer_error(call_id: str, exc: BaseException) -> JSON:
    """The answer that raises ``exc`` in the program: its type name and message (a builtin
    type is raised as itself, another as ``tools.ToolError``)."""
    # KeyError's str() quotes its key; send the key itself so the program's KeyError
    # carries what the tool's did.
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        message = str(exc.args[0])
    else:
        message = str(exc)
    return {"call_id": call_id, "error": {"type": type(exc).__name__, "message": message}}


def _lookup(tools: Mapping[str, Tool], call: ToolCall) -> Tool | JSON:
    t = tools.get(call.name)
    if t is None or t.fn is None:
        return answer_error(call.call_id, NameError(f"no function for tool {call.name!r}"))
    return t


def _run_coroutine(awaitable: Any) -> Any:
    """Runs an awaitable to its end from sync code, whether or not this thread has a loop
    running (then in a fresh loop on another thread)."""

    async def wrap() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrap())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wrap()).result()


def call_tool(tools: Mapping[str, Tool], call: ToolCall) -> JSON:
    """Calls the tool (sync; an async callable is run to its end) and gives the answer."""
    t = _lookup(tools, call)
    if not isinstance(t, Tool):
        return t
    try:
        value = t(**call.arguments)
        if inspect.isawaitable(value):
            value = _run_coroutine(value)
        return answer_result(call.call_id, value)
    except Exception as e:
        return answer_error(call.call_id, e)


async def acall_tool(tools: Mapping[str, Tool], call: ToolCall) -> JSON:
    """Calls the tool from async code: a coroutine function is awaited, a sync one called."""
    t = _lookup(tools, call)
    if not isinstance(t, Tool):
        return t
    try:
        value = t(**call.arguments)
        if inspect.isawaitable(value):
            value = await value
        return answer_result(call.call_id, value)
    except Exception as e:
        return answer_error(call.call_id, e)
