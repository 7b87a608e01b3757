"""The what-if: the window's demand replayed through ``kuota simulate`` under the current queues, with
borrowing across one cohort, and with N more GPUs, so that "tune" or "buy" rests on a number.

The config rewrites are pure functions of the decoded YAML objects; each replay is one call of the simulator's
public function, :func:`kuota.simulator.simulation.simulate`, in this process, and the report reads only the
output document that ``docs/simulate.md`` promises, not the engine's internals.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuota.engine import QuantityError, parse_amount, parse_quantity
from kuota.report.errors import WhatIfError
from kuota.report.figures.calibration import ReplayedQueue, ReplayedWeek
from kuota.report.figures.quantiles import percentile
from kuota.report.figures.schema import WhatIfScenario
from kuota.report.sources.workload_history import StartedBefore
from kuota.simulator.errors import SimulateError
from kuota.simulator.simulation import simulate

GPU = "nvidia.com/gpu"
WHATIF_COHORT = "kuota-whatif-all"

Objects = list[dict[str, Any]]


def _cluster_queues(objects: Objects) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj.get("kind") == "ClusterQueue"]


def _gpu_quota_entries(cluster_queue: Mapping[str, Any]) -> list[dict[str, Any]]:
    entries = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            entries += [r for r in flavor.get("resources") or [] if r.get("name") == GPU]
    return entries


def _gpus(quantity: object, where: str) -> int:
    try:
        amount = parse_amount(quantity if isinstance(quantity, int) else str(quantity))
    except QuantityError as error:
        raise WhatIfError(f"{where}: nominalQuota of {GPU}: {error}") from error
    if amount.denominator != 1:
        raise WhatIfError(f"{where}: nominalQuota {quantity!r} of {GPU} is not a whole number of GPUs")
    return int(amount)


def nominal_gpus(objects: Objects) -> dict[str, int]:
    """ClusterQueue -> its nominal GPU quota summed over flavors."""
    return {
        cq["metadata"]["name"]: sum(
            _gpus(entry.get("nominalQuota", 0), f"ClusterQueue {cq['metadata']['name']}")
            for entry in _gpu_quota_entries(cq)
        )
        for cq in _cluster_queues(objects)
    }


def with_borrowing(objects: Objects) -> Objects:
    """Every ClusterQueue in a cohort (its own, or one shared new one), borrowing not forbidden, and owners
    allowed to reclaim lent quota (reclaimWithinCohort: Any), so lending costs the lender nothing."""
    result = copy.deepcopy(objects)
    for cq in _cluster_queues(result):
        spec = cq.setdefault("spec", {})
        spec.setdefault("cohortName", WHATIF_COHORT)
        preemption = spec.setdefault("preemption", {})
        if preemption.get("reclaimWithinCohort", "Never") == "Never":
            preemption["reclaimWithinCohort"] = "Any"
        for entry in _gpu_quota_entries(cq):
            if str(entry.get("borrowingLimit", "")) == "0":
                del entry["borrowingLimit"]
    return result


def with_more_gpus(objects: Objects, extra: int) -> Objects:
    """``extra`` GPUs of nominal quota, shared in proportion to today's quotas (largest remainder first)."""
    result = copy.deepcopy(objects)
    queues = [cq for cq in _cluster_queues(result) if _gpu_quota_entries(cq)]
    if not queues or extra <= 0:
        return result
    current = nominal_gpus(result)
    total = sum(current[cq["metadata"]["name"]] for cq in queues) or len(queues)
    shares = [(extra * (current[cq["metadata"]["name"]] or 1) / total, cq) for cq in queues]
    grants = [math.floor(share) for share, _ in shares]
    by_remainder = sorted(range(len(shares)), key=lambda i: -(shares[i][0] - grants[i]))
    for i in by_remainder[: extra - sum(grants)]:
        grants[i] += 1
    for grant, (_, cq) in zip(grants, shares, strict=True):
        entry = _gpu_quota_entries(cq)[0]
        entry["nominalQuota"] = _gpus(entry.get("nominalQuota", 0), cq["metadata"]["name"]) + grant
    return result


