"""What the sync and async clients share, free of I/O: configuration, the requests they
send (:class:`HttpCall`), the code-mode rounds they answer (:class:`ToolRound`), the
pauses of a plan that polls (:class:`Sleep`), turning responses into values or exceptions,
and decoding an event stream.

Each operation of the API is a *plan* (``_ops.py``): a generator that yields these effects
and gets their outcomes back; ``Client`` drives plans with blocking I/O, ``AsyncClient``
with ``await``. So each endpoint's path, body and parsing is written once.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, Union
from urllib.parse import quote

from ._version import __version__
from .errors import TransportError, VivariumError, error_from_body
from .results import (
    DroppedEvent,
    ExecutionResult,
    ResultEvent,
    StderrEvent,
    StdoutEvent,
    StreamEvent,
    ToolCall,
    ToolCallEvent,
)
from .sse import SSEParser
from .tools import Tool, tool_specs

T = TypeVar("T")
JSON = dict[str, Any]

DEFAULT_URL = "http://127.0.0.1:8080"
EVENT_STREAM = "text/event-stream"


@dataclass(frozen=True)
class HttpCall:
    """One request. ``expect`` says what the body of a success is: JSON, raw bytes, or
    nothing (204). ``min_timeout`` raises the client's timeout for a long run."""

    method: str
    path: str
    json: Any = None
    content: bytes | None = None
    headers: Mapping[str, str] | None = None
    expect: Literal["json", "bytes", "none"] = "json"
    min_timeout: float | None = None


@dataclass(frozen=True)
class ToolRound:
    """A code-mode stop: the driver calls each of ``calls`` and sends back the answers."""

    execution_id: str
    calls: list[ToolCall]
    tools: Mapping[str, Tool] = field(repr=False)


@dataclass(frozen=True)
class Sleep:
    """A pause of ``seconds`` in a plan that polls (a template's build until it ends)."""

    seconds: float


Effect = Union[HttpCall, ToolRound, Sleep]
Plan = Generator[Effect, Any, T]


@dataclass(frozen=True)
class Config:
    """Where the server is and how to talk to it."""

    base_url: str
    api_key: str | None
    timeout: float | None

    @classmethod
    def make(cls, base_url: str | None, api_key: str | None, timeout: float | None) -> Config:
        url = base_url or os.environ.get("VIVARIUM_URL") or DEFAULT_URL
        key = api_key if api_key is not None else os.environ.get("VIVARIUM_API_KEY") or None
        return cls(url.rstrip("/"), key, timeout)

    def url(self, path: str) -> str:
        return self.base_url + path

    def headers(self, call: HttpCall) -> dict[str, str]:
        h = {"user-agent": f"vivarium-client-python/{__version__}", "accept": "application/json"}
        if self.api_key:
            h["authorization"] = f"Bearer {self.api_key}"
        if call.json is not None:
            h["content-type"] = "application/json"
        elif call.content is not None:
            h["content-type"] = "application/octet-stream"
        if call.headers:
            h.update(call.headers)
        return h

    def timeout_for(self, call: HttpCall) -> float | None:
        if self.timeout is None or call.min_timeout is None:
            return self.timeout
        return max(self.timeout, call.min_timeout)

    def request_args(self, call: HttpCall) -> dict[str, Any]:
        """Keyword arguments of ``httpx.Client.build_request`` (the same for the async one)."""
        args: dict[str, Any] = {
            "method": call.method,
            "url": self.url(call.path),
            "headers": self.headers(call),
            "timeout": self.timeout_for(call),
        }
        if call.json is not None:
            args["content"] = json.dumps(call.json).encode()
        elif call.content is not None:
            args["content"] = call.content
        return args


def seg(value: str) -> str:
    """A path segment (an id) escaped for a URL."""
    return quote(value, safe="")


def file_path(path: str) -> str:
    """A file's path in a session, escaped for a URL (its ``/`` kept)."""
    return quote(path.lstrip("/"), safe="/")


def _retry_after(headers: Mapping[str, str]) -> float | None:
    v = headers.get("retry-after")
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def error_for(status: int, headers: Mapping[str, str], content: bytes) -> VivariumError:
    """The exception for an error response."""
    text = content.decode("utf-8", "replace")
    try:
        body: Any = json.loads(text) if text else None
    except ValueError:
        body = None
    return error_from_body(
        status,
        body,
        text=text,
        retry_after=_retry_after(headers),
        request_id=headers.get("x-request-id"),
    )


