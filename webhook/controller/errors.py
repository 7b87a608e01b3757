"""The controller's exceptions.

ControllerError
├── ApiWriteError          a write the API server refused or never answered (after retries)
│   └── ConflictError      409: the object changed since the decision was made (resync, never retry blindly)
└── JobConflictError       a Job's own spec contradicts its admission (permanent; told to the user)
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base of the controller's exceptions."""


class ApiWriteError(ControllerError):
    """A write failed; ``status`` is the HTTP status (0 when the API server could not be reached)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ConflictError(ApiWriteError):
    """The API server refused a write made from an out-of-date resourceVersion, or the object is gone."""


class JobConflictError(ControllerError):
    """The Job cannot run as admitted, e.g. its nodeSelector contradicts its flavor's node labels."""
