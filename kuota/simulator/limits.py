"""The bounds every ``kuota simulate`` input is held to (``docs/simulate.md``, "Limits").

Inputs come from files anyone may hand the command, and from the report's what-if, which replays what a
cluster holds. Each bound is far beyond a real input and keeps the work and memory a hostile input can cost
proportional to its size: no value is trusted to be small because it is short (``1e400``, a YAML alias), and
nothing is read whole before it is known to fit.
"""

from __future__ import annotations

import math

from kuota.simulator.errors import SourceSpecError

# Replay times (submitAt, duration, --until, a trace's running sum of intervals) in seconds: about 31,700 years.
# Within it every sum of times stays exact to well under a millisecond and every GPU-hour total is finite.
MAX_SECONDS = 10**12
SECONDS_RANGE = "from 0 to 1e12"
# Kueue's pod counts and maximumExecutionTimeSeconds are int32.
MAX_INT32 = 2**31 - 1
# Kueue allows at most 8 pod sets in a Workload.
MAX_POD_SETS = 8
# A Kubernetes name is at most 253 characters; no simulate string needs more.
MAX_NAME_LENGTH = 253
# One JSON Lines workload is a few hundred bytes; one trace row a few dozen.
MAX_LINE_BYTES = 1 << 20
# CONFIG, all files together; PyYAML reads about 0.4 MB a second, so this is at most about ten seconds.
MAX_CONFIG_BYTES = 4 << 20
# CONFIG after YAML aliases are expanded, all documents together: an alias stands for a copy of its anchor, and
# every reader after the YAML parser walks the copies, so aliases may not make a CONFIG larger than one
# written without them could be. 200,000 nodes are a few thousand ClusterQueues.
MAX_YAML_NODES = 200_000
MAX_YAML_CHARACTERS = MAX_CONFIG_BYTES
# A Kubernetes object nests about ten levels (a node affinity's expressions).
MAX_YAML_DEPTH = 64


def check_until(until: float | None, name: str = "until") -> float | None:
    """``until`` itself, if it is None or a finite number of seconds from 0 to ``MAX_SECONDS``; ``name`` is
    what the caller calls it, for the message."""
    if until is not None and (isinstance(until, bool) or not isinstance(until, int | float) or not _in_range(until)):
        raise SourceSpecError(f"{name} must be a number of seconds {SECONDS_RANGE}, got {until!r}")
    return until


def _in_range(seconds: float) -> bool:
    return math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS
