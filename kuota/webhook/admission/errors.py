"""Exceptions raised by :mod:`kuota.webhook.admission`.

::

    AdmissionError
    └── MalformedReviewError          the request body is not a usable AdmissionReview
        └── MalformedObjectError      the review is usable but its object lacks or mistypes a field

``MalformedReviewError`` without a uid becomes an HTTP 400 (there is no review to answer); with a uid, and every
``MalformedObjectError``, becomes a denying AdmissionReview whose message names the field.
"""

from __future__ import annotations

from kuota.errors import KuotaError


class AdmissionError(KuotaError):
    """Base of the admission server's exceptions."""


class MalformedReviewError(AdmissionError):
    """The body cannot be answered as a review; ``uid`` is set when a denial can still be addressed."""

    def __init__(self, message: str, uid: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.uid = uid


class MalformedObjectError(MalformedReviewError):
    """The review's object is missing a field or has one of the wrong type."""
