"""The incremental SSE parser and the stream decoder, on bytes cut at every place."""

from __future__ import annotations

import json

import pytest

from vivarium_client import PolicyDenied, ResultEvent, StdoutEvent, ToolCallEvent
from vivarium_client._transport import EventDecoder
from vivarium_client.sse import SSEEvent, SSEParser

STREAM = (
    ": keep-alive\r\n"
    "event: stdout\r\n"
    'data: {"text":"h\u00e9\\n"}\r\n'
    "\r\n"
    "event: multi\n"
    "data:first\n"
    "data: second\n"
    "id: 7\n"
    "\n"
    "event: nodata\n"
    "\n"
    "data: plain\r"
    "\r"
).encode()

EXPECTED = [
    SSEEvent("stdout", '{"text":"h\u00e9\\n"}'),
    SSEEvent("multi", "first\nsecond", id="7"),
    SSEEvent("message", "plain", id="7"),
]


def test_whole() -> None:
    p = SSEParser()
    assert p.feed(STREAM) + p.flush() == EXPECTED


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_cut_anywhere(cut: int) -> None:
    p = SSEParser()
    events = p.feed(STREAM[:cut]) + p.feed(STREAM[cut:]) + p.flush()
    assert events == EXPECTED


def test_byte_by_byte() -> None:
    p = SSEParser()
    events = [e for i in range(len(STREAM)) for e in p.feed(STREAM[i : i + 1])]
    assert events + p.flush() == EXPECTED


def test_unterminated_event_is_dropped() -> None:
    p = SSEParser()
    assert p.feed(b"event: stdout\ndata: x\n") == []
    assert p.flush() == []


def test_decoder_types_events_and_raises_errors_after_earlier_events() -> None:
    result = {"id": "ex-1", "status": "ok", "exit_code": 0, "stdout": "a\n", "stderr": ""}
    call = {"execution_id": "ex-1", "call_id": "call_1", "name": "f", "arguments": {"x": 1}}
    raw = (
        f"event: stdout\ndata: {json.dumps({'text': 'a'})}\n\n"
        f"event: tool_call\ndata: {json.dumps(call)}\n\n"
        f"event: result\ndata: {json.dumps(result)}\n\n"
    ).encode()
    d = EventDecoder("text/event-stream")
    events = d.feed(raw) + d.close()
    assert isinstance(events[0], StdoutEvent) and events[0].text == "a"
    assert isinstance(events[1], ToolCallEvent) and events[1].call.arguments == {"x": 1}
    assert isinstance(events[2], ResultEvent) and events[2].result.stdout == "a\n"
    assert d.result is events[2].result

    err = {"error": {"code": "policy_denied", "message": "no"}, "findings": []}
    d = EventDecoder("text/event-stream; charset=utf-8")
    raw = f"event: stdout\ndata: {{\"text\": \"x\"}}\n\nevent: error\ndata: {json.dumps(err)}\n\n"
    out = d.feed(raw.encode())
    assert isinstance(out[0], StdoutEvent)
    assert isinstance(out[1], PolicyDenied) and out[1].status == 422


def test_decoder_reads_a_json_answer_as_the_result() -> None:
    d = EventDecoder("application/json")
    assert d.feed(b'{"status": "ok", "stdout": "1\\n"') == []
    d.feed(b"}")
    (event,) = d.close()
    assert isinstance(event, ResultEvent) and event.result.stdout == "1\n"
