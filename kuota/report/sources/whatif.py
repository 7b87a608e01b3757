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

from kuota.engine import QuantityError, parse_amount
from kuota.report.errors import WhatIfError
from kuota.report.figures.quantiles import percentile
from kuota.report.figures.schema import WhatIfScenario
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
class Replay:
    waits_s: list[float]
    per_queue_p95_s: dict[str, float | None]
    admitted_gpu_hours: float
    horizon_s: float


def summarize(output: Mapping[str, Any], submitted_at: Mapping[tuple[str, str], float]) -> Replay:
    """Waits (first admission minus submission) and admitted GPU-hours from simulate's --output JSON."""
    waits = []
    horizon = 0.0
    for workload in output.get("workloads", []):
        key = (workload["namespace"], workload["name"])
        if workload.get("admissions") and key in submitted_at:
            waits.append(workload["admissions"][0]["at"] - submitted_at[key])
        horizon = max(horizon, workload.get("finishedAt") or 0.0)
    queues = output.get("clusterQueues", {})
    return Replay(
        waits_s=waits,
        per_queue_p95_s={name: (q.get("admissionWaitSeconds") or {}).get("p95") for name, q in queues.items()},
        admitted_gpu_hours=sum(q.get("gpuHoursAdmitted", 0.0) for q in queues.values()),
        horizon_s=horizon,
    )


def read_submissions(history: Path) -> dict[tuple[str, str], float]:
    submitted: dict[tuple[str, str], float] = {}
    try:
        with history.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        record = json.loads(line)
                        at = float(record["submitAt"])
                        if not math.isfinite(at):
                            raise ValueError(f"submitAt {at} is not a finite number")
                        submitted[(record["namespace"], record["name"])] = at
                    except (ValueError, KeyError, TypeError, RecursionError) as error:
                        raise WhatIfError(
                            f"--history {history} line {number}: not a simulate workload ({error}); "
                            "each line needs name, namespace and submitAt"
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
    read_submissions(history)


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
        per_queue_wait_p95_s=replay.per_queue_p95_s,
    )


async def run_whatif(config: Objects, history: Path, more_gpus: int) -> list[WhatIfScenario]:
    """The three replays, concurrently; utilization here is admitted GPU-hours over nominal quota."""
    if not _cluster_queues(config):
        raise WhatIfError("--config has no ClusterQueue: the what-if needs the queues to replay against")
    submitted = read_submissions(history)
    capacity = sum(nominal_gpus(config).values())
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
    return [
        _scenario(name, description, summarize(task.result(), submitted), gpus)
        for (name, description, _, gpus), task in zip(variants, tasks, strict=True)
    ]
