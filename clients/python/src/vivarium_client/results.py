"""Typed views of what the API returns. Each keeps the JSON it came from as ``raw``."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal, Union

__all__ = [
    "PyError",
    "OutputFile",
    "RichOutput",
    "ResourceUsage",
    "NetworkUsage",
    "Truncated",
    "Finding",
    "ToolCall",
    "ExecutionResult",
    "StdoutEvent",
    "StderrEvent",
    "DroppedEvent",
    "ToolCallEvent",
    "ResultEvent",
    "StreamEvent",
    "SessionInfo",
    "SnapshotInfo",
    "FileEntry",
    "VolumeInfo",
    "VolumeEntry",
    "SyntaxIssue",
    "CheckResult",
    "PackagePin",
    "BuiltinPackage",
    "PackageList",
    "QuotaUse",
    "TenantUsage",
    "UsageSample",
    "EgressTotals",
    "SessionMetrics",
    "Event",
    "EventPage",
    "WebhookInfo",
    "TemplateStatus",
    "BuildFailure",
    "StepLog",
    "TemplateInfo",
]

JSON = dict[str, Any]


def _dict(v: Any) -> JSON:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _opt_int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _opt_str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


@dataclass(frozen=True)
class PyError:
    """The program's uncaught exception, parsed from its traceback."""

    type: str
    message: str
    traceback: str
    line: int | None = None
    hint: str | None = None

    @classmethod
    def from_dict(cls, d: JSON) -> PyError:
        return cls(
            type=str(d.get("type", "")),
            message=str(d.get("message", "")),
            traceback=str(d.get("traceback", "")),
            line=_opt_int(d.get("line")),
            hint=_opt_str(d.get("hint")),
        )


@dataclass(frozen=True)
class OutputFile:
    """A file the run created or changed. ``content`` is ``None`` when the response could
    not carry it (too large): read it from a session instead."""

    path: str
    content: bytes | None
    media_type: str
    size: int

    @classmethod
    def from_dict(cls, d: JSON) -> OutputFile:
        c = d.get("content")
        return cls(
            path=str(d.get("path", "")),
            content=base64.b64decode(c) if isinstance(c, str) else None,
            media_type=str(d.get("media_type", "application/octet-stream")),
            size=int(d.get("size") or 0),
        )

    @property
    def text(self) -> str:
        """The content as UTF-8 text (invalid bytes replaced)."""
        return (self.content or b"").decode("utf-8", "replace")


@dataclass(frozen=True)
class RichOutput:
    """A rich output (``display(obj)``, ``plt.show()``): ``data`` is bytes for
    ``image/png``, text for the other types."""

    mime: str
    data: bytes | str

    @classmethod
    def from_dict(cls, d: JSON) -> RichOutput:
        mime = str(d.get("mime", ""))
        data = str(d.get("data", ""))
        return cls(mime=mime, data=base64.b64decode(data) if mime == "image/png" else data)


@dataclass(frozen=True)
class ResourceUsage:
    """What a run used: wall time (tool waits included), fuel, peak memory, disk."""

    wall_ms: float
    fuel: int
    memory_peak_bytes: int
    disk_bytes: int

    @classmethod
    def from_dict(cls, d: JSON) -> ResourceUsage:
        return cls(
            wall_ms=float(d.get("wall_ms") or 0.0),
            fuel=int(d.get("fuel") or 0),
            memory_peak_bytes=int(d.get("memory_peak_bytes") or 0),
            disk_bytes=int(d.get("disk_bytes") or 0),
        )


@dataclass(frozen=True)
class NetworkUsage:
    """A run's outbound HTTP requests (only for runs granted network)."""

    requests: int
    refused: int
    bytes_sent: int
    bytes_received: int
    refusals: list[JSON]

    @classmethod
    def from_dict(cls, d: JSON) -> NetworkUsage:
        return cls(
            requests=int(d.get("requests") or 0),
            refused=int(d.get("refused") or 0),
            bytes_sent=int(d.get("bytes_sent") or 0),
            bytes_received=int(d.get("bytes_received") or 0),
            refusals=[_dict(r) for r in _list(d.get("refusals"))],
        )


