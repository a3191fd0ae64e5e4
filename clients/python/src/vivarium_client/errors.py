"""Exceptions: one class per family of API error, found by status and stable error code.

Every error response of the API is ``{"error": {"code", "message", "field"?}, ...}``. The
exception raised for it carries all of that (``status``, ``code``, ``message``, ``field``,
``retry_after``, ``body``), and its class is the family a caller would catch:
``except NotFound``, ``except Overloaded`` (then wait ``retry_after``), and so on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .results import TemplateInfo

__all__ = [
    "VivariumError",
    "TransportError",
    "Timeout",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "Gone",
    "Conflict",
    "PayloadTooLarge",
    "Unprocessable",
    "PolicyDenied",
    "OutputLeak",
    "Overloaded",
    "QuotaExceeded",
    "ServerError",
    "ServiceUnavailable",
    "TemplateBuildFailed",
    "error_class",
    "error_from_body",
]


class VivariumError(Exception):
    """An error from the Vivarium API (or from reaching it).

    ``status`` is the HTTP status (``None`` when the server was not reached), ``code`` the
    API's stable error code (``session_busy``, ``quota_exceeded``, ``invalid_json``, ...),
    ``message`` its sentence for humans, ``field`` the request field at fault when there is
    one, ``retry_after`` the seconds of a ``Retry-After`` header, ``body`` the parsed JSON
    body (``None`` when it was not JSON), ``request_id`` the ``x-request-id`` header.
    """

    #: The HTTP status this family usually comes with (used for errors met in a stream,
    #: which carry a code but no status of their own).
    http_status: ClassVar[int | None] = None

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        field: str | None = None,
        retry_after: float | None = None,
        body: Any = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.retry_after = retry_after
        self.body = body
        self.request_id = request_id

    def __str__(self) -> str:
        head = " ".join(str(p) for p in (self.status, self.code) if p is not None)
        where = f" (field {self.field})" if self.field else ""
        return f"[{head}] {self.message}{where}" if head else f"{self.message}{where}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r})"
        )

    def _body_get(self, key: str) -> Any:
        return self.body.get(key) if isinstance(self.body, dict) else None


class TransportError(VivariumError):
    """The server could not be reached, or the connection broke (no HTTP status)."""


class Timeout(TransportError):
    """The HTTP request took longer than the client's timeout."""


class BadRequest(VivariumError):
    """400: malformed JSON, a limit above the maximum, a bad path or base64, a bad package spec."""

    http_status = 400


class Unauthorized(VivariumError):
    """401: API keys are on and the key is missing or wrong."""

    http_status = 401


class Forbidden(VivariumError):
    """403: packages are disabled, or a package is not on the allowlist."""

    http_status = 403


class NotFound(VivariumError):
    """404 (unknown session, snapshot, execution, template, file or route) and 410 (expired)."""

    http_status = 404


class Gone(NotFound):
    """410: the session expired (or, in a cluster, was lost)."""

    http_status = 410


class Conflict(VivariumError):
    """409: ``session_busy``, ``session_ended``, ``snapshot_refused``, ``execution_busy``,
    ``template_building``, ``template_failed`` (a template whose build failed), ..."""

    http_status = 409


class PayloadTooLarge(VivariumError):
    """413: the body (or a package) is over the server's cap."""

    http_status = 413


class Unprocessable(VivariumError):
    """422: ``snapshot_invalid``, ``package_*`` refusals; see the subclasses."""

    http_status = 422


class PolicyDenied(Unprocessable):
    """422 ``policy_denied``: the pre-execution check refused the code; nothing ran."""

    @property
    def findings(self) -> list[dict[str, Any]]:
        """What the check found (rule, severity, line, col, message)."""
        return list(self._body_get("findings") or [])


class OutputLeak(Unprocessable):
    """422 ``output_leak``: the output held secrets under ``leakage: deny``; it was withheld."""

    @property
    def leaks(self) -> list[dict[str, Any]]:
        """What was found (rule and place, never the text)."""
        return list(self._body_get("leaks") or [])


class Overloaded(VivariumError):
    """429: the server (or the tenant) is busy; retry after ``retry_after`` seconds."""

    http_status = 429


