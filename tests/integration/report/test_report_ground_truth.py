"""Every figure of report.json against a real Prometheus equals what the generated week was built to hold.

The expected numbers are worked out by hand from tests/integration/report/synthetic_week.py's docstring.
Each test runs twice: on kuota's series with dcgm-exporter's beside them (kuota's must win), and on
dcgm-exporter's ``DCGM_FI_DEV_GPU_UTIL`` alone, relabelled to ``exported_namespace``/``exported_pod``.
"""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from tests.integration.report import synthetic_week as week
from tests.integration.report.conftest import ReportRun

pytestmark = pytest.mark.integration

PRICE = 55.04 / 8
WORKDAY_HOURS = 50  # Mon-Fri 9-19
WEEKEND_HOURS = 48
NIGHT_HOURS = 168 - 50 - 48


def _team(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(team for team in report["teams"] if team["name"] == name)
    return found


def test_report_exits_zero_and_writes_three_files(synthetic_week_report: ReportRun) -> None:
    assert synthetic_week_report.exit_code == 0, synthetic_week_report.stderr
    for name in ("report.json", "report.md", "report.html"):
        assert (synthetic_week_report.out / name).stat().st_size > 0


def test_the_gpu_series_read_are_kuotas_when_present_else_dcgm_exporters_relabelled_ones(
    synthetic_week_report: ReportRun, synthetic_week_exporters: week.GpuExporters
) -> None:
    expected = {
        week.GpuExporters.KUOTA_AND_DCGM: "kuota_gpu_allocated + kuota_pod_gpu_sm_utilization_percent",
        week.GpuExporters.DCGM_ONLY: "DCGM_FI_DEV_GPU_UTIL (exported_namespace relabelled)",
    }
    report = synthetic_week_report.json()
    assert report["gpu_source"] == expected[synthetic_week_exporters]
    # dcgm-exporter alone gives utilization, allocation and the GPU inventory; the week has no memory series
    memory = {
        week.GpuExporters.KUOTA_AND_DCGM: "kuota_pod_gpu_memory_used_bytes",
        week.GpuExporters.DCGM_ONLY: "DCGM_FI_DEV_FB_USED",
    }
    assert [entry["metric"] for entry in report["missing"]] == [memory[synthetic_week_exporters]]


def test_progress_line_per_phase(synthetic_week_report: ReportRun) -> None:
    lines = synthetic_week_report.stderr.splitlines()
    for phase in (
        "looking for GPU and queue series",
        "querying GPU allocation",
        "querying admission waits",
        "computing figures",
        "writing",
    ):
        assert any(phase in line for line in lines), phase


def test_team_utilization_is_busy_over_allocated_gpu_hours(synthetic_week_report: ReportRun) -> None:
    report = synthetic_week_report.json()
    research = _team(report, "research")["utilization"]
    assert research["allocated_gpu_hours"] == pytest.approx(8 * 168 + 4 * 48)
    assert research["used_gpu_hours"] == pytest.approx(8 * (50 * 0.9 + 118 * 0.3) + 4 * 48 * 0.95)
    assert research["average_percent"] == pytest.approx(100 * 825.6 / 1536)
    assert research["p95_percent"] == pytest.approx(90.0)
    inference = _team(report, "inference")["utilization"]
    assert inference["allocated_gpu_hours"] == pytest.approx(3 * 168)
    assert inference["average_percent"] == pytest.approx((60 + 60 + 2) / 3)
    applied = _team(report, "applied-ml")
    assert applied["namespaces"] == ["applied"]
    assert applied["utilization"]["allocated_gpu_hours"] == pytest.approx(8 * 84)
    assert applied["utilization"]["average_percent"] == pytest.approx(40.0)


def test_hour_of_week_slots_follow_the_working_hours(synthetic_week_report: ReportRun) -> None:
    slots = _team(synthetic_week_report.json(), "research")["utilization"]["by_hour_of_week"]
    assert slots[0 * 24 + 10] == pytest.approx(90.0)  # Monday 10:00
    assert slots[2 * 24 + 3] == pytest.approx(30.0)  # Wednesday 03:00
    assert slots[6 * 24 + 12] == pytest.approx((8 * 30 + 4 * 95) / 12)  # Sunday noon, sweep running


def test_waits_come_from_histogram_buckets_across_a_counter_reset(synthetic_week_report: ReportRun) -> None:
    report = synthetic_week_report.json()
    research = _team(report, "research")["queueing"]
    assert research["admissions"] == pytest.approx(100)  # the 7 observations before the window do not count
    assert research["wait_p50_s"] == pytest.approx(40 + 40 * (50 - 40) / (80 - 40))
    assert research["wait_p95_s"] == pytest.approx(2560 + 2560 * (95 - 80) / (100 - 80))
    inference = _team(report, "inference")["queueing"]
    assert inference["wait_p50_s"] == pytest.approx(7.5)
    assert inference["wait_p95_s"] == pytest.approx(9.75)
    applied = _team(report, "applied-ml")["queueing"]
    assert applied["wait_p50_s"] == pytest.approx(1280)
    assert applied["wait_p95_s"] == pytest.approx(1280 + 1280 * (19 - 10) / 10)
    cluster = report["cluster"]["queueing"]
    assert cluster["admissions"] == pytest.approx(150)
    assert cluster["wait_p50_s"] == pytest.approx(40 + 40 * (75 - 70) / (110 - 70))
    assert cluster["wait_p95_s"] == pytest.approx(2560 + 2560 * (142.5 - 130) / (150 - 130))


def test_pending_borrowing_and_waiting_while_idle_elsewhere(synthetic_week_report: ReportRun) -> None:
    report = synthetic_week_report.json()
    research = _team(report, "research")["queueing"]
    assert research["pending_average"] == pytest.approx(3 * WORKDAY_HOURS / 168)
    assert research["pending_max"] == pytest.approx(3)
    # only research ever pends: the most pending at once in all queues together is its 3
    assert report["cluster"]["queueing"]["pending_max"] == pytest.approx(3)
    assert research["borrowed_gpu_hours"] == pytest.approx(4 * WEEKEND_HOURS)
    assert research["waiting_hours"] == pytest.approx(WORKDAY_HOURS)
    # applied-ml's quota is free (so 13 >= 8 GPUs idle elsewhere) on Monday 9-19 and Friday 12-19 only
    assert research["waiting_while_idle_elsewhere_hours"] == pytest.approx(10 + 7)
    assert research["evictions"] == {"Preempted": pytest.approx(2)}
    assert _team(report, "applied-ml")["queueing"]["preemptions"] == pytest.approx(2)
    assert report["cluster"]["waiting_share"] == pytest.approx(50 / 168)
    assert report["cluster"]["waiting_while_idle_elsewhere_share"] == pytest.approx(17 / 168)


def test_idle_holders_and_idle_cost_split_nights_and_weekends(synthetic_week_report: ReportRun) -> None:
    report = synthetic_week_report.json()
    inference = _team(report, "inference")
    assert inference["idle_holders"] == [
        {"namespace": "inference", "pod": "notebook-alice", "idle_gpu_hours": pytest.approx(168)}
    ]
    assert inference["idle_cost"]["gpu_hours"] == {
        "workday": pytest.approx(WORKDAY_HOURS),
        "night": pytest.approx(NIGHT_HOURS),
        "weekend": pytest.approx(WEEKEND_HOURS),
    }
    assert inference["idle_cost"]["dollars"]["night"] == pytest.approx(NIGHT_HOURS * PRICE)
    cluster = report["cluster"]
    assert cluster["capacity_gpu_hours"] == pytest.approx(24 * 168)
    assert cluster["allocated_gpu_hours"] == pytest.approx(1536 + 504 + 672)
    # idle = unallocated GPUs + the notebook's idle-held GPU, hour by hour
    expected = {"workday": 0.0, "night": 0.0, "weekend": 0.0}
    for hour in range(168):
        allocated = 8 + 3 + (4 if week.is_weekend_hour(hour) else 0) + (8 if week.applied_running(hour) else 0)
        kind = "weekend" if week.is_weekend_hour(hour) else "workday" if week.is_workday_hour(hour) else "night"
        expected[kind] += 24 - allocated + 1
    assert cluster["idle_cost"]["gpu_hours"] == {k: pytest.approx(v) for k, v in expected.items()}
    assert cluster["idle_cost"]["dollars"]["weekend"] == pytest.approx(expected["weekend"] * PRICE)


def test_idle_held_gpu_hours_by_hour_of_week(synthetic_week_report: ReportRun) -> None:
    report = synthetic_week_report.json()
    # the notebook idles one GPU every hour of a week that starts Monday 00:00 UTC: one GPU-hour in each slot
    assert _team(report, "inference")["idle_held_by_hour_of_week"] == [pytest.approx(1.0)] * 168
    assert _team(report, "research")["idle_held_by_hour_of_week"] == [0.0] * 168
    assert report["cluster"]["idle_held_by_hour_of_week"] == [pytest.approx(1.0)] * 168


def test_verdicts_per_quadrant(synthetic_week_report: ReportRun) -> None:
    report = synthetic_week_report.json()
    assert _team(report, "research")["verdict"]["quadrant"] == "buy"  # 53.8% busy, p95 wait 75 min
    assert _team(report, "applied-ml")["verdict"]["quadrant"] == "tune"  # 40% busy, p95 wait 41 min
    assert _team(report, "inference")["verdict"]["quadrant"] == "over-provisioned"  # 40.7%, 10 s
    assert report["cluster"]["verdict"]["quadrant"] == "tune"  # 32% of capacity busy, p95 69 min


def test_levers_ranked_by_gpu_hours_with_idle_holders_named(synthetic_week_report: ReportRun) -> None:
    inference = _team(synthetic_week_report.json(), "inference")
    names = [lever["name"] for lever in inference["levers"]]
    assert "stop idle holders" in names
    hours = [lever["gpu_hours"] for lever in inference["levers"] if lever["gpu_hours"] is not None]
    assert hours == sorted(hours, reverse=True)
    research = _team(synthetic_week_report.json(), "research")
    borrowing = next(lever for lever in research["levers"] if lever["name"] == "borrowing in a cohort")
    assert borrowing["gpu_hours"] == pytest.approx(17 * 8)


def test_missing_job_history_is_named_not_zero(synthetic_week_report: ReportRun) -> None:
    report = synthetic_week_report.json()
    assert report["cluster"]["failed_gpu_hours"] is None
    markdown = (synthetic_week_report.out / "report.md").read_text(encoding="utf-8")
    assert "GPU-hours of failed or cancelled jobs | missing data" in markdown


# allocated and busy GPU-hours per namespace, from the generated week's docstring
NAMESPACE_HOURS = {
    "research": (8 * 168 + 4 * 48, 8 * (50 * 0.9 + 118 * 0.3) + 4 * 48 * 0.95),
    "inference": (3 * 168, (0.6 + 0.6 + 0.02) * 168),
    "applied": (8 * 84, 8 * 84 * 0.4),
}
TEAM_OF = {"research": "research", "inference": "inference", "applied": "applied-ml"}


def test_money_per_team_and_namespace_is_gpu_hours_times_the_price(synthetic_week_report: ReportRun) -> None:
    report = synthetic_week_report.json()
    for namespace, (allocated, used) in NAMESPACE_HOURS.items():
        figures = next(n for n in report["namespaces"] if n["name"] == namespace)
        assert figures["team"] == TEAM_OF[namespace]
        assert figures["gpu_models"] == {week.MODEL: pytest.approx(allocated)}, "the model is known in both variants"
        for money in (figures["money"], _team(report, TEAM_OF[namespace])["money"]):
            assert money["allocated_dollars"] == pytest.approx(allocated * PRICE)
            assert money["used_dollars"] == pytest.approx(used * PRICE)
            assert money["idle_dollars"] == pytest.approx((allocated - used) * PRICE)
            assert money["price_per_gpu_hour"] == pytest.approx(PRICE)
    total = sum(allocated for allocated, _ in NAMESPACE_HOURS.values())
    assert report["cluster"]["money"]["allocated_dollars"] == pytest.approx(total * PRICE)


def test_report_csv_holds_the_same_figures(synthetic_week_report: ReportRun) -> None:
    text = (synthetic_week_report.out / "report.csv").read_text(encoding="utf-8")
    read = list(csv.DictReader(io.StringIO(text, newline="")))
    rows = {(row["scope"], row["name"]): row for row in read if row["scope"] != "lever"}
    assert set(rows) == {("cluster", "cluster")} | {("team", t) for t in TEAM_OF.values()} | {
        ("namespace", n) for n in NAMESPACE_HOURS
    }
    report = synthetic_week_report.json()
    # then a row per lever of the cluster and of each team, as report.json ranks them
    levers = [(lv["name"], "") for lv in report["cluster"]["levers"]]
    levers += [(lv["name"], team["name"]) for team in report["teams"] for lv in team["levers"]]
    assert levers and [(row["name"], row["team"]) for row in read if row["scope"] == "lever"] == levers
    for namespace, (allocated, used) in NAMESPACE_HOURS.items():
        for row in (rows[("namespace", namespace)], rows[("team", TEAM_OF[namespace])]):
            assert float(row["allocated_gpu_hours"]) == pytest.approx(allocated, abs=1e-3)
            assert float(row["utilization_percent"]) == pytest.approx(100 * used / allocated, abs=1e-3)
            assert float(row["idle_dollars"]) == pytest.approx((allocated - used) * PRICE, abs=1e-3)
        team = rows[("team", TEAM_OF[namespace])]
        assert team["verdict"] == _team(report, TEAM_OF[namespace])["verdict"]["quadrant"]
    assert float(rows[("team", "inference")]["idle_held_gpu_hours"]) == pytest.approx(168)
    assert float(rows[("team", "research")]["wait_p95_s"]) == pytest.approx(2560 + 2560 * (95 - 80) / (100 - 80))


def test_daily_utilization_follows_the_working_days_and_the_weekend_sweep(synthetic_week_report: ReportRun) -> None:
    report = synthetic_week_report.json()
    assert report["trend_day_ends"] == [week.START + 86400 * (day + 1) for day in range(7)]
    research = _team(report, "research")["daily"]["utilization_percent"]
    assert research[0] == pytest.approx(100 * 8 * (10 * 0.9 + 14 * 0.3) / (8 * 24))  # Monday
    assert research[5] == pytest.approx(100 * (8 * 24 * 0.3 + 4 * 24 * 0.95) / (12 * 24))  # Saturday
    monday_busy = 8 * (10 * 0.9 + 14 * 0.3) + 24 * 1.22
    assert report["cluster"]["daily"]["utilization_percent"][0] == pytest.approx(100 * monday_busy / (24 * 24))
    assert all(p95 is not None for p95 in _team(report, "research")["daily"]["wait_p95_s"])
    markdown = (synthetic_week_report.out / "report.md").read_text(encoding="utf-8")
    for chart in ("utilization-trend", "wait-trend"):
        assert (synthetic_week_report.out / f"{chart}.svg").read_text(encoding="utf-8").startswith("<svg")
        assert f"]({chart}.svg)" in markdown


def test_gpu_hours_are_priced_by_their_gpu_model_and_free_gpus_at_the_default(priced_week_report: ReportRun) -> None:
    assert priced_week_report.exit_code == 0, priced_week_report.stderr
    report = priced_week_report.json()
    for namespace, (allocated, used) in NAMESPACE_HOURS.items():
        money = _team(report, TEAM_OF[namespace])["money"]
        assert money["allocated_dollars"] == pytest.approx(allocated * week.MODEL_PRICE)
        assert money["used_dollars"] == pytest.approx(used * week.MODEL_PRICE)
    assert _team(report, "inference")["idle_cost"]["dollars"]["night"] == pytest.approx(NIGHT_HOURS * week.MODEL_PRICE)
    expected = {"workday": 0.0, "night": 0.0, "weekend": 0.0}
    for hour in range(168):
        allocated = 8 + 3 + (4 if week.is_weekend_hour(hour) else 0) + (8 if week.applied_running(hour) else 0)
        kind = "weekend" if week.is_weekend_hour(hour) else "workday" if week.is_workday_hour(hour) else "night"
        expected[kind] += (24 - allocated) * week.FREE_GPU_PRICE + 1 * week.MODEL_PRICE  # + the idle notebook
    assert report["cluster"]["idle_cost"]["dollars"] == {k: pytest.approx(v) for k, v in expected.items()}


def test_week_over_week_against_the_same_week_differs_only_in_price(
    priced_week_report: ReportRun, synthetic_week_report: ReportRun
) -> None:
    assert priced_week_report.exit_code == 0, priced_week_report.stderr
    comparison = priced_week_report.json()["week_over_week"]
    assert [change["name"] for change in comparison["teams"]] == [
        team["name"] for team in synthetic_week_report.json()["teams"]
    ]
    for change in comparison["teams"]:
        assert change["utilization_before_percent"] == pytest.approx(change["utilization_now_percent"])
        assert change["wait_p95_before_s"] == pytest.approx(change["wait_p95_now_s"])
        assert change["verdict_before"] == change["verdict_now"]
    inference = next(change for change in comparison["teams"] if change["name"] == "inference")
    assert inference["idle_cost_before_dollars"] == pytest.approx(168 * PRICE)
    assert inference["idle_cost_now_dollars"] == pytest.approx(168 * week.MODEL_PRICE)
    assert "## Week over week" in (priced_week_report.out / "report.md").read_text(encoding="utf-8")