@dataclass(frozen=True)
class Truncated:
    """Which output streams lost bytes to ``output_bytes``."""

    stdout: bool = False
    stderr: bool = False


@dataclass(frozen=True)
class Finding:
    """One finding of the pre-execution check."""

    rule: str
    severity: str
    line: int
    col: int
    message: str

    @classmethod
    def from_dict(cls, d: JSON) -> Finding:
        return cls(
            rule=str(d.get("rule", "")),
            severity=str(d.get("severity", "")),
            line=int(d.get("line") or 0),
            col=int(d.get("col") or 0),
            message=str(d.get("message", "")),
        )


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool by the program (code mode)."""

    call_id: str
    name: str
    arguments: JSON

    @classmethod
    def from_dict(cls, d: JSON) -> ToolCall:
        return cls(
            call_id=str(d.get("call_id", "")),
            name=str(d.get("name", "")),
            arguments=_dict(d.get("arguments")),
        )


@dataclass(frozen=True)
class ExecutionResult:
    """The result of an execution or a session turn (or a code-mode stop: ``status ==
    "suspended"`` with ``pending_calls``).

    ``status`` is ``ok``, ``error``, ``timeout``, ``fuel_exhausted``, ``memory_exceeded``,
    ``host_memory_exceeded``, ``stack_overflow``, ``trap``, ``cancelled``, ``tool_timeout``,
    ``tool_limit`` (or ``suspended``). ``result`` is a session turn's final expression
    (its ``repr``), ``turn`` its number.
    """

    id: str | None
    status: str
    exit_code: int | None
    stdout: str
    stderr: str
    error: PyError | None
    detail: str | None
    files: list[OutputFile]
    usage: ResourceUsage
    truncated: Truncated
    outputs: list[RichOutput]
    findings: list[Finding]
    leaks: list[JSON]
    network: NetworkUsage | None
    result: str | None = None
    session_id: str | None = None
    turn: int | None = None
    rolled_back: bool = False
    turns_dropped: bool = False
    ended: JSON | None = None
    pending_calls: list[ToolCall] = field(default_factory=list)
    execution_id: str | None = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> ExecutionResult:
        err = d.get("error")
        net = d.get("network")
        trunc = _dict(d.get("truncated"))
        ended = d.get("ended")
        ident = _opt_str(d.get("id"))
        return cls(
            id=ident,
            status=str(d.get("status", "")),
            exit_code=_opt_int(d.get("exit_code")),
            stdout=str(d.get("stdout") or ""),
            stderr=str(d.get("stderr") or ""),
            error=PyError.from_dict(err) if isinstance(err, dict) else None,
            detail=_opt_str(d.get("detail")),
            files=[OutputFile.from_dict(_dict(f)) for f in _list(d.get("files"))],
            usage=ResourceUsage.from_dict(_dict(d.get("usage"))),
            truncated=Truncated(bool(trunc.get("stdout")), bool(trunc.get("stderr"))),
            outputs=[RichOutput.from_dict(_dict(o)) for o in _list(d.get("outputs"))],
            findings=[Finding.from_dict(_dict(f)) for f in _list(d.get("findings"))],
            leaks=[_dict(x) for x in _list(d.get("leaks"))],
            network=NetworkUsage.from_dict(net) if isinstance(net, dict) else None,
            result=_opt_str(d.get("result")),
            session_id=_opt_str(d.get("session_id")),
            turn=_opt_int(d.get("turn")),
            rolled_back=bool(d.get("rolled_back", False)),
            turns_dropped=bool(d.get("turns_dropped", False)),
            ended=ended if isinstance(ended, dict) else None,
            pending_calls=[ToolCall.from_dict(_dict(c)) for c in _list(d.get("pending_calls"))],
            execution_id=_opt_str(d.get("execution_id")) or ident,
            raw=d,
        )

    @property
    def ok(self) -> bool:
        """The program ran to the end without an uncaught exception and exited 0."""
        return self.status == "ok"

    @property
    def suspended(self) -> bool:
        """A code-mode stop: ``pending_calls`` wait for answers."""
        return self.status == "suspended"

    def file(self, path: str) -> bytes:
        """The content of the returned file at ``path`` (``KeyError`` if none)."""
        for f in self.files:
            if f.path == path:
                if f.content is None:
                    raise KeyError(f"{path}: too large to be carried in the response")
                return f.content
        raise KeyError(path)


# Stream events ------------------------------------------------------------------------


@dataclass(frozen=True)
class StdoutEvent:
    """A chunk of standard output, as the program wrote it (line-buffered)."""

    text: str
    type: Literal["stdout"] = "stdout"


@dataclass(frozen=True)
class StderrEvent:
    """A chunk of standard error."""

    text: str
    type: Literal["stderr"] = "stderr"


@dataclass(frozen=True)
class DroppedEvent:
    """Bytes of output the stream dropped for a slow reader (the result still has them)."""

    bytes: int
    type: Literal["dropped"] = "dropped"


@dataclass(frozen=True)
class ToolCallEvent:
    """Code mode, streamed: the program calls a tool; answer it at the execution's
    ``tool-results`` (``Client.submit_tool_result``)."""

    execution_id: str
    call_id: str
    name: str
    arguments: JSON
    type: Literal["tool_call"] = "tool_call"

    @property
    def call(self) -> ToolCall:
        return ToolCall(self.call_id, self.name, self.arguments)


@dataclass(frozen=True)
class ResultEvent:
    """The last event: the whole result, as without streaming."""

    result: ExecutionResult
    type: Literal["result"] = "result"


StreamEvent = Union[StdoutEvent, StderrEvent, DroppedEvent, ToolCallEvent, ResultEvent]


# Sessions, snapshots, files -----------------------------------------------------------


@dataclass(frozen=True)
class SessionInfo:
    """A session's state: from ``open``/``fork``/``restore`` (no ``state``/``resident``) or
    ``GET /v1/sessions/{id}`` (no ``durable``)."""

    id: str
    created_at: str | None
    expires_at: str | None
    turns: int
    template: str | None
    limits: JSON
    durable: bool | None = None
    state: str | None = None
    resident: bool | None = None
    last_used_at: str | None = None
    ended: JSON | None = None
    #: The volumes mounted in it, each ``{name, path, read_only}`` (empty: none).
    volumes: list[JSON] = field(default_factory=list)
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> SessionInfo:
        durable = d.get("durable")
        resident = d.get("resident")
        ended = d.get("ended")
        return cls(
            id=str(d.get("id", "")),
            created_at=_opt_str(d.get("created_at")),
            expires_at=_opt_str(d.get("expires_at")),
            turns=int(d.get("turns") or 0),
            template=_opt_str(d.get("template")),
            limits=_dict(d.get("limits")),
            durable=durable if isinstance(durable, bool) else None,
            state=_opt_str(d.get("state")),
            resident=resident if isinstance(resident, bool) else None,
            last_used_at=_opt_str(d.get("last_used_at")),
            ended=ended if isinstance(ended, dict) else None,
            volumes=[v for v in d.get("volumes") or [] if isinstance(v, dict)],
            raw=d,
        )


@dataclass(frozen=True)
class KeptTurn:
    """A state a session keeps to roll back or fork to: the one just after ``turn``."""

    turn: int
    at: str
    bytes: int
    code: str
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> KeptTurn:
        return cls(
            turn=int(d.get("turn") or 0),
            at=str(d.get("at", "")),
            bytes=int(d.get("bytes") or 0),
            code=str(d.get("code", "")),
            raw=d,
        )


@dataclass(frozen=True)
class SnapshotInfo:
    """A stored snapshot of a session."""

    snapshot_id: str
    size_bytes: int
    created_at: str
    template: str
    turns: int
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @property
    def id(self) -> str:
        return self.snapshot_id

    @classmethod
    def from_dict(cls, d: JSON) -> SnapshotInfo:
        return cls(
            snapshot_id=str(d.get("snapshot_id", "")),
            size_bytes=int(d.get("size_bytes") or 0),
            created_at=str(d.get("created_at", "")),
            template=str(d.get("template", "")),
            turns=int(d.get("turns") or 0),
            raw=d,
        )


@dataclass(frozen=True)
class FileEntry:
    """A file in a session's working directory."""

    path: str
    size: int
    media_type: str | None = None

    @classmethod
    def from_dict(cls, d: JSON) -> FileEntry:
        return cls(
            path=str(d.get("path", "")),
            size=int(d.get("size") or 0),
            media_type=_opt_str(d.get("media_type")),
        )


