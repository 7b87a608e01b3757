"""report.json's shape: the figures of one report, as the figures compute them and every writer reads them.

:mod:`~kuota.report.writers.json_file` writes a :class:`Report` field for field (adding ``schemaVersion``,
``window.hours``, ``missing`` as objects and ``empty``); docs/report.md describes each field. The window, the
thresholds, the prices, the verdicts and the levers in it are their own modules' (``window``, ``verdicts``,
``prices``). Fields are only ever added: one renamed or removed changes ``SCHEMA_VERSION``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kuota.report.figures.calibration import Calibration, Tolerance
from kuota.report.figures.levers import Lever
from kuota.report.figures.prices import Price, PriceTable
from kuota.report.figures.verdicts import Thresholds, Verdict
from kuota.report.figures.window import Window

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Utilization:
    allocated_gpu_hours: float
    used_gpu_hours: float | None
    average_percent: float | None
    p95_percent: float | None  # of the hourly utilization, over hours with GPUs held
    by_hour_of_week: tuple[float | None, ...]  # 168 slots, Monday 00:00 local first


@dataclass(frozen=True)
class Queueing:
    wait_p50_s: float | None
    wait_p95_s: float | None
    admissions: float | None
    wait_buckets: tuple[tuple[float, float], ...]  # (upper bound, observations in that bucket alone)
    pending_average: float | None
    pending_max: float | None
    nominal_gpus_average: float | None
    cohort: str | None
    borrowed_gpu_hours: float | None
    waiting_hours: float | None
    waiting_while_idle_elsewhere_hours: float | None
    preemptions: float | None
    evictions: Mapping[str, float] | None


@dataclass(frozen=True)
class IdleHolder:
    namespace: str
    pod: str
    idle_gpu_hours: float


@dataclass(frozen=True)
class IdleCost:
    gpu_hours: Mapping[str, float]  # hour class -> idle GPU-hours
    dollars: Mapping[str, float]


@dataclass(frozen=True)
class Money:
    """Dollars of the window's GPU-hours, each priced by its ResourceFlavor, else its GPU model, else the default.

    ``allocated_dollars`` is GPU-hours held x price, ``used_dollars`` busy GPU-hours x price, and
    ``idle_dollars`` their difference (held but not busy); ``idle_cost`` elsewhere counts only hours held at
    under the idle threshold."""

    allocated_dollars: float
    used_dollars: float | None
    idle_dollars: float | None
    price_per_gpu_hour: float | None  # allocated dollars over allocated GPU-hours (None when none held)
    priced_by: tuple[str, ...]  # the sources of the prices applied


@dataclass(frozen=True)
class Daily:
    """One value per trend day (``Report.trend_day_ends``), oldest first; None where the day has no data."""

    utilization_percent: tuple[float | None, ...]
    wait_p50_s: tuple[float | None, ...]
    wait_p95_s: tuple[float | None, ...]


@dataclass(frozen=True)
class NamespaceReport:
    name: str
    team: str
    allocated_gpu_hours: float
    used_gpu_hours: float | None
    utilization_percent: float | None
    idle_held_gpu_hours: float | None
    gpu_models: Mapping[str, float]  # model -> allocated GPU-hours ("" where the model is not known)
    money: Money


@dataclass(frozen=True)
class Change:
    """One team's figures in the previous report (``--previous``) and in this one; None where either lacks it."""

    name: str
    utilization_before_percent: float | None
    utilization_now_percent: float | None
    wait_p50_before_s: float | None
    wait_p50_now_s: float | None
    wait_p95_before_s: float | None
    wait_p95_now_s: float | None
    idle_cost_before_dollars: float | None  # idle-held cost, all hour classes
    idle_cost_now_dollars: float | None
    verdict_before: str | None
    verdict_now: str | None


@dataclass(frozen=True)
class WeekOverWeek:
    previous_window: str  # as the previous report described it
    cluster: Change
    teams: tuple[Change, ...]  # this report's teams first, then those only the previous one had


@dataclass(frozen=True)
class TeamReport:
    name: str
    cluster_queue: str | None
    namespaces: tuple[str, ...]
    utilization: Utilization | None
    queueing: Queueing | None
    idle_holders: tuple[IdleHolder, ...]
    idle_cost: IdleCost | None  # GPU-hours held at under the idle threshold, priced
    failed_gpu_hours: float | None
    verdict: Verdict
    levers: tuple[Lever, ...]
    money: Money | None = None
    daily: Daily | None = None
    calibration: Calibration | None = None  # the what-if's replay of the current queues against the measured week
    # GPU-hours held at under the idle threshold in each hour of the week (168 slots, Monday 00:00 local first;
    # summed over the window's weeks); None without utilization series
    idle_held_by_hour_of_week: tuple[float, ...] | None = None
    serving_gpu_hours: float | None = None  # held by serving Workloads (Deployments' pods, StatefulSets)


@dataclass(frozen=True)
class ClusterReport:
    capacity_gpu_hours: float | None
    capacity_source: str | None
    allocated_gpu_hours: float | None
    used_gpu_hours: float | None
    allocation_percent: float | None
    utilization_average_percent: float | None  # busy over capacity
    utilization_p95_percent: float | None
    queueing: Queueing | None
    waiting_share: float | None  # of the window's steps, some ClusterQueue had pending workloads
    waiting_while_idle_elsewhere_share: float | None  # ... and others had idle_elsewhere_gpus unused
    unused_quota_gpus_average: float | None
    idle_cost: IdleCost | None  # unallocated plus idle-held GPU-hours, priced
    failed_gpu_hours: float | None
    verdict: Verdict
    levers: tuple[Lever, ...]
    money: Money | None = None
    daily: Daily | None = None
    calibration: Calibration | None = None  # the what-if's replay of the current queues against the measured week
    # GPU-hours held at under the idle threshold in each hour of the week (168 slots, Monday 00:00 local first;
    # summed over the window's weeks); None without utilization series
    idle_held_by_hour_of_week: tuple[float, ...] | None = None
    serving_gpu_hours: float | None = None  # held by serving Workloads (Deployments' pods, StatefulSets)


@dataclass(frozen=True)
class WhatIfScenario:
    name: str
    description: str
    wait_p95_s: float | None
    utilization_percent: float | None
    per_queue_wait_p95_s: Mapping[str, float | None]


@dataclass(frozen=True)
class Report:
    window: Window
    thresholds: Thresholds
    price: Price
    gpu_source: str | None
    teams: tuple[TeamReport, ...]
    cluster: ClusterReport
    missing: tuple[tuple[str, str], ...]
    whatif: tuple[WhatIfScenario, ...] | None
    notes: tuple[str, ...] = ()
    queries: Mapping[str, str] = field(default_factory=dict)
    prices: PriceTable | None = None
    namespaces: tuple[NamespaceReport, ...] = ()
    trend_day_ends: tuple[int, ...] = ()  # Unix seconds; each trend point covers the day (or window) before it
    week_over_week: WeekOverWeek | None = None
    calibration_tolerance: Tolerance | None = None  # with the what-if

    @property
    def empty(self) -> bool:
        return self.cluster.allocated_gpu_hours in (None, 0.0) and self.cluster.queueing is None
