"""Team assembly and cluster figures from hand-made measurements (no Prometheus)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kuota.report.figures.measurements import GpuMeasurements, Measurements, MissingSeries
from kuota.report.figures.prices import parse_price
from kuota.report.figures.team_report import build_report
from kuota.report.figures.verdicts import Quadrant, Thresholds
from kuota.report.figures.window import Window, WorkHours

END = int(datetime(2026, 10, 5, tzinfo=UTC).timestamp())
WINDOW = Window.build(2 * 3600, END, 60, WorkHours())


def _gpu(used: dict[str, tuple[float, ...]] | None) -> GpuMeasurements:
    return GpuMeasurements(
        source="test",
        allocated={"ml": (4.0, 4.0), "web": (1.0, 0.0)},
        used=used,
        idle_held={("web", "notebook"): (1.0, 0.0)} if used is not None else None,
        inventory=(8.0, 8.0),
        cluster_used=(2.0, 1.0) if used is not None else None,
    )


def test_namespaces_join_their_cluster_queue_and_others_stand_alone() -> None:
    measurements = Measurements(2, _gpu({"ml": (2.0, 1.0), "web": (0.0, 0.0)}), None)
    report = build_report(
        measurements, window=WINDOW, thresholds=Thresholds(), price=parse_price("2"), namespace_queues={"ml": "team-ml"}
    )
    teams = {team.name: team for team in report.teams}
    assert teams["team-ml"].namespaces == ("ml",)
    assert teams["web"].cluster_queue is None
    assert teams["team-ml"].utilization is not None
    assert teams["team-ml"].utilization.average_percent == pytest.approx(100 * 3 / 8)
    assert report.cluster.utilization_average_percent == pytest.approx(100 * 3 / 16)
    assert report.cluster.capacity_gpu_hours == 16.0


def test_missing_utilization_stays_missing_and_the_verdict_says_unknown() -> None:
    measurements = Measurements(2, _gpu(None), None, (MissingSeries("kuota_pod_gpu_sm_utilization_percent", "x"),))
    report = build_report(
        measurements, window=WINDOW, thresholds=Thresholds(), price=parse_price("2"), namespace_queues={}
    )
    ml = next(team for team in report.teams if team.name == "ml")
    assert ml.utilization is not None
    assert ml.utilization.used_gpu_hours is None
    assert ml.utilization.average_percent is None
    assert ml.idle_cost is None
    assert report.cluster.utilization_average_percent is None
    assert report.cluster.verdict.quadrant is Quadrant.UNKNOWN
    assert report.missing == (("kuota_pod_gpu_sm_utilization_percent", "x"),)


def test_idle_cost_uses_the_price_per_gpu_hour() -> None:
    measurements = Measurements(2, _gpu({"ml": (2.0, 1.0), "web": (0.0, 0.0)}), None)
    report = build_report(
        measurements,
        window=WINDOW,
        thresholds=Thresholds(idle_holder_hours=1),
        price=parse_price("2"),
        namespace_queues={},
    )
    web = next(team for team in report.teams if team.name == "web")
    assert [(h.pod, h.idle_gpu_hours) for h in web.idle_holders] == [("notebook", 1.0)]
    assert web.idle_cost is not None
    assert sum(web.idle_cost.dollars.values()) == pytest.approx(2.0)
    # the window is Sunday 22:00-24:00 UTC: all weekend
    assert report.cluster.idle_cost is not None
    assert report.cluster.idle_cost.gpu_hours["weekend"] == pytest.approx((8 - 5 + 1) + (8 - 4 + 0))
