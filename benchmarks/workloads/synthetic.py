"""Seeded synthetic workload streams for the engine's scale benchmark (10k, 100k, 1M workloads).

The config: ``cluster_queues`` ClusterQueues ``cq-NNNN`` spread round-robin over ``cohorts`` cohorts
``cohort-NNN``, one ResourceFlavor ``gpu-node``; each queue 8 ``nvidia.com/gpu`` nominal with
borrowingLimit 8, 64 cpu and 512Gi (8 cores and 64Gi per GPU, so GPUs bind first),
``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``; each in its own namespace ``ns-NNNN``
with LocalQueue ``lq-NNNN``; priority classes ``low`` (100), ``normal`` (500), ``high`` (1000).

The stream offers a fixed load below capacity, so that a longer stream is the same system run for longer
(its backlog stays bounded) and the cost per decision is comparable across sizes. All draws come from one
``random.Random(seed)``, so a (spec) always gives the same workloads:

- load: every cohort is offered ``offered_load`` (default 0.8) of its GPUs on average; within a cohort each
  queue's share comes from a log-normal (sigma 0.75), so some queues want more than their nominal quota and
  borrow while others lend, but no queue's share is above ``MAX_QUEUE_DEMAND`` times its own nominal quota
  (the excess goes to the others), so no queue wants more than it can ever hold (nominal + borrowingLimit);
- bursts: arrivals come in bursts (a sweep): a Poisson stream of bursts, each to one queue (drawn by share),
  of a geometric number of workloads (mean ``MEAN_BURST``) of one shape and priority, all submitted at the
  burst's instant, each with its own duration;
- shape: 1x1, 1x2, 1x4, 1x8 or 2x4 GPUs (pods x GPUs per pod) with weights 45/25/15/10/5 (2.75 GPUs on
  average); 4 cpu and 32Gi per GPU. No workload needs more than its queue's nominal quota, which it can
  always reclaim by preemption: a bigger one would wait for a lull in its whole cohort, and at this load
  such workloads pile up, so the backlog would grow with the run;
- priority: low/normal/high with weights 60/30/10;
- duration: exponential, mean 1 hour, at least 60 s, whole seconds.

The queues and cohorts are the same at every size; a bigger stream covers a longer time span
(``SyntheticSpec.span_seconds``). Workloads are produced one at a time: a million never sit in memory, as
dicts or as JSON text.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.workloads.manifests import (
    Manifest,
    QueueingConfig,
    ResourceQuota,
    cluster_queue,
    local_queue,
    namespace,
    resource_flavor,
    workload_priority_class,
)
from kuota.simulator.errors import SourceSpecError
from kuota.simulator.lines import WorkloadLine
from kuota.simulator.queue_mapping import QueueTarget

SCALE_SIZES = (10_000, 100_000, 1_000_000)
SYNTHETIC_FLAVOR = "gpu-node"
GPUS_PER_QUEUE = 8
PRIORITY_CLASSES = (("low", 100, 60), ("normal", 500, 30), ("high", 1000, 10))  # name, value, weight
# pods, GPUs per pod, weight; the largest is one queue's nominal quota, which it can always reclaim
SHAPES = ((1, 1, 45), (1, 2, 25), (1, 4, 15), (1, 8, 10), (2, 4, 5))
MEAN_DURATION_SECONDS = 3600
MIN_DURATION_SECONDS = 60
MEAN_BURST = 4.0
QUEUE_SHARE_SIGMA = 0.75
MAX_QUEUE_DEMAND = (
    1.6  # in nominal quotas, before offered_load: under the 2 (nominal + borrowingLimit) a queue can hold
)
_MEAN_GPUS = sum(pods * gpus * weight for pods, gpus, weight in SHAPES) / sum(w for _, _, w in SHAPES)


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    workloads: int
    cluster_queues: int = 1000
    cohorts: int = 100
    seed: int = 0
    offered_load: float = 0.8

    def __post_init__(self) -> None:
        if self.workloads < 0:
            raise SourceSpecError(f"SyntheticSpec.workloads must be >= 0, got {self.workloads}")
        if not 1 <= self.cohorts <= self.cluster_queues:
            raise SourceSpecError(
                f"SyntheticSpec: need 1 <= cohorts <= cluster_queues, got {self.cohorts} cohorts for "
                f"{self.cluster_queues} ClusterQueues"
            )
        if not 0 < self.offered_load < 1:
            raise SourceSpecError(
                f"SyntheticSpec.offered_load must be above 0 and below 1 (a share of the GPUs), got {self.offered_load}"
            )

    @property
    def arrival_rate(self) -> float:
        """Workloads per second that make the mean GPU demand ``offered_load`` of the cluster."""
        total_gpus = self.cluster_queues * GPUS_PER_QUEUE
        return self.offered_load * total_gpus / (_MEAN_GPUS * MEAN_DURATION_SECONDS)

    @property
    def span_seconds(self) -> float:
        """The expected simulated time from the first submission to the last."""
        return self.workloads / self.arrival_rate


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


def queue_shares(spec: SyntheticSpec, rng: random.Random) -> list[float]:
    """Each queue's share of all the GPU demand: every cohort gets its GPUs' share, split log-normally."""
    shares = [0.0] * spec.cluster_queues
    for cohort in range(spec.cohorts):
        members = range(cohort, spec.cluster_queues, spec.cohorts)
        weights = [rng.lognormvariate(0.0, QUEUE_SHARE_SIGMA) for _ in members]
        split = _capped_split(weights, MAX_QUEUE_DEMAND / len(members))
        for index, part in zip(members, split, strict=True):
            shares[index] = part * len(members) / spec.cluster_queues
    return shares


def _capped_split(weights: list[float], cap: float) -> list[float]:
    """``weights`` scaled to sum to 1 with none above ``cap`` (the excess spread over the rest pro rata)."""
    split = [0.0] * len(weights)
    open_ = set(range(len(weights)))
    left = 1.0
    while open_:
        total = sum(weights[i] for i in open_)
        over = {i for i in open_ if weights[i] / total * left > cap}
        if not over:
            for i in open_:
                split[i] = weights[i] / total * left
            return split
        for i in over:
            split[i] = cap
        left -= cap * len(over)
        open_ -= over
    return split


def synthetic_workloads(spec: SyntheticSpec) -> Iterator[WorkloadLine]:
    """The stream, lazily, in submission order (the rules are in the module docstring)."""
    rng = random.Random(spec.seed)
    queues = synthetic_queues(spec)
    queue_weights = list(itertools.accumulate(queue_shares(spec, rng)))
    shape_weights = list(itertools.accumulate(weight for _, _, weight in SHAPES))
    priority_weights = list(itertools.accumulate(weight for _, _, weight in PRIORITY_CLASSES))
    burst_rate = spec.arrival_rate / MEAN_BURST
    now = 0.0
    index = 0
    while index < spec.workloads:
        now += rng.expovariate(burst_rate)
        target = queues[bisect.bisect_right(queue_weights, rng.random() * queue_weights[-1])]
        pods, gpus, _ = SHAPES[bisect.bisect_right(shape_weights, rng.random() * shape_weights[-1])]
        priority = PRIORITY_CLASSES[bisect.bisect_right(priority_weights, rng.random() * priority_weights[-1])][0]
        # Geometric on 1, 2, ... with mean MEAN_BURST.
        size = 1
        while rng.random() >= 1 / MEAN_BURST:
            size += 1
        for _ in range(min(size, spec.workloads - index)):
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
            index += 1