@dataclass(frozen=True)
class VolumeInfo:
    """A volume of the caller's tenant (``GET /v1/volumes/{name}``)."""

    name: str
    created_at: int
    bytes: int
    files: int
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> VolumeInfo:
        return cls(
            name=str(d.get("name", "")),
            created_at=int(d.get("created_at") or 0),
            bytes=int(d.get("bytes") or 0),
            files=int(d.get("files") or 0),
            raw=d,
        )


@dataclass(frozen=True)
class VolumeEntry:
    """A file, folder or link in a volume (``GET /v1/volumes/{name}/files``)."""

    path: str
    kind: Literal["file", "dir", "symlink"]
    size: int
    modified: int
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> VolumeEntry:
        return cls(
            path=str(d.get("path", "")),
            kind=d.get("kind", "file"),
            size=int(d.get("size") or 0),
            modified=int(d.get("modified") or 0),
            raw=d,
        )


# Check, packages, usage ---------------------------------------------------------------


@dataclass(frozen=True)
class SyntaxIssue:
    line: int
    col: int
    message: str


@dataclass(frozen=True)
class CheckResult:
    """``POST /v1/check``: whether the code parses (``ok``), and static findings."""

    ok: bool
    errors: list[SyntaxIssue]
    findings: list[Finding]
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> CheckResult:
        syntax = _dict(d.get("syntax"))
        return cls(
            ok=bool(syntax.get("ok")),
            errors=[
                SyntaxIssue(int(e.get("line") or 0), int(e.get("col") or 0), str(e.get("message", "")))
                for e in map(_dict, _list(syntax.get("errors")))
            ],
            findings=[Finding.from_dict(_dict(f)) for f in _list(d.get("findings"))],
            raw=d,
        )


