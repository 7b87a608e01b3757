"""The levers cheaper than buying GPUs, each priced in dollars per month, with the pods or Workloads behind it.

A lever is what a team (or the cluster) could do instead of buying capacity, as the guide ranks them: stop
idle holders, right-size to a smaller GPU, MIG for inference, spot flavors, borrowing and reclaiming within a
cohort, commitments sized to the measured floor. Each carries its GPU-hours and dollars over the window, the
dollars scaled to a month (:data:`HOURS_PER_MONTH`), the effort it takes (:class:`Effort`), the items it comes
from, and, where an input it needs is missing, what is missing: a lever is never priced at 0 for lack of data.

Levers are ranked by dollars per month; those without dollars follow by GPU-hours, then those with neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TypeVar

from kuota.report.figures.verdicts import Thresholds

K = TypeVar("K")

# The month cloud bills use (365 days x 24 h / 12).
HOURS_PER_MONTH = 730.0
# A cluster lever lists at most this many items (its teams' largest); each team's report lists all of its own.
CLUSTER_ITEMS = 20


class Effort(StrEnum):
    """What pulling a lever takes, cheapest first, as the guide ranks them."""

    SETTING = "a setting"  # a queue or manager setting, an auto-stop policy: hours of work
    FLAVOR = "a new flavor"  # a flavor, node pool or GPU model to add and move work to: days to weeks
    CONTRACT = "a contract"  # a reservation or savings plan: a budget decision


@dataclass(frozen=True)
class LeverItem:
    """One pod or Workload a lever's figure comes from."""

    namespace: str
    name: str
    gpu_hours: float  # the GPU-hours of this item the lever recovers or moves
    dollars: float | None  # what they cost or save over the window; None when not priced
    detail: str  # why this item counts, in a few words
    target: str | None = None  # where it would move: a smaller GPU model, a MIG profile
    # stop idle holders: its idle GPU-hours and their dollars per hour class (workday, night, weekend)
    idle_gpu_hours_by_class: Mapping[str, float] | None = None
    idle_dollars_by_class: Mapping[str, float] | None = None


@dataclass(frozen=True)
class Lever:
    name: str
    gpu_hours: float | None  # GPU-hours over the window the lever recovers or serves; None when not quantified
    evidence: str
    dollars: float | None = None  # saved over the window; None when not priced (``missing`` says why)
    dollars_per_month: float | None = None  # ``dollars`` scaled to a month of the window's pace
    effort: Effort = Effort.SETTING
    items: tuple[LeverItem, ...] = ()  # largest first
    missing: str | None = None  # the input the lever lacks to be priced or computed
    # what the window would have cost with the lever pulled and without it, where the lever compares the two
    committed_dollars: float | None = None
    on_demand_dollars: float | None = None
    # stop idle holders: dollars per month an auto-stop after N idle hours would save, for N in 1, 2, 4
    auto_stop: Mapping[int, float] | None = None
    # right-sizing: a target GPU model the cluster has none of -> dollars per month to add the GPUs it needs
    adding_models: Mapping[str, float] | None = None


def per_month(dollars: float | None, window_hours: float) -> float | None:
    """Window dollars at the same pace for a month."""
    if dollars is None or window_hours <= 0:
        return None
    return dollars * HOURS_PER_MONTH / window_hours


def priced(lever: Lever, price_per_gpu_hour: float | None, window_hours: float) -> Lever:
    """A lever measured in GPU-hours alone, priced at its team's average price per GPU-hour; one that lacks an
    input of its own price (a spot price) stays unpriced: the full price would overstate it."""
    if lever.dollars is not None or lever.gpu_hours is None or lever.missing is not None or price_per_gpu_hour is None:
        return lever
    dollars = lever.gpu_hours * price_per_gpu_hour
    return replace(lever, dollars=dollars, dollars_per_month=per_month(dollars, window_hours))