@dataclass(frozen=True)
class Submission:
    """What the report needs of one record of the replayed history."""

    waited_from: float | None  # when its wait began (s; before 0 if pending at the start); None: running at 0
    gpus: int  # all its pods' GPUs


@dataclass(frozen=True)
class Replay:
    waits_s: list[float]
    per_queue_waits_s: dict[str, list[float]]
    admitted_gpu_hours: float
    horizon_s: float
    per_queue_window_gpu_hours: dict[str, float]  # admitted inside the window, [0, window_s]


def _admitted_spans(workload: Mapping[str, Any], horizon: float) -> list[tuple[float, float]]:
    """(from, to) of each admission: each ends at the eviction that follows it, the last one at its finish."""
    starts = [admission["at"] for admission in workload.get("admissions") or []]
    ends = [eviction["at"] for eviction in workload.get("evictions") or []]
    last = workload.get("finishedAt")
    ends += [last if last is not None else horizon] * (len(starts) - len(ends))
    return list(zip(starts, ends, strict=False))


def summarize(output: Mapping[str, Any], submissions: Mapping[tuple[str, str], Submission], window_s: float) -> Replay:
    """Waits (first admission minus when the wait began) and admitted GPU-hours from simulate's --output JSON; a
    workload running from time 0 adds no wait (it waited before the window, as Prometheus measured it)."""
    waits: list[float] = []
    per_queue: dict[str, list[float]] = {name: [] for name in output.get("clusterQueues", {})}
    window_hours: dict[str, float] = {}
    horizon = max((w.get("finishedAt") or 0.0 for w in output.get("workloads", [])), default=0.0)
    for workload in output.get("workloads", []):
        submission = submissions.get((workload["namespace"], workload["name"]))
        queue = workload.get("clusterQueue") or ""
        if submission is None:
            continue
        if workload.get("admissions") and submission.waited_from is not None:
            wait = workload["admissions"][0]["at"] - submission.waited_from
            waits.append(wait)
            per_queue.setdefault(queue, []).append(wait)
        held = sum(max(0.0, min(end, window_s) - start) for start, end in _admitted_spans(workload, horizon))
        if held > 0:
            window_hours[queue] = window_hours.get(queue, 0.0) + submission.gpus * held / 3600
    queues = output.get("clusterQueues", {})
    return Replay(
        waits_s=waits,
        per_queue_waits_s=per_queue,
        admitted_gpu_hours=sum(q.get("gpuHoursAdmitted", 0.0) for q in queues.values()),
        horizon_s=horizon,
        per_queue_window_gpu_hours=window_hours,
    )


def _record_gpus(record: Mapping[str, Any]) -> int:
    return sum(
        int(pod_set.get("count", 1)) * parse_quantity(GPU, (pod_set.get("requests") or {}).get(GPU, 0))
        for pod_set in record["podSets"]
    )


def read_submissions(history: Path, started_before: StartedBefore) -> dict[tuple[str, str], Submission]:
    """Each record's submission; ``started_before`` says which began before the window (the report's own
    history; a --history file has none)."""
    submitted: dict[tuple[str, str], Submission] = {}
    try:
        with history.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        record = json.loads(line)
                        key = (record["namespace"], record["name"])
                        at = float(record["submitAt"])
                        if not math.isfinite(at):
                            raise ValueError(f"submitAt {at} is not a finite number")
                        waited_from = (
                            None if key in started_before.holding else started_before.pending_since.get(key, at)
                        )
                        submitted[key] = Submission(waited_from, _record_gpus(record))
                    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, QuantityError) as error:
                        raise WhatIfError(
                            f"--history {history} line {number}: not a simulate workload ({error}); "
                            "each line needs name, namespace, submitAt and podSets"
                        ) from error
    except OSError as error:
        raise WhatIfError(f"--history {history} cannot be read: {error}") from error
    return submitted