@dataclass(frozen=True)
class PackagePin:
    """One wheel of a session's extra packages."""

    name: str
    version: str
    sha256: str


@dataclass(frozen=True)
class BuiltinPackage:
    name: str
    version: str
    imports: list[str]


@dataclass(frozen=True)
class PackageList:
    """``GET /v1/packages``: the built-in distributions and the policy for extra ones."""

    builtin: list[BuiltinPackage]
    extra: JSON
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> PackageList:
        return cls(
            builtin=[
                BuiltinPackage(str(p.get("name", "")), str(p.get("version", "")),
                               [str(i) for i in _list(p.get("imports"))])
                for p in map(_dict, _list(d.get("builtin")))
            ],
            extra=_dict(d.get("extra")),
            raw=d,
        )

    def get(self, name: str) -> BuiltinPackage | None:
        """The built-in distribution named ``name`` (case and ``-``/``_`` insensitive)."""
        key = name.lower().replace("_", "-")
        return next((p for p in self.builtin if p.name.lower().replace("_", "-") == key), None)


@dataclass(frozen=True)
class QuotaUse:
    quota: str
    used: int
    limit: int | None


@dataclass(frozen=True)
class TenantUsage:
    """``GET /v1/usage``: the caller's tenant's use of each quota."""

    tenant: str
    key_id: str | None
    quotas: list[QuotaUse]
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> TenantUsage:
        return cls(
            tenant=str(d.get("tenant", "")),
            key_id=_opt_str(d.get("key_id")),
            quotas=[
                QuotaUse(str(q.get("quota", "")), int(q.get("used") or 0), _opt_int(q.get("limit")))
                for q in map(_dict, _list(d.get("quotas")))
            ],
            raw=d,
        )

    def quota(self, name: str) -> QuotaUse | None:
        return next((q for q in self.quotas if q.quota == name), None)


