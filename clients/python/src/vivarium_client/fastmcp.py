"""FastMCP CodeMode on Vivarium: a ``sandbox_provider`` that runs the model's code in a
Vivarium sandbox instead of Monty.

FastMCP's ``CodeMode`` transform (``fastmcp.experimental.transforms.code_mode``) collapses a
server's tools into discovery tools and one ``execute`` tool whose code calls
``await call_tool(name, params)`` and ends with ``return value``. Its ``sandbox_provider``
is anything with ``async run(code, *, inputs, external_functions)``; this is one::

    from fastmcp import FastMCP
    from fastmcp.experimental.transforms.code_mode import CodeMode
    from vivarium_client.fastmcp import VivariumSandboxProvider

    mcp = FastMCP("tools", transforms=[CodeMode(sandbox_provider=VivariumSandboxProvider())])

Each external function (FastMCP passes ``call_tool``) becomes a code-mode tool: the program
awaits it as a plain function, Vivarium suspends, and the function runs here, on the host,
with FastMCP's own auth, validation and call limit. The code is the real CPython, so the
program may import numpy, pandas and the rest of the sandbox's packages.

The code is run as Monty runs it: top-level ``await`` and ``return`` work, the value of a
``return`` (or of a trailing expression) is what ``run`` returns, ``inputs`` are globals.
The value crosses back as JSON (tuples become lists; anything JSON cannot carry becomes its
``repr``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .aio import AsyncClient
from .results import ExecutionResult
from .tools import Tool

__all__ = ["VivariumSandboxProvider"]

#: The host tool the program's value is handed to (a name no FastMCP function takes).
RESULT_TOOL = "__vivarium_result__"

# The program around the model's code: bind the external functions as awaitables, compile
# the code as the body of an ``async def`` (so ``return`` and ``await`` work and line
# numbers stay the code's own), run it, and hand its value to the host.
_PROGRAM = """\
import ast as _vv_ast, json as _vv_json
globals().update(_vv_json.loads({inputs!r}))
def _vv_bind(function, params):
    # Positional arguments in the host function's order (the guest's signature puts required
    # parameters first).
    def bound(*args, **kwargs):
        if len(args) > len(params):
            raise TypeError(f"takes {{len(params)}} positional arguments but {{len(args)}} were given")
        for name, value in zip(params, args):
            if name in kwargs:
                raise TypeError(f"got multiple values for argument {{name!r}}")
            kwargs[name] = value
        return function(**kwargs)
    return bound
for _vv_name, _vv_params in _vv_json.loads({functions!r}).items():
    globals()[_vv_name] = _vv_bind(getattr(tools.aio, tools.names[_vv_name]), _vv_params)
def _vv_compile(source):
    tree = _vv_ast.parse(source, "<code>")
    body = tree.body
    if body and isinstance(body[-1], _vv_ast.Expr):
        body[-1] = _vv_ast.copy_location(_vv_ast.Return(value=body[-1].value), body[-1])
    main = _vv_ast.AsyncFunctionDef(
        name="_vv_main", args=_vv_ast.arguments(), body=body or [_vv_ast.Pass()], decorator_list=[]
    )
    module = _vv_ast.Module(body=[main], type_ignores=[])
    _vv_ast.fix_missing_locations(module)
    exec(compile(module, "<code>", "exec"), globals())
_vv_compile({code!r})
_vv_value = await _vv_main()
tools.{result_tool}(value=_vv_json.loads(_vv_json.dumps(_vv_value, default=repr)))
"""


class VivariumSandboxProvider:
    """FastMCP ``SandboxProvider`` backed by a Vivarium server.

    Args:
        client: the :class:`~vivarium_client.AsyncClient` to use, or a server URL (then,
            as by default, one is made from ``base_url`` / ``api_key`` / ``timeout``,
            ``VIVARIUM_URL`` and ``VIVARIUM_API_KEY`` when not given, and closed by
            :meth:`aclose`).
        tool_limits: code-mode limits of each run (``calls``, ``tool_timeout_ms``, ...).
        **request_fields: other fields of each execution request (``limits``,
            ``template``, ``env``, ``on_stdout``, ...), passed to ``AsyncClient.run``.
    """

    def __init__(
        self,
        client: AsyncClient | str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        tool_limits: Mapping[str, Any] | None = None,
        **request_fields: Any,
    ) -> None:
        if isinstance(client, str):
            client, base_url = None, client
        self._owns_client = client is None
        self.client = client if client is not None else AsyncClient(
            base_url, api_key=api_key, timeout=timeout
        )
        self.tool_limits = dict(tool_limits) if tool_limits is not None else None
        self.request_fields = request_fields

    async def run(
        self,
        code: str,
        *,
        inputs: dict[str, Any] | None = None,
        external_functions: dict[str, Callable[..., Any]] | None = None,
    ) -> Any:
        """Runs ``code`` and returns its value; raises ``fastmcp.exceptions.ToolError``
        with the program's traceback when it fails."""
        functions = dict(external_functions or {})
        if RESULT_TOOL in functions:
            raise ValueError(f"{RESULT_TOOL!r} is reserved by the Vivarium sandbox provider")
        returned: list[Any] = []

        def hand_back(value: Any = None) -> None:
            returned.append(value)

        tools: dict[str, Tool] = {
            name: Tool.from_function(fn, name=name) for name, fn in functions.items()
        }
        tools[RESULT_TOOL] = Tool(
            name=RESULT_TOOL,
            description="Receives the program's value.",
            parameters={"type": "object", "properties": {"value": {}}},
            fn=hand_back,
        )
        program = _PROGRAM.format(
            inputs=json.dumps(inputs or {}),
            functions=json.dumps(
                {name: list(tools[name].parameters.get("properties", {})) for name in functions}
            ),
            code=code,
            result_tool=RESULT_TOOL,
        )
        result = await self.client.run(
            program, tools=tools, tool_limits=self.tool_limits, **self.request_fields
        )
        if not result.ok:
            _raise_tool_error(result)
        return returned[-1] if returned else None

    async def aclose(self) -> None:
        """Closes the client, if this provider made it."""
        if self._owns_client:
            await self.client.aclose()


def _raise_tool_error(result: ExecutionResult) -> None:
    from fastmcp.exceptions import ToolError

    if result.error is not None:
        message = result.error.traceback or f"{result.error.type}: {result.error.message}"
    else:
        message = f"sandbox run ended with status {result.status!r}"
        if result.detail:
            message += f": {result.detail}"
        if result.stderr:
            message += "\n" + result.stderr
    raise ToolError(message)
