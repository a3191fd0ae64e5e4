"""deepagents on Vivarium: a sandbox backend for ``create_deep_agent(backend=...)``.

deepagents' ``BaseSandbox`` (``deepagents/backends/sandbox.py``) builds every file tool of
the agent (``ls``, ``read_file``, ``write_file``, ``edit_file``, ``grep``, ``glob``) on three
primitives a backend provides: ``execute(command)`` (a shell command), ``upload_files`` and
``download_files``; the ``execute`` tool is the first one itself. This backend runs them in
one Vivarium session: a command is a bash turn of the session (the sandbox's own shell, over
the sandbox's own files, never a host process), so ``cd`` and ``export`` carry over between
commands as in a terminal, and files go through the session's file API::

    from deepagents import create_deep_agent
    from vivarium_client.deepagents import VivariumSandbox

    with VivariumSandbox("http://127.0.0.1:8080") as sandbox:
        agent = create_deep_agent(model=model, backend=sandbox)
        agent.invoke({"messages": [{"role": "user", "content": "..."}]})

Paths: the sandbox's ``/`` is the session's own directory (its working directory at the
start, where the file API's paths start), so deepagents' absolute paths (``/notes.md``,
``/src/app.py``) are the same files for the file tools, the file API and shell commands.
A relative path is taken from ``/``.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Mapping
from typing import Any

from deepagents.backends.protocol import (
    ExecuteResponse,
    FileDownloadResponse,
    FileUploadResponse,
)
from deepagents.backends.sandbox import BaseSandbox

from .client import Client, Session
from .errors import BadRequest, Forbidden, NotFound, VivariumError
from .results import ExecutionResult

__all__ = ["VivariumSandbox"]


class VivariumSandbox(BaseSandbox):
    """A deepagents sandbox backend backed by one Vivarium session.

    Args:
        server_or_client: a server URL, or the :class:`~vivarium_client.Client` to use; by
            default (and for a URL) a client is made (``VIVARIUM_URL`` and
            ``VIVARIUM_API_KEY`` when not given) and closed by :meth:`close`.
        api_key: the API key of a client made here.
        template: the session's template (``scientific``, ...).
        session: an open :class:`~vivarium_client.Session` (or its id) to use instead of
            opening one; it is not closed by :meth:`close`.
        session_options: other options of the session (``limits``, ``packages``,
            ``network``, ...), passed to ``Client.open_session``.
        default_timeout: seconds a command may run when deepagents gives no ``timeout``
            (``None``: the session's own ``timeout_ms``).
        http_timeout: the HTTP timeout of a client made here.

    The session is opened at the first use and closed by :meth:`close` (or ``with``).
    Commands are run one at a time (a session runs one turn at a time).
    """

    def __init__(
        self,
        server_or_client: Client | str | None = None,
        *,
        api_key: str | None = None,
        template: str | None = None,
        session: Session | str | None = None,
        session_options: Mapping[str, Any] | None = None,
        default_timeout: int | None = None,
        http_timeout: float | None = 60.0,
    ) -> None:
        if isinstance(server_or_client, Client):
            self.client = server_or_client
            self._owns_client = False
        else:
            self.client = Client(server_or_client, api_key=api_key, timeout=http_timeout)
            self._owns_client = True
        self.session_options = dict(session_options or {})
        if template is not None:
            self.session_options["template"] = template
        if isinstance(session, str):
            session = self.client.session(session)
        self.session: Session | None = session
        self._owns_session = session is None
        self.default_timeout = default_timeout
        self._max_timeout_ms: int | None = None
        self._lock = threading.RLock()

    # The session -------------------------------------------------------------------------

    def _open(self) -> Session:
        with self._lock:
            if self.session is None:
                self.session = self.client.open_session(**self.session_options)
            if self._max_timeout_ms is None:
                info = self.session.info_at_open or self.session.info()
                limit = info.limits.get("timeout_ms")
                self._max_timeout_ms = limit if isinstance(limit, int) else 0
            return self.session

    @property
    def id(self) -> str:
        """The session's id (the session is opened if it is not yet)."""
        return self._open().id

    def close(self) -> None:
        """Closes the session (unless it was given) and the client (if made here)."""
        with self._lock:
            try:
                if self.session is not None and self._owns_session:
                    self.session.close()
            finally:
                self.session = None if self._owns_session else self.session
                if self._owns_client:
                    self.client.close()

    def __enter__(self) -> VivariumSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # BaseSandbox -------------------------------------------------------------------------

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        """Runs ``command`` as a bash turn of the session: its stdout then its stderr, its
        exit status, and whether the output was cut at the session's ``output_bytes``.
        ``timeout`` (seconds) becomes the turn's ``timeout_ms`` (at most the session's)."""
        with self._lock:
            session = self._open()
            limits: dict[str, int] = {}
            seconds = timeout if timeout is not None else self.default_timeout
            if seconds is not None and seconds > 0:
                ms = int(seconds * 1000)
                if self._max_timeout_ms:
                    ms = min(ms, self._max_timeout_ms)
                limits["timeout_ms"] = ms
            result = session.execute(command, language="bash", limits=limits or None)
        return _response(result)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        """Writes each file through the session's file API (parent directories made)."""
        out: list[FileUploadResponse] = []
        with self._lock:
            session = self._open()
            for path, data in files:
                try:
                    session.write_file(_api_path(path), data)
                    out.append(FileUploadResponse(path=path))
                except VivariumError as e:
                    out.append(FileUploadResponse(path=path, error=_file_error(e)))
        return out

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        """Reads each file through the session's file API."""
        out: list[FileDownloadResponse] = []
        with self._lock:
            session = self._open()
            for path in paths:
                try:
                    out.append(FileDownloadResponse(path=path, content=session.read_file(_api_path(path))))
                except VivariumError as e:
                    out.append(FileDownloadResponse(path=path, error=_file_error(e)))
        return out


def _api_path(path: str) -> str:
    """A sandbox path as the file API's (relative to the session's ``/``)."""
    return posixpath.normpath("/" + path).lstrip("/")


def _file_error(e: VivariumError) -> str:
    if isinstance(e, NotFound):
        return "file_not_found"
    if isinstance(e, Forbidden):
        return "permission_denied"
    if isinstance(e, BadRequest):
        message = (e.message or "").lower()
        if "directory" in message:
            return "is_directory"
        return "invalid_path"
    return f"{e.code or e.status}: {e.message}"


def _response(result: ExecutionResult) -> ExecuteResponse:
    output = result.stdout
    if result.stderr:
        if output and not output.endswith("\n"):
            output += "\n"
        output += result.stderr
    exit_code = result.exit_code
    if exit_code is None and result.status != "ok":
        # A limit (or the runtime) ended the turn: say so, as a nonzero status.
        if output and not output.endswith("\n"):
            output += "\n"
        output += f"Error: the command ended with status {result.status}" + (
            f": {result.detail}" if result.detail else ""
        )
        exit_code = 124 if result.status == "timeout" else 1
    truncated = bool(result.truncated.stdout or result.truncated.stderr)
    return ExecuteResponse(output=output, exit_code=exit_code, truncated=truncated)
