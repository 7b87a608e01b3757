"""The controller's exceptions.

ControllerError
├── ApiWriteError          a write the API server refused or never answered (after retries), raised from the
│   │                      typed :mod:`kuota.kube.errors` error that says why
│   └── StaleObjectError   404 or 409: the object changed since the decision was made, or is gone (re-read and
│                          decide again, never retry blindly)
├── JobConflictError       a Job's own spec contradicts its admission (permanent; told to the user)
└── InvalidJobError        a job's spec makes no Workload (until it, or what it names, changes; told to the user)
"""

from __future__ import annotations

from kuota.errors import KuotaError


class ControllerError(KuotaError):
    """Base of the controller's exceptions."""


class ApiWriteError(ControllerError):
    """A write failed; its ``__cause__`` is the :mod:`kuota.kube.errors` error of the last attempt."""


class StaleObjectError(ApiWriteError):
    """The API server refused a write made from an out-of-date resourceVersion, or the object is gone: its
    ``__cause__`` is a :class:`kuota.kube.errors.ConflictError` or :class:`kuota.kube.errors.NotFoundError`."""


class JobConflictError(ControllerError):
    """The Job cannot run as admitted, e.g. its nodeSelector contradicts its flavor's node labels."""


class InvalidJobError(ControllerError):
    """No Workload can be made of the job, e.g. an MPIJob without a launcher; the message says what to fix."""
