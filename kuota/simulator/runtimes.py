"""Expected runtimes for admission ETAs, from the best source there is, in order:

1. the workload's ``maxExecutionTimeSeconds`` (the engine stops it then: an upper bound the user declared);
2. the ``kuota.dev/expected-runtime`` annotation, a duration in the project's grammar (``90m``, ``1h30m``);
3. the history of finished workloads of the same LocalQueue and shape (total GPUs, in powers of two), a ring
   of the last ``RING_SIZE`` runtimes per (LocalQueue, shape); a shape with fewer than ``MIN_SAMPLES``
   finished jobs borrows the whole LocalQueue's history. A running workload is expected to run the median of
   its ring (of those longer than it has run), the best guess for one job; a workload yet to start, pending
   or expected to arrive, the mean, what a queue of such jobs adds up to (:meth:`RuntimeHistory.queued`).

Pure: the controller keeps a :class:`RuntimeHistory` and persists it (one annotation per LocalQueue, see
``to_json``/``load_json``); ``kuota simulate --etas`` keeps one from the stream's finished workloads.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from kuota.durations import parse_duration
from kuota.engine import Workload
from kuota.simulator.errors import HistoryFormatError

GPU = "nvidia.com/gpu"
EXPECTED_RUNTIME_ANNOTATION = "kuota.dev/expected-runtime"
RING_SIZE = 32
MIN_SAMPLES = 3
# Shapes are powers of two from 0 GPUs up to 2**20 (far beyond any job, larger ones share its ring): at most
# this many rings per queue.
_LARGEST_SHAPE = 1 << 20
MAX_SHAPES = 22
_FORMAT_VERSION = 1


class RuntimeSource(StrEnum):
    MAX_EXECUTION = "maxExecutionTimeSeconds"
    ANNOTATION = "annotation"
    HISTORY = "history"


@dataclass(frozen=True, slots=True)
class Runtime:
    """How long a workload is expected to run, and where that came from: ``samples`` finished jobs of the
    ring named ``basis`` (history), or none (declared)."""

    seconds: float
    source: RuntimeSource
    samples: int = 0
    basis: str = ""


def gpus_of(workload: Workload) -> int:
    return sum(pod_set.count * pod_set.requests.get(GPU, 0) for pod_set in workload.pod_sets)


def shape_of(gpus: int) -> str:
    """The shape bucket: ``gpus-0``, ``gpus-1``, ``gpus-2``, ``gpus-4`` (4 to 7), ``gpus-8``..."""
    return f"gpus-{0 if gpus <= 0 else 1 << (min(gpus, _LARGEST_SHAPE).bit_length() - 1)}"


def annotated_runtime(text: str) -> Runtime:
    """The runtime a ``kuota.dev/expected-runtime`` annotation declares; raises DurationError."""
    return Runtime(parse_duration(text), RuntimeSource.ANNOTATION)


def declared_runtime(workload: Workload, annotated: Runtime | None) -> Runtime | None:
    """The runtime the workload itself declares: its maximum execution time, else its annotation's."""
    if workload.max_execution_seconds is not None:
        return Runtime(float(workload.max_execution_seconds), RuntimeSource.MAX_EXECUTION)
    return annotated


def local_queue_of(workload: Workload) -> str:
    """``namespace/name`` of the workload's LocalQueue: what the history keeps its rings under."""
    return f"{workload.namespace}/{workload.queue_name}"


def remaining_runtime(
    workload: Workload, annotated: Runtime | None, history: RuntimeHistory, elapsed: float
) -> Runtime | None:
    """The runtime this workload has left after running ``elapsed`` seconds: what it declares, less that, else
    what its shape's history expects (:meth:`RuntimeHistory.remaining`)."""
    declared = declared_runtime(workload, annotated)
    if declared is not None:
        return Runtime(max(0.0, declared.seconds - elapsed), declared.source)
    return history.remaining(local_queue_of(workload), gpus_of(workload), elapsed)


def queued_runtime(workload: Workload, annotated: Runtime | None, history: RuntimeHistory) -> Runtime | None:
    """The runtime of this workload, yet to start (pending, or a copy expected to arrive): its declared one,
    else its shape's mean (:meth:`RuntimeHistory.queued`)."""
    return declared_runtime(workload, annotated) or history.queued(local_queue_of(workload), gpus_of(workload))


