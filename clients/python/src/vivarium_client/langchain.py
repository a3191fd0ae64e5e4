"""LangChain on Vivarium: an ``execute_python`` tool (a ``langchain_core`` ``BaseTool``).

::

    from vivarium_client.langchain import ExecutePythonTool

    python = ExecutePythonTool()                      # each call a fresh sandbox
    python = ExecutePythonTool(session=True)          # variables persist between calls
    python = ExecutePythonTool(tools=[search])        # the program may call search(...)
    model.bind_tools([python]); python.invoke({"code": "print(1 + 1)"})

The tool's output is what the program printed (a session turn also echoes its final
expression, as a REPL does), then its traceback if it failed. ``tools`` (LangChain tools,
callables or :class:`~vivarium_client.Tool` s) are code-mode tools: the program calls each
as ``tools.<name>(...)`` (listed in the tool's description), Vivarium suspends, and it runs here, on the host, with LangChain's
own ``invoke``/``ainvoke``. ``_run`` uses a :class:`~vivarium_client.Client`, ``_arun`` an
:class:`~vivarium_client.AsyncClient`; a session is shared by both.
"""

from __future__ import annotations

import asyncio
import keyword
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from .aio import AsyncClient
from .client import Client
from .results import ExecutionResult
from .tools import Tool

__all__ = ["ExecutePythonInput", "ExecutePythonTool", "host_tool"]

DESCRIPTION = (
    "Runs Python 3 code in an isolated sandbox (no network, a private working directory; "
    "numpy, pandas, scipy, matplotlib and the standard library are available) and returns "
    "what it printed, then the traceback if it failed. Print what you need to see."
)


TOOLS_HEADER = (
    "The code may call these host functions (keyword arguments; each returns JSON data, "
    "and raises if it fails):"
)


def _python_name(name: str) -> str:
    """A tool's name in the program (``tools.<this>``), by Vivarium's rule."""
    out = re.sub(r"\W", "_", name, flags=re.ASCII)
    if out[:1].isdigit():
        out = "_" + out
    if keyword.iskeyword(out) or out in ("aio", "ToolError", "names"):
        out += "_"
    return out


class ExecutePythonInput(BaseModel):
    """The tool's argument."""

    code: str = Field(description="The Python code to run. Print the results you need.")


def host_tool(tool: BaseTool | Callable[..., Any] | Tool, *, use_async: bool = False) -> Tool:
    """A code-mode :class:`Tool` for a LangChain tool (its name, description and argument
    schema; called with ``invoke`` or ``ainvoke``), a callable or a ``Tool``."""
    if isinstance(tool, Tool):
        return tool
    if not isinstance(tool, BaseTool):
        return Tool.from_function(tool)
    spec = convert_to_openai_tool(tool)["function"]
    lc_tool = tool

    def invoke(**kwargs: Any) -> Any:
        return lc_tool.invoke(kwargs)

    async def ainvoke(**kwargs: Any) -> Any:
        return await lc_tool.ainvoke(kwargs)

    return Tool(
        name=tool.name,
        description=str(spec.get("description") or ""),
        parameters=spec.get("parameters") or {"type": "object", "properties": {}},
        fn=ainvoke if use_async else invoke,
    )


