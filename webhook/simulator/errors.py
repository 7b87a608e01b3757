"""What ``kuota simulate`` raises: every message names the file, the line or document, and the fix.

SimulateError          base; the command prints it and exits 2
├── ConfigFileError     a CONFIG file or object is unreadable or invalid
└── WorkloadFileError   a workloads line (or trace row) is unreadable or invalid
"""

from __future__ import annotations


class SimulateError(Exception):
    """Base of the simulator's errors."""


class ConfigFileError(SimulateError):
    """A CONFIG file or one of its objects cannot be used."""


class WorkloadFileError(SimulateError):
    """A workloads line or trace row cannot be used."""
