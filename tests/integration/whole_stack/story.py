"""The seed example's story, compressed, as real Jobs; and what the test itself saw of it (the ground truth).

The queues are examples/seed's YAML, applied unchanged. The Jobs take their names, shapes and priority
classes from examples/seed/workloads.jsonl. Each phase of the story gets a few seconds of wall clock
(``PHASE_S``) instead of its hours or days:

- Saturday: inference's nightly embedding job holds 2 GPUs and barely uses them (its SM use is
  ``TEAM_SM_PERCENT``'s 2 %); research submits 12 sweep trials of 2 GPUs: 10 run at once on 20 GPUs (its 8,
  8 borrowed from applied-ml, 4 from inference), 2 wait.
- Monday: applied-ml's ``llm-finetune-mon`` (2 pods x 4 GPUs) reclaims its quota: the 4 trials admitted last
  are preempted and the fine-tune starts at once.
- Tuesday: the fine-tune ends; the 4 preempted trials resume, 2 trials still wait.
- Drain: the first 6 trials finish, the last 2 run; then everything finishes.

Each trial is pinned to a node (as a topology-aware scheduler would place it) so the preempted trials free
4 GPUs on each of two nodes and the fine-tune's 4-GPU pods find room.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
SEED = REPO / "kuota" / "simulator" / "seed"
GPU = "nvidia.com/gpu"
TEAMS = ("research", "applied-ml", "inference")
NOMINAL_GPUS = 8  # every seed ClusterQueue's nominal GPU quota
TEAM_SM_PERCENT = {"research": 90, "applied-ml": 75, "inference": 2}
PHASE_S = {"saturday": 15.0, "monday": 15.0, "tuesday": 10.0, "drain": 10.0}
SWEEP = tuple(f"sweep-lr-{index:02d}" for index in range(1, 13))
FINETUNE = "llm-finetune-mon"
EMBEDDING = "embed-nightly-sat"
# Trial -> node; the 4 admitted last (07-10) sit 2 on h100-1 and 2 on h100-2.
SWEEP_NODES = dict(
    zip(
        SWEEP,
        ("h100-0",) * 3 + ("h100-1",) * 2 + ("h100-2",) + ("h100-1",) * 2 + ("h100-2",) * 2 + ("h100-0",) * 2,
        strict=True,
    )
)
PREEMPTED = SWEEP[6:10]
FIRST_WAVE = SWEEP[:10]


def seed_records() -> dict[str, dict[str, Any]]:
    records = [json.loads(line) for line in (SEED / "workloads.jsonl").read_text().splitlines() if line.strip()]
    return {record["name"]: record for record in records}


def job_manifest(record: Mapping[str, Any], node: str | None) -> dict[str, Any]:
    """A suspended Job in the record's LocalQueue, shaped as the record's one pod set."""
    (pod_set,) = record["podSets"]
    requests = dict(pod_set["requests"])
    selector = {"kubernetes.io/hostname": node} if node else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": record["name"],
            "namespace": record["namespace"],
            "labels": {
                "kueue.x-k8s.io/queue-name": record["queue"],
                "kueue.x-k8s.io/priority-class": record["priorityClass"],
            },
        },
        "spec": {
            "suspend": True,
            "parallelism": pod_set["count"],
            "completions": pod_set["count"],
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": selector,
                    "containers": [
                        {
                            "name": "main",
                            "image": "fake",
                            "resources": {"requests": requests, "limits": {GPU: requests[GPU]}},
                        }
                    ],
                }
            },
        },
    }


def timestamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _time(text: str | None) -> float | None:
    return timestamp(text) if text else None


def condition(workload: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def is_true(workload: Mapping[str, Any], kind: str) -> bool:
    found = condition(workload, kind)
    return found is not None and found["status"] == "True"


def workload_gpus(workload: Mapping[str, Any]) -> int:
    return sum(
        int(pod_set["count"]) * int(container["resources"]["requests"].get(GPU, 0))
        for pod_set in workload["spec"]["podSets"]
        for container in pod_set["template"]["spec"]["containers"]
    )


def job_name(workload: Mapping[str, Any]) -> str:
    owners = workload["metadata"].get("ownerReferences") or [{}]
    return str(owners[0].get("name", ""))


@dataclass(frozen=True)
class Admission:
    """One admission as the Workload's conditions show it, and the wait they give to within 1 s."""

    cluster_queue: str
    job: str
    queued_at: float  # the last Requeued=True transition, else the creation (what the manager measures from)
    admitted_at: float  # the QuotaReserved=True transition

    @property
    def wait_bounds(self) -> tuple[float, float]:
        # Both stamps are whole seconds (the API server's resolution), so the manager's own measurement of the
        # same two instants lies within one second of their difference.
        waited = self.admitted_at - self.queued_at
        return max(0.0, waited - 1), waited + 1