class QuotaExceeded(Overloaded):
    """429 ``quota_exceeded``: a quota of the caller's tenant is full (``quota`` names it)."""

    @property
    def quota(self) -> dict[str, Any] | None:
        """``{"quota", "used", "limit"}`` of the quota that refused the request."""
        q = self._body_get("quota")
        return q if isinstance(q, dict) else None


class ServerError(VivariumError):
    """5xx: the server failed (``internal``), or an upstream did (package index)."""

    http_status = 500


class ServiceUnavailable(ServerError):
    """503: not ready, shutting down, ``worker_lost`` (retry), snapshot store unavailable."""

    http_status = 503


class TemplateBuildFailed(VivariumError):
    """A template's build ended ``failed`` while the client waited for it
    (``build_template(..., wait=True)``). Not an HTTP error: the build was accepted and the
    template is kept, failed (delete it, or build the name again). ``template`` is its
    :class:`~vivarium_client.TemplateInfo` (``log`` holds what each step printed); ``step``
    and ``reason`` say where and why."""

    def __init__(self, template: TemplateInfo) -> None:
        err = template.error
        where = f" at {err.step}: {err.reason}" if err is not None else ""
        super().__init__(
            f"template {template.name!r} failed to build{where}",
            code="template_failed",
            body=template.raw,
        )
        self.template = template

    @property
    def step(self) -> str | None:
        """The step that failed: ``commands[N]``, ``setup``, ``imports``, ``files``, ..."""
        return self.template.error.step if self.template.error is not None else None

    @property
    def reason(self) -> str | None:
        """Why it failed: an exception, an exit status, a limit."""
        return self.template.error.reason if self.template.error is not None else None


#: The one table: an API error code, or else an HTTP status, to the class raised for it.
#: Codes are listed where their class is more specific than their status's, or where they
#: can arrive without a status (an ``error`` event ending a stream).
ERROR_CLASSES: dict[int | str, type[VivariumError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: PayloadTooLarge,
    422: Unprocessable,
    429: Overloaded,
    500: ServerError,
    502: ServerError,
    503: ServiceUnavailable,
    504: ServerError,
    "unauthorized": Unauthorized,
    "policy_denied": PolicyDenied,
    "output_leak": OutputLeak,
    "quota_exceeded": QuotaExceeded,
    "overloaded": Overloaded,
    "too_many_sessions": Overloaded,
    "too_many_mcp_sessions": Overloaded,
    "internal": ServerError,
    "not_ready": ServiceUnavailable,
    "shutting_down": ServiceUnavailable,
    "worker_lost": ServiceUnavailable,
    "session_moving": ServiceUnavailable,
    "snapshot_store_unavailable": ServiceUnavailable,
    "session_not_found": NotFound,
    "snapshot_not_found": NotFound,
    "execution_not_found": NotFound,
    "template_not_found": NotFound,
    "session_expired": Gone,
    "session_lost": Gone,
    "session_busy": Conflict,
    "session_ended": Conflict,
    "execution_busy": Conflict,
    "replay_diverged": Conflict,
    "template_building": Conflict,
    "template_failed": Conflict,
    "payload_too_large": PayloadTooLarge,
}


def error_class(status: int | None, code: str | None) -> type[VivariumError]:
    """The class for an error: by its code, else by its status, else :class:`VivariumError`."""
    if code is not None and code in ERROR_CLASSES:
        return ERROR_CLASSES[code]
    if status is not None:
        if status in ERROR_CLASSES:
            return ERROR_CLASSES[status]
        if status >= 500:
            return ServerError
    return VivariumError


def error_from_body(
    status: int | None,
    body: Any,
    *,
    text: str = "",
    retry_after: float | None = None,
    request_id: str | None = None,
) -> VivariumError:
    """Builds the exception for an error response (or a stream's ``error`` event)."""
    detail = body.get("error") if isinstance(body, dict) else None
    code: str | None = None
    field: str | None = None
    if isinstance(detail, dict):
        code = detail.get("code") if isinstance(detail.get("code"), str) else None
        message = str(detail.get("message") or code or "error")
        field = detail.get("field") if isinstance(detail.get("field"), str) else None
    else:
        message = text.strip() or (f"HTTP {status}" if status is not None else "error")
    cls = error_class(status, code)
    return cls(
        message,
        status=status if status is not None else cls.http_status,
        code=code,
        field=field,
        retry_after=retry_after,
        body=body,
        request_id=request_id,
    )
