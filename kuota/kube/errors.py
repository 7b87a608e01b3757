"""What :mod:`kuota.kube` raises: a kubeconfig that cannot be used, or a request that failed, typed by cause.

A caller catches the cause it can act on (``except NotFoundError``) instead of comparing HTTP statuses::

    KubeError
    ├── KubeconfigError          a kubeconfig or the pod's service account cannot be used
    └── KubeApiError             a request to the API server failed; ``status`` is the HTTP status (0: no answer)
        ├── CredentialPluginError  not sent: the kubeconfig's exec plugin is missing, fails or prints no credential
        ├── ApiUnreachableError  no answer: connection refused or reset, TLS failure, timeout
        └── ApiResponseError     an answer that is not what was asked for
            ├── BadRequestError          400, and any other 4xx not below
            ├── UnauthorizedError        401: the credentials are not accepted
            ├── ForbiddenError           403: RBAC denies the request
            ├── NotFoundError            404
            ├── ConflictError            409: a stale resourceVersion
            │   └── AlreadyExistsError   409 with reason AlreadyExists: a create found the name taken
            ├── GoneError                410: a list or watch resourceVersion has expired; list again
            ├── UnavailableError         429 and 5xx: the server is overloaded or failing; retry later
            └── MalformedResponseError   2xx whose body is not the JSON object asked for
"""

from __future__ import annotations

from kuota.errors import ConfigurationError, KuotaError


class KubeError(KuotaError):
    """Base of :mod:`kuota.kube`'s errors."""


class KubeconfigError(KubeError, ConfigurationError):
    """A kubeconfig or the pod's service account is unusable; the message names the file, the entry and the fix."""


class KubeApiError(KubeError):
    """A request to the Kubernetes API server failed."""

    status = 0


class CredentialPluginError(KubeApiError):
    """The request was not sent: the kubeconfig's exec credential plugin is not installed, failed (its exit code
    and the end of its stderr are in the message) or printed no usable credential. Like an unreachable server,
    it may pass (a sign-in that expired, a network blip to the cloud's token service), so retry loops retry it."""


class ApiUnreachableError(KubeApiError):
    """The API server did not answer: the message names the request, the server and the transport failure.

    ``reason`` is the failure alone ("timed out", "ClientConnectorError: ..."), for callers that word their own.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ApiResponseError(KubeApiError):
    """The API server answered, but not with what was asked for. ``detail`` is the server's own words (a
    Status object's message, else the start of the body), for callers that word their own message."""

    def __init__(self, message: str, status: int, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class BadRequestError(ApiResponseError):
    """400 (or another 4xx without a class of its own): the request itself is wrong."""


class UnauthorizedError(ApiResponseError):
    """401: the API server does not accept the credentials."""


class ForbiddenError(ApiResponseError):
    """403: the credentials are accepted but RBAC denies the request."""


class NotFoundError(ApiResponseError):
    """404: the object (or its namespace, or the resource itself) does not exist."""


class ConflictError(ApiResponseError):
    """409: the object changed since it was read; read it again and retry."""


class AlreadyExistsError(ConflictError):
    """409 with reason AlreadyExists: a create found the name taken."""


class GoneError(ApiResponseError):
    """410: the resourceVersion of a list or watch has expired; list again from the start."""


class UnavailableError(ApiResponseError):
    """429 or 5xx: the server is overloaded, shutting down or failing; retry later."""


class MalformedResponseError(ApiResponseError):
    """A successful status whose body is not the JSON object that was asked for."""


_BY_STATUS: dict[int, type[ApiResponseError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    429: UnavailableError,
}


def error_for_status(status: int, reason: str, message: str, detail: str = "") -> ApiResponseError:
    """The typed error for an answer of ``status`` whose Status object gives ``reason`` (or "")."""
    kind: type[ApiResponseError] = MalformedResponseError
    if status == 409 and reason == "AlreadyExists":
        kind = AlreadyExistsError
    elif status in _BY_STATUS:
        kind = _BY_STATUS[status]
    elif status >= 500:
        kind = UnavailableError
    elif 400 <= status < 500:
        kind = BadRequestError
    return kind(message, status, detail)
