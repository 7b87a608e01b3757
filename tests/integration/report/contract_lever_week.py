"""A generated week for the levers read from the Workloads and the floor: spot, commitments, failed work.

The week runs Monday 2026-10-05 00:00 UTC to Monday 2026-10-12 00:00 UTC, sampled every 5 minutes as in
synthetic_week.py (hour k of the window is sampled at minutes 5..60 after its start). kuota's exporter series
only, on 6 nodes x 8 GPUs; no dcgm-exporter (the GPU model is not known) and no queue series (each namespace is
a team of its own). The Workloads are a ``kubectl get workloads -A -o json`` dump (:func:`workloads_dump`).

Teams (namespaces), each built for one lever:

- base: 16 GPUs held all week at 90% (two 8-GPU servers). With quiet's 2, the cluster's floor is 18 GPUs.
- quiet: 2 GPUs held all week at 85%, one Workload that succeeded at priority 0: nothing to tune.
- sweeps: a pod holding 16 GPUs in hours 24-36 at 95%; Workloads of 4 GPUs each, created at hour 20, last
  admitted at hour 30, finished at hour 36:

  - sweep-0: preempted twice (Kueue's ``schedulingStats``), 2 h admitted before (``accumulatedPast...``),
    succeeded: 4 x (6 + 2) = 32 GPU-hours;
  - sweep-1: preempted once (``schedulingStats``), succeeded: 24 GPU-hours;
  - sweep-2: preempted once (kuota's manager: only a ``Preempted`` condition), succeeded: 24 GPU-hours;
  - sweep-3: preempted once, then failed after 3 h: 12 GPU-hours of failed work, not spot;
  - sweep-low: priority -1, never preempted, succeeded after 5 h: a spot candidate, not counted.

- training: a pod holding 8 GPUs in hours 100-103 and 4 in hours 110-112, at 70%; Workloads train-oom (8 GPUs,
  3 h, Failed) and train-timeout (4 GPUs, 2 h, evicted DeactivatedDueToMaximumExecutionTimeExceeded).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.integration.report.openmetrics import OpenMetricsHistory, gpus_up, pod_gpu_labels

START = int(datetime(2026, 10, 5, tzinfo=UTC).timestamp())
HOURS = 168
END = START + HOURS * 3600
STEP_S = 300
NODES = tuple(f"node-{index}" for index in range(6))
GPUS_PER_NODE = 8
GPU = "nvidia.com/gpu"
FLAVOR = "h100"


@dataclass(frozen=True)
class PodGpus:
    namespace: str
    pod: str
    node: str
    gpus: tuple[int, ...]
    present: Callable[[int], bool]
    util: float


def _between(first: int, last: int) -> Callable[[int], bool]:
    return lambda hour: first <= hour < last


PODS = (
    PodGpus("base", "server-0", "node-0", tuple(range(8)), lambda h: True, 90.0),
    PodGpus("base", "server-1", "node-1", tuple(range(8)), lambda h: True, 90.0),
    PodGpus("quiet", "api-0", "node-2", (0, 1), lambda h: True, 85.0),
    PodGpus("sweeps", "sweep-runner-a", "node-3", tuple(range(8)), _between(24, 36), 95.0),
    PodGpus("sweeps", "sweep-runner-b", "node-4", tuple(range(8)), _between(24, 36), 95.0),
    PodGpus("training", "train-oom", "node-5", tuple(range(8)), _between(100, 103), 70.0),
    PodGpus("training", "train-timeout", "node-5", (0, 1, 2, 3), _between(110, 112), 70.0),
)


def _samples() -> Iterator[tuple[int, int]]:
    """(time, hour of the window) of every sample in the window."""
    for t in range(START + STEP_S, END + 1, STEP_S):
        yield t, (t - START - 1) // 3600


def history() -> OpenMetricsHistory:
    om = OpenMetricsHistory()
    gpus_up(om, NODES, GPUS_PER_NODE, (t for t, _ in _samples()))
    for pod in PODS:
        for gpu in pod.gpus:
            labels = pod_gpu_labels(pod.node, gpu, pod.namespace, pod.pod)
            times = [t for t, h in _samples() if pod.present(h)]
            om.gauge("kuota_gpu_allocated", labels, ((t, 1) for t in times))
            om.gauge("kuota_pod_gpu_sm_utilization_percent", labels, ((t, pod.util) for t in times))
    return om


def _iso(hour: float) -> str:
    return datetime.fromtimestamp(START + hour * 3600, tz=UTC).isoformat().replace("+00:00", "Z")


def _condition(kind: str, status: str, hour: float, reason: str) -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason, "message": "", "lastTransitionTime": _iso(hour)}


def _workload(
    namespace: str,
    name: str,
    gpus: int,
    conditions: list[dict[str, str]],
    *,
    priority: int = 0,
    **status: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": _iso(20)},
        "spec": {
            "queueName": "default",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}},
                }
            ],
        },
        "status": {
            "admission": {
                "clusterQueue": namespace,
                "podSetAssignments": [{"name": "main", "flavors": {GPU: FLAVOR}, "count": 1}],
            },
            "conditions": conditions,
            **status,
        },
    }


def _ran(admitted: float, ended: float, reason: str, *, preempted: bool) -> list[dict[str, str]]:
    conditions = [_condition("QuotaReserved", "True", admitted, "QuotaReserved")]
    if preempted:  # cleared by the admission after the preemption, as Kueue and kuota leave it
        conditions.append(_condition("Preempted", "False", admitted, "QuotaReserved"))
    if reason.startswith("Deactivated"):
        return [*conditions, _condition("Evicted", "True", ended, reason)]
    return [*conditions, _condition("Finished", "True", ended, reason)]


def _evicted(preempted: int) -> dict[str, Any]:
    return {"evictions": [{"reason": "Preempted", "underlyingCause": "InCohortReclamation", "count": preempted}]}


WORKLOADS = [
    _workload(
        "sweeps",
        "sweep-0",
        4,
        _ran(30, 36, "Succeeded", preempted=True),
        schedulingStats=_evicted(2),
        accumulatedPastExecutionTimeSeconds=7200,
    ),
    _workload("sweeps", "sweep-1", 4, _ran(30, 36, "Succeeded", preempted=True), schedulingStats=_evicted(1)),
    _workload("sweeps", "sweep-2", 4, _ran(30, 36, "Succeeded", preempted=True)),
    _workload("sweeps", "sweep-3", 4, _ran(30, 33, "Failed", preempted=True), schedulingStats=_evicted(1)),
    _workload("sweeps", "sweep-low", 4, _ran(30, 35, "Succeeded", preempted=False), priority=-1),
    _workload("training", "train-oom", 8, _ran(100, 103, "Failed", preempted=False)),
    _workload(
        "training",
        "train-timeout",
        4,
        _ran(110, 112, "DeactivatedDueToMaximumExecutionTimeExceeded", preempted=False),
    ),
    _workload("quiet", "serve", 2, _ran(21, 140, "Succeeded", preempted=False)),
]


def workloads_dump(path: Path) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": WORKLOADS}), encoding="utf-8")
    return path
