"""The pod levers against a real Prometheus: each lever's dollars as worked out by hand from
tests/integration/report/pod_lever_week.py's docstring, naming the pods behind it, for kuota's exporter (with
dcgm-exporter beside it for the GPU model) and for dcgm-exporter alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.report import pod_lever_week as week
from tests.integration.report.conftest import ReportRun, run_report
from tests.integration.report.synthetic_week import END
from tests.prometheus_server import PrometheusServer, backfill_openmetrics

pytestmark = pytest.mark.integration

H100_PRICE = 55.04 / 8  # p5.48xlarge
L4_PRICE = 0.80
MONTH = 730 / 168  # a month of this week's pace


@pytest.fixture(scope="module", params=list(week.GpuExporters), ids=str)
def pod_lever_report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReportRun]:
    exporters: week.GpuExporters = request.param
    workdir = tmp_path_factory.mktemp(f"pod-lever-week-{exporters}")
    history = week.history(exporters).write_file(workdir / "history.om")
    backfill_openmetrics(history, workdir / "tsdb")
    history.unlink()
    with PrometheusServer.start(workdir / "prometheus", tsdb=workdir / "tsdb", lookback_delta="30s") as server:
        yield run_report(
            "--prometheus",
            server.url,
            "--end",
            str(END),
            "--window",
            "7d",
            "--resolution",
            "5m",
            "--price",
            "p5.48xlarge",
            "--price",
            f"NVIDIA L4={L4_PRICE}",
            out=workdir / "out",
        )


def _levers(run: ReportRun, team: str) -> dict[str, dict[str, Any]]:
    assert run.exit_code == 0, run.stderr
    found = next(t for t in run.json()["teams"] if t["name"] == team)
    return {lever["name"]: lever for lever in found["levers"]}


def test_the_notebook_idle_every_night_and_weekend_is_stopped_after_an_idle_hour(pod_lever_report: ReportRun) -> None:
    levers = _levers(pod_lever_report, "notebooks")
    assert list(levers) == ["stop idle holders"]
    lever = levers["stop idle holders"]
    # idle runs of 9, 14, 14, 14, 14 and 53 hours: each saves its hours past the N-th
    runs = (9, 14, 14, 14, 14, 53)
    saved = {n: sum(max(0, run - n) for run in runs) for n in (1, 2, 4)}
    assert saved == {1: 112, 2: 106, 4: 94}
    assert lever["dollars"] == pytest.approx(saved[1] * H100_PRICE, rel=0.05)
    assert lever["dollars_per_month"] == pytest.approx(saved[1] * H100_PRICE * MONTH, rel=0.05)
    assert lever["effort"] == "a setting"
    for n, hours in saved.items():
        assert lever["auto_stop"][str(n)] == pytest.approx(hours * H100_PRICE * MONTH, rel=0.05)
    [item] = lever["items"]
    assert (item["namespace"], item["name"]) == ("notebooks", "notebook-bob")
    assert item["detail"].startswith("notebook-like")
    hours = item["idle_gpu_hours_by_class"]
    assert (hours["workday"], hours["night"], hours["weekend"]) == pytest.approx((0, 70, 48), rel=0.05)
    assert item["idle_dollars_by_class"]["night"] == pytest.approx(70 * H100_PRICE, rel=0.05)


def test_low_use_inference_pods_get_mig_profiles_packed_into_fewer_gpus(pod_lever_report: ReportRun) -> None:
    levers = _levers(pod_lever_report, "serving")
    assert list(levers) == ["MIG for inference"]
    lever = levers["MIG for inference"]
    # three 2g.20gb slices pack into one H100: two of the three GPUs freed all week
    assert lever["dollars"] == pytest.approx(2 * 168 * H100_PRICE, rel=0.05)
    assert lever["effort"] == "a new flavor"
    assert "3 NVIDIA H100 80GB HBM3 GPU(s) held, 1 needed packed" in lever["evidence"]
    assert {(item["name"], item["target"]) for item in lever["items"]} == {(f"server-{i}", "2g.20gb") for i in range(3)}


def test_a_small_training_pod_fits_an_l4_and_adding_one_is_priced(pod_lever_report: ReportRun) -> None:
    levers = _levers(pod_lever_report, "training")
    assert list(levers) == ["right-sizing to smaller GPUs"]
    lever = levers["right-sizing to smaller GPUs"]
    assert lever["dollars"] == pytest.approx(72 * (H100_PRICE - L4_PRICE), rel=0.05)
    assert lever["missing"] is None
    assert lever["adding_models"] == {"NVIDIA L4": pytest.approx(1 * L4_PRICE * 730)}
    assert "the cluster has no NVIDIA L4" in lever["evidence"]
    [item] = lever["items"]
    assert (item["name"], item["target"]) == ("small-train", "NVIDIA L4")


def test_a_steady_busy_team_gets_no_lever(pod_lever_report: ReportRun) -> None:
    assert _levers(pod_lever_report, "steady") == {}


def test_the_cluster_ranks_the_pod_levers_by_dollars(pod_lever_report: ReportRun) -> None:
    cluster = pod_lever_report.json()["cluster"]["levers"]
    assert [lever["name"] for lever in cluster] == [
        "MIG for inference",  # 336 GPU-h x 6.88
        "stop idle holders",  # 112 x 6.88
        "right-sizing to smaller GPUs",  # 72 x 6.08
        "commitment sized to the floor",  # not priced without --commitment: it says so, after the priced ones
    ]
    assert cluster[-1]["dollars"] is None and "--commitment" in cluster[-1]["missing"]
    markdown = (pod_lever_report.out / "report.md").read_text(encoding="utf-8")
    assert "serving/server-0" in markdown and "notebooks/notebook-bob" in markdown
