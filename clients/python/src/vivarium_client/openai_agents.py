"""OpenAI Agents SDK on Vivarium: a shell executor for ``ShellTool(executor=...)``.

The SDK's ``ShellTool`` (``agents/tool.py``) hands each shell call of the model to
``executor(ShellCommandRequest) -> str | ShellResult``: the call's ``commands``, a
``timeout_ms`` and a ``max_output_length``. This executor runs each command as a bash turn of
one Vivarium session (the sandbox's own shell over the sandbox's own files, never a host
process), so ``cd``, ``export`` and files carry over between commands and calls, as in a
terminal::

    from agents import Agent, Runner, ShellTool
    from vivarium_client.openai_agents import VivariumShell

    shell = VivariumShell("http://127.0.0.1:8080")
    agent = Agent(name="dev", tools=[ShellTool(executor=shell)])
    result = await Runner.run(agent, "How many files are there?")
    await shell.aclose()

Each command's result is a ``ShellCommandOutput``: its stdout, its stderr, and the outcome,
``exit`` with the command's status, or ``timeout`` when the turn's time limit (the call's
``timeout_ms``, at most the session's) ended it. The SDK cuts the output at
``max_output_length`` itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from agents.tool import (
    ShellCallOutcome,
    ShellCommandOutput,
    ShellCommandRequest,
    ShellResult,
)

from .aio import AsyncClient, AsyncSession
from .results import ExecutionResult

__all__ = ["VivariumShell"]


class VivariumShell:
    """A ``ShellTool`` executor backed by one Vivarium session.

    Args:
        server_or_client: a server URL or the :class:`~vivarium_client.AsyncClient` to use;
            by default (and for a URL) a client is made (``VIVARIUM_URL`` and
            ``VIVARIUM_API_KEY`` when not given) and closed by :meth:`aclose`.
        api_key: the API key of a client made here.
        template: the session's template.
        session: an open :class:`~vivarium_client.AsyncSession` (or its id) to use instead
            of opening one; it is not closed by :meth:`aclose`.
        session_options: other options of the session (``limits``, ``packages``, ...).
        http_timeout: the HTTP timeout of a client made here.

    The session is opened at the first call and closed by :meth:`aclose` (or ``async
    with``). Commands run one at a time, in order.
    """

    def __init__(
        self,
        server_or_client: AsyncClient | str | None = None,
        *,
        api_key: str | None = None,
        template: str | None = None,
        session: AsyncSession | str | None = None,
        session_options: Mapping[str, Any] | None = None,
        http_timeout: float | None = 60.0,
    ) -> None:
        if isinstance(server_or_client, AsyncClient):
            self.client = server_or_client
            self._owns_client = False
        else:
            self.client = AsyncClient(server_or_client, api_key=api_key, timeout=http_timeout)
            self._owns_client = True
        self.session_options = dict(session_options or {})
        if template is not None:
            self.session_options["template"] = template
        if isinstance(session, str):
            session = self.client.session(session)
        self.session: AsyncSession | None = session
        self._owns_session = session is None
        self._max_timeout_ms: int | None = None
        self._lock = asyncio.Lock()

    async def _open(self) -> AsyncSession:
        if self.session is None:
            self.session = await self.client.open_session(**self.session_options)
        if self._max_timeout_ms is None:
            info = self.session.info_at_open or await self.session.info()
            limit = info.limits.get("timeout_ms")
            self._max_timeout_ms = limit if isinstance(limit, int) else 0
        return self.session

    async def __call__(self, request: ShellCommandRequest) -> ShellResult:
        """Runs the call's commands in order, each a bash turn of the session."""
        action = request.data.action
        outputs: list[ShellCommandOutput] = []
        async with self._lock:
            session = await self._open()
            limits: dict[str, int] | None = None
            if action.timeout_ms is not None and action.timeout_ms > 0:
                ms = int(action.timeout_ms)
                if self._max_timeout_ms:
                    ms = min(ms, self._max_timeout_ms)
                limits = {"timeout_ms": ms}
            for command in action.commands:
                result = await session.execute(command, language="bash", limits=limits)
                outputs.append(_output(command, result))
        return ShellResult(output=outputs, max_output_length=action.max_output_length)

    async def aclose(self) -> None:
        """Closes the session (unless it was given) and the client (if made here)."""
        try:
            if self.session is not None and self._owns_session:
                await self.session.close()
        finally:
            if self._owns_session:
                self.session = None
            if self._owns_client:
                await self.client.aclose()

    async def __aenter__(self) -> VivariumShell:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _output(command: str, result: ExecutionResult) -> ShellCommandOutput:
    stderr = result.stderr
    if result.status == "timeout":
        outcome = ShellCallOutcome(type="timeout", exit_code=result.exit_code)
    else:
        exit_code = result.exit_code
        if exit_code is None and result.status != "ok":
            # A limit (or the runtime) ended the turn without a shell status: say which.
            stderr += ("\n" if stderr and not stderr.endswith("\n") else "") + (
                f"vivarium: the command ended with status {result.status}"
                + (f": {result.detail}" if result.detail else "")
                + "\n"
            )
            exit_code = 1
        outcome = ShellCallOutcome(type="exit", exit_code=0 if exit_code is None else exit_code)
    return ShellCommandOutput(
        stdout=result.stdout,
        stderr=stderr,
        outcome=outcome,
        command=command,
        provider_data={"vivarium_status": result.status, "truncated": bool(
            result.truncated.stdout or result.truncated.stderr)},
    )
