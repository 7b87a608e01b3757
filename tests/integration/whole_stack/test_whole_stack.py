"""The seed story, compressed, on the whole stack; every figure of report.json against what the test knows.

The ground truth is the test's own: the SM percentages it set on the fake NVML for each team's pods and the
wall-clock times it gave each pod its GPUs (gpu_nodes.py), and the Workloads' conditions and queue states it
listed from the API server every ``POLL_S`` (story.py). The report reads none of that: it reads Prometheus,
which scraped the manager and the exporters, and the API server.

Tolerances come from the sampling between the truth and the report, edge by edge (a GPU taken or given back, a
Workload admitted, evicted or finished): the exporter reads PodResources and NVML every 0.25 s and averages SM
use over 1 s, Prometheus scrapes every 1 s and the report steps every 1 s. Admission waits are within 1 s of the
Workloads' whole-second stamps, and a counter's ``increase`` extrapolates by at most one scrape interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from kuota.webhook.controller.metrics import ADMISSION_WAIT_BUCKETS
from tests.integration.whole_stack import story
from tests.integration.whole_stack.conftest import LONG_WAIT_S, RESOLUTION_S, SCRAPE_S, StoryRun
from tests.integration.whole_stack.gpu_nodes import (
    POD_RESOURCES_INTERVAL_S,
    PROCESS_INTERVAL_S,
    UTILIZATION_WINDOW_S,
    Holding,
)
from tests.integration.whole_stack.story import NOMINAL_GPUS, TEAM_SM_PERCENT, TEAMS, Integral, QueueState

pytestmark = pytest.mark.integration

# How far one edge of a (pod, GPU) holding may move between the test's clock and the report's: the exporter
# reads it within one read interval, Prometheus scrapes it within one interval, the report counts it from its
# next step, and SM use ramps over the utilization window; half of that either way, once the constant part of
# the delay cancels between the holding's two edges.
EDGE_S = (max(POD_RESOURCES_INTERVAL_S, PROCESS_INTERVAL_S) + SCRAPE_S + RESOLUTION_S + UTILIZATION_WINDOW_S) / 2
IDLE_PERCENT = 5.0  # the report's default --idle-percent
LOW_UTILIZATION = 50.0  # and --low-utilization
IDLE_ELSEWHERE_GPUS = 8  # and --idle-elsewhere-gpus
PRICE = 55.04 / 8  # the default --price p5.48xlarge, per GPU-hour
CLUSTER_NOMINAL = NOMINAL_GPUS * len(TEAMS)
BOUNDS = (*ADMISSION_WAIT_BUCKETS, math.inf)


def _team(run: StoryRun, name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(team for team in run.report["teams"] if team["name"] == name)
    return found


def _within(figure: float | None, truth: Integral | float, tolerance: float = 0.0) -> bool:
    """``figure`` is ``truth`` to within its tolerance (and float rounding)."""
    value, allowed = (truth.value, truth.tolerance) if isinstance(truth, Integral) else (truth, tolerance)
    return figure is not None and abs(figure - value) <= allowed + 1e-9 * max(1.0, abs(value))


def _holdings(run: StoryRun, team: str) -> list[Holding]:
    return [h for h in run.holdings if h.namespace == team]


def _allocated(holdings: Sequence[Holding]) -> Integral:
    return Integral(sum(h.seconds() for h in holdings) / 3600, len(holdings) * 2 * EDGE_S / 3600)


def _used(holdings: Sequence[Holding]) -> Integral:
    return Integral(
        sum(h.sm_percent / 100 * h.seconds() for h in holdings) / 3600,
        sum(h.sm_percent / 100 * 2 * EDGE_S for h in holdings) / 3600,
    )


def _ratio_bounds(used: Integral, allocated: Integral) -> tuple[float, float]:
    return (
        100 * (used.value - used.tolerance) / (allocated.value + allocated.tolerance),
        100 * (used.value + used.tolerance) / (allocated.value - allocated.tolerance),
    )


def _queue_integral(run: StoryRun, value: Callable[[QueueState], float]) -> Integral:
    found = story.integrate(
        run.timeline.states, value, (run.start, run.end), scrape_s=SCRAPE_S, resolution_s=RESOLUTION_S
    )
    return Integral(found.value / 3600, found.tolerance / 3600)


def _with_unseen_waits(found: Integral, run: StoryRun, team: str) -> Integral:
    """``found`` widened by the waits no listing saw: a Workload created and admitted between two listings was
    never listed pending, yet a scrape of the manager's gauge may have fallen in its wait. Each shifts the
    report's figure by at most its wait (+1 s: the conditions' times are whole seconds), a scrape and a step."""
    states = run.timeline.states
    unseen = sum(
        admission.admitted_at + 1 - admission.queued_at + SCRAPE_S + RESOLUTION_S
        for admission in run.timeline.admissions.values()
        if admission.cluster_queue == team
        and not any(
            admission.queued_at + 1 <= sent and answered <= admission.admitted_at for sent, answered, _ in states
        )
    )
    return Integral(found.value, found.tolerance + unseen / 3600)


def _hour_class(run: StoryRun) -> str:
    """The window's one bucket is classed by the UTC clock at its start (default --work-hours 9-19)."""
    moment = datetime.fromtimestamp(run.start, tz=UTC)
    if moment.weekday() >= 5:
        return "weekend"
    return "workday" if 9 <= moment.hour < 19 else "night"


