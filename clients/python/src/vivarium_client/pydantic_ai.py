"""pydantic-ai on Vivarium: code mode, with a ``run_code`` tool whose programs call the
agent's other tools back.

::

    from pydantic_ai import Agent
    from vivarium_client.pydantic_ai import VivariumCodeMode

    agent = Agent("openai:gpt-5", tools=[get_weather, search], capabilities=[VivariumCodeMode()])

:class:`VivariumCodeMode` is a pydantic-ai capability (``AbstractCapability``) whose
``get_wrapper_toolset`` wraps the agent's tools in :class:`VivariumCodeModeToolset`: the
selected tools (``tools='all'`` by default: every function tool the agent has; tool search,
capability loading and output tools stay as they are) leave the model's tool list and
become functions of the program that ``run_code`` runs, in a Vivarium session (one per
agent run, so variables persist between ``run_code`` calls of a run). The program calls
them as plain functions (``get_weather(city="Paris")``, or ``await
tools.aio.get_weather(...)`` with ``asyncio.gather`` for a round of calls at once); each
call suspends the program and runs the tool here, on the host, through the wrapped toolset
with its argument validation. Results cross as JSON (``pydantic_core.to_jsonable_python``).

``run_code`` returns what the program printed (the session echoes a final expression, as a
REPL does); a program that fails asks the model to retry (``ModelRetry``) with its
traceback. The toolset can also be used alone: ``Agent(toolsets=[VivariumCodeModeToolset(
FunctionToolset([...]))])``.
"""

from __future__ import annotations

import inspect
import keyword
import re
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import AbstractToolset, ModelRetry, RunContext, ToolDefinition, ToolReturn
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.function_signature import FunctionSignature
from pydantic_ai.tools import AgentDepsT, ToolSelector, matches_tool_selector
from pydantic_ai.toolsets import ToolsetTool, WrapperToolset
from pydantic_core import to_jsonable_python
from typing_extensions import TypedDict

from .aio import AsyncClient, AsyncSession
from .results import ExecutionResult
from .tools import Tool

__all__ = ["RUN_CODE", "VivariumCodeMode", "VivariumCodeModeToolset"]

RUN_CODE = "run_code"


class RunCodeArgs(TypedDict):
    code: str
    """The Python code to run. Print what you need to see; the value of a final expression is echoed."""


_RUN_CODE_ADAPTER = TypeAdapter(RunCodeArgs)

_DESCRIPTION = """\
Run Python 3 code (the real CPython, with numpy, pandas and the standard library) in an \
isolated sandbox with no network. State is kept between calls of this run, as in a REPL. \
Returns what the code printed; the value of a final expression is echoed. Call the \
functions below directly, with keyword arguments, to use the tools: each returns JSON \
data. For several calls at once, `await asyncio.gather(*(tools.aio.NAME(...) for ...))`."""

# Binds each tool as a global function of the session (a turn of its own, run when the set of
# tools changes, so the code's line numbers stay its own).
_BIND = "for _vv_n in tools.names.values(): globals()[_vv_n] = getattr(tools, _vv_n)\n"

_FRAMEWORK_KINDS = frozenset({"tool-search", "capability-load"})


def python_name(name: str) -> str:
    """A tool's function name in the program, by Vivarium's rule (``tools.names``)."""
    out = re.sub(r"\W", "_", name, flags=re.ASCII)
    if out[:1].isdigit():
        out = "_" + out
    if keyword.iskeyword(out) or out in ("aio", "ToolError", "names"):
        out += "_"
    return out


def _can_be_sandboxed(tool_def: ToolDefinition) -> bool:
    return (
        tool_def.kind == "function"
        and tool_def.tool_kind not in _FRAMEWORK_KINDS
        and not tool_def.unless_native
    )


@dataclass
class _RunState:
    """What one agent run holds: its session, and the tools bound in it."""

    session: AsyncSession | None = None
    bound: frozenset[str] = frozenset()


@dataclass
class _RunCodeTool(ToolsetTool[AgentDepsT]):
    """``run_code``, with the tools its programs may call."""

    sandboxed: dict[str, ToolsetTool[AgentDepsT]] = field(default_factory=dict)


