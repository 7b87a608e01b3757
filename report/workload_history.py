"""Retained Kueue Workloads (``kueue.x-k8s.io/v1beta2``, as decoded dicts) -> the window's job history:
simulate workload records for the what-if and GPU-hours burned by jobs that failed or were cancelled.

Pure: the caller lists the Workloads (the manager keeps finished ones for a configurable time, default 8
days) and passes them in. Only the last admission is visible on a Workload, so runs before a preemption
are not counted; a Workload never admitted has no known duration and is left out (and counted).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from kuota.engine.errors import QuantityError
from kuota.engine.quantities import format_quantity, parse_quantity

GPU = "nvidia.com/gpu"
FAILED_REASONS = frozenset({"Failed", "OwnerNotFound", "Deactivated", "MaximumExecutionTimeExceeded"})


@dataclass(frozen=True)
class JobHistory:
    records: list[dict[str, Any]]  # simulate's JSON Lines records, times relative to the window's start
    failed_gpu_hours: dict[str, float]  # namespace -> GPU-hours of jobs that failed or were cancelled
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many Workloads were left out
    # priority class -> how many records name it though the replayed config has no such WorkloadPriorityClass
    unknown_priority_classes: dict[str, int] = field(default_factory=dict)


def _time(text: str | None) -> float | None:
    return None if not text else datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _condition(workload: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            found: Mapping[str, Any] = condition
            return found
    return None


def _pod_requests(template: Mapping[str, Any]) -> dict[str, str]:
    """A pod's requests, its containers' summed exactly through the engine's quantities; raises
    :class:`QuantityError` for a request that is not a quantity."""
    totals: dict[str, int] = {}
    for container in (template.get("spec") or {}).get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            totals[name] = totals.get(name, 0) + parse_quantity(name, value if isinstance(value, int) else str(value))
    return {name: format_quantity(name, units) for name, units in totals.items()}


def _pod_sets(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": p.get("name", "main"),
            "count": int(p.get("count", 1)),
            "requests": _pod_requests(p.get("template") or {}),
            "nodeSelector": dict(((p.get("template") or {}).get("spec") or {}).get("nodeSelector") or {}),
            "tolerations": list(((p.get("template") or {}).get("spec") or {}).get("tolerations") or []),
        }
        for p in spec.get("podSets") or []
    ]


def _gpus(pod_sets: list[dict[str, Any]]) -> int:
    return sum(int(p["count"]) * parse_quantity(GPU, p["requests"].get(GPU, "0")) for p in pod_sets)


def job_history(workloads: Iterable[Mapping[str, Any]], window_start: float, window_end: float) -> JobHistory:
    records: list[dict[str, Any]] = []
    failed: dict[str, float] = {}
    skipped: dict[str, int] = {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for workload in workloads:
        metadata = workload.get("metadata") or {}
        spec = workload.get("spec") or {}
        created = _time(metadata.get("creationTimestamp"))
        if created is None or not window_start <= created < window_end:
            skip("created outside the window")
            continue
        if not spec.get("queueName"):
            skip("no spec.queueName (not submitted to a queue)")
            continue
        if not spec.get("podSets"):
            skip("no spec.podSets")
            continue
        admitted_condition = _condition(workload, "QuotaReserved") or _condition(workload, "Admitted")
        admitted = _time(admitted_condition.get("lastTransitionTime")) if admitted_condition else None
        if admitted is None:
            skip("never admitted (no known duration)")
            continue
        finished_condition = _condition(workload, "Finished")
        finished = _time(finished_condition.get("lastTransitionTime")) if finished_condition else None
        deactivated = _condition(workload, "Evicted")
        if finished is None and deactivated is not None and deactivated.get("reason") == "Deactivated":
            finished, finished_condition = _time(deactivated.get("lastTransitionTime")), deactivated
        ended = min(finished if finished is not None else window_end, window_end)
        try:
            pod_sets = _pod_sets(spec)
        except QuantityError:
            skip("a request that is not a Kubernetes quantity")
            continue
        priority = spec.get("priorityClassRef")
        records.append(
            {
                "name": metadata.get("name"),
                "namespace": metadata.get("namespace"),
                "queue": spec.get("queueName"),
                "priorityClass": priority.get("name") if isinstance(priority, dict) else priority,
                "submitAt": created - window_start,
                "duration": max(1.0, ended - admitted),
                "maxExecutionSeconds": spec.get("maximumExecutionTimeSeconds"),
                "podSets": pod_sets,
            }
        )
        if finished_condition is not None and finished_condition.get("reason") in FAILED_REASONS:
            namespace = str(metadata.get("namespace"))
            failed[namespace] = failed.get(namespace, 0.0) + _gpus(pod_sets) * (ended - admitted) / 3600
    return JobHistory(records, failed, skipped)


def with_known_priority_classes(history: JobHistory, known: Collection[str]) -> JobHistory:
    """Records naming a class the replayed config lacks (deleted since, or a scheduling.k8s.io PriorityClass)
    replay at the default priority: simulate refuses unknown names, and the demand matters more than its order."""
    unknown: dict[str, int] = {}
    records = []
    for record in history.records:
        name = record.get("priorityClass")
        if name is not None and name not in known:
            unknown[name] = unknown.get(name, 0) + 1
            records.append({**record, "priorityClass": None})
        else:
            records.append(record)
    return replace(history, records=records, unknown_priority_classes=unknown)