def _fractions(observations: Sequence[float], up_weight: float, down_weight: float) -> list[float]:
    """The cumulative fraction at each of the manager's wait buckets, observations up to it weighing
    ``up_weight`` each and those above ``down_weight``."""
    fractions = []
    for bound in BOUNDS:
        up = sum(1 for value in observations if value <= bound) * up_weight
        down = sum(1 for value in observations if value > bound) * down_weight
        fractions.append(up / (up + down))
    return fractions


def _quantile(q: float, fractions: Sequence[float]) -> float:
    """PromQL's histogram_quantile of a cumulative distribution over the manager's wait buckets."""
    index = next(i for i, fraction in enumerate(fractions) if fraction >= q)
    if math.isinf(BOUNDS[index]):
        return BOUNDS[index - 1]
    lower, below = (BOUNDS[index - 1], fractions[index - 1]) if index else (0.0, 0.0)
    return lower + (BOUNDS[index] - lower) * (q - below) / (fractions[index] - below)


def _extrapolation(run: StoryRun) -> float:
    """How far ``increase`` may scale a count up: from the samples it has to the window's two ends, each at most
    one scrape interval away."""
    return run.length_s / (run.length_s - 2 * SCRAPE_S)


def _admissions(run: StoryRun, team: str) -> list[story.Admission]:
    # Every Job is created after the window starts, but a Workload's timestamps are whole seconds (truncated), so
    # one admitted in the window's first second carries the start itself.
    return [a for a in run.timeline.admissions.values() if a.cluster_queue == team and run.start <= a.admitted_at]


def test_the_report_reads_kuotas_series_and_finds_nothing_missing(whole_stack: StoryRun) -> None:
    report = whole_stack.report
    assert report["gpu_source"].startswith("kuota_gpu_allocated + kuota_pod_gpu_sm_utilization_percent")
    assert report["missing"] == []
    assert report["empty"] is False
    assert report["window"]["start"] == whole_stack.start and report["window"]["end"] == whole_stack.end
    assert whole_stack.seconds < 600, f"the run took {whole_stack.seconds:.0f}s"


def test_the_targets_carry_the_labels_the_charts_servicemonitors_give_them(whole_stack: StoryRun) -> None:
    """The rules and the dashboard select on these: job per component, and the exporter's node."""
    by_job: dict[str, list[dict[str, str]]] = {}
    for labels in whole_stack.up_labels:
        by_job.setdefault(labels["job"], []).append(labels)
    assert sorted(by_job) == ["dcgm-exporter", "kuota-exporter", "kuota-manager"]
    (manager,) = by_job["kuota-manager"]
    assert (manager["namespace"], manager["endpoint"]) == ("kuota-system", "metrics")
    nodes = sorted(labels["node"] for labels in by_job["kuota-exporter"])
    assert nodes == ["h100-0", "h100-1", "h100-2"]
    for labels in by_job["kuota-exporter"]:  # dropped, so the holder's own labels reach Prometheus
        assert not {"namespace", "pod", "container"} & set(labels), labels