class ExecutePythonTool(BaseTool):
    """``execute_python``: runs code in Vivarium.

    Fields: ``client`` / ``async_client`` (made from ``base_url`` and ``api_key`` when not
    given), ``session`` (run every call as a turn of one session, opened at the first
    call; :meth:`close` closes it), ``session_options`` (``Client.open_session`` options),
    ``tools`` (code-mode tools the program may call), ``tool_limits``, ``request_fields``
    (other request fields: ``limits``, ``env``, ``files``, ...).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = "execute_python"
    description: str = DESCRIPTION
    args_schema: type[BaseModel] = ExecutePythonInput

    client: Client | None = Field(default=None, exclude=True)
    async_client: AsyncClient | None = Field(default=None, exclude=True)
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False, exclude=True)
    timeout: float = 60.0
    session: bool = False
    session_options: dict[str, Any] = Field(default_factory=dict)
    tools: Sequence[Any] = Field(default_factory=list)
    tool_limits: dict[str, Any] | None = None
    request_fields: dict[str, Any] = Field(default_factory=dict)

    _session_id: str | None = PrivateAttr(default=None)
    _owned: list[Client | AsyncClient] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _alock: asyncio.Lock | None = PrivateAttr(default=None)

    def __init__(self, client: Client | AsyncClient | str | None = None, /, **data: Any) -> None:
        """The first argument may be a server URL, a :class:`~vivarium_client.Client` or an
        :class:`~vivarium_client.AsyncClient` (or pass ``client=`` / ``base_url=``)."""
        if isinstance(client, str):
            data.setdefault("base_url", client)
        elif isinstance(client, AsyncClient):
            data.setdefault("async_client", client)
        elif client is not None:
            data.setdefault("client", client)
        if isinstance(data.get("client"), str):
            data["base_url"] = data.pop("client")
        super().__init__(**data)

    @model_validator(mode="after")
    def _describe_tools(self) -> ExecutePythonTool:
        """Tells the model about the host functions its code may call."""
        if self.tools and self.description == DESCRIPTION:
            lines = [DESCRIPTION, TOOLS_HEADER]
            for t in (host_tool(x) for x in self.tools):
                params = ", ".join(f"{p}=..." for p in t.parameters.get("properties", {}))
                doc = (t.description or "").strip().splitlines()
                lines.append(f"- tools.{_python_name(t.name)}({params})" + (f": {doc[0]}" if doc else ""))
            self.description = "\n".join(lines)
        return self

    @property
    def session_id(self) -> str | None:
        """The session's id, once opened."""
        return self._session_id

    # BaseTool ---------------------------------------------------------------------------

    def _run(self, code: str, run_manager: CallbackManagerForToolRun | None = None) -> str:
        client = self._sync_client()
        tools = [host_tool(t) for t in self.tools]
        with self._lock:
            if self.session and self._session_id is None:
                self._session_id = client.open_session(**self.session_options).id
            result = client.run(
                code,
                tools,
                session=self._session_id,
                tool_limits=self.tool_limits,
                **self.request_fields,
            )
        return _output(result)

    async def _arun(
        self, code: str, run_manager: AsyncCallbackManagerForToolRun | None = None
    ) -> str:
        client = self._async_client()
        tools = [host_tool(t, use_async=True) for t in self.tools]
        if self._alock is None:
            self._alock = asyncio.Lock()
        async with self._alock:
            if self.session and self._session_id is None:
                self._session_id = (await client.open_session(**self.session_options)).id
            result = await client.run(
                code,
                tools,
                session=self._session_id,
                tool_limits=self.tool_limits,
                **self.request_fields,
            )
        return _output(result)

    # Lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the session and the clients this tool made."""
        if self._session_id is not None:
            session_id, self._session_id = self._session_id, None
            self._sync_client().session(session_id).close()
        for c in self._owned:
            if isinstance(c, Client):
                c.close()
        self._owned = [c for c in self._owned if not isinstance(c, Client)]
        self.client = None if self.client in self._owned else self.client

    async def aclose(self) -> None:
        """Closes the session and the clients this tool made (from async code)."""
        if self._session_id is not None:
            session_id, self._session_id = self._session_id, None
            await self._async_client().session(session_id).close()
        for c in self._owned:
            if isinstance(c, AsyncClient):
                await c.aclose()
            else:
                c.close()
        self._owned = []

    def _sync_client(self) -> Client:
        if self.client is None:
            self.client = Client(self.base_url, api_key=self.api_key, timeout=self.timeout)
            self._owned.append(self.client)
        return self.client

    def _async_client(self) -> AsyncClient:
        if self.async_client is None:
            self.async_client = AsyncClient(self.base_url, api_key=self.api_key, timeout=self.timeout)
            self._owned.append(self.async_client)
        return self.async_client


def _output(result: ExecutionResult) -> str:
    out = result.stdout + result.stderr
    if not result.ok and result.error is None:
        note = f"[{result.status}" + (f": {result.detail}]" if result.detail else "]")
        out = f"{out}\n{note}" if out else note
    return out
