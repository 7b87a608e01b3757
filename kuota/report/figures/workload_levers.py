"""The levers measured on the retained Workloads: spot for the work proven interruptible, and the GPU-hours of
failed and cancelled work (pure; the Workloads are read by ``sources/workload_history.py``).

Spot counts only what the window proved: a Workload preempted at least once that still finished successfully
survived an interruption, so spot capacity would have served it. A low-priority Workload never preempted may
be interruptible too, but nothing shows it: it is listed as a candidate, never counted in dollars. Saving is
GPU-hours x (on-demand price - spot price), the spot price being the one the user names
(``--price FLAVOR-spot=PRICE``), never a remembered discount.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from kuota.report.figures.levers import Effort, Lever, LeverItem, per_month
from kuota.report.figures.prices import SPOT_SUFFIX

SPOT = "spot for interruptible work"
FAILED_WORK = "failed and cancelled work"
# Kueue's priority of a Workload without a priority class.
DEFAULT_PRIORITY = 0


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed or cancelled"
    SERVING = "serving"  # a Deployment's pod or a StatefulSet: it never finishes, however it ended
    UNFINISHED = "unfinished"  # running, or waiting again, at the window's end


@dataclass(frozen=True, slots=True)
class WorkloadRun:
    """One Workload of the window, as the levers read it."""

    namespace: str
    name: str
    gpu_hours: float  # held inside the window: its last admission's, and earlier ones' where recorded
    flavor: str | None  # the ResourceFlavor of its GPUs in its admission, where known
    priority: int | None
    preemptions: int  # evictions by preemption it went through
    outcome: Outcome
    reason: str | None  # why it ended (the Finished or deactivating Evicted condition's reason)


@dataclass(frozen=True)
class RunPrice:
    """A Workload's on-demand price per GPU-hour, its spot price where one is named, and the key to name it by."""

    on_demand: float
    spot: float | None
    spot_key: str  # the flavor (else GPU model, else FLAVOR) a ``--price KEY-spot=`` would price


def _low_priority(team_runs: Sequence[WorkloadRun]) -> list[WorkloadRun]:
    """A team's Workloads below priority 0, or at its lowest priority where its Workloads have several."""
    priorities = [_priority(run) for run in team_runs]
    lowest = min(priorities, default=DEFAULT_PRIORITY)
    several = lowest < max(priorities, default=DEFAULT_PRIORITY)
    return [run for run in team_runs if _priority(run) < DEFAULT_PRIORITY or (several and _priority(run) == lowest)]


def _priority(run: WorkloadRun) -> int:
    return DEFAULT_PRIORITY if run.priority is None else run.priority


def _movable(run: WorkloadRun) -> bool:
    """Held GPUs in the window, and not on a spot flavor already."""
    return run.gpu_hours > 0 and not (run.flavor is not None and run.flavor.endswith(SPOT_SUFFIX))


def spot_lever(
    team_runs: Sequence[WorkloadRun], prices: Mapping[tuple[str, str], RunPrice], window_hours: float
) -> Lever | None:
    """A team's Workloads proven interruptible, priced at their spot prices; candidates listed, not counted.
    Workloads already on a spot flavor (its name ends in ``-spot``) have nothing left to save."""
    proven = [r for r in team_runs if _movable(r) and r.preemptions > 0 and r.outcome is Outcome.SUCCEEDED]
    candidates = [r for r in _low_priority(team_runs) if _movable(r) and r.preemptions == 0]
    if not proven and not candidates:
        return None
    items = []
    unpriced: list[str] = []
    saved = 0.0
    for run in sorted(proven, key=lambda r: (-r.gpu_hours, r.namespace, r.name)):
        price = prices[(run.namespace, run.name)]
        dollars = None
        if price.spot is None:
            unpriced += [price.spot_key] * (price.spot_key not in unpriced)
        else:
            dollars = run.gpu_hours * max(0.0, price.on_demand - price.spot)
            saved += dollars
        items.append(
            LeverItem(
                run.namespace,
                run.name,
                run.gpu_hours,
                dollars,
                f"preempted {run.preemptions}x and finished" + (f"; flavor {run.flavor}" if run.flavor else ""),
            )
        )
    items += [
        LeverItem(
            run.namespace,
            run.name,
            run.gpu_hours,
            None,
            f"candidate, not counted: priority {_priority(run)}, never preempted",
        )
        for run in sorted(candidates, key=lambda r: (-r.gpu_hours, r.namespace, r.name))
    ]
    gpu_hours = sum(r.gpu_hours for r in proven) if proven else None
    dollars = saved if proven and not unpriced else None
    evidence = (
        f"{len(proven)} Workload(s) preempted and finished anyway: {gpu_hours:.1f} GPU-hours of work that "
        "survives interruption"
        if gpu_hours is not None
        else "no Workload was preempted and finished anyway"
    )
    if candidates:
        evidence += f"; {len(candidates)} low-priority Workload(s) never preempted are candidates, not counted"
    missing = None
    if unpriced:
        missing = "a spot price: " + ", ".join(f"--price {key}{SPOT_SUFFIX}=PRICE" for key in unpriced[:3])
    return Lever(
        SPOT,
        gpu_hours,
        evidence,
        dollars=dollars,
        dollars_per_month=per_month(dollars, window_hours),
        effort=Effort.FLAVOR,
        items=tuple(items),
        missing=missing,
    )


def failed_work_lever(
    runs: Sequence[WorkloadRun], prices: Mapping[tuple[str, str], RunPrice], window_hours: float
) -> Lever | None:
    """The GPU-hours of the team's Workloads that failed or were cancelled, at their on-demand prices."""
    failed = sorted(
        (r for r in runs if r.outcome is Outcome.FAILED and r.gpu_hours > 0),
        key=lambda r: (-r.gpu_hours, r.namespace, r.name),
    )
    if not failed:
        return None
    items = tuple(
        LeverItem(
            run.namespace,
            run.name,
            run.gpu_hours,
            run.gpu_hours * prices[(run.namespace, run.name)].on_demand,
            run.reason or "failed",
        )
        for run in failed
    )
    gpu_hours = sum(item.gpu_hours for item in items)
    dollars = sum(item.dollars or 0.0 for item in items)
    return Lever(
        FAILED_WORK,
        gpu_hours,
        f"{len(items)} Workload(s) failed or were cancelled after holding {gpu_hours:.1f} GPU-hours: fixing the "
        "cause (or failing fast) frees them",
        dollars=dollars,
        dollars_per_month=per_month(dollars, window_hours),
        effort=Effort.SETTING,
        items=items,
    )