@pytest.mark.parametrize("team", TEAMS)
def test_team_gpu_hours_and_utilization_are_the_ones_set_on_the_fake_nvml(whole_stack: StoryRun, team: str) -> None:
    utilization = _team(whole_stack, team)["utilization"]
    holdings = _holdings(whole_stack, team)
    allocated, used = _allocated(holdings), _used(holdings)
    assert _within(utilization["allocated_gpu_hours"], allocated), (utilization, allocated)
    assert _within(utilization["used_gpu_hours"], used), (utilization, used)
    low, high = _ratio_bounds(used, allocated)
    assert low <= utilization["average_percent"] <= high, (utilization["average_percent"], low, high)
    # Every pod of a team runs at one SM value, so the truth is that value; the report's figure may differ from
    # it only by the edges of the holdings (the bounds above), which weigh more the shorter the holdings are.
    assert used.value / allocated.value == pytest.approx(TEAM_SM_PERCENT[team] / 100)
    # one bucket (the window is under an hour): its utilization is the p95 and the one hour-of-week slot
    assert utilization["p95_percent"] == pytest.approx(utilization["average_percent"])
    slots = [value for value in utilization["by_hour_of_week"] if value is not None]
    assert slots == [pytest.approx(utilization["average_percent"])]


def test_cluster_capacity_allocation_and_utilization(whole_stack: StoryRun) -> None:
    cluster = whole_stack.report["cluster"]
    capacity = whole_stack.capacity_gpus * whole_stack.length_s / 3600  # 24 GPUs up for the whole window
    allocated, used = _allocated(whole_stack.holdings), _used(whole_stack.holdings)
    assert cluster["capacity_gpu_hours"] == pytest.approx(capacity)
    assert _within(cluster["allocated_gpu_hours"], allocated), (cluster, allocated)
    assert _within(cluster["used_gpu_hours"], used), (cluster, used)
    assert _within(cluster["utilization_average_percent"], 100 * used.value / capacity, 100 * used.tolerance / capacity)
    assert _within(
        cluster["allocation_percent"], 100 * allocated.value / capacity, 100 * allocated.tolerance / capacity
    )


def test_the_embedding_job_is_the_idle_holder_and_its_hours_are_priced(whole_stack: StoryRun) -> None:
    embedding = _holdings(whole_stack, "inference")[0]
    idle = _allocated(_holdings(whole_stack, "inference"))  # every inference GPU was held at 2 % < 5 %
    inference = _team(whole_stack, "inference")
    (holder,) = inference["idle_holders"]
    assert (holder["namespace"], holder["pod"]) == ("inference", embedding.pod)
    assert _within(holder["idle_gpu_hours"], idle), (holder, idle)
    hour_class = _hour_class(whole_stack)
    assert _within(inference["idle_cost"]["gpu_hours"][hour_class], idle)
    assert _within(inference["idle_cost"]["dollars"][hour_class], idle.value * PRICE, idle.tolerance * PRICE)
    for other in ("research", "applied-ml"):  # busy at 90 % and 75 %
        assert _team(whole_stack, other)["idle_holders"] == []
        assert sum(_team(whole_stack, other)["idle_cost"]["gpu_hours"].values()) == 0
    # the cluster's idle hours: GPUs nobody held, plus those held idle
    capacity = whole_stack.capacity_gpus * whole_stack.length_s / 3600
    allocated = _allocated(whole_stack.holdings)
    unheld = capacity - allocated.value + idle.value
    cluster_idle = whole_stack.report["cluster"]["idle_cost"]["gpu_hours"]
    assert _within(cluster_idle[hour_class], unheld, allocated.tolerance + idle.tolerance), (cluster_idle, unheld)
    assert sum(value for name, value in cluster_idle.items() if name != hour_class) == 0


@pytest.mark.parametrize("team", TEAMS)
def test_admission_waits_are_the_workloads_conditions(whole_stack: StoryRun, team: str) -> None:
    queueing = _team(whole_stack, team)["queueing"]
    admissions = _admissions(whole_stack, team)
    expected = {"research": 12 + 4, "applied-ml": 1, "inference": 1}[team]  # 4 trials were admitted twice
    assert len(admissions) == expected, admissions
    assert expected <= queueing["admissions"] <= expected * _extrapolation(whole_stack)
    # Each wait is known to within a second (Admission.wait_bounds), and increase() counts each admission from
    # once (a series' first sample) to _extrapolation() times: a quantile lies between those of the highest and
    # the lowest cumulative fractions these allow, bucket by bucket.
    extrapolation = _extrapolation(whole_stack)
    most = _fractions([a.wait_bounds[0] for a in admissions], extrapolation, 1.0)
    least = _fractions([a.wait_bounds[1] for a in admissions], 1.0, extrapolation)
    for q, figure in ((0.5, "wait_p50_s"), (0.95, "wait_p95_s")):
        low, high = _quantile(q, most), _quantile(q, least)
        assert low - 1e-9 <= queueing[figure] <= high + 1e-9, (figure, queueing[figure], low, high, admissions)


