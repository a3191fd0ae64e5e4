"""The synchronous client: :class:`Client` and :class:`Session`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from .tools import Tool, ToolsArg, answer_error, answer_result, call_tool, normalize_tools

__all__ = ["Client", "Session", "EventStream"]

T = TypeVar("T")
OutputCallback = Callable[[str], None]


class EventStream:
    """The events of a streamed execution: iterate it (``for event in stream``); closing it
    (``with``, ``close()``, or leaving the loop early and dropping it) hangs up, which
    cancels the run. Once the :class:`ResultEvent` has passed, ``result`` holds it."""

    def __init__(self, events: Iterator[StreamEvent]) -> None:
        self._events = events
        self.result: ExecutionResult | None = None

    def __iter__(self) -> Iterator[StreamEvent]:
        return self

    def __next__(self) -> StreamEvent:
        event = next(self._events)
        if isinstance(event, ResultEvent):
            self.result = event.result
        return event

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client:
    """A synchronous client of a Vivarium server.

    ``base_url`` defaults to ``$VIVARIUM_URL``, then ``http://127.0.0.1:8080``; ``api_key``
    to ``$VIVARIUM_API_KEY`` (sent as ``Authorization: Bearer KEY``). ``timeout`` is the
    HTTP timeout in seconds (``None``: none); a run whose ``limits.timeout_ms`` is longer
    gets that much more. ``http_client`` is an ``httpx.Client`` to use (not closed here).
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float | None = 60.0,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._config = Config.make(base_url, api_key, timeout)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client()

    @property
    def base_url(self) -> str:
        return self._config.base_url

    # Lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        """Closes the HTTP connections (unless the ``httpx.Client`` was given)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    # Driving plans --------------------------------------------------------------------

    def _send(self, call: HttpCall) -> Any:
        request = self._http.build_request(**self._config.request_args(call))
        try:
            response = self._http.send(request)
        except httpx.TimeoutException as e:
            raise Timeout(f"{call.method} {call.path}: {e}") from e
        except httpx.TransportError as e:
            raise TransportError(f"{call.method} {call.path}: {e}") from e
        return decode(call, response.status_code, response.headers, response.content)

    def _perform(self, effect: HttpCall | ToolRound | Sleep) -> Any:
        if isinstance(effect, ToolRound):
            return [call_tool(effect.tools, c) for c in effect.calls]
        if isinstance(effect, Sleep):
            time.sleep(effect.seconds)
            return None
        return self._send(effect)

    def _drive(self, plan: Plan[T]) -> T:
        try:
            effect = next(plan)
            while True:
                try:
                    outcome = self._perform(effect)
                except BaseException as e:
                    effect = plan.throw(e)
                else:
                    effect = plan.send(outcome)
        except StopIteration as stop:
            value: T = stop.value
            return value
        finally:
            plan.close()

    def _events(self, call: HttpCall) -> EventStream:
        return EventStream(self._event_iter(call))

    def _event_iter(self, call: HttpCall) -> Iterator[StreamEvent]:
        request = self._http.build_request(**self._config.request_args(call))
        try:
            response = self._http.send(request, stream=True)
        except httpx.TimeoutException as e:
            raise Timeout(f"{call.method} {call.path}: {e}") from e
        except httpx.TransportError as e:
            raise TransportError(f"{call.method} {call.path}: {e}") from e
        try:
            if response.status_code >= 400:
                raise error_for(response.status_code, response.headers, response.read())
            decoder = EventDecoder(response.headers.get("content-type"))
            try:
                for chunk in response.iter_bytes():
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
            response.close()

    # Executions -----------------------------------------------------------------------

    def execute(
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
        """Runs ``code`` in a fresh sandbox (``POST /v1/execute``). Every outcome of the
        program is a result (``status``); a refused request raises :class:`VivariumError`.
        ``files`` maps paths to bytes (or text); ``language`` is ``"python"`` (the default) or
        ``"bash"``; ``template`` is a built-in template (``"scientific"``, the default, or
        ``"python"``) or one of yours (:meth:`build_template`); other request fields go in
        ``extra``."""
        fields = dict(stdin=stdin, files=files, env=env, limits=limits, template=template,
                      packages=packages, policy=policy, language=language, leakage=leakage,
                      network=network, secrets=secrets, volumes=volumes, **extra)
        return self._drive(_ops.execute(_ops.run_call(code, fields)))

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
    ) -> EventStream:
        """Runs ``code`` and yields its events as they happen: :class:`StdoutEvent`,
        :class:`StderrEvent`, :class:`DroppedEvent`, :class:`ToolCallEvent` (with ``tools``;
        answer with :meth:`submit_tool_result`), then :class:`ResultEvent`. A refusal (an
        ``error`` event) is raised."""
        fields = dict(stdin=stdin, files=files, env=env, limits=limits, template=template,
                      packages=packages, policy=policy, language=language, leakage=leakage,
                      network=network, secrets=secrets, volumes=volumes, **extra)
        return self._events(_ops.run_call(code, fields, stream=True))

    def check(self, code: str) -> CheckResult:
        """Checks ``code`` without running it: syntax, and static findings."""
        return self._drive(_ops.check(code))

    def run(
        self,
        code: str,
        tools: ToolsArg = None,
        *,
        session: str | Session | None = None,
        tool_limits: Mapping[str, int] | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        **request_fields: Any,
    ) -> ExecutionResult:
        """Code mode: runs ``code`` with ``tools`` (callables, sync or async, or
        :class:`Tool` s) that the program calls as ``tools.<name>(...)``, answering every call
        until the final result. A tool that raises raises the same type (by name) and
        message in the program. With ``on_stdout``/``on_stderr`` the run streams and output
        reaches them as it is printed (a session turn cannot stream: they get its output
        at the end). ``session`` runs it as a turn of that session."""
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
            return self._run_streamed(call, registry, on_stdout, on_stderr)
        result = self._drive(_ops.run(call, registry))
        _ops.replay_output(result, on_stdout, on_stderr)
        return result

    def _run_streamed(
        self,
        call: HttpCall,
        registry: Mapping[str, Tool],
        on_stdout: OutputCallback | None,
        on_stderr: OutputCallback | None,
    ) -> ExecutionResult:
        with self._events(call) as events:
            for event in events:
                if isinstance(event, ToolCallEvent):
                    answer = call_tool(registry, event.call)
                    self._drive(_ops.tool_result(event.execution_id, answer))
                elif isinstance(event, ResultEvent):
                    return event.result
                else:
                    _ops.deliver(event, on_stdout, on_stderr)
        raise TransportError("the event stream ended without a result")

    # Code mode, by hand ---------------------------------------------------------------

    def resume(self, execution_id: str, answers: Sequence[JSON]) -> ExecutionResult:
        """Answers pending calls of a suspended execution (``{"call_id", "result"}`` or
        ``{"call_id", "error": {"type", "message"}}``); returns the next stop or the end."""
        return self._drive(_ops.resume(execution_id, list(answers)))

    def submit_tool_result(
        self,
        execution_id: str,
        call_id: str,
        result: Any = None,
        *,
        error: BaseException | Mapping[str, str] | None = None,
    ) -> list[str]:
        """Answers one call of a streamed execution; returns the call ids still waiting."""
        if error is None:
            answer = answer_result(call_id, result)
        elif isinstance(error, BaseException):
            answer = answer_error(call_id, error)
        else:
            answer = {"call_id": call_id, "error": dict(error)}
        return self._drive(_ops.tool_result(execution_id, answer))

    def cancel_execution(self, execution_id: str) -> None:
        """Cancels a suspended execution (its program stops, its journal is deleted)."""
        self._drive(_ops.cancel_execution(execution_id))

    def fork_execution(self, execution_id: str) -> ExecutionResult:
        """A new execution waiting on the same round (``status == "suspended"``)."""
        return self._drive(_ops.fork_execution(execution_id))

    # Sessions -------------------------------------------------------------------------

    def open_session(
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
    ) -> Session:
        """Opens a session: a kept-alive interpreter (``POST /v1/sessions``). With
        ``snapshot``, it starts from that snapshot (then leave out limits and template)."""
        snap = snapshot.snapshot_id if isinstance(snapshot, SnapshotInfo) else snapshot
        fields = dict(template=template, limits=limits, packages=packages, durable=durable,
                      snapshot=snap, leakage=leakage, network=network, secrets=secrets, volumes=volumes, **extra)
        return Session(self, self._drive(_ops.open_session(fields)))

    def session(self, session_id: str) -> Session:
        """The session ``session_id`` (no request is made)."""
        return Session(self, session_id)

    def restore(self, snapshot_id: str | SnapshotInfo, **opts: Any) -> Session:
        """A new session from a snapshot: its variables, imports and files."""
        return self.open_session(snapshot=snapshot_id, **opts)

    # Snapshots, packages, usage --------------------------------------------------------

    def list_snapshots(self) -> list[SnapshotInfo]:
        return self._drive(_ops.list_snapshots())

    def get_snapshot(self, snapshot_id: str) -> SnapshotInfo:
        return self._drive(_ops.get_snapshot(snapshot_id))

    def delete_snapshot(self, snapshot_id: str | SnapshotInfo) -> None:
        sid = snapshot_id.snapshot_id if isinstance(snapshot_id, SnapshotInfo) else snapshot_id
        self._drive(_ops.delete_snapshot(sid))

    def packages(self) -> PackageList:
        """What a sandbox can import besides the standard library, and the extra policy."""
        return self._drive(_ops.packages())

    def events(
        self,
        *,
        type: str | None = None,
        session_id: str | None = None,
        after: int | None = None,
        limit: int | None = None,
    ) -> EventPage:
        """The caller's tenant's lifecycle events, oldest first (``GET /v1/events``)."""
        query = {"type": type, "session_id": session_id, "after": after, "limit": limit}
        return self._drive(_ops.events(query))

    def add_webhook(
        self, url: str, *, events: list[str] | None = None, secret: str | None = None
    ) -> WebhookInfo:
        """Registers a webhook for the tenant's events; its ``secret`` is in this answer only."""
        return self._drive(_ops.add_webhook({"url": url, "events": events, "secret": secret}))

    def webhooks(self) -> list[WebhookInfo]:
        """The tenant's webhooks and how their deliveries went."""
        return self._drive(_ops.webhooks())

    def delete_webhook(self, webhook_id: str) -> None:
        """Deletes one of the tenant's webhooks."""
        self._drive(_ops.delete_webhook(webhook_id))

    # Volumes: files the tenant keeps beyond any sandbox ------------------------------

    def create_volume(self, name: str) -> VolumeInfo:
        """Makes an empty volume for the caller's tenant."""
        return self._drive(_ops.create_volume(name))

    def volumes(self) -> list[VolumeInfo]:
        """The tenant's volumes, with their usage."""
        return self._drive(_ops.volumes())

    def volume_info(self, name: str) -> VolumeInfo:
        return self._drive(_ops.volume_info(name))

    def delete_volume(self, name: str) -> None:
        """Deletes a volume with every file in it."""
        self._drive(_ops.delete_volume(name))

    def write_volume_file(self, name: str, path: str, data: bytes | str) -> FileEntry:
        """Writes a file in a volume (its folders made; a file there replaced, whole)."""
        return self._drive(_ops.write_volume_file(name, path, data))

    def read_volume_file(self, name: str, path: str) -> bytes:
        return self._drive(_ops.read_volume_file(name, path))

    def list_volume(self, name: str, path: str = "", *, depth: int = 1) -> list[VolumeEntry]:
        """The entries under a folder of a volume, ``depth`` levels down."""
        return self._drive(_ops.list_volume(name, path, depth))

    def remove_volume_path(self, name: str, path: str) -> None:
        """Removes a file, a link, or a folder with everything in it."""
        self._drive(_ops.remove_volume_path(name, path))

    def make_volume_dir(self, name: str, path: str) -> VolumeEntry:
        return self._drive(_ops.make_volume_dir(name, path))

    # Templates: environments the tenant builds once and names ------------------------

    def build_template(
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
        """Builds a template named ``name`` (``POST /v1/templates``): from ``from_``
        (``"scientific"``, the default, ``"python"``, or another of yours), ``packages``
        installed, ``files`` (path -> bytes or text) laid down, ``workdir`` made and
        entered, each of ``commands`` run by the sandbox's shell, then ``setup`` (Python),
        then ``imports``; ``env`` is the environment of every sandbox from it, ``limits``
        the build's. Then ``execute(..., template=name)`` and ``open_session(template=name)``
        start from it.

        With ``wait`` (the default) it polls the build to its end and returns the ready
        template; a build that fails raises :class:`TemplateBuildFailed` (its ``step`` and
        ``reason``, its ``template`` with the log), one still building after ``timeout``
        seconds (``None``: no limit) raises :class:`Timeout` (the build goes on). Without
        ``wait`` it returns the answer as it came (``status == "building"``; see
        :meth:`wait_template`). Identical inputs to a ready template of yours return it at
        once."""
        fields = dict(name=name, packages=packages, files=files, commands=commands,
                      setup=setup, imports=imports, env=env, workdir=workdir, limits=limits,
                      **extra)
        fields["from"] = from_
        return self._drive(_ops.build_template(fields, wait, timeout))

    def wait_template(
        self, name: str | TemplateInfo, *, timeout: float | None = 120.0
    ) -> TemplateInfo:
        """Waits for a template's build to end (see :meth:`build_template`)."""
        info = name if isinstance(name, TemplateInfo) else self.template(name)
        return self._drive(_ops.wait_template(info, timeout))

    def templates(self) -> list[TemplateInfo]:
        """The built-in templates, then yours, by name (``GET /v1/templates``)."""
        return self._drive(_ops.templates())

    def template(self, name: str) -> TemplateInfo:
        """A template: its status, and its build's log and failure. An unknown name (or
        another tenant's) raises :class:`NotFound` (``template_not_found``)."""
        return self._drive(_ops.template(name))

    def delete_template(self, name: str | TemplateInfo) -> None:
        """Deletes one of your templates (sessions and runs started from it go on). A
        built-in raises :class:`BadRequest`, one still building :class:`Conflict`."""
        self._drive(_ops.delete_template(name.name if isinstance(name, TemplateInfo) else name))

    def usage(self) -> TenantUsage:
        """The caller's tenant's use of each quota."""
        return self._drive(_ops.usage())

    def health(self, *, ready: bool = True) -> JSON:
        """``GET /readyz`` (or ``/healthz``); a server not ready raises ServiceUnavailable."""
        return self._drive(_ops.health(ready))


class Session:
    """A session: a kept-alive interpreter whose variables, imports and files persist
    between turns. A context manager that closes it."""

    def __init__(self, client: Client, info: SessionInfo | str) -> None:
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
        return f"Session({self.id!r})"

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.close()
        except VivariumError:
            if exc is None:
                raise

    def execute(
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
        """Runs a turn; ``result`` is its final expression's ``repr``. ``limits`` may lower
        this turn's ``timeout_ms``, ``fuel``, ``output_bytes``."""
        fields = dict(stdin=stdin, files=files, limits=limits, policy=policy, language=language,
                      leakage=leakage, **extra)
        call = _ops.run_call(code, fields, self.id, self._turn_timeout_ms)
        return self._client._drive(_ops.execute(call))

    def run(
        self,
        code: str,
        tools: ToolsArg = None,
        *,
        tool_limits: Mapping[str, int] | None = None,
        on_stdout: OutputCallback | None = None,
        on_stderr: OutputCallback | None = None,
        **request_fields: Any,
    ) -> ExecutionResult:
        """Code mode in a turn of this session (see :meth:`Client.run`)."""
        return self._client.run(code, tools, session=self, tool_limits=tool_limits,
                                on_stdout=on_stdout, on_stderr=on_stderr, **request_fields)

    def list_files(self) -> list[FileEntry]:
        return self._client._drive(_ops.list_files(self.id))

    def read_file(self, path: str) -> bytes:
        return self._client._drive(_ops.read_file(self.id, path))

    def write_file(self, path: str, data: bytes | str) -> FileEntry:
        return self._client._drive(_ops.write_file(self.id, path, data))

    def snapshot(self) -> SnapshotInfo:
        """Stores the session's state; restore it with ``Client.restore``."""
        return self._client._drive(_ops.snapshot(self.id))

    def fork(self, turn: int | None = None) -> Session:
        """A new live session with this one's state (or its state just after kept turn
        ``turn``); the two diverge from here."""
        return Session(self._client, self._client._drive(_ops.fork_session(self.id, turn)))

    def fan_out(self, count: int, turn: int | None = None) -> list[Session]:
        """``count`` new sessions (1 to 100) with this one's state, or its state just after
        kept turn ``turn``: all or none."""
        made = self._client._drive(_ops.fan_out(self.id, count, turn))
        return [Session(self._client, info) for info in made]

    def turns(self) -> list[KeptTurn]:
        """The states it keeps to roll back or fork to, oldest first; the last is now."""
        return self._client._drive(_ops.kept_turns(self.id))

    def rollback(self, turn: int, *, branch: bool = False) -> Session | None:
        """Goes back to its state just after kept turn ``turn`` (the next turn is
        ``turn + 1``); with ``branch``, the state it was in goes on as the returned session."""
        made = self._client._drive(_ops.rollback(self.id, turn, branch))
        return Session(self._client, made) if made else None

    def add_packages(self, *specs: str) -> list[PackagePin]:
        """Adds pure-Python packages between turns (state kept); returns every one it has."""
        return self._client._drive(_ops.add_packages(self.id, list(specs)))

    def metrics(self) -> SessionMetrics:
        """What the session has used, in all and turn by turn."""
        return self._client._drive(_ops.session_metrics(self.id))

    def info(self) -> SessionInfo:
        return self._client._drive(_ops.session_info(self.id))

    def close(self, *, missing_ok: bool = True) -> None:
        """Closes the session (its files are gone). Already closed or expired is fine
        unless ``missing_ok=False``."""
        self._client._drive(_ops.close_session(self.id, missing_ok))
