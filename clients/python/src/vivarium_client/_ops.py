"""Every operation of the API as a plan: a generator yielding :class:`HttpCall` and
:class:`ToolRound` effects and returning the typed value. Paths, bodies and parsing live
here once; the clients only perform the effects (``_drive`` in each)."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from ._transport import (
    EVENT_STREAM,
    JSON,
    HttpCall,
    Plan,
    Sleep,
    ToolRound,
    body,
    file_path,
    run_timeout,
    seg,
)
from .errors import NotFound, TemplateBuildFailed, Timeout
from .results import (
    CheckResult,
    EventPage,
    ExecutionResult,
    FileEntry,
    KeptTurn,
    PackageList,
    PackagePin,
    SessionInfo,
    SessionMetrics,
    SnapshotInfo,
    StderrEvent,
    StdoutEvent,
    StreamEvent,
    TemplateInfo,
    TenantUsage,
    VolumeEntry,
    VolumeInfo,
    WebhookInfo,
)
from .tools import Tool


def execute_path(session_id: str | None) -> str:
    return "/v1/execute" if session_id is None else f"/v1/sessions/{seg(session_id)}/execute"


def run_call(
    code: str,
    fields: Mapping[str, Any],
    session_id: str | None = None,
    default_timeout_ms: int | None = None,
    *,
    stream: bool = False,
) -> HttpCall:
    """The request of an execution (``session_id`` None) or a session turn."""
    return HttpCall(
        "POST",
        execute_path(session_id),
        json=body(fields, code),
        headers={"accept": EVENT_STREAM} if stream else None,
        min_timeout=run_timeout(fields, default_timeout_ms),
    )


def execute(call: HttpCall) -> Plan[ExecutionResult]:
    return ExecutionResult.from_dict((yield call))


def run(call: HttpCall, tools: Mapping[str, Tool]) -> Plan[ExecutionResult]:
    """Code mode over plain HTTP: each ``suspended`` stop's calls are answered at
    ``/resume`` until the final result. If anything escapes (a failed resume, an interrupt
    while a tool runs), the suspended execution is cancelled so it does not hold its place
    until it expires."""
    d: JSON = yield call
    while d.get("status") == "suspended":
        stop = ExecutionResult.from_dict(d)
        exec_id = stop.execution_id or ""
        try:
            answers = yield ToolRound(exec_id, stop.pending_calls, tools)
            d = yield HttpCall(
                "POST",
                f"/v1/executions/{seg(exec_id)}/resume",
                json={"results": answers},
                min_timeout=call.min_timeout,
            )
        except BaseException:
            try:
                yield cancel_call(exec_id)
            except Exception:
                pass
            raise
    return ExecutionResult.from_dict(d)


def resume(execution_id: str, answers: list[JSON]) -> Plan[ExecutionResult]:
    d = yield HttpCall("POST", f"/v1/executions/{seg(execution_id)}/resume", json={"results": answers})
    return ExecutionResult.from_dict(d)


def tool_result(execution_id: str, answer: JSON) -> Plan[list[str]]:
    """Answers one streamed call; returns the calls of its round still waiting."""
    d = yield HttpCall("POST", f"/v1/executions/{seg(execution_id)}/tool-results", json=answer)
    return [str(x) for x in (d or {}).get("waiting", [])]


def cancel_call(execution_id: str) -> HttpCall:
    return HttpCall("DELETE", f"/v1/executions/{seg(execution_id)}", expect="none")


def cancel_execution(execution_id: str) -> Plan[None]:
    yield cancel_call(execution_id)


def fork_execution(execution_id: str) -> Plan[ExecutionResult]:
    d = yield HttpCall("POST", f"/v1/executions/{seg(execution_id)}/fork")
    return ExecutionResult.from_dict(d)


def check(code: str) -> Plan[CheckResult]:
    return CheckResult.from_dict((yield HttpCall("POST", "/v1/check", json={"code": code})))


# Sessions -----------------------------------------------------------------------------


def open_session(fields: Mapping[str, Any]) -> Plan[SessionInfo]:
    min_timeout = 190.0 if fields.get("packages") else None
    d = yield HttpCall("POST", "/v1/sessions", json=body(fields), min_timeout=min_timeout)
    return SessionInfo.from_dict(d)


def session_info(session_id: str) -> Plan[SessionInfo]:
    return SessionInfo.from_dict((yield HttpCall("GET", f"/v1/sessions/{seg(session_id)}")))


def close_session(session_id: str, missing_ok: bool) -> Plan[None]:
    try:
        yield HttpCall("DELETE", f"/v1/sessions/{seg(session_id)}", expect="none")
    except NotFound:
        if not missing_ok:
            raise


def list_files(session_id: str) -> Plan[list[FileEntry]]:
    d = yield HttpCall("GET", f"/v1/sessions/{seg(session_id)}/files")
    return [FileEntry.from_dict(f) for f in (d or {}).get("files", [])]


def read_file(session_id: str, path: str) -> Plan[bytes]:
    data: bytes = yield HttpCall(
        "GET",
        f"/v1/sessions/{seg(session_id)}/files/{file_path(path)}",
        headers={"accept": "*/*"},
        expect="bytes",
    )
    return data


def write_file(session_id: str, path: str, data: bytes | str) -> Plan[FileEntry]:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    d = yield HttpCall("PUT", f"/v1/sessions/{seg(session_id)}/files/{file_path(path)}", content=raw)
    return FileEntry.from_dict(d or {"path": path, "size": len(raw)})


def snapshot(session_id: str) -> Plan[SnapshotInfo]:
    return SnapshotInfo.from_dict((yield HttpCall("POST", f"/v1/sessions/{seg(session_id)}/snapshot")))


def fork_session(session_id: str, turn: int | None = None) -> Plan[SessionInfo]:
    body = {} if turn is None else {"turn": turn}
    return SessionInfo.from_dict((yield HttpCall("POST", f"/v1/sessions/{seg(session_id)}/fork", json=body)))


def fan_out(session_id: str, count: int, turn: int | None = None) -> Plan[list[SessionInfo]]:
    body: dict[str, Any] = {"count": count}
    if turn is not None:
        body["turn"] = turn
    d = yield HttpCall("POST", f"/v1/sessions/{seg(session_id)}/fork", json=body)
    return [SessionInfo.from_dict(s) for s in d.get("sessions") or [] if isinstance(s, dict)]


def kept_turns(session_id: str) -> Plan[list[KeptTurn]]:
    d = yield HttpCall("GET", f"/v1/sessions/{seg(session_id)}/turns")
    return [KeptTurn.from_dict(t) for t in d.get("turns") or [] if isinstance(t, dict)]


def rollback(session_id: str, turn: int, branch: bool = False) -> Plan[str | None]:
    body = {"turn": turn, "branch": branch}
    d = yield HttpCall("POST", f"/v1/sessions/{seg(session_id)}/rollback", json=body)
    b = d.get("branch")
    return b if isinstance(b, str) else None


def add_packages(session_id: str, specs: list[str]) -> Plan[list[PackagePin]]:
    d = yield HttpCall(
        "POST", f"/v1/sessions/{seg(session_id)}/packages", json={"packages": specs}, min_timeout=190.0
    )
    return [
        PackagePin(str(p.get("name", "")), str(p.get("version", "")), str(p.get("sha256", "")))
        for p in (d or {}).get("packages", [])
    ]


# Snapshots, packages, usage ------------------------------------------------------------


def list_snapshots() -> Plan[list[SnapshotInfo]]:
    d = yield HttpCall("GET", "/v1/snapshots")
    return [SnapshotInfo.from_dict(s) for s in (d or [])]


def get_snapshot(snapshot_id: str) -> Plan[SnapshotInfo]:
    return SnapshotInfo.from_dict((yield HttpCall("GET", f"/v1/snapshots/{seg(snapshot_id)}")))


def delete_snapshot(snapshot_id: str) -> Plan[None]:
    yield HttpCall("DELETE", f"/v1/snapshots/{seg(snapshot_id)}", expect="none")


def packages() -> Plan[PackageList]:
    return PackageList.from_dict((yield HttpCall("GET", "/v1/packages")))


def usage() -> Plan[TenantUsage]:
    return TenantUsage.from_dict((yield HttpCall("GET", "/v1/usage")))


def session_metrics(session_id: str) -> Plan[SessionMetrics]:
    return SessionMetrics.from_dict((yield HttpCall("GET", f"/v1/sessions/{seg(session_id)}/metrics")))


def events(query: Mapping[str, Any]) -> Plan[EventPage]:
    asked = {k: v for k, v in query.items() if v is not None}
    path = "/v1/events" + (f"?{urllib.parse.urlencode(asked)}" if asked else "")
    return EventPage.from_dict((yield HttpCall("GET", path)))


def add_webhook(fields: Mapping[str, Any]) -> Plan[WebhookInfo]:
    return WebhookInfo.from_dict((yield HttpCall("POST", "/v1/webhooks", json=body(fields))))


def webhooks() -> Plan[list[WebhookInfo]]:
    d = yield HttpCall("GET", "/v1/webhooks")
    return [WebhookInfo.from_dict(w) for w in d if isinstance(w, dict)]


def delete_webhook(webhook_id: str) -> Plan[None]:
    yield HttpCall("DELETE", f"/v1/webhooks/{seg(webhook_id)}", expect="none")


# Volumes ------------------------------------------------------------------------------


def volume_path(name: str, what: str, path: str = "") -> str:
    return f"/v1/volumes/{seg(name)}/{what}/{file_path(path)}"


def create_volume(name: str) -> Plan[VolumeInfo]:
    return VolumeInfo.from_dict((yield HttpCall("POST", "/v1/volumes", json={"name": name})))


def volumes() -> Plan[list[VolumeInfo]]:
    d = yield HttpCall("GET", "/v1/volumes")
    return [VolumeInfo.from_dict(v) for v in (d or {}).get("volumes", [])]


def volume_info(name: str) -> Plan[VolumeInfo]:
    return VolumeInfo.from_dict((yield HttpCall("GET", f"/v1/volumes/{seg(name)}")))


def delete_volume(name: str) -> Plan[None]:
    yield HttpCall("DELETE", f"/v1/volumes/{seg(name)}", expect="none")


def write_volume_file(name: str, path: str, data: bytes | str) -> Plan[FileEntry]:
    raw = data.encode() if isinstance(data, str) else bytes(data)
    d = yield HttpCall("PUT", volume_path(name, "files", path), content=raw)
    return FileEntry.from_dict(d or {"path": path, "size": len(raw)})


def read_volume_file(name: str, path: str) -> Plan[bytes]:
    data: bytes = yield HttpCall(
        "GET", volume_path(name, "files", path), headers={"accept": "*/*"}, expect="bytes"
    )
    return data


def list_volume(name: str, path: str, depth: int) -> Plan[list[VolumeEntry]]:
    query = urllib.parse.urlencode({"path": path, "depth": depth})
    d = yield HttpCall("GET", f"/v1/volumes/{seg(name)}/files?{query}")
    return [VolumeEntry.from_dict(e) for e in (d or {}).get("entries", [])]


def remove_volume_path(name: str, path: str) -> Plan[None]:
    yield HttpCall("DELETE", volume_path(name, "files", path), expect="none")


def make_volume_dir(name: str, path: str) -> Plan[VolumeEntry]:
    return VolumeEntry.from_dict((yield HttpCall("POST", volume_path(name, "dirs", path))))


# Templates ----------------------------------------------------------------------------


def template_body(fields: Mapping[str, Any]) -> JSON:
    """The body of ``POST /v1/templates``: as :func:`body`, its lists and ``env`` made JSON
    (a lone string where a list of them is due is refused, not split into characters)."""
    out = dict(fields)
    for key in ("packages", "commands", "imports"):
        value = out.get(key)
        if isinstance(value, str):
            raise TypeError(f"{key} must be a list of strings, not a string")
        if value is not None:
            out[key] = list(value)
    if out.get("env") is not None:
        out["env"] = dict(out["env"])
    return body(out)


def build_template(fields: Mapping[str, Any], wait: bool, timeout: float | None) -> Plan[TemplateInfo]:
    """Starts a build (``POST /v1/templates``); with ``wait``, polls it to its end."""
    info = TemplateInfo.from_dict((yield HttpCall("POST", "/v1/templates", json=template_body(fields))))
    if not wait:
        return info
    done: TemplateInfo = yield from wait_template(info, timeout)
    return done


def wait_template(info: TemplateInfo, timeout: float | None) -> Plan[TemplateInfo]:
    """Polls ``GET /v1/templates/{name}`` while ``info`` is building (every 0.1 s at first,
    then less often, up to 1 s). A ready template is returned; a failed one raises
    :class:`TemplateBuildFailed`; still building after ``timeout`` seconds raises
    :class:`Timeout` (the build goes on)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.1
    while info.status == "building":
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise Timeout(f"template {info.name!r} is still building after {timeout:g} s")
        yield Sleep(pause if left is None else min(pause, left))
        pause = min(pause * 1.5, 1.0)
        info = yield from template(info.name)
    if info.status == "failed":
        raise TemplateBuildFailed(info)
    return info


