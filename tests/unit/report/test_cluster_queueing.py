"""The cluster row carries every queueing figure a team row does; ``pending_max`` is the most workloads pending
at once in all ClusterQueues together, which the queues' own maxima cannot give (their peaks need not meet)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.report.figures.measurements import Measurements, QueueMeasurements
from kuota.report.figures.prices import parse_price
from kuota.report.figures.schema import Queueing
from kuota.report.figures.team_report import build_report
from kuota.report.figures.verdicts import Thresholds
from kuota.report.figures.window import Window, WorkHours
from tests.examples import examples
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


_QUEUE_NAMES = ("a", "b", "c", "d")
_COUNTS = st.floats(min_value=0, max_value=1e4, allow_nan=False)
_HOURLY = st.tuples(_COUNTS, _COUNTS)


@st.composite
def _collected(draw: st.DrawFn) -> QueueMeasurements:
    """Queue measurements as one collection gives them: each queue has some of the per-queue series, and a
    cluster-wide figure is answered whenever a queue's series it is queried from is."""
    names = draw(st.lists(st.sampled_from(_QUEUE_NAMES), min_size=1, max_size=4, unique=True))
    kinds = {name: draw(st.sets(st.sampled_from(("waits", "pending", "quota")), min_size=1)) for name in names}
    with_waits = [n for n in names if "waits" in kinds[n]]
    with_pending = [n for n in names if "pending" in kinds[n]]
    with_quota = [n for n in names if "quota" in kinds[n]]

    def histogram() -> tuple[tuple[float, float], ...]:
        counts = sorted(draw(st.lists(_COUNTS, min_size=3, max_size=3)))
        return ((60.0, counts[0]), (600.0, counts[1]), (float("inf"), counts[2]))

    def steps(of: list[str]) -> dict[str, float]:
        return {n: draw(_COUNTS) for n in of}

    waiting = steps(with_pending)
    preempting = draw(st.none() | st.just(steps(draw(st.lists(st.sampled_from(names), unique=True)))))
    return QueueMeasurements(
        wait_buckets={n: histogram() for n in with_waits},
        pending_average=steps(with_pending),
        pending_max=steps(with_pending),
        pending_hourly={n: draw(_HOURLY) for n in with_pending},
        cohorts={n: draw(st.sampled_from(("pool", "other"))) for n in names if draw(st.booleans())},
        nominal={n: draw(_HOURLY) for n in with_quota},
        usage={n: draw(_HOURLY) for n in with_quota},
        borrowed={n: draw(_HOURLY) for n in with_quota},
        waiting_steps=waiting,
        waiting_while_idle_steps=steps(with_pending),
        cluster_waiting_steps=draw(_COUNTS) if waiting else None,
        cluster_waiting_while_idle_steps=draw(_COUNTS) if waiting else None,
        queue_steps=draw(_COUNTS) if waiting else None,
        cluster_unused_average=draw(_COUNTS) if with_quota else None,
        preemptions=preempting,
        evictions=draw(st.none() | st.just({n: {"Preempted": draw(_COUNTS)} for n in names if draw(st.booleans())})),
        cluster_pending_max=draw(_COUNTS) if with_pending else None,
    )


@settings(max_examples=examples(300), deadline=None)
@given(queues=_collected())
def test_the_cluster_row_has_every_figure_any_team_row_has_on_generated_queues(queues: QueueMeasurements) -> None:
    cluster, teams = _build(queues)
    assert set(cluster) == {field.name for field in dataclasses.fields(Queueing)}
    for name, queueing in teams.items():
        assert set(queueing) == set(cluster)
        for figure, value in queueing.items():
            if value is not None:
                assert cluster[figure] is not None, f"{figure}: team {name} has it, the cluster does not"
