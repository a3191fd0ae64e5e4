"""An incremental parser of server-sent events (the WHATWG ``text/event-stream`` format).

Feed it bytes as they arrive, in chunks of any size (a chunk may end inside a line, a
UTF-8 character or a ``\\r\\n``); it returns each event once its blank line has arrived.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["SSEEvent", "SSEParser"]


@dataclass(frozen=True)
class SSEEvent:
    """One event: its type (``message`` when none was named) and its data lines joined."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


class SSEParser:
    """Incremental: ``feed(chunk)`` returns the events completed by ``chunk``."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._last_id: str | None = None
        self._retry: int | None = None
        self._first = True

    def feed(self, chunk: bytes | str) -> list[SSEEvent]:
        text = self._decoder.decode(chunk) if isinstance(chunk, bytes) else chunk
        if self._first and text:
            text = text.removeprefix("\ufeff")
            self._first = False
        self._buffer += text
        return self._drain(final=False)

    def flush(self) -> list[SSEEvent]:
        """At the end of the stream: what is left. (An event without its blank line is
        dropped, as the format says.)"""
        self._buffer += self._decoder.decode(b"", final=True)
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        buf = self._buffer
        pos = 0
        while True:
            cr = buf.find("\r", pos)
            lf = buf.find("\n", pos)
            if cr == -1 and lf == -1:
                break
            if cr != -1 and (lf == -1 or cr < lf):
                # A lone "\r" at the end may be the first half of "\r\n": wait for more.
                if cr == len(buf) - 1 and not final:
                    break
                end, nxt = cr, cr + 2 if buf.startswith("\n", cr + 1) else cr + 1
            else:
                end, nxt = lf, lf + 1
            ev = self._line(buf[pos:end])
            if ev is not None:
                events.append(ev)
            pos = nxt
        self._buffer = buf[pos:]
        if final:
            self._buffer = ""
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment (keep-alive)
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        if self._id is not None:
            self._last_id = self._id
        if not self._data:  # no data: nothing to dispatch (as the format says)
            self._event, self._id, self._retry = "", None, None
            return None
        ev = SSEEvent(
            event=self._event or "message",
            data="\n".join(self._data),
            id=self._last_id,
            retry=self._retry,
        )
        self._event, self._data, self._id, self._retry = "", [], None, None
        return ev