def decode(call: HttpCall, status: int, headers: Mapping[str, str], content: bytes) -> Any:
    """A response's value as ``call`` expects it, or its error raised."""
    if status >= 400:
        raise error_for(status, headers, content)
    if call.expect == "none":
        return None
    if call.expect == "bytes":
        return content
    if not content:
        return None
    try:
        return json.loads(content)
    except ValueError as e:
        raise TransportError(
            f"the server's answer to {call.method} {call.path} is not JSON: {e}", status=status
        ) from e


# Request bodies -----------------------------------------------------------------------


def encode_files(files: Any) -> list[JSON]:
    """``files`` of a request: a mapping path -> bytes or text (text as UTF-8), or a list
    of ``{"path", "content"}`` (content base64, as the API takes it) given as is."""
    if isinstance(files, Mapping):
        out = []
        for path, data in files.items():
            raw = data.encode() if isinstance(data, str) else bytes(data)
            out.append({"path": str(path), "content": base64.b64encode(raw).decode()})
        return out
    if isinstance(files, Sequence) and not isinstance(files, (str, bytes)):
        return [dict(f) for f in files]
    raise TypeError("files must be a mapping of path -> bytes | str")


def body(fields: Mapping[str, Any], code: str | None = None) -> JSON:
    """A request body: the fields given (``None`` left out), ``files`` base64-encoded and
    ``tools`` (callables, :class:`Tool` s, spec dicts) turned into specs."""
    out: JSON = {} if code is None else {"code": code}
    for key, value in fields.items():
        if value is None:
            continue
        if key == "files":
            value = encode_files(value)
        elif key == "tools":
            value = tool_specs(value)
        out[key] = value
    return out


def run_timeout(fields: Mapping[str, Any], default_timeout_ms: int | None = None) -> float | None:
    """How long the HTTP request of a run may take: the run's own deadline (and package
    resolution, when it asks for packages), with room for the queue."""
    limits = fields.get("limits")
    ms = limits.get("timeout_ms") if isinstance(limits, Mapping) else None
    ms = ms if isinstance(ms, int) else default_timeout_ms
    if ms is None and not fields.get("packages"):
        return None
    seconds = (ms or 30_000) / 1000 + 35.0
    if fields.get("packages"):
        seconds += 130.0
    return seconds


# Event streams ------------------------------------------------------------------------


class EventDecoder:
    """Turns the bytes of an ``execute`` stream into typed events. An ``error`` event comes
    out as the exception to raise, after the events before it. A response that is JSON
    instead of a stream is read whole and comes out as one :class:`ResultEvent`."""

    def __init__(self, content_type: str | None) -> None:
        self._sse: SSEParser | None = SSEParser() if EVENT_STREAM in (content_type or "") else None
        self._raw = bytearray()
        self.result: ExecutionResult | None = None

    def feed(self, chunk: bytes) -> list[StreamEvent | VivariumError]:
        if self._sse is None:
            self._raw += chunk
            return []
        return [self._convert(e.event, e.data) for e in self._sse.feed(chunk)
                if e.event in _EVENTS]

    def close(self) -> list[StreamEvent | VivariumError]:
        if self._sse is None:
            return [self._convert("result", self._raw.decode("utf-8", "replace"))]
        out = [self._convert(e.event, e.data) for e in self._sse.flush() if e.event in _EVENTS]
        if self.result is None and not any(isinstance(e, VivariumError) for e in out):
            out.append(TransportError("the event stream ended without a result"))
        return out

    def _convert(self, event: str, data: str) -> StreamEvent | VivariumError:
        try:
            d: Any = json.loads(data) if data else {}
        except ValueError:
            if event == "error":
                return error_from_body(None, None, text=data)
            return TransportError(f"a {event} event that is not JSON: {data[:200]!r}")
        if not isinstance(d, dict):
            d = {}
        if event == "stdout":
            return StdoutEvent(str(d.get("text", "")))
        if event == "stderr":
            return StderrEvent(str(d.get("text", "")))
        if event == "dropped":
            return DroppedEvent(int(d.get("bytes") or 0))
        if event == "tool_call":
            args = d.get("arguments")
            return ToolCallEvent(
                execution_id=str(d.get("execution_id", "")),
                call_id=str(d.get("call_id", "")),
                name=str(d.get("name", "")),
                arguments=args if isinstance(args, dict) else {},
            )
        if event == "result":
            if "error" in d and "status" not in d:  # a JSON error body where a result was due
                return error_from_body(None, d)
            self.result = ExecutionResult.from_dict(d)
            return ResultEvent(self.result)
        return error_from_body(None, d, text=data)


_EVENTS = frozenset({"stdout", "stderr", "dropped", "tool_call", "result", "error"})