def ranked(levers: Iterable[Lever]) -> list[Lever]:
    """By dollars per month, then the unpriced by GPU-hours, then the rest; names break ties."""

    def key(lever: Lever) -> tuple[int, float, str]:
        if lever.dollars_per_month is not None:
            return (0, -lever.dollars_per_month, lever.name)
        if lever.gpu_hours is not None:
            return (1, -lever.gpu_hours, lever.name)
        return (2, 0.0, lever.name)

    return sorted(levers, key=key)


@dataclass(frozen=True)
class QueueLeverInputs:
    """A team's queueing figures the cohort levers read."""

    long_queue: bool
    waiting_while_idle_hours: float | None
    reclaimable_gpu_hours: float | None  # waited under own nominal quota while others borrowed
    cohort: str | None
    preemptions: float | None


def queue_levers(inputs: QueueLeverInputs, thresholds: Thresholds) -> list[Lever]:
    """Borrowing and reclaiming within a cohort, for a team whose queue is long (GPU-hours; priced later); spot
    is measured from the Workloads (:mod:`~kuota.report.figures.workload_levers`)."""
    if not inputs.long_queue:
        return []
    levers: list[Lever] = []
    if inputs.waiting_while_idle_hours:
        cohort = f"cohort {inputs.cohort!r}" if inputs.cohort else "no cohort yet"
        levers.append(
            Lever(
                "borrowing in a cohort",
                inputs.waiting_while_idle_hours * thresholds.idle_elsewhere_gpus,
                f"{inputs.waiting_while_idle_hours:.1f} h waiting while at least {thresholds.idle_elsewhere_gpus} "
                f"GPUs of other teams' quota sat unused ({cohort}); GPU-hours are a lower bound",
            )
        )
    if inputs.reclaimable_gpu_hours:
        done = f"{inputs.preemptions:.0f} preemptions recorded" if inputs.preemptions else "no preemptions recorded"
        levers.append(
            Lever(
                "preemption (reclaimWithinCohort)",
                inputs.reclaimable_gpu_hours,
                f"{inputs.reclaimable_gpu_hours:.1f} GPU-hours of its own unused quota were borrowed by others "
                f"while it waited ({done})",
            )
        )
    return levers


def cluster_levers(team_levers: Sequence[tuple[str, Sequence[Lever]]], extra: Iterable[Lever] = ()) -> list[Lever]:
    """Each lever summed over the teams that have it (items: the largest of all), with the cluster's own."""
    merged: dict[str, Lever] = {}
    teams: dict[str, list[str]] = {}
    for team, levers in team_levers:
        for lever in levers:
            teams.setdefault(lever.name, []).append(team)
            seen = merged.get(lever.name)
            merged[lever.name] = lever if seen is None else _summed(seen, lever)
    result = []
    for name, lever in merged.items():
        names = teams[name]
        listed = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
        items = sorted(lever.items, key=lambda item: -(item.dollars or 0.0) - item.gpu_hours * 1e-9)
        result.append(
            replace(lever, evidence=f"indicated for {len(names)} team(s): {listed}", items=tuple(items[:CLUSTER_ITEMS]))
        )
    return ranked([*result, *extra])


def _summed(first: Lever, second: Lever) -> Lever:
    def add(a: float | None, b: float | None) -> float | None:
        return None if a is None and b is None else (a or 0.0) + (b or 0.0)

    def merged(a: Mapping[K, float] | None, b: Mapping[K, float] | None) -> dict[K, float] | None:
        if a is None and b is None:
            return None
        keys = {**(a or {}), **(b or {})}
        return {key: (a or {}).get(key, 0.0) + (b or {}).get(key, 0.0) for key in keys}

    return replace(
        first,
        auto_stop=merged(first.auto_stop, second.auto_stop),
        adding_models=merged(first.adding_models, second.adding_models),
        gpu_hours=add(first.gpu_hours, second.gpu_hours),
        dollars=add(first.dollars, second.dollars),
        dollars_per_month=add(first.dollars_per_month, second.dollars_per_month),
        items=first.items + second.items,
        missing=first.missing or second.missing,
    )
