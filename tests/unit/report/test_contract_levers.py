"""The levers read from the Workloads and the floor: spot for work proven interruptible, failed and cancelled
work, and a commitment sized to the measured floor; with their options' bad input."""

from __future__ import annotations

import contextlib
import io
from datetime import UTC, datetime
from typing import Any

import pytest

from kuota.cli import main
from kuota.report.errors import ReportInputError
from kuota.report.figures.commitments import (
    MISSING_PRICE,
    CommitmentTable,
    ModelHolding,
    commitment_lever,
    measured_floor,
    parse_commitments,
)
from kuota.report.figures.levers import Effort
from kuota.report.figures.prices import parse_prices
from kuota.report.figures.workload_levers import (
    Outcome,
    RunPrice,
    WorkloadRun,
    failed_work_lever,
    spot_lever,
)
from kuota.report.sources.workload_history import job_history, read_workloads

WEEK_H = 168.0


def _run(
    name: str,
    gpu_hours: float,
    *,
    preemptions: int = 0,
    outcome: Outcome = Outcome.SUCCEEDED,
    priority: int | None = None,
    flavor: str | None = "h100",
    reason: str | None = None,
) -> WorkloadRun:
    return WorkloadRun("ml", name, gpu_hours, flavor, priority, preemptions, outcome, reason)


def _prices(runs: list[WorkloadRun], on_demand: float, spot: float | None) -> dict[tuple[str, str], RunPrice]:
    return {(r.namespace, r.name): RunPrice(on_demand, spot, r.flavor or "FLAVOR") for r in runs}


def test_spot_counts_workloads_preempted_that_still_finished_at_on_demand_minus_spot() -> None:
    runs = [
        _run("sweep-1", 40.0, preemptions=2),
        _run("sweep-2", 10.0, preemptions=1),
        _run("steady", 100.0),
        _run("crashed-after-preemption", 30.0, preemptions=1, outcome=Outcome.FAILED),
        _run("still-running", 20.0, preemptions=1, outcome=Outcome.UNFINISHED),
    ]
    lever = spot_lever(runs, _prices(runs, 6.0, 2.5), WEEK_H)
    assert lever is not None
    assert lever.gpu_hours == 50.0
    assert lever.dollars == pytest.approx(50.0 * (6.0 - 2.5))
    assert lever.effort is Effort.FLAVOR and lever.missing is None
    assert [(i.name, i.dollars) for i in lever.items] == [
        ("sweep-1", pytest.approx(40 * 3.5)),
        ("sweep-2", pytest.approx(10 * 3.5)),
    ]
    assert lever.items[0].detail == "preempted 2x and finished; flavor h100"


def test_spot_without_a_spot_price_says_which_one_is_missing_and_is_not_priced() -> None:
    runs = [_run("sweep", 40.0, preemptions=1)]
    lever = spot_lever(runs, _prices(runs, 6.0, None), WEEK_H)
    assert lever is not None
    assert (lever.gpu_hours, lever.dollars, lever.dollars_per_month) == (40.0, None, None)
    assert lever.missing == "a spot price: --price h100-spot=PRICE"


def test_low_priority_workloads_never_preempted_are_listed_as_candidates_not_counted() -> None:
    runs = [
        _run("batch", 25.0, priority=-5),
        _run("default", 15.0),
        _run("negative-but-preempted", 5.0, priority=-5, preemptions=1),
    ]
    lever = spot_lever(runs, _prices(runs, 6.0, 2.0), WEEK_H)
    assert lever is not None
    assert lever.gpu_hours == 5.0 and lever.dollars == pytest.approx(5.0 * 4.0)
    candidates = [(i.name, i.dollars) for i in lever.items if i.detail.startswith("candidate")]
    assert candidates == [("batch", None)]
    tiers = [_run("lowest-of-the-queue", 15.0, priority=10), _run("high", 60.0, priority=100)]
    lever = spot_lever(tiers, _prices(tiers, 6.0, 2.0), WEEK_H)
    assert lever is not None
    assert [(i.name, i.detail) for i in lever.items] == [
        ("lowest-of-the-queue", "candidate, not counted: priority 10, never preempted")
    ]


def test_only_candidates_make_a_spot_lever_without_gpu_hours_or_dollars() -> None:
    runs = [_run("batch", 25.0, priority=-1)]
    lever = spot_lever(runs, _prices(runs, 6.0, 2.0), WEEK_H)
    assert lever is not None and (lever.gpu_hours, lever.dollars) == (None, None)


def test_work_on_a_spot_flavor_already_and_a_team_with_nothing_to_move_get_no_spot_lever() -> None:
    on_spot = [_run("sweep", 40.0, preemptions=3, flavor="h100-spot")]
    assert spot_lever(on_spot, _prices(on_spot, 6.0, 2.0), WEEK_H) is None
    plain = [_run("a", 10.0, priority=5), _run("b", 10.0, priority=5)]
    assert spot_lever(plain, _prices(plain, 6.0, 2.0), WEEK_H) is None