@dataclass
class VivariumCodeModeToolset(WrapperToolset[AgentDepsT]):
    """Wraps a toolset: the selected tools become functions of ``run_code``'s programs.

    Args:
        wrapped: the toolset whose tools the programs call.
        tools: which tools go inside ``run_code`` (``'all'``, names, or a predicate
            ``(ctx, tool_def) -> bool``); the others stay native tool calls.
        client: the :class:`~vivarium_client.AsyncClient`, or a server URL (then, as by
            default, one is made, from ``VIVARIUM_URL`` / ``VIVARIUM_API_KEY`` when not
            given, and closed by :meth:`aclose`).
        max_retries: retries of ``run_code`` (a failed program counts as one).
        session_options: options of each run's session (``limits``, ``template``, ...).
        tool_limits: code-mode limits of each ``run_code`` call.
        request_fields: other fields of each turn.
    """

    tools: ToolSelector[AgentDepsT] = "all"
    _: KW_ONLY
    client: AsyncClient | str | None = None
    max_retries: int = 3
    session_options: Mapping[str, Any] = field(default_factory=dict)
    tool_limits: Mapping[str, Any] | None = None
    request_fields: Mapping[str, Any] = field(default_factory=dict)

    _run: _RunState = field(default_factory=lambda: _RunState(), init=False, repr=False)
    _owns_client: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.client is None or isinstance(self.client, str):
            self.client = AsyncClient(self.client)
            self._owns_client = True

    @property
    def _client(self) -> AsyncClient:
        assert isinstance(self.client, AsyncClient)
        return self.client

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> AbstractToolset[AgentDepsT]:
        """A copy for the run (its own session), sharing the client."""
        return replace(self, wrapped=await self.wrapped.for_run(ctx), client=self.client)

    async def for_run_step(self, ctx: RunContext[AgentDepsT]) -> AbstractToolset[AgentDepsT]:
        """The step's toolset; a copy made for a step keeps the run's session."""
        wrapped = await self.wrapped.for_run_step(ctx)
        if wrapped is self.wrapped:
            return self
        copy = replace(self, wrapped=wrapped, client=self.client)
        copy._run = self._run
        return copy

    async def __aexit__(self, *args: object) -> bool | None:
        """Closes the run's session, then leaves the wrapped toolset."""
        session, self._run.session, self._run.bound = self._run.session, None, frozenset()
        try:
            if session is not None:
                await session.close()
        finally:
            left = await super().__aexit__(*args)
        return left

    async def aclose(self) -> None:
        """Closes the client, if this toolset made it."""
        if self._owns_client:
            await self._client.aclose()

    # Tools -------------------------------------------------------------------------------

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        """The native tools, and ``run_code`` in place of the sandboxed ones."""
        native: dict[str, ToolsetTool[AgentDepsT]] = {}
        sandboxed: dict[str, ToolsetTool[AgentDepsT]] = {}
        for name, tool in (await self.wrapped.get_tools(ctx)).items():
            tool_def = tool.tool_def
            if (
                _can_be_sandboxed(tool_def)
                and ctx.is_tool_available(tool_def)
                and await matches_tool_selector(self.tools, ctx, tool_def)
            ):
                sandboxed[name] = tool
            else:
                native[name] = tool
        if RUN_CODE in native:
            raise ValueError(f"the tool name {RUN_CODE!r} is taken by Vivarium code mode")
        native[RUN_CODE] = _RunCodeTool(
            toolset=self,
            tool_def=ToolDefinition(
                name=RUN_CODE,
                description=_describe(sandboxed),
                parameters_json_schema=_RUN_CODE_ADAPTER.json_schema(),
                sequential=True,
                metadata={"code_arg_name": "code", "code_arg_language": "python"},
            ),
            max_retries=self.max_retries,
            args_validator=_RUN_CODE_ADAPTER.validator,  # type: ignore[arg-type]
            sandboxed=sandboxed,
        )
        return native

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        if not isinstance(tool, _RunCodeTool):
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        host_tools = {n: self._host_tool(n, t, ctx) for n, t in tool.sandboxed.items()}
        session = await self._open()
        names = frozenset(host_tools)
        if host_tools and names != self._run.bound:
            bound = await session.run(_BIND, list(host_tools.values()))
            if not bound.ok:
                raise RuntimeError(f"binding the tools failed: {_report(bound)}")
            self._run.bound = names
        result = await session.run(
            tool_args["code"],
            list(host_tools.values()) or None,
            tool_limits=self.tool_limits,
            **self.request_fields,
        )
        if not result.ok:
            raise ModelRetry(_report(result))
        return result.stdout

    def _host_tool(self, name: str, tool: ToolsetTool[AgentDepsT], ctx: RunContext[AgentDepsT]) -> Tool:
        wrapped = self.wrapped

        async def call(**kwargs: Any) -> Any:
            # Validated as pydantic-ai validates a model's call: the schema, then the tool's
            # own validator function, if it has one.
            args = tool.args_validator.validate_python(kwargs, context=ctx.validation_context)
            if tool.args_validator_func is not None:
                checked = tool.args_validator_func(ctx, **args)
                if inspect.isawaitable(checked):
                    await checked
            value = await wrapped.call_tool(name, args, ctx, tool)
            if isinstance(value, ToolReturn):
                value = value.return_value
            return to_jsonable_python(value, fallback=str)

        return Tool(
            name=name,
            description=tool.tool_def.description or "",
            parameters=tool.tool_def.parameters_json_schema,
            fn=call,
        )

    async def _open(self) -> AsyncSession:
        if self._run.session is None:
            self._run.session = await self._client.open_session(**dict(self.session_options))
        return self._run.session