@dataclass(frozen=True)
class UsageSample:
    """A session's usage as one turn left it."""

    at: str
    at_unix: int
    cpu_used_pct: float
    memory_bytes: int
    disk_bytes: int

    @classmethod
    def from_dict(cls, d: JSON) -> UsageSample:
        return cls(
            at=str(d.get("at", "")),
            at_unix=int(d.get("at_unix") or 0),
            cpu_used_pct=float(d.get("cpu_used_pct") or 0.0),
            memory_bytes=int(d.get("memory_bytes") or 0),
            disk_bytes=int(d.get("disk_bytes") or 0),
        )


@dataclass(frozen=True)
class EgressTotals:
    """A session's outbound requests over its turns."""

    requests: int
    bytes_sent: int
    bytes_received: int

    @classmethod
    def from_dict(cls, d: JSON) -> EgressTotals:
        return cls(
            requests=int(d.get("requests") or 0),
            bytes_sent=int(d.get("bytes_sent") or 0),
            bytes_received=int(d.get("bytes_received") or 0),
        )


@dataclass(frozen=True)
class SessionMetrics:
    """``GET /v1/sessions/{id}/metrics``: what a session has used, in all and turn by turn."""

    session_id: str
    at: str
    turns: int
    cpu_seconds: float
    fuel: int
    memory_bytes: int
    memory_peak_bytes: int
    memory_limit_bytes: int
    disk_bytes: int
    disk_limit_bytes: int
    egress: EgressTotals
    samples: list[UsageSample]
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> SessionMetrics:
        return cls(
            session_id=str(d.get("session_id", "")),
            at=str(d.get("at", "")),
            turns=int(d.get("turns") or 0),
            cpu_seconds=float(d.get("cpu_seconds") or 0.0),
            fuel=int(d.get("fuel") or 0),
            memory_bytes=int(d.get("memory_bytes") or 0),
            memory_peak_bytes=int(d.get("memory_peak_bytes") or 0),
            memory_limit_bytes=int(d.get("memory_limit_bytes") or 0),
            disk_bytes=int(d.get("disk_bytes") or 0),
            disk_limit_bytes=int(d.get("disk_limit_bytes") or 0),
            egress=EgressTotals.from_dict(_dict(d.get("egress"))),
            samples=[UsageSample.from_dict(_dict(x)) for x in _list(d.get("samples"))],
            raw=d,
        )


@dataclass(frozen=True)
class Event:
    """One lifecycle event of the caller's tenant (``GET /v1/events``, a webhook's ``data``)."""

    id: str
    seq: int
    type: str
    at: str
    session_id: str | None
    execution_id: str | None
    snapshot_id: str | None
    status: str | None
    usage: ResourceUsage | None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> Event:
        usage = d.get("usage")
        return cls(
            id=str(d.get("id", "")),
            seq=int(d.get("seq") or 0),
            type=str(d.get("type", "")),
            at=str(d.get("at", "")),
            session_id=_opt_str(d.get("session_id")),
            execution_id=_opt_str(d.get("execution_id")),
            snapshot_id=_opt_str(d.get("snapshot_id")),
            status=_opt_str(d.get("status")),
            usage=ResourceUsage.from_dict(usage) if isinstance(usage, dict) else None,
            raw=d,
        )


@dataclass(frozen=True)
class EventPage:
    """A page of events, oldest first; ``next`` is the ``after`` of the next page."""

    events: list[Event]
    next: int | None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> EventPage:
        return cls(
            events=[Event.from_dict(_dict(e)) for e in _list(d.get("events"))],
            next=_opt_int(d.get("next")),
            raw=d,
        )


