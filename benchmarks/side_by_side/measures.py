"""What one run measured, from the timelines of its workloads: no I/O, no clock, so the figures of a live
controller and of ``kuota simulate`` (the floor) come out of the same arithmetic.

Definitions follow Kueue's performance harness (test/performance/scheduler/runner/recorder), so the figures
compare with its published thresholds:

- time to admission: from creation to the workload's *last* admission (the harness overwrites it on every
  re-admission after a preemption);
- utilization: cpu held by admitted workloads, integrated over time, divided by the total nominal quota
  times the monitored time (first creation to last release);
- wall time: first creation to the last workload finished.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from benchmarks.side_by_side.errors import MeasureError


@dataclass(slots=True)
class WorkloadTimeline:
    """What happened to one workload, in seconds on one clock (the driver's, or simulated time).

    ``holds`` are the intervals during which it held quota: (admitted at, released at or None while held).
    """

    key: str
    workload_class: str
    cpu: float
    created_at: float
    holds: list[tuple[float, float | None]] = field(default_factory=list)
    finished_at: float | None = None

    @property
    def holding(self) -> bool:
        return bool(self.holds) and self.holds[-1][1] is None

    def admit(self, at: float) -> None:
        if self.holding:
            raise MeasureError(f"workload {self.key}: admitted at {at:.3f}s while already holding quota")
        self.holds.append((at, None))

    def release(self, at: float) -> None:
        if not self.holding:
            raise MeasureError(f"workload {self.key}: released at {at:.3f}s without holding quota")
        admitted_at, _ = self.holds[-1]
        self.holds[-1] = (admitted_at, at)

    def finish(self, at: float) -> None:
        if self.holding:
            self.release(at)
        self.finished_at = at

    @property
    def admissions(self) -> int:
        return len(self.holds)

    @property
    def time_to_admission(self) -> float | None:
        return self.holds[-1][0] - self.created_at if self.holds else None


@dataclass(frozen=True, slots=True)
class ClassFigures:
    workloads: int
    admitted: int
    mean_to_admission: float | None
    p95_to_admission: float | None


@dataclass(frozen=True, slots=True)
class RunFigures:
    classes: Mapping[str, ClassFigures]
    wall_seconds: float | None  # None when some workload never finished
    finished: int
    workloads: int
    admissions: int
    evictions: int
    utilization: float
    admissions_per_second: float


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (the smallest value with at least ``fraction`` of the values at or below it)."""
    if not values:
        raise MeasureError("percentile of no values: measure at least one workload")
    if not 0 < fraction <= 1:
        raise MeasureError(f"percentile fraction must be in (0, 1], got {fraction}")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def utilization(timelines: Iterable[WorkloadTimeline], total_quota_cpu: float, start: float, end: float) -> float:
    """Time-weighted cpu held over [start, end] as a fraction of ``total_quota_cpu``; holds still open count
    until ``end``."""
    if end <= start:
        raise MeasureError(f"utilization over an empty window [{start:.3f}, {end:.3f}]")
    if total_quota_cpu <= 0:
        raise MeasureError(f"utilization needs a positive total quota, got {total_quota_cpu}")
    held = 0.0
    for timeline in timelines:
        for admitted_at, released_at in timeline.holds:
            begin, stop = max(admitted_at, start), min(end if released_at is None else released_at, end)
            if stop > begin:
                held += timeline.cpu * (stop - begin)
    return held / (total_quota_cpu * (end - start))


def summarize(timelines: Sequence[WorkloadTimeline], class_order: Sequence[str], total_quota_cpu: float) -> RunFigures:
    if not timelines:
        raise MeasureError("no workload timelines to summarize: did the run create any workload?")
    by_class: dict[str, list[WorkloadTimeline]] = {name: [] for name in class_order}
    for timeline in timelines:
        if timeline.workload_class not in by_class:
            raise MeasureError(
                f"workload {timeline.key} has class {timeline.workload_class!r}, not one of {class_order}"
            )
        by_class[timeline.workload_class].append(timeline)
    classes = {}
    for name, members in by_class.items():
        waits = [t.time_to_admission for t in members if t.time_to_admission is not None]
        classes[name] = ClassFigures(
            workloads=len(members),
            admitted=len(waits),
            mean_to_admission=sum(waits) / len(waits) if waits else None,
            p95_to_admission=percentile(waits, 0.95) if waits else None,
        )
    start = min(t.created_at for t in timelines)
    finishes = [t.finished_at for t in timelines if t.finished_at is not None]
    releases = [at for t in timelines for _, at in t.holds if at is not None]
    end = max([*finishes, *releases, *(t.created_at for t in timelines)])
    wall = end - start if len(finishes) == len(timelines) else None
    admissions = sum(t.admissions for t in timelines)
    window = max(end - start, 1e-9)
    return RunFigures(
        classes=classes,
        wall_seconds=wall,
        finished=len(finishes),
        workloads=len(timelines),
        admissions=admissions,
        evictions=sum(max(0, t.admissions - 1) for t in timelines),
        utilization=utilization(timelines, total_quota_cpu, start, start + window),
        admissions_per_second=admissions / window,
    )
