from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.report.figures.quantiles import histogram_count, histogram_quantile, percentile
from tests.examples import examples

INF = math.inf


def test_quantile_interpolates_inside_the_bucket_holding_the_rank() -> None:
    buckets = [(10.0, 0.0), (20.0, 40.0), (40.0, 80.0), (INF, 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(20 + 20 * (50 - 40) / 40)


def test_first_bucket_starts_at_zero() -> None:
    assert histogram_quantile(0.5, [(10.0, 10.0), (INF, 10.0)]) == pytest.approx(5.0)


def test_rank_in_the_infinite_bucket_gives_the_highest_finite_bound() -> None:
    assert histogram_quantile(0.99, [(10.0, 1.0), (20.0, 2.0), (INF, 100.0)]) == 20.0


def test_no_observations_is_no_quantile_not_zero() -> None:
    assert histogram_quantile(0.95, [(10.0, 0.0), (INF, 0.0)]) is None
    assert histogram_quantile(0.95, []) is None
    assert histogram_count([(10.0, 0.0)]) is None


def test_histogram_without_infinite_bucket_is_rejected_as_unknown() -> None:
    assert histogram_quantile(0.5, [(10.0, 5.0)]) is None


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=50), min_size=2, max_size=8), st.floats(0.01, 0.99))
def test_quantile_is_monotonic_in_q_and_within_the_bounds(counts: list[int], q: float) -> None:
    bounds = [float(2**i) for i in range(len(counts))] + [INF]
    cumulative, running = [], 0
    for count in [*counts, 0]:
        running += count
        cumulative.append(float(running))
    buckets = list(zip(bounds, cumulative, strict=True))
    value = histogram_quantile(q, buckets)
    if running == 0:
        assert value is None
        return
    assert value is not None
    assert 0 <= value <= bounds[-2]
    higher = histogram_quantile(min(0.999, q + 0.2), buckets)
    assert higher is not None and higher >= value - 1e-9


def test_percentile_interpolates_linearly_between_ranks() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == pytest.approx(2.5)
    assert percentile([5.0], 0.95) == 5.0
    assert percentile([], 0.95) is None
