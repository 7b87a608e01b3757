"""The side-by-side benchmark's exceptions.

SideBySideError
├── MeasureError      a timeline or figure that cannot be (re-admitted while holding, empty window, ...)
├── ControllerError   a controller could not be built, installed or started; the message names its log
└── ApiError          a request to the API server failed; the message names the object and the status
"""

from __future__ import annotations


class SideBySideError(Exception):
    """Anything the side-by-side benchmark raises on purpose."""


class MeasureError(SideBySideError):
    pass


class ControllerError(SideBySideError):
    pass


class ApiError(SideBySideError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