def test_failed_work_is_priced_per_workload_with_its_reason() -> None:
    runs = [
        _run("oom", 8.0, outcome=Outcome.FAILED, reason="Failed"),
        _run("timeout", 2.0, outcome=Outcome.FAILED, reason="DeactivatedDueToMaximumExecutionTimeExceeded"),
        _run("fine", 50.0),
    ]
    lever = failed_work_lever(runs, _prices(runs, 5.0, None), WEEK_H)
    assert lever is not None
    assert (lever.gpu_hours, lever.dollars, lever.effort) == (10.0, 50.0, Effort.SETTING)
    assert [(i.name, i.dollars, i.detail) for i in lever.items] == [
        ("oom", 40.0, "Failed"),
        ("timeout", 10.0, "DeactivatedDueToMaximumExecutionTimeExceeded"),
    ]
    assert failed_work_lever([_run("fine", 50.0)], _prices(runs, 5.0, None), WEEK_H) is None


def test_spot_prices_are_looked_up_by_flavor_then_model() -> None:
    table = parse_prices(["6", "h100=5", "h100-spot=2", "NVIDIA L4-spot=0.4"])
    assert table.spot(["h100", "NVIDIA L4"]).per_gpu_hour == 2.0  # type: ignore[union-attr]
    assert table.spot(["a100", "NVIDIA L4"]).per_gpu_hour == 0.4  # type: ignore[union-attr]
    assert table.spot([None, "NVIDIA A100"]) is None


@pytest.mark.parametrize(
    ("prices", "named"),
    [
        (["h100=4", "h100-spot=5"], "h100's on-demand price 4"),
        (["3", "a100-spot=3.5"], "a100's on-demand price 3"),  # no a100 price: the default is its on-demand
    ],
)
def test_a_spot_price_above_its_on_demand_price_is_refused_naming_both(prices: list[str], named: str) -> None:
    with pytest.raises(ReportInputError, match="the spot price is above") as raised:
        parse_prices(prices)
    assert named in str(raised.value)
    assert prices[-1] in str(raised.value)


def test_the_floor_is_the_gpus_held_in_at_least_95_percent_of_hours() -> None:
    held = (10.0,) * 160 + (3.0,) * 8  # 8 of 168 hours (4.8%) below 10: the floor stays 10
    assert measured_floor(held, 1.0) == 10
    held = (10.0,) * 159 + (3.0,) * 9  # 9 hours (5.4%) below: the floor drops to 3
    assert measured_floor(held, 1.0) == 3
    assert measured_floor((7.5,) * 168, 1.0) == 7, "whole GPUs"
    assert measured_floor((2.0,) * 4, 0.5) == 4, "a half-hour bucket holding 2 GPU-hours is 4 GPUs"
    assert measured_floor((), 1.0) == 0


def test_commitment_prices_the_floor_committed_and_the_rest_on_demand() -> None:
    held = (16.0,) * 100 + (20.0,) * 68
    on_demand = sum(held) * 6.0
    table = parse_commitments(["35%"], parse_prices(["6"]))
    lever = commitment_lever([ModelHolding("NVIDIA H100", held, on_demand)], table, 1.0)
    assert lever is not None
    committed = 16 * 168 * 6.0 * 0.65 + 4 * 68 * 6.0
    assert lever.committed_dollars == pytest.approx(committed)
    assert lever.on_demand_dollars == pytest.approx(on_demand)
    assert lever.dollars == pytest.approx(on_demand - committed)
    assert (lever.gpu_hours, lever.effort) == (16 * 168, Effort.CONTRACT)
    assert [(i.namespace, i.name) for i in lever.items] == [("", "NVIDIA H100")]


def test_commitment_without_a_price_names_the_floor_and_what_is_missing() -> None:
    lever = commitment_lever([ModelHolding("NVIDIA H100", (8.0,) * 168, 8 * 168 * 6.0)], None, 1.0)
    assert lever is not None
    assert (lever.gpu_hours, lever.dollars, lever.missing) == (8 * 168, None, MISSING_PRICE)
    assert "8 x NVIDIA H100" in lever.evidence
    assert commitment_lever([ModelHolding("NVIDIA H100", (0.0,) * 168, 0.0)], None, 1.0) is None, "no floor"


