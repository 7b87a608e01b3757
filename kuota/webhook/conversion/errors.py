"""Exceptions raised by :mod:`kuota.webhook.conversion`.

::

    ConversionError
    ├── MalformedConversionReviewError   the request body is not a usable ConversionReview
    └── UnconvertibleObjectError         an object cannot be written in the other version as it is
"""

from __future__ import annotations

from kuota.errors import KuotaError


class ConversionError(KuotaError):
    """Base of the conversion webhook's exceptions; ``message`` is what the API server is told."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class MalformedConversionReviewError(ConversionError):
    """The body cannot be read as a ConversionReview; ``uid`` is set when the review could be addressed."""

    def __init__(self, message: str, uid: str = "") -> None:
        super().__init__(message)
        self.uid = uid


class UnconvertibleObjectError(ConversionError):
    """The object names an unknown version or kind, or holds a field the other version cannot express."""