async def check_replayable(config: Objects, history: Path) -> None:
    """Fail now, before Prometheus is asked, if the queues or the history cannot be replayed: simulate reads
    both whole and replays up to the window's first instant, which takes a moment."""
    if not _cluster_queues(config):
        raise WhatIfError("--config has no ClusterQueue: the what-if needs the queues to replay against")
    await _simulate(config, history, "reading the queues and the history", until=0.0)
    read_submissions(history, StartedBefore())


async def _simulate(config: Objects, history: Path, name: str, until: float | None = None) -> dict[str, Any]:
    try:
        # In a thread: a week's replay takes seconds of CPU, and the event loop stays free meanwhile.
        return await asyncio.to_thread(simulate, config, history, until)
    except SimulateError as error:
        raise WhatIfError(f"kuota simulate ({name}): {error}") from error


def _scenario(name: str, description: str, replay: Replay, capacity_gpus: int) -> WhatIfScenario:
    capacity_hours = capacity_gpus * replay.horizon_s / 3600
    return WhatIfScenario(
        name=name,
        description=description,
        wait_p95_s=percentile(replay.waits_s, 0.95),
        utilization_percent=100 * replay.admitted_gpu_hours / capacity_hours if capacity_hours > 0 else None,
        per_queue_wait_p95_s={queue: percentile(waits, 0.95) for queue, waits in replay.per_queue_waits_s.items()},
    )


def _replayed_week(replay: Replay, nominal: Mapping[str, int], window_s: float) -> ReplayedWeek:
    """The current queues' replay inside the window, for the calibration against the measured week."""
    hours = window_s / 3600
    queues = {
        queue: ReplayedQueue(
            waits_s=tuple(replay.per_queue_waits_s.get(queue, [])),
            admitted_gpu_hours=replay.per_queue_window_gpu_hours.get(queue, 0.0),
            nominal_gpu_hours=gpus * hours,
        )
        for queue, gpus in sorted(nominal.items())
    }
    cluster = ReplayedQueue(
        waits_s=tuple(replay.waits_s),
        admitted_gpu_hours=sum(replay.per_queue_window_gpu_hours.values()),
        nominal_gpu_hours=sum(nominal.values()) * hours,
    )
    return ReplayedWeek(queues, cluster)


@dataclass(frozen=True)
class WhatIf:
    scenarios: list[WhatIfScenario]
    current_week: ReplayedWeek  # the current queues' replay, to calibrate against the measured week


async def run_whatif(
    config: Objects,
    history: Path,
    more_gpus: int,
    window_s: float,
    started_before: StartedBefore | None = None,
) -> WhatIf:
    """The three replays, concurrently; utilization here is admitted GPU-hours over nominal quota.
    ``started_before``: the history's Workloads created before the window (:func:`job_history`'s)."""
    if not _cluster_queues(config):
        raise WhatIfError("--config has no ClusterQueue: the what-if needs the queues to replay against")
    submitted = read_submissions(history, started_before or StartedBefore())
    nominal = nominal_gpus(config)
    capacity = sum(nominal.values())
    variants: Sequence[tuple[str, str, Objects, int]] = (
        ("current", "today's queues and quotas", config, capacity),
        (
            "borrowing",
            "every ClusterQueue in a cohort, borrowing allowed, reclaimWithinCohort Any",
            with_borrowing(config),
            capacity,
        ),
        (
            f"+{more_gpus} GPUs",
            f"{more_gpus} more GPUs of nominal quota, shared in proportion to today's",
            with_more_gpus(config, more_gpus),
            capacity + more_gpus,
        ),
    )
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(_simulate(objects, history, name)) for name, _, objects, _ in variants]
    replays = [summarize(task.result(), submitted, window_s) for task in tasks]
    return WhatIf(
        scenarios=[
            _scenario(name, description, replay, gpus)
            for (name, description, _, gpus), replay in zip(variants, replays, strict=True)
        ],
        current_week=_replayed_week(replays[0], nominal, window_s),
    )