def test_a_commitment_per_model_applies_to_that_model_only() -> None:
    prices = parse_prices(["6", "NVIDIA L4=1"])
    table = parse_commitments(["NVIDIA L4=0.6"], prices)
    assert isinstance(table, CommitmentTable)
    lever = commitment_lever(
        [
            ModelHolding("NVIDIA L4", (4.0,) * 10, 40.0),
            ModelHolding("NVIDIA H100", (8.0,) * 10, 480.0),
        ],
        table,
        1.0,
    )
    assert lever is not None
    assert lever.dollars == pytest.approx(40.0 - 4 * 10 * 0.6)
    assert lever.missing is None
    unpriced = next(item for item in lever.items if item.name == "NVIDIA H100")
    assert unpriced.dollars is None and "no commitment price" in unpriced.detail


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (["0"], "a commitment price is above 0"),
        (["0%"], "a discount is above 0% and below 100%"),
        (["100%"], "a discount is above 0% and below 100%"),
        (["7"], "7 per GPU-hour is not below the on-demand price 6"),
        (["h100=5.5"], "5.5 per GPU-hour is not below the on-demand price 5"),
        (["cheap"], "neither dollars per GPU-hour"),
        (["30%", "20%"], "the default commitment is given twice"),
        (["h100=1", "h100=2"], "has a commitment already"),
    ],
)
def test_bad_commitments_are_one_clear_error(given: list[str], says: str) -> None:
    with pytest.raises(ReportInputError, match=says):
        parse_commitments(given, parse_prices(["6", "h100=5"]))


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--price", "h100=4", "--price", "h100-spot=5"], "the spot price is above h100's on-demand price 4"),
        (["--commitment", "0"], "a commitment price is above 0"),
    ],
)
def test_the_cli_refuses_bad_lever_prices_with_one_line_before_any_query(flags: list[str], says: str) -> None:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(["report", "--prometheus", "http://127.0.0.1:9", *flags, "--out", "/nonexistent/never"])
    assert code == 2
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kuota report: error: ") and says in lines[0], lines


START = 1_790_000_000.0


def _iso(offset_s: float) -> str:
    return datetime.fromtimestamp(START + offset_s, tz=UTC).isoformat().replace("+00:00", "Z")


def _workload(name: str, status: dict[str, Any], *, priority: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": "default",
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {"spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "2"}}}]}},
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": name, "namespace": "ml", "creationTimestamp": _iso(0)}, "spec": spec, "status": status}


def _conditions(*kinds: tuple[str, str, float, str]) -> list[dict[str, str]]:
    return [{"type": t, "status": s, "lastTransitionTime": _iso(at), "reason": r} for t, s, at, r in kinds]


def test_the_history_reads_preemptions_flavor_priority_and_earlier_runs_of_each_workload() -> None:
    kueue = _workload(
        "sweep",
        {
            "admission": {
                "clusterQueue": "ml",
                "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default", "nvidia.com/gpu": "h100"}}],
            },
            "conditions": _conditions(
                ("QuotaReserved", "True", 7200, "QuotaReserved"),
                ("Preempted", "False", 7200, "QuotaReserved"),
                ("Finished", "True", 10800, "Succeeded"),
            ),
            "schedulingStats": {
                "evictions": [
                    {"reason": "Preempted", "underlyingCause": "InCohortReclamation", "count": 2},
                    {"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 1},
                ]
            },
            "accumulatedPastExecutionTimeSeconds": 1800,
        },
        priority=-10,
    )
    # kuota's manager writes no schedulingStats: the Preempted condition, cleared by the new admission, proves one
    kuota = _workload(
        "resumed",
        {
            "conditions": _conditions(
                ("QuotaReserved", "True", 3600, "QuotaReserved"),
                ("Preempted", "False", 3600, "QuotaReserved"),
                ("Finished", "True", 7200, "Succeeded"),
            )
        },
    )
    failed = _workload(
        "crashed",
        {"conditions": _conditions(("QuotaReserved", "True", 0, ""), ("Finished", "True", 3600, "Failed"))},
    )
    history = job_history(read_workloads([kueue, kuota, failed]), START, START + 86400)
    runs = {run.name: run for run in history.runs}
    assert runs["sweep"] == WorkloadRun("ml", "sweep", 2 * 1.5, "h100", -10, 2, Outcome.SUCCEEDED, "Succeeded")
    assert runs["resumed"] == WorkloadRun("ml", "resumed", 2.0, None, None, 1, Outcome.SUCCEEDED, "Succeeded")
    assert runs["crashed"].outcome is Outcome.FAILED and runs["crashed"].preemptions == 0
    assert history.failed_gpu_hours == {"ml": pytest.approx(2.0)}


def test_a_workload_whose_priority_is_not_a_number_is_left_out_and_named() -> None:
    bad = _workload("odd", {"conditions": _conditions(("QuotaReserved", "True", 0, ""))})
    bad["spec"]["priority"] = "high"
    retained = read_workloads([bad])
    assert retained.workloads == []
    assert retained.warnings() == [
        "left out 1 of 1 item(s): spec.priority is not a 32-bit whole number "
        "(first: items[0] 'ml'/'odd': spec.priority is 'high')"
    ]
