"""Kueue's scheduler performance harness (test/performance/scheduler, "baseline"), as kuota workloads.

The same generator feeds ``kuota simulate`` (simulated time) and a live benchmark against kuota and Kueue,
so it yields arrivals in time order, each with its class, and renders the config objects and each Workload
as plain manifests.

What Kueue's harness creates, and so what this produces:

- one ResourceFlavor ``rf``; 5 cohorts ``cohort-<c>`` (implicit: no Cohort objects, as in Kueue), each
  with 6 ClusterQueues ``cq-0-<q>-cohort-<c>`` (20 cpu nominal, borrowingLimit 100,
  ``reclaimWithinCohort: Any``, ``withinClusterQueue: LowerPriority``, every namespace selected,
  BestEffortFIFO); per ClusterQueue a namespace and a LocalQueue of the same name.
- per ClusterQueue three workload sets, created concurrently, each one workload per interval, the first one
  interval after the start: 350 ``small`` (1 cpu, 200 ms, priority 50, every 100 ms), 100 ``medium``
  (5 cpu, 500 ms, priority 100, every 500 ms), 50 ``large`` (20 cpu, 1 s, priority 200, every 1.2 s);
  15,000 workloads in all, named ``<class>-<set>-<i>-0`` as Kueue names them.
- Kueue sets ``spec.priority`` directly; the simulate contract names a WorkloadPriorityClass, so the config
  has one per class (``small`` = 50, ``medium`` = 100, ``large`` = 200).

``jitter_ms`` (default 0) delays each creation by a uniform random 0..jitter_ms, drawn from ``seed`` per
(queue, set) stream, to mimic API latency on a live cluster; with 0 the schedule is exact and the seed
changes nothing.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

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

HARNESS_FLAVOR = "rf"


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    name: str
    count: int  # per ClusterQueue
    interval_ms: int
    runtime_ms: int
    priority: int
    cpu: int


KUEUE_BASELINE_CLASSES = (
    WorkloadClass("small", count=350, interval_ms=100, runtime_ms=200, priority=50, cpu=1),
    WorkloadClass("medium", count=100, interval_ms=500, runtime_ms=500, priority=100, cpu=5),
    WorkloadClass("large", count=50, interval_ms=1200, runtime_ms=1000, priority=200, cpu=20),
)


@dataclass(frozen=True, slots=True)
class HarnessSpec:
    cohorts: int = 5
    queues_per_cohort: int = 6
    nominal_cpu: int = 20
    borrowing_limit_cpu: int = 100
    classes: tuple[WorkloadClass, ...] = KUEUE_BASELINE_CLASSES
    seed: int = 0
    jitter_ms: int = 0

    def __post_init__(self) -> None:
        for name in ("cohorts", "queues_per_cohort", "nominal_cpu"):
            if getattr(self, name) < 1:
                raise SourceSpecError(f"HarnessSpec.{name} must be at least 1, got {getattr(self, name)}")
        if self.borrowing_limit_cpu < 0 or self.jitter_ms < 0:
            raise SourceSpecError("HarnessSpec.borrowing_limit_cpu and jitter_ms must be >= 0")
        if not self.classes or len({c.name for c in self.classes}) != len(self.classes):
            raise SourceSpecError("HarnessSpec.classes: give at least one class, each name once")
        for workload_class in self.classes:
            if min(workload_class.count, workload_class.interval_ms, workload_class.runtime_ms) < 1:
                raise SourceSpecError(
                    f"workload class {workload_class.name}: count, interval_ms and runtime_ms must be >= 1"
                )

    @property
    def total_workloads(self) -> int:
        return self.cohorts * self.queues_per_cohort * sum(c.count for c in self.classes)


class HarnessArrival(NamedTuple):
    submit_at: float  # seconds from the start
    workload_class: str
    workload: WorkloadLine


def harness_queues(spec: HarnessSpec = HarnessSpec()) -> tuple[QueueTarget, ...]:
    """The LocalQueues, in (cohort, queue) order; namespace, LocalQueue and ClusterQueue share a name."""
    names = [f"cq-0-{q}-cohort-{c}" for c in range(spec.cohorts) for q in range(spec.queues_per_cohort)]
    return tuple(QueueTarget(name, name) for name in names)


def harness_config(spec: HarnessSpec = HarnessSpec()) -> QueueingConfig:
    objects: list[Manifest] = [resource_flavor(HARNESS_FLAVOR)]
    objects += [
        workload_priority_class(c.name, c.priority, f"Kueue performance harness class {c.name}") for c in spec.classes
    ]
    queues = harness_queues(spec)
    for index, target in enumerate(queues):
        objects.append(namespace(target.namespace))
        objects.append(
            cluster_queue(
                target.queue,
                cohort_name=f"cohort-{index // spec.queues_per_cohort}",
                flavor=HARNESS_FLAVOR,
                quotas=(ResourceQuota("cpu", spec.nominal_cpu, borrowing_limit=spec.borrowing_limit_cpu),),
                namespace_selector={},
                reclaim_within_cohort="Any",
                within_cluster_queue="LowerPriority",
            )
        )
        objects.append(local_queue(target, target.queue))
    return QueueingConfig(objects=tuple(objects), queues=queues)


def harness_arrivals(spec: HarnessSpec = HarnessSpec()) -> Iterator[HarnessArrival]:
    """Every workload, in submission order; ties by (queue, set, index), so the order is reproducible."""
    streams = [
        _stream(spec, queue_index, target, set_index, workload_class)
        for queue_index, target in enumerate(harness_queues(spec))
        for set_index, workload_class in enumerate(spec.classes)
    ]
    for _, arrival in heapq.merge(*streams, key=lambda keyed: keyed[0]):
        yield arrival


def harness_workloads(spec: HarnessSpec = HarnessSpec()) -> Iterator[WorkloadLine]:
    for arrival in harness_arrivals(spec):
        yield arrival.workload


def _stream(
    spec: HarnessSpec, queue_index: int, target: QueueTarget, set_index: int, workload_class: WorkloadClass
) -> Iterator[tuple[tuple[int, int, int, int], HarnessArrival]]:
    rng = random.Random(f"{spec.seed}:{queue_index}:{set_index}")
    timed: list[tuple[tuple[int, int, int, int], HarnessArrival]] = []
    for index in range(workload_class.count):
        at_ms = (index + 1) * workload_class.interval_ms
        if spec.jitter_ms:
            at_ms += rng.randint(0, spec.jitter_ms)
        workload: WorkloadLine = {
            "name": f"{workload_class.name}-{set_index}-{index}-0",
            "namespace": target.namespace,
            "queue": target.queue,
            "priorityClass": workload_class.name,
            "submitAt": at_ms / 1000,
            "duration": workload_class.runtime_ms / 1000,
            "maxExecutionSeconds": None,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "requests": {"cpu": str(workload_class.cpu)},
                    "nodeSelector": {},
                    "tolerations": [],
                }
            ],
        }
        timed.append(
            ((at_ms, queue_index, set_index, index), HarnessArrival(at_ms / 1000, workload_class.name, workload))
        )
    timed.sort(key=lambda keyed: keyed[0])
    return iter(timed)
