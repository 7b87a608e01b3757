"""The what-if replays the Workloads that began before the window (a notebook holding a GPU all week, serving
pods, a long training run), its replay of the current queues matches the week Prometheus measured, and a
Workloads dump that lost the long holders is caught by that calibration: the borrowing override is withheld,
with the numbers. The week: :mod:`tests.integration.report.held_week`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kuota.report.figures.verdicts import WHATIF_WITHHELD
from kuota.report.sources.queue_config import load_objects
from tests.integration.report import held_week
from tests.integration.report.conftest import ReportRun, run_report
from tests.prometheus_server import PrometheusServer, backfill_openmetrics

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class HeldWeek:
    prometheus: PrometheusServer
    config: Path
    runs: list[held_week.Run]
    workdir: Path

    def report(self, name: str, leave_out: frozenset[str] = frozenset()) -> ReportRun:
        dump = self.workdir / f"{name}-workloads.json"
        dump.write_text(json.dumps(held_week.workloads_dump(self.runs, leave_out)), encoding="utf-8")
        return run_report(
            "--prometheus",
            self.prometheus.url,
            "--end",
            str(held_week.END),
            "--window",
            "7d",
            "--resolution",
            "5m",
            "--config",
            str(self.config),
            "--workloads",
            str(dump),
            # the cluster's GPUs are a third busy: judged busy here, so that its verdict is "buy" too
            "--low-utilization",
            "25",
            out=self.workdir / name,
        )


@pytest.fixture(scope="module")
def week(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HeldWeek]:
    workdir = tmp_path_factory.mktemp("held-week")
    config = workdir / "queues.yaml"
    config.write_text(held_week.CONFIG_YAML, encoding="utf-8")
    runs = held_week.cluster_week(load_objects(config), workdir)
    history = held_week.prometheus_history(runs).write_file(workdir / "history.om")
    backfill_openmetrics(history, workdir / "tsdb")
    history.unlink()
    with PrometheusServer.start(workdir / "prometheus", tsdb=workdir / "tsdb", lookback_delta="30s") as server:
        yield HeldWeek(server, config, runs, workdir)


@pytest.fixture(scope="module")
def whole_dump(week: HeldWeek) -> ReportRun:
    return week.report("whole")


@pytest.fixture(scope="module")
def dump_without_long_holders(week: HeldWeek) -> ReportRun:
    return week.report("without-long-holders", held_week.LONG_HOLDERS)


def _team(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(team for team in report["teams"] if team["name"] == name)


def test_workloads_created_before_the_window_are_replayed_from_its_start_and_counted(
    week: HeldWeek, whole_dump: ReportRun
) -> None:
    assert whole_dump.exit_code == 0, whole_dump.stderr
    before = [run for run in week.runs if run.job.created < held_week.START]
    holding = sum(1 for run in before if run.admitted is not None and run.admitted < held_week.START)
    assert (holding, len(before) - holding) == (5, 1)
    notes = whole_dump.json()["notes"]
    assert f"{holding} Workload(s) created before the window replayed from its start, holding" in " ".join(notes)
    assert "1 Workload(s) created before the window replayed from its start, pending" in " ".join(notes)
    assert not any("left out of the job history" in note for note in notes), notes


def test_the_replay_of_the_current_queues_matches_the_measured_week(whole_dump: ReportRun) -> None:
    report = whole_dump.json()
    assert report["calibration_tolerance"] == {
        "wait_factor": 2.0,
        "allocation_points": 10.0,
        "wait_floor_s": 60.0,
    }
    rows = {name: _team(report, name)["calibration"] for name in held_week.NOMINAL}
    rows["cluster"] = report["cluster"]["calibration"]
    for name, row in rows.items():
        assert row["within_tolerance"], (name, row)
        assert row["allocation_replayed_percent"] == pytest.approx(row["allocation_measured_percent"], abs=1.0), name
    # the GPU-hours held, worked out from the jobs: inference 3 of 4 GPUs all week; research the training run's
    # 60 h, the hour and two hours around the start and 21 two-hour bursts, all of 4 GPUs, over 8 GPUs' week
    assert rows["inference"]["allocation_replayed_percent"] == pytest.approx(75.0, abs=0.5)
    assert rows["research"]["allocation_replayed_percent"] == pytest.approx(
        100 * 4 * (60 + 1 + 2 + 21 * 2) / (8 * held_week.HOURS), abs=0.5
    )
    research = rows["research"]
    assert research["wait_p95_replayed_s"] == pytest.approx(research["wait_p95_measured_s"], rel=0.05)
    assert research["wait_p50_replayed_s"] == pytest.approx(research["wait_p50_measured_s"], rel=0.05, abs=1.0)
    # research waited hours behind the training run: a long queue on busy GPUs, and borrowing inference's one
    # free GPU cures nothing, so the what-if does not move the verdict and has nothing to withhold
    for verdict in (_team(report, "research")["verdict"], report["cluster"]["verdict"]):
        assert verdict["quadrant"] == "buy", verdict
        assert WHATIF_WITHHELD not in verdict["reason"], verdict


def test_a_dump_that_lost_the_long_holders_is_off_the_measured_week_and_its_override_is_withheld(
    dump_without_long_holders: ReportRun,
) -> None:
    assert dump_without_long_holders.exit_code == 0, dump_without_long_holders.stderr
    report = dump_without_long_holders.json()
    inference = _team(report, "inference")["calibration"]
    assert not inference["within_tolerance"]
    assert inference["allocation_replayed_percent"] == pytest.approx(0.0)
    research = _team(report, "research")
    assert not research["calibration"]["within_tolerance"]
    # borrowing the quota the lost holders held would cure research's queue in this replay: the override it
    # would have made is withheld, and the reason gives the numbers
    for verdict in (research["verdict"], report["cluster"]["verdict"]):
        assert verdict["quadrant"] == "buy", verdict
        assert WHATIF_WITHHELD in verdict["reason"], verdict
        assert "allocation replayed" in verdict["reason"], verdict
    markdown = (dump_without_long_holders.out / "report.md").read_text(encoding="utf-8")
    assert "### Calibration: the current queues replayed against the measured week" in markdown
    assert "| research |" in markdown and "off: allocation replayed" in markdown
    page = (dump_without_long_holders.out / "report.html").read_text(encoding="utf-8")
    assert "<h3>Calibration: the current queues replayed against the measured week</h3>" in page
    assert "<td>research</td>" in page and "off: allocation replayed" in page
