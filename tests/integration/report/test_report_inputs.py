"""Bad input against a real Prometheus: an empty window says so, and nothing missing is shown as 0."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.integration.report import synthetic_week
from tests.integration.report.conftest import run_report
from tests.prometheus_server import PrometheusServer

pytestmark = pytest.mark.integration


def test_empty_window_says_so_and_shows_no_zeros(synthetic_week_prometheus: PrometheusServer, tmp_path: Path) -> None:
    long_before = str(synthetic_week.START - 30 * 86400)
    run = run_report("--prometheus", synthetic_week_prometheus.url, "--end", long_before, out=tmp_path)
    assert run.exit_code == 0, run.stderr
    assert "the window is empty" in run.stderr
    report = run.json()
    assert report["empty"] is True
    assert report["cluster"]["allocated_gpu_hours"] is None
    assert report["cluster"]["verdict"]["quadrant"] == "unknown"
    assert {m["metric"] for m in report["missing"]} >= {
        "kuota_gpu_allocated / DCGM_FI_DEV_GPU_UTIL",
        "kueue_admission_wait_time_seconds_bucket",
    }
    markdown = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "The window is empty" in markdown
    assert "allocated GPU-hours | missing data" in markdown


def test_bad_query_parameters_name_the_flag(synthetic_week_prometheus: PrometheusServer, tmp_path: Path) -> None:
    run = run_report("--prometheus", synthetic_week_prometheus.url, "--window", "90m", out=tmp_path)
    assert run.exit_code == 2
    assert "--window must be a whole number of hours, or shorter than an hour, got 5400 s" in run.stderr


def test_retained_workloads_give_failed_gpu_hours_per_team(
    synthetic_week_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    def iso(hour: float) -> str:
        moment = datetime.fromtimestamp(synthetic_week.START + hour * 3600, tz=UTC)
        return moment.isoformat().replace("+00:00", "Z")

    def workload(name: str, reason: str, hours: float) -> dict[str, object]:
        return {
            "metadata": {"name": name, "namespace": "research", "creationTimestamp": iso(10)},
            "spec": {
                "queueName": "default",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "8"}}}]}
                        },
                    }
                ],
            },
            "status": {
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "lastTransitionTime": iso(11)},
                    {"type": "Finished", "status": "True", "reason": reason, "lastTransitionTime": iso(11 + hours)},
                ]
            },
        }

    listing = tmp_path / "workloads.json"
    listing.write_text(
        json.dumps(
            {
                "kind": "List",
                "items": [
                    workload("crashed", "Failed", 2.5),
                    workload("fine", "Succeeded", 4),
                ],
            }
        ),
        encoding="utf-8",
    )
    run = run_report(
        "--prometheus",
        synthetic_week_prometheus.url,
        "--end",
        str(synthetic_week.END),
        "--resolution",
        "5m",
        "--workloads",
        str(listing),
        out=tmp_path / "out",
    )
    assert run.exit_code == 0, run.stderr
    report = run.json()
    research = next(team for team in report["teams"] if team["name"] == "research")
    assert research["failed_gpu_hours"] == pytest.approx(8 * 2.5)
    assert report["cluster"]["failed_gpu_hours"] == pytest.approx(8 * 2.5)
