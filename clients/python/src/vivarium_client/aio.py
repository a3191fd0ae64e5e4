"""The asynchronous client: :class:`AsyncClient` and :class:`AsyncSession`. The same
operations as the sync client (the same plans, ``_ops.py``), performed with ``await``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import _ops
from ._transport import (
    JSON,
    Config,
    EventDecoder,
    HttpCall,
    Plan,
    Sleep,
    ToolRound,
    decode,
    error_for,
)
from .errors import Timeout, TransportError, VivariumError
from .results import (
    CheckResult,
    EventPage,
    ExecutionResult,
    FileEntry,
    KeptTurn,
    PackageList,
    PackagePin,
    ResultEvent,
    SessionInfo,
    SessionMetrics,
    SnapshotInfo,
    StreamEvent,
    TemplateInfo,
    TenantUsage,
    ToolCallEvent,
    VolumeEntry,
    VolumeInfo,
    WebhookInfo,
)
from .tools import Tool, ToolsArg, acall_tool, answer_error, answer_result, normalize_tools

__all__ = ["AsyncClient", "AsyncSession", "AsyncEventStream"]

T = TypeVar("T")
OutputCallback = Callable[[str], None]


class AsyncEventStream:
    """The events of a streamed execution: ``async for event in stream``. Closing it
    (``async with``, ``aclose()``) hangs up, which cancels the run. Once the
    :class:`ResultEvent` has passed, ``result`` holds it."""

    def __init__(self, events: AsyncIterator[StreamEvent]) -> None:
        self._events = events
        self.result: ExecutionResult | None = None

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self

    async def __anext__(self) -> StreamEvent:
        event = await self._events.__anext__()
        if isinstance(event, ResultEvent):
            self.result = event.result
        return event

    async def aclose(self) -> None:
        close = getattr(self._events, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncClient:
    """An asynchronous client of a Vivarium server; the same arguments as :class:`Client`
    (``http_client`` an ``httpx.AsyncClient``)."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float | None = 60.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._config = Config.make(base_url, api_key, timeout)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient()

    @property
    def base_url(self) -> str:
        return self._config.base_url

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    aclose = close

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    # Driving plans --------------------------------------------------------------------

    async def _send(self, call: HttpCall) -> Any:
        request = self._http.build_request(**self._config.request_args(call))
        try:
            response = await self._http.send(request)
        except httpx.TimeoutException as e:
            raise Timeout(f"{call.method} {call.path}: {e}") from e
        except httpx.TransportError as e:
            raise TransportError(f"{call.method} {call.path}: {e}") from e
        return decode(call, response.status_code, response.headers, response.content)

    async def _perform(self, effect: HttpCall | ToolRound | Sleep) -> Any:
        if isinstance(effect, ToolRound):
            # The calls of a round run concurrently (the program waits on all of them).
            return list(await asyncio.gather(*(acall_tool(effect.tools, c) for c in effect.calls)))
        if isinstance(effect, Sleep):
            await asyncio.sleep(effect.seconds)
            return None
        return await self._send(effect)

    async def _drive(self, plan: Plan[T]) -> T:
        try:
            effect = next(plan)
            while True:
                try:
                    outcome = await self._perform(effect)
                except BaseException as e:
                    effect = plan.throw(e)
                else:
                    effect = plan.send(outcome)
        except StopIteration as stop:
            value: T = stop.value
            return value
        finally:
            plan.close()

    def _events(self, call: HttpCall) -> AsyncEventStream:
        return AsyncEventStream(self._event_iter(call))

    async def _event_iter(self, call: HttpCall) -> AsyncIterator[StreamEvent]:
        request = self._http.build_request(**self._config.request_args(call))
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TimeoutException as e:
            raise Timeout(f"{call.method} {call.path}: {e}") from e
        except httpx.TransportError as e:
            raise TransportError(f"{call.method} {call.path}: {e}") from e
        try:
            if response.status_code >= 400:
                raise error_for(response.status_code, response.headers, await response.aread())
            decoder = EventDecoder(response.headers.get("content-type"))
            try:
                async for chunk in response.aiter_bytes():
                    for event in decoder.feed(chunk):
                        if isinstance(event, VivariumError):
                            raise event
                        yield event
                        if isinstance(event, ResultEvent):
                            return
            except httpx.TimeoutException as e:
                raise Timeout(f"{call.method} {call.path}: {e}") from e
            except httpx.TransportError as e:
                raise TransportError(f"{call.method} {call.path}: {e}") from e
            for event in decoder.close():
                if isinstance(event, VivariumError):
                    raise event
                yield event
        finally:
            await response.aclose()

    # Executions -----------------------------------------------------------------------

    async def execute(
        self,
        code: str,
        *,
        stdin: str | None = None,
        files: Mapping[str, bytes | str] | None = None,
        env: Mapping[str, str] | None = None,
        limits: Mapping[str, int] | None = None,
        template: str | None = None,
        packages: Sequence[str] | None = None,
        policy: str | None = None,
        language: str | None = None,
        leakage: str | None = None,
        network: Mapping[str, Any] | None = None,
        secrets: Mapping[str, Any] | None = None,
        volumes: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> ExecutionResult:
        """See :meth:`Client.execute`."""
        fields = dict(stdin=stdin, files=files, env=env, limits=limits, template=template,
                      packages=packages, policy=policy, language=language, leakage=leakage,
                      network=network, secrets=secrets, volumes=volumes, **extra)
        return await self._drive(_ops.execute(_ops.run_call(code, fields)))

    def stream(
        self,
        code: str,
        *,
        stdin: str | None = None,
        files: Mapping[str, bytes | str] | None = None,
        env: Mapping[str, str] | None = None,
        limits: Mapping[str, int] | None = None,
        template: str | None = None,
        packages: Sequence[str] | None = None,
        policy: str | None = None,
        language: str | None = None,
        leakage: str | None = None,
        network: Mapping[str, Any] | None = None,
        secrets: Mapping[str, Any] | None = None,
        volumes: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> AsyncEventStream:
        """See :meth:`Client.stream`; iterate with ``async for``."""
        fields = dict(stdin=stdin, files=files, env=env, limits=limits, template=template,
                      packages=packages, policy=policy, language=language, leakage=leakage,
                      network=network, secrets=secrets, volumes=volumes, **extra)
        return self._events(_ops.run_call(code, fields, stream=True))

    async def check(self, code: str) -> CheckResult:
        return await self._drive(_ops.check(code))

    async def run(
        self,
        code: str,
        tools: ToolsArg = None,
        *,
        session: str | AsyncSession | None = None,
        tool_limits: Mapping[str, int] | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        **request_fields: Any,
    ) -> ExecutionResult:
        """See :meth:`Client.run`. Tools may be coroutine functions (awaited; the calls of
        one round run concurrently) or plain functions (called directly)."""
        session_id = session if isinstance(session, str) or session is None else session.id
        default_ms = None if isinstance(session, str) or session is None else session._turn_timeout_ms
        registry = normalize_tools(tools)
        fields: dict[str, Any] = dict(request_fields)
        if registry:
            fields["tools"] = list(registry.values())
            fields["tool_limits"] = tool_limits
        streamed = session_id is None and (on_stdout is not None or on_stderr is not None)
        call = _ops.run_call(code, fields, session_id, default_ms, stream=streamed)
        if streamed:
            return await self._run_streamed(call, registry, on_stdout, on_stderr)
        result = await self._drive(_ops.run(call, registry))
        _ops.replay_output(result, on_stdout, on_stderr)
        return result

    async def _answer(self, registry: Mapping[str, Tool], event: ToolCallEvent) -> None:
        answer = await acall_tool(registry, event.call)
        await self._drive(_ops.tool_result(event.execution_id, answer))

    async def _run_streamed(
        self,
        call: HttpCall,
        registry: Mapping[str, Tool],
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
    ) -> ExecutionResult:
        pending: set[asyncio.Task[None]] = set()
        try:
            async with self._events(call) as events:
                async for event in events:
                    if isinstance(event, ToolCallEvent):
                        # Answered concurrently: the calls of a round arrive one event each.
                        pending.add(asyncio.ensure_future(self._answer(registry, event)))
                    elif isinstance(event, ResultEvent):
                        for task in pending:
                            if task.done() and not task.cancelled() and task.exception():
                                task.result()  # an answer that failed explains the end
                        return event.result
                    else:
                        _ops.deliver(event, on_stdout, on_stderr)
                    for task in [t for t in pending if t.done()]:
                        pending.discard(task)
                        task.result()  # a failed answer (HTTP error) is raised here
        finally:
            for task in pending:
                task.cancel()
        raise TransportError("the event stream ended without a result")

    # Code mode, by hand ---------------------------------------------------------------

    async def resume(self, execution_id: str, answers: Sequence[JSON]) -> ExecutionResult:
        return await self._drive(_ops.resume(execution_id, list(answers)))

    async def submit_tool_result(
        self,
        execution_id: str,
        call_id: str,
        result: Any = None,
        *,
        error: BaseException | Mapping[str, str] | None = None,
    ) -> list[str]:
        if error is None:
            answer = answer_result(call_id, result)
        elif isinstance(error, BaseException):
            answer = answer_error(call_id, error)
        else:
            answer = {"call_id": call_id, "error": dict(error)}
        return await self._drive(_ops.tool_result(execution_id, answer))

    async def cancel_execution(self, execution_id: str) -> None:
        await self._drive(_ops.cancel_execution(execution_id))

    async def fork_execution(self, execution_id: str) -> ExecutionResult:
        return await self._drive(_ops.fork_execution(execution_id))

    # Sessions -------------------------------------------------------------------------

    async def open_session(
        self,
        *,
        template: str | None = None,
        limits: Mapping[str, int] | None = None,
        packages: Sequence[str] | None = None,
        durable: bool | None = None,
        snapshot: str | SnapshotInfo | None = None,
        leakage: str | None = None,
        network: Mapping[str, Any] | None = None,
        secrets: Mapping[str, Any] | None = None,
        volumes: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> AsyncSession:
        """See :meth:`Client.open_session`."""
        snap = snapshot.snapshot_id if isinstance(snapshot, SnapshotInfo) else snapshot
        fields = dict(template=template, limits=limits, packages=packages, durable=durable,
                      snapshot=snap, leakage=leakage, network=network, secrets=secrets, volumes=volumes, **extra)
        return AsyncSession(self, await self._drive(_ops.open_session(fields)))

    def session(self, session_id: str) -> AsyncSession:
        return AsyncSession(self, session_id)

    async def restore(self, snapshot_id: str | SnapshotInfo, **opts: Any) -> AsyncSession:
        return await self.open_session(snapshot=snapshot_id, **opts)

    # Snapshots, packages, usage --------------------------------------------------------

    async def list_snapshots(self) -> list[SnapshotInfo]:
        return await self._drive(_ops.list_snapshots())

    async def get_snapshot(self, snapshot_id: str) -> SnapshotInfo:
        return await self._drive(_ops.get_snapshot(snapshot_id))

    async def delete_snapshot(self, snapshot_id: str | SnapshotInfo) -> None:
        sid = snapshot_id.snapshot_id if isinstance(snapshot_id, SnapshotInfo) else snapshot_id
        await self._drive(_ops.delete_snapshot(sid))

    async def packages(self) -> PackageList:
        return await self._drive(_ops.packages())

    async def events(
        self,
        *,
        type: str | None = None,
        session_id: str | None = None,
        after: int | None = None,
        limit: int | None = None,
    ) -> EventPage:
        """The caller's tenant's lifecycle events, oldest first (``GET /v1/events``)."""
        query = {"type": type, "session_id": session_id, "after": after, "limit": limit}
        return await self._drive(_ops.events(query))

    async def add_webhook(
        self, url: str, *, events: list[str] | None = None, secret: str | None = None
    ) -> WebhookInfo:
        """Registers a webhook for the tenant's events; its ``secret`` is in this answer only."""
        return await self._drive(_ops.add_webhook({"url": url, "events": events, "secret": secret}))

    async def webhooks(self) -> list[WebhookInfo]:
        """The tenant's webhooks and how their deliveries went."""
        return await self._drive(_ops.webhooks())

    async def delete_webhook(self, webhook_id: str) -> None:
        """Deletes one of the tenant's webhooks."""
        await self._drive(_ops.delete_webhook(webhook_id))

    # Volumes: files the tenant keeps beyond any sandbox ------------------------------

    async def create_volume(self, name: str) -> VolumeInfo:
        """Makes an empty volume for the caller's tenant."""
        return await self._drive(_ops.create_volume(name))

    async def volumes(self) -> list[VolumeInfo]:
        """The tenant's volumes, with their usage."""
        return await self._drive(_ops.volumes())

    async def volume_info(self, name: str) -> VolumeInfo:
        return await self._drive(_ops.volume_info(name))

    async def delete_volume(self, name: str) -> None:
        """Deletes a volume with every file in it."""
        await self._drive(_ops.delete_volume(name))

    async def write_volume_file(self, name: str, path: str, data: bytes | str) -> FileEntry:
        """Writes a file in a volume (its folders made; a file there replaced, whole)."""
        return await self._drive(_ops.write_volume_file(name, path, data))

    async def read_volume_file(self, name: str, path: str) -> bytes:
        return await self._drive(_ops.read_volume_file(name, path))

    async def list_volume(self, name: str, path: str = "", *, depth: int = 1) -> list[VolumeEntry]:
        """The entries under a folder of a volume, ``depth`` levels down."""
        return await self._drive(_ops.list_volume(name, path, depth))

    async def remove_volume_path(self, name: str, path: str) -> None:
        """Removes a file, a link, or a folder with everything in it."""
        await self._drive(_ops.remove_volume_path(name, path))

    async def make_volume_dir(self, name: str, path: str) -> VolumeEntry:
        return await self._drive(_ops.make_volume_dir(name, path))

    # Templates: environments the tenant builds once and names ------------------------

    async def build_template(
        self,
        name: str,
        *,
        from_: str | None = None,
        packages: Sequence[str] | None = None,
        files: Mapping[str, bytes | str] | None = None,
        commands: Sequence[str] | None = None,
        setup: str | None = None,
        imports: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        limits: Mapping[str, int] | None = None,
        wait: bool = True,
        timeout: float | None = 120.0,
        **extra: Any,
    ) -> TemplateInfo:
        """See :meth:`Client.build_template`; the wait polls with ``asyncio.sleep``."""
        fields = dict(name=name, packages=packages, files=files, commands=commands,
                      setup=setup, imports=imports, env=env, workdir=workdir, limits=limits,
                      **extra)
        fields["from"] = from_
        return await self._drive(_ops.build_template(fields, wait, timeout))

    async def wait_template(
        self, name: str | TemplateInfo, *, timeout: float | None = 120.0
    ) -> TemplateInfo:
        """Waits for a template's build to end (see :meth:`Client.build_template`)."""
        info = name if isinstance(name, TemplateInfo) else await self.template(name)
        return await self._drive(_ops.wait_template(info, timeout))

    async def templates(self) -> list[TemplateInfo]:
        """The built-in templates, then yours, by name (``GET /v1/templates``)."""
        return await self._drive(_ops.templates())

    async def template(self, name: str) -> TemplateInfo:
        """See :meth:`Client.template`."""
        return await self._drive(_ops.template(name))

    async def delete_template(self, name: str | TemplateInfo) -> None:
        """See :meth:`Client.delete_template`."""
        await self._drive(_ops.delete_template(name.name if isinstance(name, TemplateInfo) else name))

    async def usage(self) -> TenantUsage:
        return await self._drive(_ops.usage())

    async def health(self, *, ready: bool = True) -> JSON:
        return await self._drive(_ops.health(ready))


class AsyncSession:
    """A session of an :class:`AsyncClient`; ``async with`` closes it."""

    def __init__(self, client: AsyncClient, info: SessionInfo | str) -> None:
        self._client = client
        self.info_at_open: SessionInfo | None = info if isinstance(info, SessionInfo) else None
        self.id: str = info.id if isinstance(info, SessionInfo) else info

    @property
    def _turn_timeout_ms(self) -> int | None:
        if self.info_at_open is None:
            return None
        ms = self.info_at_open.limits.get("timeout_ms")
        return ms if isinstance(ms, int) else None

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r})"

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.close()
        except VivariumError:
            if exc is None:
                raise

    async def execute(
        self,
        code: str,
        *,
        stdin: str | None = None,
        files: Mapping[str, bytes | str] | None = None,
        limits: Mapping[str, int] | None = None,
        policy: str | None = None,
        language: str | None = None,
        leakage: str | None = None,
        **extra: Any,
    ) -> ExecutionResult:
        fields = dict(stdin=stdin, files=files, limits=limits, policy=policy, language=language,
                      leakage=leakage, **extra)
        call = _ops.run_call(code, fields, self.id, self._turn_timeout_ms)
        return await self._client._drive(_ops.execute(call))

    async def run(
        self,
        code: str,
        tools: ToolsArg = None,
        *,
        tool_limits: Mapping[str, int] | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        **request_fields: Any,
    ) -> ExecutionResult:
        return await self._client.run(code, tools, session=self, tool_limits=tool_limits,
                                      on_stdout=on_stdout, on_stderr=on_stderr, **request_fields)

    async def list_files(self) -> list[FileEntry]:
        return await self._client._drive(_ops.list_files(self.id))

    async def read_file(self, path: str) -> bytes:
        return await self._client._drive(_ops.read_file(self.id, path))

    async def write_file(self, path: str, data: bytes | str) -> FileEntry:
        return await self._client._drive(_ops.write_file(self.id, path, data))

    async def snapshot(self) -> SnapshotInfo:
        return await self._client._drive(_ops.snapshot(self.id))

    async def fork(self, turn: int | None = None) -> AsyncSession:
        return AsyncSession(self._client, await self._client._drive(_ops.fork_session(self.id, turn)))

    async def fan_out(self, count: int, turn: int | None = None) -> list[AsyncSession]:
        made = await self._client._drive(_ops.fan_out(self.id, count, turn))
        return [AsyncSession(self._client, info) for info in made]

    async def turns(self) -> list[KeptTurn]:
        return await self._client._drive(_ops.kept_turns(self.id))

    async def rollback(self, turn: int, *, branch: bool = False) -> AsyncSession | None:
        made = await self._client._drive(_ops.rollback(self.id, turn, branch))
        return AsyncSession(self._client, made) if made else None

    async def add_packages(self, *specs: str) -> list[PackagePin]:
        return await self._client._drive(_ops.add_packages(self.id, list(specs)))

    async def metrics(self) -> SessionMetrics:
        """What the session has used, in all and turn by turn."""
        return await self._client._drive(_ops.session_metrics(self.id))

    async def info(self) -> SessionInfo:
        return await self._client._drive(_ops.session_info(self.id))

    async def close(self, *, missing_ok: bool = True) -> None:
        await self._client._drive(_ops.close_session(self.id, missing_ok))
