"""The what-if replays the Workloads created before the window from its start, and its replay of the current
queues is calibrated against the measured week before its verdict override is trusted."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kuota.report.figures.calibration import (
    Calibration,
    ReplayedQueue,
    ReplayedWeek,
    Tolerance,
    calibrate,
    withheld,
)
from kuota.report.figures.measurements import GpuMeasurements, Measurements, QueueMeasurements
from kuota.report.figures.prices import parse_price
from kuota.report.figures.schema import WhatIfScenario
from kuota.report.figures.team_report import build_report
from kuota.report.figures.verdicts import WHATIF_WITHHELD, Quadrant, Thresholds, Verdict, settle_with_whatif
from kuota.report.figures.window import Window, WorkHours
from kuota.report.sources.whatif import Submission, run_whatif, summarize
from kuota.report.sources.workload_history import job_history, read_workloads

WINDOW_S = 7200.0
START = 1_790_000_000.0
RULES = Thresholds(low_utilization_percent=50, long_wait_s=1800)


def _iso(offset_s: float) -> str:
    return datetime.fromtimestamp(START + offset_s, tz=UTC).isoformat().replace("+00:00", "Z")


def _workload(name: str, created: float, admitted: float, finished: float | None, priority: str) -> dict[str, Any]:
    conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": _iso(admitted)}]
    if finished is not None:
        conditions.append(
            {"type": "Finished", "status": "True", "reason": "Succeeded", "lastTransitionTime": _iso(finished)}
        )
    container = {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    return {
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": _iso(created)},
        "spec": {
            "queueName": "default",
            "priorityClassRef": {"name": priority},
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
        "status": {"conditions": conditions},
    }


def _config() -> list[dict[str, Any]]:
    """One ClusterQueue of one GPU; no preemption."""
    group = "kueue.x-k8s.io/v1beta2"
    return [
        {"apiVersion": group, "kind": "ResourceFlavor", "metadata": {"name": "h100"}},
        {
            "apiVersion": group,
            "kind": "ClusterQueue",
            "metadata": {"name": "ml"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]}],
                    }
                ],
            },
        },
        {
            "apiVersion": group,
            "kind": "LocalQueue",
            "metadata": {"name": "default", "namespace": "ml"},
            "spec": {"clusterQueue": "ml"},
        },
        {"apiVersion": group, "kind": "WorkloadPriorityClass", "metadata": {"name": "low"}, "value": 10},
        {"apiVersion": group, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 1000},
    ]


def test_a_holder_runs_from_the_first_instant_ahead_of_a_higher_priority_workload_pending_at_the_start(
    tmp_path: Path,
) -> None:
    # The cluster: a low-priority notebook held the GPU from before the window to an hour into it; a
    # high-priority job created half an hour before the window waited for it, then ran to the window's end.
    items = [
        _workload("notebook", -7200, -3600, 3600, "low"),
        _workload("urgent", -1800, 3600, WINDOW_S, "high"),
    ]
    history = job_history(read_workloads(items), START, START + WINDOW_S)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in history.records), encoding="utf-8")
    whatif = asyncio.run(run_whatif(_config(), path, 1, WINDOW_S, history.started_before))
    replayed = whatif.current_week.queues["ml"]
    # the notebook is admitted at 0, so the urgent job waits its hour plus the half hour before the window
    assert replayed.waits_s == pytest.approx((5400.0,))
    assert replayed.admitted_gpu_hours == pytest.approx(2.0)  # the GPU held all window: as it was
    assert replayed.nominal_gpu_hours == pytest.approx(2.0)
    assert whatif.current_week.cluster.waits_s == pytest.approx((5400.0,))  # the notebook's wait is not counted


def test_replayed_gpu_hours_are_those_admitted_inside_the_window_across_evictions() -> None:
    output = {
        "workloads": [
            {
                "name": "w",
                "namespace": "ml",
                "clusterQueue": "ml",
                "admissions": [{"at": 100.0}, {"at": 500.0}],
                "evictions": [{"at": 300.0}],
                "finishedAt": 1500.0,
            }
        ],
        "clusterQueues": {"ml": {"gpuHoursAdmitted": 0.0}},
    }
    replay = summarize(output, {("ml", "w"): Submission(None, 2)}, 1000.0)
    assert replay.per_queue_window_gpu_hours == {"ml": pytest.approx(2 * (200 + 500) / 3600)}
    assert replay.waits_s == []  # running from the start: its wait was before the window


QUEUE = ReplayedQueue(waits_s=(4000.0,), admitted_gpu_hours=80.0, nominal_gpu_hours=100.0)


def _calibrate(
    p50: float | None,
    p95: float | None,
    allocated: float | None,
    replayed: ReplayedQueue,
    tolerance: Tolerance,
    *,
    bounds: Sequence[float] = (),
) -> Calibration:
    return calibrate(
        replayed, tolerance, wait_p50_s=p50, wait_p95_s=p95, wait_bounds=bounds, allocated_gpu_hours=allocated
    )


def test_a_replay_within_the_tolerance_is_trusted() -> None:
    calibration = _calibrate(200.0, 3000.0, 85.0, QUEUE, Tolerance(wait_factor=2.0, allocation_points=10.0))
    assert calibration.within_tolerance and calibration.off == ()
    assert calibration.allocation_measured_percent == pytest.approx(85.0)
    assert calibration.allocation_replayed_percent == pytest.approx(80.0)
    assert withheld(calibration) is None


def test_a_p95_wait_off_by_more_than_the_factor_withholds_the_whatif_with_the_numbers() -> None:
    calibration = _calibrate(200.0, 12_600.0, 85.0, QUEUE, Tolerance(wait_factor=2.0))
    assert not calibration.within_tolerance
    assert calibration.off == ("p95 wait replayed 4000 s against 3.5 h measured (a factor of 3.1, over 2)",)
    assert withheld(calibration) == f"its replay of the current queues is off the measured week: {calibration.off[0]}"


def test_an_allocation_off_by_more_than_the_points_withholds_the_whatif() -> None:
    calibration = _calibrate(200.0, 4000.0, 95.0, QUEUE, Tolerance(allocation_points=10.0))
    assert calibration.off == (
        "allocation replayed 80% against 95% measured of nominal GPU quota (15 points, over 10)",
    )


def test_short_waits_agree_whatever_their_ratio_and_a_missing_side_cannot_be_trusted() -> None:
    short = ReplayedQueue(waits_s=(2.0,), admitted_gpu_hours=80.0, nominal_gpu_hours=100.0)
    assert _calibrate(10.0, 50.0, 80.0, short, Tolerance(wait_floor_s=60.0)).within_tolerance
    assert not _calibrate(10.0, 50.0, None, short, Tolerance()).within_tolerance
    assert not _calibrate(None, None, 80.0, QUEUE, Tolerance()).within_tolerance


def test_replayed_waits_are_counted_into_the_measured_buckets_so_both_sides_round_alike() -> None:
    # Prometheus reads a wait past the last finite bound as that bound: so must the replay's
    long = ReplayedQueue(waits_s=(30.0,) * 10 + (5000.0,) * 90, admitted_gpu_hours=80.0, nominal_gpu_hours=100.0)
    calibration = _calibrate(None, 1280.0, 80.0, long, Tolerance(), bounds=[40.0, 1280.0, math.inf])
    assert calibration.wait_p95_replayed_s == 1280.0
    assert calibration.wait_p50_replayed_s == 1280.0
    assert calibration.within_tolerance
    assert not _calibrate(None, 1280.0, 80.0, long, Tolerance()).within_tolerance  # exact: 5000 s


def test_a_withheld_whatif_leaves_buy_and_says_why() -> None:
    buy = Verdict(Quadrant.BUY, "utilization 80% and p95 wait 2.0 h")
    assert settle_with_whatif(buy, 600.0, RULES).quadrant is Quadrant.TUNE
    kept = settle_with_whatif(buy, 600.0, RULES, withheld="p95 wait replayed 10 min against 2.0 h measured")
    assert kept.quadrant is Quadrant.BUY
    assert kept.reason == (
        "utilization 80% and p95 wait 2.0 h; borrowing across the cohort brings the p95 wait to 10 min in the "
        f"what-if, but {WHATIF_WITHHELD}: p95 wait replayed 10 min against 2.0 h measured"
    )


def _measurements() -> Measurements:
    """Team ml: 8 GPUs of quota held all window (busy 80%), every admission waited 43 to 85 minutes."""
    hours = 2
    queues = QueueMeasurements(
        wait_buckets={"ml": ((640.0, 0.0), (1280.0, 0.0), (2560.0, 0.0), (5120.0, 10.0), (float("inf"), 10.0))},
        pending_average={"ml": 2.0},
        pending_max={"ml": 3.0},
        pending_hourly={"ml": (2.0, 2.0)},
        cohorts={},
        nominal={"ml": (8.0, 8.0)},
        usage={"ml": (8.0, 8.0)},
        borrowed={"ml": (0.0, 0.0)},
        waiting_steps={"ml": 120.0},
        waiting_while_idle_steps={"ml": 0.0},
        cluster_waiting_steps=120.0,
        cluster_waiting_while_idle_steps=0.0,
        queue_steps=120.0,
        cluster_unused_average=0.0,
        preemptions=None,
        evictions=None,
    )
    gpu = GpuMeasurements(
        source="test",
        allocated={"ml": (8.0, 8.0)},
        used={"ml": (6.4, 6.4)},
        idle_held=None,
        inventory=(8.0, 8.0),
        cluster_used=(6.4, 6.4),
    )
    return Measurements(hours, gpu, queues)


@pytest.mark.parametrize(
    ("replayed_p95_s", "replayed_gpu_hours", "quadrant"),
    [(3000.0, 15.0, Quadrant.TUNE), (600.0, 15.0, Quadrant.BUY), (3000.0, 8.0, Quadrant.BUY)],
    ids=["calibrated", "replayed-waits-too-short", "replayed-allocation-too-light"],
)
def test_the_borrowing_override_needs_each_row_calibrated(
    replayed_p95_s: float, replayed_gpu_hours: float, quadrant: Quadrant
) -> None:
    window = Window.build(2 * 3600, int(START) // 3600 * 3600, 60, WorkHours())
    queue = ReplayedQueue((replayed_p95_s,) * 10, replayed_gpu_hours, 16.0)
    borrowing = WhatIfScenario("borrowing", "", 600.0, None, {"ml": 600.0})
    report = build_report(
        _measurements(),
        window=window,
        thresholds=RULES,
        price=parse_price("2"),
        namespace_queues={"ml": "ml"},
        whatif=[borrowing],
        replayed_week=ReplayedWeek({"ml": queue}, queue),
        tolerance=Tolerance(),
    )
    (team,) = report.teams
    assert team.verdict.quadrant is quadrant
    assert report.cluster.verdict.quadrant is quadrant
    assert team.calibration is not None and report.cluster.calibration is not None
    assert team.calibration.within_tolerance is (quadrant is Quadrant.TUNE)
    assert (WHATIF_WITHHELD in team.verdict.reason) is (quadrant is Quadrant.BUY)
    assert (WHATIF_WITHHELD in report.cluster.verdict.reason) is (quadrant is Quadrant.BUY)
    assert report.calibration_tolerance == Tolerance()
