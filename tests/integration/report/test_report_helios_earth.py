"""The report on the real Helios Earth month (16 teams, May 2020) turned into metrics (see helios_earth.py).

It must find what the trace holds: in most minutes some team had jobs waiting while at least 8 GPUs of
other teams' quota sat idle, so the cluster's verdict is "tune"; and with no SM utilization in the trace,
utilization is reported as missing data, never as 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.report import helios_earth
from tests.integration.report.conftest import ReportRun, run_report
from tests.prometheus_server import PrometheusServer

pytestmark = pytest.mark.integration


def _minute_facts() -> dict[str, float]:
    """Computed straight from the CSV rows, independently of Prometheus and the report."""
    teams = helios_earth.load()
    minutes = helios_earth.minutes(teams)
    waiting_while_idle = waiting = idle = allocated = capacity = 0.0
    for i in range(minutes):
        unused = {t.name: t.total[i] - t.running[i] for t in teams}
        total_unused = sum(unused.values())
        pending = [t for t in teams if t.pending_jobs[i] > 0]
        waiting += bool(pending)
        waiting_while_idle += any(total_unused - unused[t.name] >= 8 for t in pending)
        idle += total_unused
        allocated += sum(t.running[i] for t in teams)
        capacity += sum(t.total[i] for t in teams)
    return {
        "waiting_share": waiting / minutes,
        "waiting_while_idle_share": waiting_while_idle / minutes,
        "unused_average": idle / minutes,
        "allocation_percent": 100 * allocated / capacity,
    }


@pytest.fixture(scope="module")
def helios_report(helios_prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory) -> ReportRun:
    workdir = Path(tmp_path_factory.mktemp("helios-report"))
    teams = helios_earth.load()
    config = workdir / "queues.yaml"
    config.write_text(yaml.safe_dump_all(helios_earth.config(teams)), encoding="utf-8")
    history = workdir / "history.jsonl"
    with history.open("w", encoding="utf-8") as lines:
        lines.writelines(json.dumps(workload) + "\n" for workload in helios_earth.workloads(teams))
    return run_report(
        "--prometheus",
        helios_prometheus.url,
        "--end",
        "2020-06-01T00:00:00Z",
        "--window",
        "31d",
        "--resolution",
        "1m",
        "--price",
        "p4d.24xlarge",
        "--config",
        str(config),
        "--history",
        str(history),
        out=workdir / "out",
    )


@pytest.fixture(scope="module")
def report(helios_report: ReportRun) -> dict[str, Any]:
    assert helios_report.exit_code == 0, helios_report.stderr
    return helios_report.json()


def test_most_minutes_some_team_waits_while_others_idle(report: dict[str, Any]) -> None:
    facts = _minute_facts()
    cluster = report["cluster"]
    assert cluster["waiting_while_idle_elsewhere_share"] == pytest.approx(facts["waiting_while_idle_share"])
    assert cluster["waiting_while_idle_elsewhere_share"] == pytest.approx(0.892, abs=0.001)  # traces/README.md
    assert cluster["waiting_share"] == pytest.approx(facts["waiting_share"])
    assert cluster["unused_quota_gpus_average"] == pytest.approx(facts["unused_average"])
    assert cluster["allocation_percent"] == pytest.approx(facts["allocation_percent"])
    assert cluster["allocation_percent"] == pytest.approx(66.7, abs=0.05)


def test_cluster_verdict_is_tune(report: dict[str, Any]) -> None:
    verdict = report["cluster"]["verdict"]
    assert verdict["quadrant"] == "tune", verdict["reason"]
    assert "idle elsewhere" in verdict["reason"]


def test_sixteen_teams_with_utilization_named_missing_not_zero(report: dict[str, Any]) -> None:
    assert len(report["teams"]) == 16
    assert all(team["utilization"]["average_percent"] is None for team in report["teams"])
    assert report["cluster"]["utilization_average_percent"] is None
    assert "kuota_pod_gpu_sm_utilization_percent" in {m["metric"] for m in report["missing"]}
    assert "capacity" in report["cluster"]["capacity_source"] or "nominal" in report["cluster"]["capacity_source"]


def test_teams_that_waited_behind_idle_quota_get_tune_and_borrowing_first(report: dict[str, Any]) -> None:
    tuned = [team for team in report["teams"] if team["verdict"]["quadrant"] == "tune"]
    assert tuned, [team["verdict"] for team in report["teams"]]
    for team in tuned:
        assert team["levers"][0]["name"] == "borrowing in a cohort", team["levers"]


def test_whatif_with_a_cohort_and_borrowing_cuts_the_waiting(report: dict[str, Any]) -> None:
    scenarios = {scenario["name"]: scenario for scenario in report["whatif"]}
    assert set(scenarios) == {"current", "borrowing", "+8 GPUs"}
    current, borrowing = scenarios["current"], scenarios["borrowing"]
    assert current["wait_p95_s"] > report["thresholds"]["long_wait_s"]
    # the idle quota of other teams absorbs the queue: the p95 wait falls under the long-wait threshold
    assert borrowing["wait_p95_s"] <= report["thresholds"]["long_wait_s"] < current["wait_p95_s"]
    assert borrowing["utilization_percent"] > current["utilization_percent"]
    # eight more GPUs shared across 16 teams do not come close to what borrowing does
    assert scenarios["+8 GPUs"]["wait_p95_s"] > borrowing["wait_p95_s"]