@pytest.mark.parametrize("team", TEAMS)
def test_the_wait_trend_of_a_window_shorter_than_a_day_is_the_windows_waits(whole_stack: StoryRun, team: str) -> None:
    """One trend point spans the whole window here: it reads the same histogram over the same range, so it must
    count every admission the window's figures count, a queue's first admissions included."""
    report = _team(whole_stack, team)
    daily, queueing = report["daily"], report["queueing"]
    assert (daily["wait_p50_s"][-1], daily["wait_p95_s"][-1]) == pytest.approx(
        (queueing["wait_p50_s"], queueing["wait_p95_s"])
    ), (daily, queueing)


@pytest.mark.parametrize("team", TEAMS)
def test_quota_borrowing_and_waiting_are_the_queue_states_listed(whole_stack: StoryRun, team: str) -> None:
    queueing = _team(whole_stack, team)["queueing"]
    run = whole_stack
    assert queueing["nominal_gpus_average"] == pytest.approx(NOMINAL_GPUS)
    assert queueing["cohort"] == "gpu-pool"
    borrowed = _queue_integral(run, lambda s: max(0, s.usage[team] - NOMINAL_GPUS))
    assert _within(queueing["borrowed_gpu_hours"], borrowed), (queueing, borrowed)
    waiting = _with_unseen_waits(_queue_integral(run, lambda s: s.pending[team] > 0), run, team)
    assert _within(queueing["waiting_hours"], waiting), (queueing, waiting)

    def idle_elsewhere(s: QueueState) -> bool:
        idle = CLUSTER_NOMINAL - sum(s.usage.values())  # quota nobody uses: lent GPUs are the borrower's usage
        return s.pending[team] > 0 and idle - max(0, NOMINAL_GPUS - s.usage[team]) >= IDLE_ELSEWHERE_GPUS

    waiting_idle = _with_unseen_waits(_queue_integral(run, idle_elsewhere), run, team)
    assert _within(queueing["waiting_while_idle_elsewhere_hours"], waiting_idle), (queueing, waiting_idle)
    pending = _queue_integral(run, lambda s: s.pending[team])
    length_h = run.length_s / 3600
    assert _within(queueing["pending_average"], pending.value / length_h, pending.tolerance / length_h)
    # The report's maximum is over scraped steps: a count that lasted less than a scrape interval plus a step
    # may not be seen; one that lasted longer must be. Runs of listings with one count give how long it lasted.
    listed = [(sent, state.pending[team]) for sent, _, state in run.timeline.states if run.start < sent <= run.end]
    seen = max(count for _, count in listed)
    runs: list[tuple[float, float, int]] = []  # (first listed, next change listed, count)
    for sent, count in listed:
        if runs and runs[-1][2] == count:
            continue
        if runs:
            runs[-1] = (runs[-1][0], sent, runs[-1][2])
        runs.append((sent, run.end, count))
    lasting = max((count for first, changed, count in runs if changed - first >= SCRAPE_S + RESOLUTION_S), default=0)
    assert lasting <= queueing["pending_max"] <= seen, (queueing["pending_max"], lasting, seen)


def test_research_borrowed_12_gpus_and_waited_while_none_sat_idle(whole_stack: StoryRun) -> None:
    """The story's own numbers, beside the integrals above: research ran on 20 GPUs and 6 of its trials waited at
    once; it had to wait although every spare GPU was already its own borrowing, never idle elsewhere."""
    research = _team(whole_stack, "research")["queueing"]
    in_window = [s for sent, _, s in whole_stack.timeline.states if whole_stack.start < sent <= whole_stack.end]
    assert max(s.usage["research"] for s in in_window) == 20
    assert research["pending_max"] == 2 + 4
    assert research["borrowed_gpu_hours"] > 0
    assert research["waiting_hours"] > 0
    assert research["waiting_while_idle_elsewhere_hours"] < research["waiting_hours"] / 4


