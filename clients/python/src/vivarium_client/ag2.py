"""AG2 on Vivarium: a ``CodeEnvironment`` for ``SandboxCodeTool``.

AG2 1.2's ``SandboxCodeTool`` (``ag2/tools/code/tool.py``) gives an agent one
``run_code(code, language)`` tool and runs it in the ``CodeEnvironment`` it is given
(``ag2/tools/code/environment/base.py``: ``supported_languages`` and
``async run(code, language, *, context) -> CodeRunResult``). This is one, backed by
Vivarium::

    from ag2 import Agent
    from ag2.tools import SandboxCodeTool
    from vivarium_client.ag2 import VivariumCodeEnvironment

    agent = Agent("analyst", config=..., tools=[SandboxCodeTool(VivariumCodeEnvironment())])

Vivarium runs Python only, so ``supported_languages`` is ``("python",)``. With
``persistent=True`` every call is a turn of one session (variables, imports and files carry
over, as in a reused container); by default each call is a fresh sandbox. ``tools`` are
code-mode tools the program may call (``tools.<name>(...)``), run on the host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ag2.tools.code import CodeLanguage, CodeRunResult

from .aio import AsyncClient, AsyncSession
from .results import ExecutionResult
from .tools import ToolsArg

if TYPE_CHECKING:
    from ag2.context import ConversationContext

__all__ = ["VivariumCodeEnvironment"]


class VivariumCodeEnvironment:
    """AG2 ``CodeEnvironment`` running Python in Vivarium.

    Args:
        client: the :class:`~vivarium_client.AsyncClient` to use, or a server URL (then,
            as by default, one is made from ``base_url`` / ``api_key`` / ``timeout`` and
            closed by :meth:`aclose`).
        persistent: run every call as a turn of one session (opened at the first call,
            closed by :meth:`aclose`).
        session_options: options of that session (``limits``, ``template``, ...).
        tools: code-mode tools the program may call (callables or ``Tool`` s).
        tool_limits: code-mode limits of each run.
        **request_fields: other fields of each run (``limits``, ``env``, ``files``, ...).
    """

    def __init__(
        self,
        client: AsyncClient | str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        persistent: bool = False,
        session_options: Mapping[str, Any] | None = None,
        tools: ToolsArg = None,
        tool_limits: Mapping[str, Any] | None = None,
        **request_fields: Any,
    ) -> None:
        if isinstance(client, str):
            client, base_url = None, client
        self._owns_client = client is None
        self.client = client if client is not None else AsyncClient(
            base_url, api_key=api_key, timeout=timeout
        )
        self.persistent = persistent
        self.session_options = dict(session_options or {})
        self.tools = tools
        self.tool_limits = dict(tool_limits) if tool_limits is not None else None
        self.request_fields = request_fields
        self.session: AsyncSession | None = None
        self._lock = asyncio.Lock()  # a session runs one turn at a time

    @property
    def supported_languages(self) -> tuple[CodeLanguage, ...]:
        return ("python",)

    async def run(
        self,
        code: str,
        language: CodeLanguage,
        *,
        context: ConversationContext | None = None,
    ) -> CodeRunResult:
        """Runs ``code``; the output is stdout then stderr (the traceback, if it failed)."""
        if language not in self.supported_languages:
            return CodeRunResult(
                output=f"Language {language!r} is not enabled. Available: {list(self.supported_languages)}",
                exit_code=2,
            )
        fields: dict[str, Any] = dict(self.request_fields)
        if self.tools is not None:
            fields["tools"] = self.tools
        if self.tool_limits is not None:
            fields["tool_limits"] = self.tool_limits
        if self.persistent:
            async with self._lock:
                if self.session is None:
                    self.session = await self.client.open_session(**self.session_options)
                result = await self.session.run(code, **fields)
        else:
            result = await self.client.run(code, **fields)
        return _code_run_result(result)

    async def aclose(self) -> None:
        """Closes the session (and the client, if this environment made it)."""
        if self.session is not None:
            try:
                await self.session.close()
            finally:
                self.session = None
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> VivariumCodeEnvironment:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __deepcopy__(self, memo: dict[int, Any]) -> VivariumCodeEnvironment:
        # A shared resource handle (client, session), as AG2's own environments are:
        # ``Agent.add_tool`` deep-copies the tool, and the copy must use the same sandbox.
        return self


def _code_run_result(result: ExecutionResult) -> CodeRunResult:
    output = result.stdout + result.stderr
    if not result.ok and result.error is None:
        # Stopped by the host (timeout, memory, ...): say so, as a shell would.
        note = f"[{result.status}" + (f": {result.detail}]" if result.detail else "]")
        output = f"{output}\n{note}" if output else note
    exit_code = result.exit_code if result.exit_code is not None else (0 if result.ok else 1)
    if not result.ok and exit_code == 0:
        exit_code = 1
    return CodeRunResult(output=output, exit_code=exit_code)