class RuntimeHistory:
    """Per LocalQueue (``namespace/name``) and shape, the last ``RING_SIZE`` runtimes of finished workloads,
    each with when it finished (so that a finished Workload seen again, after a restart, is not counted twice)."""

    def __init__(self) -> None:
        self._rings: dict[str, dict[str, deque[tuple[float, float]]]] = {}

    def record(self, queue: str, gpus: int, runtime: float, finished_at: float) -> bool:
        """Add one finished workload; False when that very one (same finish, same runtime) is already in."""
        ring = self._rings.setdefault(queue, {}).setdefault(shape_of(gpus), deque(maxlen=RING_SIZE))
        entry = (round(finished_at, 3), round(max(0.0, runtime), 3))
        if entry in ring:
            return False
        ring.append(entry)
        return True

    def forget(self, queue: str) -> None:
        self._rings.pop(queue, None)

    def queues(self) -> Iterator[str]:
        return iter(self._rings)

    def samples(self, queue: str) -> int:
        return sum(len(ring) for ring in self._rings.get(queue, {}).values())

    def runtimes(self, queue: str, gpus: int) -> tuple[list[float], str]:
        """The runtimes an estimate for this shape rests on, and the ring's name (``queue shape`` or
        ``queue *`` when the shape's own ring is too short)."""
        rings = self._rings.get(queue, {})
        shape = shape_of(gpus)
        own = rings.get(shape)
        if own is not None and len(own) >= MIN_SAMPLES:
            return [runtime for _, runtime in own], f"{queue} {shape}"
        return [runtime for ring in rings.values() for _, runtime in ring], f"{queue} *"

    def remaining(self, queue: str, gpus: int, elapsed: float) -> Runtime | None:
        """The expected remaining runtime of a workload that has run ``elapsed`` seconds: the median of the
        recorded runtimes longer than that, less ``elapsed``; one running past all of them is expected to
        run half as long again (an old job is likely to live a while yet). None with no history."""
        runtimes, basis = self.runtimes(queue, gpus)
        if not runtimes:
            return None
        longer = [runtime for runtime in runtimes if runtime > elapsed]
        remaining = statistics.median(longer) - elapsed if longer else elapsed / 2
        return Runtime(remaining, RuntimeSource.HISTORY, len(runtimes), basis)

    def queued(self, queue: str, gpus: int) -> Runtime | None:
        """The runtime of each job of this shape yet to start (pending, or expected to arrive): the mean of the
        recorded runtimes, not the median. The wait they make is the sum of their runtimes, and the sum of
        many is near their mean times their count; where runtimes are heavy-tailed the median is a fraction of
        it (Helios jobs of 9+ GPUs: 0.07 h against 5.9 h). None with no history."""
        runtimes, basis = self.runtimes(queue, gpus)
        if not runtimes:
            return None
        return Runtime(statistics.fmean(runtimes), RuntimeSource.HISTORY, len(runtimes), basis)

    def mean(self, queue: str) -> float | None:
        """The mean runtime over the queue's every shape (the naive baseline's figure)."""
        runtimes = [runtime for ring in self._rings.get(queue, {}).values() for _, runtime in ring]
        return sum(runtimes) / len(runtimes) if runtimes else None

    def to_json(self, queue: str) -> str:
        """The queue's rings as compact JSON: at most ``MAX_SHAPES`` x ``RING_SIZE`` pairs (about 20 KB)."""
        rings = self._rings.get(queue, {})
        body = {
            "v": _FORMAT_VERSION,
            "shapes": {shape: [list(entry) for entry in ring] for shape, ring in rings.items()},
        }
        return json.dumps(body, separators=(",", ":"), sort_keys=True)

    def load_json(self, queue: str, text: str) -> None:
        """Replace the queue's rings with ``text`` (what ``to_json`` wrote); raises HistoryFormatError."""
        try:
            body = json.loads(text)
            if not isinstance(body, dict) or body.get("v") != _FORMAT_VERSION:
                raise ValueError(f"version {body.get('v') if isinstance(body, dict) else None!r}, not 1")
            shapes = body["shapes"]
            if not isinstance(shapes, dict) or len(shapes) > MAX_SHAPES:
                raise ValueError(f"shapes must be an object of at most {MAX_SHAPES} rings")
            rings: dict[str, deque[tuple[float, float]]] = {}
            for shape, entries in shapes.items():
                if not str(shape).startswith("gpus-"):
                    raise ValueError(f"shape {shape!r} is not gpus-N")
                rings[str(shape)] = deque(_entries(entries), maxlen=RING_SIZE)
        except (ValueError, KeyError, TypeError) as error:
            raise HistoryFormatError(f"runtime history of LocalQueue {queue} is unreadable ({error})") from None
        self._rings[queue] = rings


def _entries(entries: Iterable[object]) -> Iterator[tuple[float, float]]:
    for entry in list(entries)[-RING_SIZE:]:
        if not isinstance(entry, list) or len(entry) != 2:
            raise ValueError(f"entry {entry!r} is not [finishedAt, seconds]")
        finished_at, runtime = (float(value) for value in entry)
        if not (math.isfinite(finished_at) and math.isfinite(runtime) and runtime >= 0):
            raise ValueError(f"entry {entry!r} holds no runtime")
        yield finished_at, runtime
