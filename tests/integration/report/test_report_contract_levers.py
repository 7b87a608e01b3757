"""Spot, commitment and failed-work levers against a real Prometheus and a Workloads dump: each lever's dollars
as worked out by hand from tests/integration/report/contract_lever_week.py's docstring, each naming its
Workloads; a team with nothing to tune gets no lever; bad lever prices are one line, before any query."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kuota.report.figures.levers import HOURS_PER_MONTH
from tests.integration.report import contract_lever_week as week
from tests.integration.report.conftest import ReportRun, run_report
from tests.prometheus_server import PrometheusServer, backfill_openmetrics

pytestmark = pytest.mark.integration

ON_DEMAND = 4.0
SPOT = 1.5
DISCOUNT = 0.35
WITHIN = 0.05  # the tolerance on each lever's dollars
PER_MONTH = HOURS_PER_MONTH / week.HOURS


@pytest.fixture(scope="module")
def lever_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    workdir = tmp_path_factory.mktemp("contract-lever-week")
    history = week.history().write_file(workdir / "history.om")
    backfill_openmetrics(history, workdir / "tsdb")
    history.unlink()
    with PrometheusServer.start(workdir / "prometheus", tsdb=workdir / "tsdb", lookback_delta="30s") as server:
        yield server


def _report(prometheus: PrometheusServer, out: Path, *flags: str) -> ReportRun:
    return run_report(
        "--prometheus",
        prometheus.url,
        "--end",
        str(week.END),
        "--window",
        "7d",
        "--resolution",
        "5m",
        "--workloads",
        str(week.workloads_dump(out.parent / "workloads.json")),
        *flags,
        out=out,
    )


@pytest.fixture(scope="module")
def lever_report(lever_prometheus: PrometheusServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("contract-lever-report") / "out"
    run = _report(
        lever_prometheus,
        out,
        "--price",
        str(ON_DEMAND),
        "--price",
        f"{week.FLAVOR}={ON_DEMAND}",
        "--price",
        f"{week.FLAVOR}-spot={SPOT}",
        "--commitment",
        f"{DISCOUNT * 100:g}%",
    )
    assert run.exit_code == 0, run.stderr
    report: dict[str, Any] = run.json()
    return report


def _levers(report: dict[str, Any], team: str) -> dict[str, dict[str, Any]]:
    found = next(t for t in report["teams"] if t["name"] == team)
    return {lever["name"]: lever for lever in found["levers"]}


def _cluster_lever(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(lever for lever in report["cluster"]["levers"] if lever["name"] == name)
    return found


def test_spot_prices_the_sweeps_preempted_and_finished_at_on_demand_minus_spot(lever_report: dict[str, Any]) -> None:
    spot = _levers(lever_report, "sweeps")["spot for interruptible work"]
    proven = {"sweep-0": 4 * (6 + 2), "sweep-1": 4 * 6, "sweep-2": 4 * 6}
    assert spot["gpu_hours"] == pytest.approx(sum(proven.values()), rel=WITHIN)
    assert spot["dollars"] == pytest.approx(80 * (ON_DEMAND - SPOT), rel=WITHIN)
    assert spot["dollars_per_month"] == pytest.approx(200 * PER_MONTH, rel=WITHIN)
    assert (spot["effort"], spot["missing"]) == ("a new flavor", None)
    counted = {item["name"]: item for item in spot["items"] if item["dollars"] is not None}
    assert set(counted) == set(proven), "the failed sweep is not proven interruptible"
    for name, gpu_hours in proven.items():
        assert counted[name]["dollars"] == pytest.approx(gpu_hours * (ON_DEMAND - SPOT), rel=WITHIN)
    assert counted["sweep-0"]["detail"].startswith("preempted 2x")
    candidates = [item["name"] for item in spot["items"] if item["dollars"] is None]
    assert candidates == ["sweep-low"]


def test_failed_and_cancelled_work_names_each_workload_with_its_reason(lever_report: dict[str, Any]) -> None:
    failed = _levers(lever_report, "training")["failed and cancelled work"]
    assert failed["dollars"] == pytest.approx((24 + 8) * ON_DEMAND, rel=WITHIN)
    assert failed["effort"] == "a setting"
    assert [(i["name"], i["detail"]) for i in failed["items"]] == [
        ("train-oom", "Failed"),
        ("train-timeout", "DeactivatedDueToMaximumExecutionTimeExceeded"),
    ]
    sweeps = _levers(lever_report, "sweeps")["failed and cancelled work"]
    assert [(i["name"], i["gpu_hours"]) for i in sweeps["items"]] == [("sweep-3", pytest.approx(12.0))]
    cluster = _cluster_lever(lever_report, "failed and cancelled work")
    assert cluster["dollars"] == pytest.approx((24 + 8 + 12) * ON_DEMAND, rel=WITHIN)


def test_the_commitment_covers_the_floor_and_compares_both_costs(lever_report: dict[str, Any]) -> None:
    floor = 16 + 2  # base's servers and quiet's API, held every hour
    above = 16 * 12 + 8 * 3 + 4 * 2  # the sweeps and the training runs
    on_demand = (floor * week.HOURS + above) * ON_DEMAND
    committed = floor * week.HOURS * ON_DEMAND * (1 - DISCOUNT) + above * ON_DEMAND
    lever = _cluster_lever(lever_report, "commitment sized to the floor")
    assert lever["gpu_hours"] == pytest.approx(floor * week.HOURS, rel=WITHIN)
    assert lever["on_demand_dollars"] == pytest.approx(on_demand, rel=WITHIN)
    assert lever["committed_dollars"] == pytest.approx(committed, rel=WITHIN)
    assert lever["dollars"] == pytest.approx(on_demand - committed, rel=WITHIN)
    assert lever["effort"] == "a contract"
    assert "18 x GPU model not known" in lever["evidence"]


def test_a_team_with_nothing_to_tune_gets_no_lever(lever_report: dict[str, Any]) -> None:
    assert _levers(lever_report, "quiet") == {}
    assert _levers(lever_report, "base") == {}


def test_the_cluster_levers_are_ranked_by_dollars(lever_report: dict[str, Any]) -> None:
    names = [lever["name"] for lever in lever_report["cluster"]["levers"]]
    assert names == ["commitment sized to the floor", "spot for interruptible work", "failed and cancelled work"]


def test_without_spot_or_commitment_prices_the_levers_say_what_is_missing(
    lever_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    run = _report(lever_prometheus, tmp_path / "out", "--price", str(ON_DEMAND))
    assert run.exit_code == 0, run.stderr
    report = run.json()
    spot = _levers(report, "sweeps")["spot for interruptible work"]
    assert (spot["dollars"], spot["missing"]) == (None, f"a spot price: --price {week.FLAVOR}-spot=PRICE")
    assert spot["gpu_hours"] == pytest.approx(80, rel=WITHIN)
    commitment = _cluster_lever(report, "commitment sized to the floor")
    assert (commitment["dollars"], commitment["missing"]) == (None, "a commitment price or discount (--commitment 30%)")
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "missing: a commitment price or discount" in markdown


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--price", "h100=4", "--price", "h100-spot=5"], "the spot price is above h100's on-demand price 4"),
        (["--commitment", "0"], "a commitment price is above 0"),
    ],
)
def test_bad_lever_prices_exit_2_with_one_line(
    lever_prometheus: PrometheusServer, tmp_path: Path, flags: list[str], says: str
) -> None:
    run = _report(lever_prometheus, tmp_path / "out", *flags)
    assert run.exit_code == 2
    assert run.stderr.splitlines() == [f"kuota report: error: {run.stderr.split('error: ', 1)[1].strip()}"]
    assert says in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists(), "refused before any query or file"