def templates() -> Plan[list[TemplateInfo]]:
    d = yield HttpCall("GET", "/v1/templates")
    return [TemplateInfo.from_dict(t) for t in (d or {}).get("templates", []) if isinstance(t, dict)]


def template(name: str) -> Plan[TemplateInfo]:
    return TemplateInfo.from_dict((yield HttpCall("GET", f"/v1/templates/{seg(name)}")))


def delete_template(name: str) -> Plan[None]:
    yield HttpCall("DELETE", f"/v1/templates/{seg(name)}", expect="none")


def health(ready: bool) -> Plan[JSON]:
    d: JSON = yield HttpCall("GET", "/readyz" if ready else "/healthz")
    return d


# Output callbacks ---------------------------------------------------------------------


def deliver(
    event: StreamEvent,
    on_stdout: Callable[[str], None] | None,
    on_stderr: Callable[[str], None] | None,
) -> None:
    """Hands an output event to its callback."""
    if isinstance(event, StdoutEvent) and on_stdout is not None:
        on_stdout(event.text)
    elif isinstance(event, StderrEvent) and on_stderr is not None:
        on_stderr(event.text)


def replay_output(
    result: ExecutionResult,
    on_stdout: Callable[[str], None] | None,
    on_stderr: Callable[[str], None] | None,
) -> None:
    """For a run that could not stream (a session turn): the output at the end, once."""
    if on_stdout is not None and result.stdout:
        on_stdout(result.stdout)
    if on_stderr is not None and result.stderr:
        on_stderr(result.stderr)
