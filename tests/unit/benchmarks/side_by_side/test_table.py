"""The printed comparison: ratios, distance to the floor, and the issue's targets."""

from __future__ import annotations

import re

from benchmarks.side_by_side.measures import ClassFigures, RunFigures
from benchmarks.side_by_side.table import (
    HIGHER,
    LOWER,
    ManagerUsage,
    Row,
    SystemResult,
    Target,
    at_most,
    comparison_rows,
    render,
)


def _figures(wall: float, small_mean: float, utilization: float) -> RunFigures:
    return RunFigures(
        classes={"small": ClassFigures(10, 10, small_mean, small_mean * 2)},
        wall_seconds=wall,
        finished=10,
        workloads=10,
        admissions=12,
        evictions=2,
        utilization=utilization,
        admissions_per_second=12 / wall,
    )


def _result(wall: float, small_mean: float, utilization: float, rss: float) -> SystemResult:
    return SystemResult(_figures(wall, small_mean, utilization), ManagerUsage(3.0, rss, 500, 200))


def test_ratio_is_kuota_over_kueue() -> None:
    assert Row("wall time", "s", 1.0, 20.0, 80.0).ratio == 0.25


def test_ratio_is_absent_when_either_side_is_missing_or_kueue_is_zero() -> None:
    assert Row("x", "s", None, None, 3.0).ratio is None
    assert Row("x", "s", None, 3.0, 0.0).ratio is None


def test_targets_judge_kuota_against_kueue() -> None:
    assert at_most(0.4).met(4.0, 10.0)
    assert not at_most(0.4).met(4.1, 10.0)
    assert HIGHER.met(0.9, 0.6)
    assert not LOWER.met(200.0, 100.0)
    readmissions = Target(of_workloads=0.01)
    assert readmissions.met(150.0, 0.0, 15_000) and not readmissions.met(151.0, 0.0, 15_000)
    assert readmissions.label == "kuota <= 1% of workloads"


def test_rows_carry_the_issue_targets_and_verdicts() -> None:
    rows = comparison_rows(
        ["small"], _figures(5.0, 0.5, 0.9), _result(10.0, 1.0, 0.8, 90.0), _result(40.0, 8.0, 0.5, 60.0)
    )
    by_name = {row.measure: row for row in rows}
    assert by_name["wall time"].verdict == "met"
    assert by_name["re-admissions after preemption"].verdict == "MISSED", "2 of 10 workloads is over 1%"
    assert by_name["manager CPU per admission"].kuota == 3000.0 / 12
    assert by_name["apiserver requests per admission"].kuota == 500 / 12
    assert by_name["apiserver writes per admission"].kuota == 200 / 12
    assert by_name["apiserver writes per admission"].ratio == 1.0
    assert by_name["mean time to admission, small"].verdict == "met"
    assert by_name["utilization (cpu held / quota)"].kuota == 80.0
    assert by_name["utilization (cpu held / quota)"].verdict == "met"
    assert by_name["manager peak RSS (VmHWM)"].verdict == "MISSED"
    assert by_name["manager peak RSS (VmHWM)"].floor is None


def test_a_system_that_was_not_run_reads_as_missing_not_as_zero() -> None:
    rows = comparison_rows(["small"], _figures(5.0, 0.5, 0.9), _result(10.0, 1.0, 0.8, 90.0), None)
    wall = next(row for row in rows if row.measure == "wall time")
    assert wall.kueue is None
    assert wall.verdict == ""


def test_render_prints_ratio_and_gap_to_floor() -> None:
    text = render([Row("wall time", "s", 5.0, 10.0, 40.0, at_most(0.4))])
    header, rule, line = text.splitlines()
    assert re.split(r"\s{2,}", header) == [
        "measure", "unit", "floor", "kuota", "Kueue", "kuota/Kueue", "kuota-floor", "Kueue-floor", "target"
    ]  # fmt: skip
    assert set(rule) == {"-"}
    assert re.split(r"\s{2,}", line) == [
        "wall time", "s", "5.00", "10.00", "40.00", "0.25", "+5.00", "+35.00", "kuota <= 0.4x Kueue: met"
    ]  # fmt: skip
