"""Exceptions raised by :mod:`kuota`'s shared modules. Catch :class:`KuotaError` for all of them::

    KuotaError
    ├── ConfigurationError       a kubeconfig or the pod's service account cannot be used; the message names the
    │                            file and the entry, and says what to fix
    └── KubeApiError             a request to the API server failed
        ├── ApiUnreachableError  no answer: connection refused or reset, TLS failure, timeout
        └── ApiResponseError     an answer that is not what was asked for: a non-2xx status, or a body that is
                                 not JSON; ``status`` is the HTTP status

The other packages' own configuration errors (e.g. the exporter's, for its flags) derive from
:class:`ConfigurationError`, so one ``except`` covers a bad flag and a bad kubeconfig alike.
"""

from __future__ import annotations


class KuotaError(Exception):
    """Base of every error raised by :mod:`kuota`."""


class ConfigurationError(KuotaError):
    """A setting is unusable; the message names it and says what to do."""


class KubeApiError(KuotaError):
    """A request to the Kubernetes API server failed."""


class ApiUnreachableError(KubeApiError):
    """The API server did not answer: the message names the request, the server and the transport failure.

    ``reason`` is the failure alone ("timed out", "ClientConnectorError: ..."), for callers that word their own.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ApiResponseError(KubeApiError):
    """The API server answered, but not with what was asked for."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