@dataclass(frozen=True)
class Eviction:
    cluster_queue: str
    job: str
    reason: str
    at: float


@dataclass(frozen=True)
class QueueState:
    """Per ClusterQueue, as one listing of the Workloads showed it."""

    usage: Mapping[str, int]  # admitted GPUs
    pending: Mapping[str, int]  # workloads neither admitted nor finished


@dataclass
class Timeline:
    """Every listing of the Workloads: (when the request went out, when it answered, what it showed)."""

    states: list[tuple[float, float, QueueState]] = field(default_factory=list)
    admissions: dict[tuple[str, str, float], Admission] = field(default_factory=dict)
    evictions: dict[tuple[str, str, float], Eviction] = field(default_factory=dict)
    latest: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (namespace, job) -> Workload
    poller: asyncio.Task[None] | None = None  # the task keeping this record

    def observe(self, sent: float, answered: float, workloads: Sequence[Mapping[str, Any]]) -> None:
        usage = dict.fromkeys(TEAMS, 0)
        pending = dict.fromkeys(TEAMS, 0)
        latest = {}
        for workload in workloads:
            namespace = workload["metadata"]["namespace"]
            if namespace not in TEAMS:
                continue
            job = job_name(workload)
            latest[(namespace, job)] = dict(workload)
            finished = is_true(workload, "Finished")
            if is_true(workload, "QuotaReserved") and not finished:
                usage[namespace] += workload_gpus(workload)
                reserved = condition(workload, "QuotaReserved")
                requeued = condition(workload, "Requeued")
                assert reserved is not None
                admitted_at = _time(reserved.get("lastTransitionTime"))
                queued_at = (
                    _time(requeued.get("lastTransitionTime")) if requeued and requeued["status"] == "True" else None
                )
                created = _time(workload["metadata"]["creationTimestamp"])
                assert admitted_at is not None and created is not None
                self.admissions.setdefault(
                    (namespace, job, admitted_at), Admission(namespace, job, queued_at or created, admitted_at)
                )
            elif not finished:
                pending[namespace] += 1
            evicted = condition(workload, "Evicted")
            if evicted is not None and evicted["status"] == "True":
                at = _time(evicted.get("lastTransitionTime"))
                assert at is not None
                self.evictions.setdefault((namespace, job, at), Eviction(namespace, job, evicted["reason"], at))
        self.latest = latest
        self.states.append((sent, answered, QueueState(usage, pending)))

    def workload(self, namespace: str, job: str) -> dict[str, Any] | None:
        return self.latest.get((namespace, job))


@dataclass(frozen=True)
class Integral:
    """The time integral of a step function seen at polls, and how far the report's may honestly differ.

    A change between two listings happened somewhere between the earlier request and the later answer; the
    manager's gauge takes it at once, Prometheus sees it at its next scrape and the report at its next step,
    so each change of size |d| shifts the integral by |d| x (listing gap + scrape interval + resolution) at
    most, half of that either way once the constant part of the delay cancels (every value here returns to
    where it started).
    """

    value: float
    tolerance: float


def integrate(
    states: Sequence[tuple[float, float, QueueState]],
    value: Any,
    window: tuple[float, float],
    *,
    scrape_s: float,
    resolution_s: float,
) -> Integral:
    """∫ value(state) dt over ``window`` (start, end), in seconds, with the tolerance of :class:`Integral`."""
    start, end = window
    total = tolerance = 0.0
    for (sent, answered, state), following in zip(states, [*states[1:], None], strict=True):
        until = following[0] if following is not None else math.inf
        midpoint = (sent + answered) / 2
        begin = max(start, midpoint)
        finish = min(end, (following[0] + following[1]) / 2 if following is not None else until)
        if finish > begin:
            total += float(value(state)) * (finish - begin)
        if following is not None and start <= following[0] <= end:
            change = abs(float(value(following[2])) - float(value(state)))
            tolerance += change * ((following[1] - sent) + scrape_s + resolution_s) / 2
    return Integral(total, tolerance)