def _describe(sandboxed: Mapping[str, ToolsetTool[Any]]) -> str:
    """``run_code``'s description: the prose, then the functions as Python signatures."""
    if not sandboxed:
        return _DESCRIPTION
    defs = [replace(t.tool_def, name=python_name(t.tool_def.name)) for t in sandboxed.values()]
    sigs = [d.function_signature for d in defs]
    conflicting = FunctionSignature.get_conflicting_type_names(sigs)
    blocks = FunctionSignature.render_type_definitions(sigs, conflicting)
    blocks += [d.render_signature("...", is_async=False, conflicting_type_names=conflicting) for d in defs]
    return _DESCRIPTION + "\n\n```python\n" + "\n\n".join(blocks) + "\n```"


def _report(result: ExecutionResult) -> str:
    out = result.stdout
    if result.error is not None:
        out += result.error.traceback or f"{result.error.type}: {result.error.message}"
    else:
        out += f"[{result.status}" + (f": {result.detail}]" if result.detail else "]") + result.stderr
    return out


@dataclass
class VivariumCodeMode(AbstractCapability[AgentDepsT]):
    """Capability: the agent's tools go inside ``run_code``, run in Vivarium.

    Takes the arguments of :class:`VivariumCodeModeToolset` (but ``wrapped``).
    """

    tools: ToolSelector[AgentDepsT] = "all"
    _: KW_ONLY
    client: AsyncClient | str | None = None
    max_retries: int = 3
    session_options: Mapping[str, Any] = field(default_factory=dict)
    tool_limits: Mapping[str, Any] | None = None
    request_fields: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.client is None or isinstance(self.client, str):
            self.client = AsyncClient(self.client)

    def get_ordering(self) -> CapabilityOrdering:
        """Outermost: it wraps the toolset the other capabilities made."""
        return CapabilityOrdering(position="outermost")

    def get_wrapper_toolset(self, toolset: AbstractToolset[AgentDepsT]) -> AbstractToolset[AgentDepsT] | None:
        return VivariumCodeModeToolset(
            toolset,
            self.tools,
            client=self.client,
            max_retries=self.max_retries,
            session_options=self.session_options,
            tool_limits=self.tool_limits,
            request_fields=self.request_fields,
        )

    async def aclose(self) -> None:
        """Closes the client."""
        if isinstance(self.client, AsyncClient):
            await self.client.aclose()
