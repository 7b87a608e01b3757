"""The arithmetic behind every figure of the side-by-side table, on hand-checkable timelines."""

from __future__ import annotations

import pytest

from benchmarks.side_by_side.errors import MeasureError
from benchmarks.side_by_side.measures import WorkloadTimeline, percentile, summarize, utilization


def _timeline(key: str, cls: str, cpu: float, created: float, *holds: tuple[float, float | None]) -> WorkloadTimeline:
    timeline = WorkloadTimeline(key, cls, cpu, created)
    for admitted, released in holds:
        timeline.admit(admitted)
        if released is not None:
            timeline.release(released)
    return timeline


def test_time_to_admission_counts_to_the_last_admission_as_kueues_harness_does() -> None:
    timeline = _timeline("ns/w", "small", 1, 10.0, (11.0, 12.0), (15.0, None))
    assert timeline.time_to_admission == pytest.approx(5.0)
    assert timeline.admissions == 2


def test_a_workload_cannot_be_admitted_twice_without_a_release() -> None:
    timeline = _timeline("ns/w", "small", 1, 0.0, (1.0, None))
    with pytest.raises(MeasureError, match="ns/w"):
        timeline.admit(2.0)


def test_a_release_needs_a_hold() -> None:
    with pytest.raises(MeasureError, match="without holding"):
        WorkloadTimeline("ns/w", "small", 1, 0.0).release(1.0)


def test_finishing_releases_the_open_hold() -> None:
    timeline = _timeline("ns/w", "small", 1, 0.0, (1.0, None))
    timeline.finish(3.0)
    assert timeline.holds == [(1.0, 3.0)]
    assert timeline.finished_at == 3.0
    assert not timeline.holding


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 0.95) == 19.0
    assert percentile(values, 1.0) == 20.0
    assert percentile([7.0], 0.95) == 7.0


def test_percentile_of_nothing_is_an_error_not_a_zero() -> None:
    with pytest.raises(MeasureError):
        percentile([], 0.95)


def test_utilization_weights_cpu_by_time_held_and_clips_to_the_window() -> None:
    timelines = [
        _timeline("a", "small", 10, 0.0, (0.0, 5.0)),  # 10 cpu for 5 s
        _timeline("b", "small", 20, 0.0, (5.0, None)),  # 20 cpu from 5 s, still held at the end
        _timeline("c", "small", 40, 0.0, (-5.0, 1.0)),  # only the part inside the window counts
    ]
    # held: 10*5 + 20*5 + 40*1 = 190 cpu-s, over a 20 cpu quota for 10 s = 200 cpu-s
    assert utilization(timelines, 20, 0.0, 10.0) == pytest.approx(0.95)


def test_utilization_of_an_empty_window_is_an_error() -> None:
    with pytest.raises(MeasureError, match="empty window"):
        utilization([], 20, 3.0, 3.0)


def test_summary_per_class_wall_and_rates() -> None:
    timelines = [
        _timeline("s1", "small", 1, 0.0, (1.0, 2.0)),
        _timeline("s2", "small", 1, 0.0, (3.0, 4.0)),
        _timeline("l1", "large", 4, 1.0, (2.0, 3.0), (5.0, 6.0)),
    ]
    for timeline in timelines:
        timeline.finish(timeline.holds[-1][1] or 0.0)
    figures = summarize(timelines, ["small", "large"], total_quota_cpu=4)
    assert figures.classes["small"].mean_to_admission == pytest.approx(2.0)
    assert figures.classes["small"].p95_to_admission == pytest.approx(3.0)
    assert figures.classes["large"].mean_to_admission == pytest.approx(4.0)
    assert figures.wall_seconds == pytest.approx(6.0)
    assert figures.admissions == 4
    assert figures.evictions == 1
    assert figures.admissions_per_second == pytest.approx(4 / 6)
    # 1 + 1 + 4 + 4 cpu-s over 4 cpu x 6 s
    assert figures.utilization == pytest.approx(10 / 24)


def test_wall_time_is_unknown_while_a_workload_is_unfinished() -> None:
    done = _timeline("s1", "small", 1, 0.0, (1.0, None))
    done.finish(2.0)
    figures = summarize([done, _timeline("s2", "small", 1, 0.0)], ["small"], total_quota_cpu=1)
    assert figures.wall_seconds is None
    assert figures.finished == 1
    assert figures.classes["small"].admitted == 1


def test_a_workload_of_an_unknown_class_is_an_error() -> None:
    with pytest.raises(MeasureError, match="huge"):
        summarize([_timeline("x", "huge", 1, 0.0)], ["small"], total_quota_cpu=1)
