"""Quantiles the report states, with their exact definitions (pure functions)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The q-quantile of a cumulative histogram, interpolated as PromQL's ``histogram_quantile`` does.

    ``buckets`` are (upper bound, cumulative count) with a +Inf bucket. Within the bucket holding the rank,
    observations are assumed spread evenly; the first bucket starts at 0; a rank in the +Inf bucket gives
    the highest finite bound. None when there are no observations (an empty window is not a zero wait).
    """
    ordered = sorted(buckets)
    if not ordered or not math.isinf(ordered[-1][0]):
        return None
    # counts can dip through float noise from increase(); keep them monotonic as Prometheus does
    counts: list[float] = []
    for _, count in ordered:
        counts.append(max(count, counts[-1]) if counts else count)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    for index, (bound, count) in enumerate(zip((b for b, _ in ordered), counts, strict=True)):
        if count >= rank:
            if math.isinf(bound):
                return ordered[index - 1][0] if index > 0 else None
            lower = ordered[index - 1][0] if index > 0 else 0.0
            below = counts[index - 1] if index > 0 else 0.0
            if index == 0 and bound <= 0:
                return bound
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
    return None


def histogram_count(buckets: Sequence[tuple[float, float]]) -> float | None:
    """Observations in the histogram (its +Inf bucket)."""
    infinite = [count for bound, count in buckets if math.isinf(bound)]
    return infinite[0] if infinite else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (position (n-1)q), as numpy's default; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
