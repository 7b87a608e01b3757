"""The one exception tree of ``webhook.workloads``.

::

    WorkloadSourceError          anything this package refuses to produce
    ├── SourceSpecError          the caller's parameters cannot describe a workload source
    └── TraceFormatError         a trace file row cannot be read as a job (names file, line and column)

Every message names the object or field at fault and says what to do about it.
"""


class WorkloadSourceError(Exception):
    """A workload source (trace, generator, example) cannot produce what was asked."""


class SourceSpecError(WorkloadSourceError, ValueError):
    """The parameters given to a generator or converter are unusable."""


class TraceFormatError(WorkloadSourceError, ValueError):
    """A trace CSV row is not a job this converter can read."""
