"""Whether the what-if can be trusted: its replay of the current queues set against the measured week (pure).

The what-if's counterfactuals (borrowing, more GPUs) are only as good as its replay of what happened. So the
replay of today's queues is compared, per ClusterQueue and for the cluster, with the week Prometheus measured:
the p50 and p95 admission waits, and the allocation, like with like: GPU-hours held (measured: allocated to
the team's pods; replayed: admitted) over the same nominal GPU quota of the window. The replayed waits are
counted into the measured histogram's buckets and their quantiles interpolated as PromQL does, so both sides
carry the same rounding (and a wait past the last finite bound reads as that bound on both). Where the p95 wait or the
allocation is off by more than the :class:`Tolerance`, the what-if does not move that verdict
(:func:`kuota.report.figures.verdicts.settle_with_whatif`), and the reason gives the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kuota.report.figures.quantiles import histogram_quantile, percentile


@dataclass(frozen=True)
class Tolerance:
    """How far the replay may be from the measured week and still be trusted; printed in every report."""

    wait_factor: float = 2.0  # the p95 waits, the larger over the smaller
    allocation_points: float = 10.0  # percentage points of nominal quota
    wait_floor_s: float = 60.0  # waits both at most this long agree, whatever their ratio


@dataclass(frozen=True)
class ReplayedQueue:
    """One ClusterQueue's (or the cluster's) figures in the replay of the current queues, inside the window."""

    waits_s: tuple[float, ...]  # of each workload's first admission in the window
    admitted_gpu_hours: float
    nominal_gpu_hours: float  # nominal GPU quota times the window's hours


@dataclass(frozen=True)
class ReplayedWeek:
    queues: Mapping[str, ReplayedQueue]  # by ClusterQueue
    cluster: ReplayedQueue


@dataclass(frozen=True)
class Calibration:
    """Measured and replayed figures side by side, and each one off by more than the tolerance (none: trusted)."""

    wait_p50_measured_s: float | None
    wait_p50_replayed_s: float | None
    wait_p95_measured_s: float | None
    wait_p95_replayed_s: float | None
    nominal_gpu_hours: float
    allocation_measured_percent: float | None  # allocated GPU-hours over nominal_gpu_hours
    allocation_replayed_percent: float | None  # admitted GPU-hours in the replay over nominal_gpu_hours
    within_tolerance: bool
    off: tuple[str, ...]  # why not, one phrase per figure, with its numbers


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value < 5400 else f"{value / 3600:.1f} h"


def _wait_off(measured: float | None, replayed: float | None, tolerance: Tolerance) -> str | None:
    if measured is None and replayed is None:
        return None
    if measured is None or replayed is None:
        return (
            f"the p95 wait cannot be compared (measured {'none' if measured is None else _seconds(measured)}, "
            f"replayed {'none' if replayed is None else _seconds(replayed)})"
        )
    low, high = sorted((measured, replayed))
    if high <= tolerance.wait_floor_s or (low > 0 and high / low <= tolerance.wait_factor):
        return None
    factor = f"a factor of {high / low:.1f}" if low > 0 else "against none"
    return (
        f"p95 wait replayed {_seconds(replayed)} against {_seconds(measured)} measured "
        f"({factor}, over {tolerance.wait_factor:g})"
    )


def _allocation_off(measured: float | None, replayed: float | None, tolerance: Tolerance) -> str | None:
    if measured is None or replayed is None:
        return "the allocation cannot be compared (no allocated GPU-hours measured, or no nominal GPU quota)"
    points = abs(replayed - measured)
    if points <= tolerance.allocation_points:
        return None
    return (
        f"allocation replayed {replayed:.0f}% against {measured:.0f}% measured of nominal GPU quota "
        f"({points:.0f} points, over {tolerance.allocation_points:g})"
    )


def _quantiles(waits: Sequence[float], bounds: Sequence[float]) -> tuple[float | None, float | None]:
    """p50 and p95 of ``waits``: counted into the histogram ``bounds`` when there are some, else exact."""
    if not bounds:
        return percentile(waits, 0.5), percentile(waits, 0.95)
    edges = sorted({*bounds, math.inf})
    buckets = [(edge, float(sum(1 for wait in waits if wait <= edge))) for edge in edges]
    return histogram_quantile(0.5, buckets), histogram_quantile(0.95, buckets)


def calibrate(
    replayed: ReplayedQueue,
    tolerance: Tolerance,
    *,
    wait_p50_s: float | None,
    wait_p95_s: float | None,
    wait_bounds: Sequence[float],
    allocated_gpu_hours: float | None,
) -> Calibration:
    """One team's (or the cluster's) measured figures against the replay's; ``wait_bounds`` are the upper bounds
    of the measured wait histogram's buckets."""
    replayed_p50, replayed_p95 = _quantiles(replayed.waits_s, wait_bounds)

    def share(gpu_hours: float | None) -> float | None:
        if gpu_hours is None or replayed.nominal_gpu_hours <= 0:
            return None
        return 100.0 * gpu_hours / replayed.nominal_gpu_hours

    measured_share, replayed_share = share(allocated_gpu_hours), share(replayed.admitted_gpu_hours)
    off = tuple(
        phrase
        for phrase in (
            _wait_off(wait_p95_s, replayed_p95, tolerance),
            _allocation_off(measured_share, replayed_share, tolerance),
        )
        if phrase is not None
    )
    return Calibration(
        wait_p50_measured_s=wait_p50_s,
        wait_p50_replayed_s=replayed_p50,
        wait_p95_measured_s=wait_p95_s,
        wait_p95_replayed_s=replayed_p95,
        nominal_gpu_hours=replayed.nominal_gpu_hours,
        allocation_measured_percent=measured_share,
        allocation_replayed_percent=replayed_share,
        within_tolerance=not off,
        off=off,
    )


def withheld(calibration: Calibration | None) -> str | None:
    """Why the what-if may not move a verdict, or None when its calibration is within the tolerance."""
    if calibration is None or calibration.within_tolerance:
        return None
    return "its replay of the current queues is off the measured week: " + "; ".join(calibration.off)
