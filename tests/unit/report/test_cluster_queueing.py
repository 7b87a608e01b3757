"""The cluster row carries every queueing figure a team row does; ``pending_max`` is the most workloads pending
at once in all ClusterQueues together, which the queues' own maxima cannot give (their peaks need not meet)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kuota.report.figures.measurements import Measurements, QueueMeasurements
from kuota.report.figures.prices import parse_price
from kuota.report.figures.team_report import build_report
from kuota.report.figures.verdicts import Thresholds
from kuota.report.figures.window import Window, WorkHours
from tests.unit.report.conftest import every_series_present, run_report, serving, vector

END = int(datetime(2026, 10, 5, tzinfo=UTC).timestamp())
WINDOW = Window.build(2 * 3600, END, 60, WorkHours())
PER_QUEUE_PENDING = "max_over_time((sum by (cluster_queue) (kueue_pending_workloads))"
ALL_QUEUES_PENDING = "max_over_time((sum(kueue_pending_workloads))"


def _queues(cluster_pending_max: float | None) -> QueueMeasurements:
    """Queue a peaked at 3 pending, queue b at 4, never at the same time: together at most 5 were pending."""
    return QueueMeasurements(
        wait_buckets={"a": ((60.0, 4.0), (float("inf"), 4.0)), "b": ((600.0, 2.0), (float("inf"), 2.0))},
        pending_average={"a": 1.0, "b": 2.0},
        pending_max={"a": 3.0, "b": 4.0},
        pending_hourly={"a": (1.0, 1.0), "b": (2.0, 2.0)},
        cohorts={"a": "pool", "b": "pool"},
        nominal={"a": (4.0, 4.0), "b": (2.0, 2.0)},
        usage={"a": (3.0, 3.0), "b": (3.0, 3.0)},
        borrowed={"a": (0.0, 0.0), "b": (1.0, 1.0)},
        waiting_steps={"a": 60.0, "b": 120.0},
        waiting_while_idle_steps={"a": 0.0, "b": 30.0},
        cluster_waiting_steps=120.0,
        cluster_waiting_while_idle_steps=30.0,
        queue_steps=120.0,
        cluster_unused_average=0.0,
        preemptions={"b": 1.0},
        evictions={"a": {"Preempted": 1.0}},
        cluster_pending_max=cluster_pending_max,
    )


def _build(queues: QueueMeasurements) -> tuple[dict[str, object], dict[str, dict[str, object]]]:
    report = build_report(
        Measurements(2, None, queues),
        window=WINDOW,
        thresholds=Thresholds(),
        price=parse_price("2"),
        namespace_queues={},
    )
    assert report.cluster.queueing is not None
    teams = {team.name: dataclasses.asdict(team.queueing) for team in report.teams if team.queueing is not None}
    return dataclasses.asdict(report.cluster.queueing), teams


def test_cluster_pending_max_is_the_most_pending_at_once_not_the_sum_of_the_queues_most() -> None:
    cluster, teams = _build(_queues(cluster_pending_max=5.0))
    assert teams["a"]["pending_max"] == 3.0 and teams["b"]["pending_max"] == 4.0
    assert cluster["pending_max"] == 5.0


def test_the_cluster_row_has_every_queueing_figure_a_team_row_has() -> None:
    cluster, teams = _build(_queues(cluster_pending_max=5.0))
    for name, queueing in teams.items():
        for figure, value in queueing.items():
            if value is not None:
                assert cluster[figure] is not None, f"{figure}: team {name} has it, the cluster does not"


def test_one_queue_is_its_own_cluster() -> None:
    queues = _queues(cluster_pending_max=None)
    only_a = dataclasses.replace(
        queues,
        wait_buckets={"a": queues.wait_buckets["a"]},
        pending_average={"a": 1.0},
        pending_max={"a": 3.0},
        nominal={"a": (4.0, 4.0)},
    )
    cluster, _ = _build(only_a)
    assert cluster["pending_max"] == 3.0


def _pending(path: str, query: str) -> tuple[int, bytes]:
    if path.endswith("/query") and query.startswith("avg_over_time((sum by (cluster_queue) (kueue_pending_workloads))"):
        return 200, vector(({"cluster_queue": "a"}, "1"), ({"cluster_queue": "b"}, "2"))
    if path.endswith("/query") and query.startswith(PER_QUEUE_PENDING):
        return 200, vector(({"cluster_queue": "a"}, "3"), ({"cluster_queue": "b"}, "4"))
    if path.endswith("/query") and query.startswith(ALL_QUEUES_PENDING):
        return 200, vector(({}, "5"))
    return every_series_present(path, query)


def test_report_json_has_the_clusters_pending_max_from_its_own_query(tmp_path: Path) -> None:
    with serving(_pending) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=tmp_path / "out")
    assert run.exit_code == 0, run.stderr
    assert sum(query.startswith(ALL_QUEUES_PENDING) for query in prometheus.queries) == 1
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    teams = {team["name"]: team["queueing"] for team in report["teams"]}
    assert teams["a"]["pending_max"] == 3 and teams["b"]["pending_max"] == 4
    assert report["cluster"]["queueing"]["pending_max"] == 5
    assert report["queries"]["cluster_pending_max"].startswith(ALL_QUEUES_PENDING)


@pytest.mark.parametrize("answer", [b"", b"NaN"])
def test_no_pending_series_leaves_the_clusters_pending_max_missing(tmp_path: Path, answer: bytes) -> None:
    def respond(path: str, query: str) -> tuple[int, bytes]:
        if path.endswith("/query") and query.startswith(ALL_QUEUES_PENDING):
            return 200, vector(({}, answer.decode())) if answer else vector()
        return _pending(path, query)

    with serving(respond) as prometheus:
        run = run_report("--prometheus", prometheus.url, out=tmp_path / "out")
    assert run.exit_code == 0, run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["cluster"]["queueing"]["pending_max"] is None, "missing, never a sum of the queues' maxima"