@dataclass(frozen=True)
class WebhookInfo:
    """A webhook of the caller's tenant and how its deliveries went; ``secret`` only in the
    answer to its registration."""

    id: str
    url: str
    events: list[str]
    created_at: str
    pending: int
    delivered: int
    failed: int
    dropped: int
    last_error: str | None
    secret: str | None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> WebhookInfo:
        return cls(
            id=str(d.get("id", "")),
            url=str(d.get("url", "")),
            events=[str(e) for e in _list(d.get("events"))],
            created_at=str(d.get("created_at", "")),
            pending=int(d.get("pending") or 0),
            delivered=int(d.get("delivered") or 0),
            failed=int(d.get("failed") or 0),
            dropped=int(d.get("dropped") or 0),
            last_error=_opt_str(d.get("last_error")),
            secret=_opt_str(d.get("secret")),
            raw=d,
        )


# Templates ----------------------------------------------------------------------------

#: Where a template's build is.
TemplateStatus = Literal["building", "ready", "failed"]


@dataclass(frozen=True)
class BuildFailure:
    """Where and why a template's build failed: ``step`` is ``packages``, ``files``,
    ``workdir``, ``commands[N]``, ``setup``, ``imports`` or ``build`` (the build as a whole);
    ``reason`` an exception, an exit status or a limit."""

    step: str
    reason: str

    @classmethod
    def from_dict(cls, d: JSON) -> BuildFailure:
        return cls(step=str(d.get("step", "")), reason=str(d.get("reason", "")))


@dataclass(frozen=True)
class StepLog:
    """What one step of a template's build printed (each stream cut at 16 KiB)."""

    step: str
    stdout: str
    stderr: str

    @classmethod
    def from_dict(cls, d: JSON) -> StepLog:
        return cls(
            step=str(d.get("step", "")),
            stdout=str(d.get("stdout") or ""),
            stderr=str(d.get("stderr") or ""),
        )


@dataclass(frozen=True)
class TemplateInfo:
    """A template (``GET /v1/templates/{name}``): a built-in one (``python``,
    ``scientific``) or one of the caller's tenant's, with how its build went.

    ``id`` hashes every input of the build (empty for a built-in): identical inputs give the
    same id. ``from_`` (the wire's ``from``) is what it was built from, ``base`` the
    built-in template under it, ``bytes`` its image's size, ``created_at`` when its build
    started (seconds since the epoch), ``env`` the names of its environment variables (not
    their values), ``packages`` its pins (``name==version``), ``error`` why a ``failed``
    build failed, ``log`` what each step printed.
    """

    name: str
    status: TemplateStatus
    builtin: bool
    id: str
    version: int
    from_: str
    base: str
    bytes: int
    created_at: int
    build_ms: int | None
    env: list[str]
    workdir: str | None
    packages: list[str]
    error: BuildFailure | None
    log: list[StepLog]
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: JSON) -> TemplateInfo:
        err = d.get("error")
        return cls(
            name=str(d.get("name", "")),
            status=d.get("status", "building"),
            builtin=bool(d.get("builtin", False)),
            id=str(d.get("id") or ""),
            version=int(d.get("version") or 0),
            from_=str(d.get("from") or ""),
            base=str(d.get("base") or ""),
            bytes=int(d.get("bytes") or 0),
            created_at=int(d.get("created_at") or 0),
            build_ms=_opt_int(d.get("build_ms")),
            env=[str(e) for e in _list(d.get("env"))],
            workdir=_opt_str(d.get("workdir")),
            packages=[str(p) for p in _list(d.get("packages"))],
            error=BuildFailure.from_dict(err) if isinstance(err, dict) else None,
            log=[StepLog.from_dict(_dict(x)) for x in _list(d.get("log"))],
            raw=d,
        )

    @property
    def ready(self) -> bool:
        """Built: runs and sessions may start from it."""
        return self.status == "ready"

    @property
    def failed(self) -> bool:
        """Its build failed (``error`` says where and why)."""
        return self.status == "failed"
