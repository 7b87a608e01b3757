"""Exceptions raised by :mod:`kuota.webhook.visibility`.

::

    VisibilityError
    ├── BadQueryError             a query parameter (limit, offset) is not a usable number: HTTP 400
    ├── Unauthenticated           the request is not from the API server's front proxy, or names no user: 401
    └── FrontProxyConfigError     the extension-apiserver-authentication ConfigMap cannot be used
"""

from __future__ import annotations

from kuota.errors import KuotaError


class VisibilityError(KuotaError):
    """Base of the visibility API's exceptions."""


class BadQueryError(VisibilityError):
    """A query parameter the caller must fix; the message names it and what is allowed."""


class Unauthenticated(VisibilityError):  # noqa: N818 - a refusal, not a fault: answered as HTTP 401
    """The request is not believed; the message says why (no certificate, wrong CA or name, no user)."""


class FrontProxyConfigError(VisibilityError):
    """The API server's requestheader configuration is missing or unreadable; the message says which key."""