def test_the_finetune_reclaimed_by_preempting_the_four_trials_admitted_last(whole_stack: StoryRun) -> None:
    evictions = [e for e in whole_stack.timeline.evictions.values() if whole_stack.start < e.at <= whole_stack.end]
    assert sorted((e.cluster_queue, e.job, e.reason) for e in evictions) == [
        ("research", trial, "Preempted") for trial in story.PREEMPTED
    ]
    applied = _team(whole_stack, "applied-ml")["queueing"]
    research = _team(whole_stack, "research")["queueing"]
    extrapolated = _extrapolation(whole_stack)
    assert 4 <= applied["preemptions"] <= 4 * extrapolated
    assert set(research["evictions"]) == {"Preempted"}
    assert 4 <= research["evictions"]["Preempted"] <= 4 * extrapolated
    assert research["preemptions"] == 0 and _team(whole_stack, "inference")["queueing"]["preemptions"] == 0


def test_cluster_waiting_shares_and_unused_quota(whole_stack: StoryRun) -> None:
    cluster = whole_stack.report["cluster"]
    length_h = whole_stack.length_s / 3600
    waiting = _queue_integral(whole_stack, lambda s: any(s.pending.values()))
    assert _within(cluster["waiting_share"], waiting.value / length_h, waiting.tolerance / length_h)
    unused = _queue_integral(whole_stack, lambda s: sum(max(0, NOMINAL_GPUS - u) for u in s.usage.values()))
    assert _within(cluster["unused_quota_gpus_average"], unused.value / length_h, unused.tolerance / length_h)


def test_verdicts_are_the_storys(whole_stack: StoryRun) -> None:
    """research waits on a cluster it already fills (buy); applied-ml gets its quota back at once and uses it
    (healthy); inference holds GPUs it barely uses and never waits (over-provisioned); the cluster is busy and
    its worst queue long (buy)."""
    verdicts = {team: _team(whole_stack, team)["verdict"]["quadrant"] for team in TEAMS}
    assert verdicts == {"research": "buy", "applied-ml": "healthy", "inference": "over-provisioned"}
    for team in TEAMS:  # the figures behind them sit on the story's side of each threshold
        queueing, utilization = _team(whole_stack, team)["queueing"], _team(whole_stack, team)["utilization"]
        assert (queueing["wait_p95_s"] > LONG_WAIT_S) == (team == "research")
        assert (utilization["average_percent"] < LOW_UTILIZATION) == (team == "inference")
    cluster = whole_stack.report["cluster"]
    assert cluster["utilization_average_percent"] >= LOW_UTILIZATION
    assert cluster["verdict"]["quadrant"] == "buy"


def test_dcgm_exporter_beside_kuotas_exporter_is_not_counted_twice(whole_stack: StoryRun) -> None:
    """Both exporters' DCGM_FI_DEV_GPU_UTIL are in Prometheus for every GPU (the double-count trap for a sum over
    that name); the report reads kuota's per-pod series only, so GPU-hours match the fake NVML exactly once."""
    assert whole_stack.dcgm_jobs == {"kuota-exporter", "dcgm-exporter"}
    assert len(whole_stack.dcgm_series_per_gpu) == whole_stack.capacity_gpus
    assert min(whole_stack.dcgm_series_per_gpu.values()) >= 2
    cluster = whole_stack.report["cluster"]
    assert _within(cluster["allocated_gpu_hours"], _allocated(whole_stack.holdings))
    assert _within(cluster["used_gpu_hours"], _used(whole_stack.holdings))
    assert cluster["allocated_gpu_hours"] <= cluster["capacity_gpu_hours"]


def test_kueues_own_grafana_queries_return_data_from_kuota(whole_stack: StoryRun) -> None:
    """Every query of Kueue's "Common Grafana Queries" page (kueue_queries.py) against the Prometheus that scraped
    the manager through the story: each returns at least one series."""
    assert sorted(name for name, series in whole_stack.kueue_panels.items() if series == 0) == []
    assert whole_stack.kueue_panels["evictions per hour by reason"] >= 1, "research's trials were preempted"
