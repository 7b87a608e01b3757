"""Seeded synthetic workload streams for the engine's scale benchmark (10k, 100k, 1M workloads).

The config: ``cluster_queues`` ClusterQueues ``cq-NNNN`` spread round-robin over ``cohorts`` cohorts
``cohort-NNN``, one ResourceFlavor ``gpu-node``; each queue 8 ``nvidia.com/gpu`` nominal with
borrowingLimit 8, 64 cpu and 512Gi (8 cores and 64Gi per GPU, so GPUs bind first),
``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``; each in its own namespace ``ns-NNNN``
with LocalQueue ``lq-NNNN``; priority classes ``low`` (100), ``normal`` (500), ``high`` (1000).

The stream, all drawn from one ``random.Random(seed)``, so a (spec) always gives the same workloads:

- queue: each ClusterQueue gets a demand weight from a log-normal (sigma 0.75), so some queues want more
  than their quota and borrow while others lend;
- shape: 1x1, 1x2, 1x4, 1x8 or 2x8 GPUs (pods x GPUs per pod) with weights 45/25/15/10/5 (3.15 GPUs on
  average); 4 cpu and 32Gi per GPU;
- priority: low/normal/high with weights 60/30/10;
- duration: exponential, mean 1 hour, at least 60 s, whole seconds;
- arrivals: a Poisson stream whose rate makes the mean demand ``offered_load`` (default 0.9) of all the
  GPUs, so queues form and drain and the backlog stays bounded as the run grows.

Workloads are produced one at a time: a million never sit in memory, as dicts or as JSON text.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from webhook.workloads.errors import SourceSpecError
from webhook.workloads.lines import WorkloadLine
from webhook.workloads.manifests import (
    Manifest,
    QueueingConfig,
    ResourceQuota,
    cluster_queue,
    local_queue,
    namespace,
    resource_flavor,
    workload_priority_class,
)
from webhook.workloads.queue_mapping import QueueTarget

SCALE_SIZES = (10_000, 100_000, 1_000_000)
SYNTHETIC_FLAVOR = "gpu-node"
GPUS_PER_QUEUE = 8
PRIORITY_CLASSES = (("low", 100, 60), ("normal", 500, 30), ("high", 1000, 10))  # name, value, weight
SHAPES = ((1, 1, 45), (1, 2, 25), (1, 4, 15), (1, 8, 10), (2, 8, 5))  # pods, GPUs per pod, weight
MEAN_DURATION_SECONDS = 3600
MIN_DURATION_SECONDS = 60
_MEAN_GPUS = sum(pods * gpus * weight for pods, gpus, weight in SHAPES) / sum(w for _, _, w in SHAPES)


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    workloads: int
    cluster_queues: int = 1000
    cohorts: int = 100
    seed: int = 0
    offered_load: float = 0.9

    def __post_init__(self) -> None:
        if self.workloads < 0:
            raise SourceSpecError(f"SyntheticSpec.workloads must be >= 0, got {self.workloads}")
        if not 1 <= self.cohorts <= self.cluster_queues:
            raise SourceSpecError(
                f"SyntheticSpec: need 1 <= cohorts <= cluster_queues, got {self.cohorts} cohorts for "
                f"{self.cluster_queues} ClusterQueues"
            )
        if self.offered_load <= 0:
            raise SourceSpecError(f"SyntheticSpec.offered_load must be > 0, got {self.offered_load}")

    @property
    def arrival_rate(self) -> float:
        """Workloads per second that make the mean GPU demand ``offered_load`` of the cluster."""
        total_gpus = self.cluster_queues * GPUS_PER_QUEUE
        return self.offered_load * total_gpus / (_MEAN_GPUS * MEAN_DURATION_SECONDS)


def synthetic_queues(spec: SyntheticSpec) -> tuple[QueueTarget, ...]:
    return tuple(QueueTarget(f"ns-{i:04d}", f"lq-{i:04d}") for i in range(spec.cluster_queues))


def synthetic_config(spec: SyntheticSpec) -> QueueingConfig:
    objects: list[Manifest] = [resource_flavor(SYNTHETIC_FLAVOR)]
    objects += [
        workload_priority_class(name, value, f"synthetic scale benchmark, {name} priority")
        for name, value, _ in PRIORITY_CLASSES
    ]
    queues = synthetic_queues(spec)
    for index, target in enumerate(queues):
        name = f"cq-{index:04d}"
        objects.append(namespace(target.namespace))
        objects.append(
            cluster_queue(
                name,
                cohort_name=f"cohort-{index % spec.cohorts:03d}",
                flavor=SYNTHETIC_FLAVOR,
                quotas=(
                    ResourceQuota("cpu", GPUS_PER_QUEUE * 8),
                    ResourceQuota("memory", f"{GPUS_PER_QUEUE * 64}Gi"),
                    ResourceQuota("nvidia.com/gpu", GPUS_PER_QUEUE, borrowing_limit=GPUS_PER_QUEUE),
                ),
                namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": target.namespace}},
                reclaim_within_cohort="Any",
                within_cluster_queue="LowerPriority",
            )
        )
        objects.append(local_queue(target, name))
    return QueueingConfig(objects=tuple(objects), queues=queues)


def synthetic_workloads(spec: SyntheticSpec) -> Iterator[WorkloadLine]:
    """The stream, lazily, in submission order (the rules are in the module docstring)."""
    rng = random.Random(spec.seed)
    queues = synthetic_queues(spec)
    queue_weights = list(itertools.accumulate(rng.lognormvariate(0.0, 0.75) for _ in queues))
    shape_weights = list(itertools.accumulate(weight for _, _, weight in SHAPES))
    priority_weights = list(itertools.accumulate(weight for _, _, weight in PRIORITY_CLASSES))
    rate = spec.arrival_rate
    now = 0.0
    for index in range(spec.workloads):
        now += rng.expovariate(rate)
        target = queues[bisect.bisect_right(queue_weights, rng.random() * queue_weights[-1])]
        pods, gpus, _ = SHAPES[bisect.bisect_right(shape_weights, rng.random() * shape_weights[-1])]
        priority = PRIORITY_CLASSES[bisect.bisect_right(priority_weights, rng.random() * priority_weights[-1])][0]
        duration = max(MIN_DURATION_SECONDS, round(rng.expovariate(1 / MEAN_DURATION_SECONDS)))
        yield {
            "name": f"wl-{index}",
            "namespace": target.namespace,
            "queue": target.queue,
            "priorityClass": priority,
            "submitAt": round(now, 3),
            "duration": duration,
            "maxExecutionSeconds": None,
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "requests": {"nvidia.com/gpu": str(gpus), "cpu": str(4 * gpus), "memory": f"{32 * gpus}Gi"},
                    "nodeSelector": {},
                    "tolerations": [],
                }
            ],
        }
