"""What ``kuota simulate`` raises: every message names the file, the line or document, and the fix.

SimulateError          base; the command prints it and exits 2
├── ConfigFileError     a CONFIG file or object is unreadable or invalid
├── WorkloadFileError   a workloads line (or trace row) is unreadable or invalid
│   └── TraceFormatError    a trace CSV row cannot be read as a job (names file, line and column)
├── SourceSpecError     the parameters given to a replay (until) or a workload source (trace converter,
│                       generator) are unusable
└── HistoryFormatError  a persisted runtime history (``runtimes``) is not one kuota wrote
"""

from __future__ import annotations

from kuota.errors import KuotaError


class SimulateError(KuotaError):
    """Base of the simulator's errors."""


class ConfigFileError(SimulateError):
    """A CONFIG file or one of its objects cannot be used."""


class WorkloadFileError(SimulateError):
    """A workloads line or trace row cannot be used."""


class TraceFormatError(WorkloadFileError, ValueError):
    """A trace CSV row is not a job the converter can read."""


class SourceSpecError(SimulateError, ValueError):
    """The parameters given to a replay or a workload source are unusable."""


class HistoryFormatError(SimulateError, ValueError):
    """A persisted runtime history is not one ``RuntimeHistory.to_json`` wrote."""
