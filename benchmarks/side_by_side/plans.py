"""The loads, built from Kueue's harness generator (benchmarks.workloads.kueue_harness): the queue objects, the
objects to create and when, and the same arrivals as the floor replays them. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from benchmarks.side_by_side.errors import MeasureError
from benchmarks.side_by_side.live_run import PlannedObject
from benchmarks.workloads.kueue_harness import HarnessArrival, HarnessSpec, harness_arrivals, harness_config
from benchmarks.workloads.manifests import Manifest, workload_manifest
from tests.cluster import GPU_RESOURCE, RUN_SECONDS_ANNOTATION

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def scaled_spec(
    scale: float, seed: int, cohorts: int | None = None, queues_per_cohort: int | None = None
) -> HarnessSpec:
    """Kueue's baseline with every class's count multiplied by ``scale`` (at least one of each): the same
    queues, rates and contention, a shorter arrival window."""
    if not 0 < scale <= 1:
        raise MeasureError(f"--scale must be in (0, 1], got {scale}")
    base = HarnessSpec(seed=seed)
    classes = tuple(dataclasses.replace(c, count=max(1, round(c.count * scale))) for c in base.classes)
    return dataclasses.replace(
        base,
        classes=classes,
        cohorts=cohorts or base.cohorts,
        queues_per_cohort=queues_per_cohort or base.queues_per_cohort,
    )


def total_quota_cpu(spec: HarnessSpec) -> float:
    return float(spec.cohorts * spec.queues_per_cohort * spec.nominal_cpu)


def queue_objects(spec: HarnessSpec) -> list[Manifest]:
    return list(harness_config(spec).objects)


def priority_values(spec: HarnessSpec) -> dict[str, int]:
    return {c.name: c.priority for c in spec.classes}


def _cpu(arrival: HarnessArrival) -> float:
    return float(arrival.workload["podSets"][0]["requests"]["cpu"])


def _plan(spec: HarnessSpec, manifest: Callable[[HarnessArrival], dict[str, Any]]) -> list[PlannedObject]:
    """One planned object per harness arrival; ``manifest`` says what is created for it."""
    return [
        PlannedObject(
            key=f"{a.workload['namespace']}/{a.workload['name']}",
            submit_at=a.submit_at,
            workload_class=a.workload_class,
            cpu=_cpu(a),
            runtime=a.workload["duration"],
            manifest=manifest(a),
        )
        for a in harness_arrivals(spec)
    ]


def workload_plan(spec: HarnessSpec) -> list[PlannedObject]:
    values = priority_values(spec)
    return _plan(spec, lambda arrival: workload_manifest(arrival.workload, priority_values=values))


def job_manifest(arrival: HarnessArrival) -> dict[str, Any]:
    """A batch/v1 Job for one harness workload: the queue and priority labels, one pod that the fake node runs
    for the workload's runtime, tolerating the fake GPU nodes' taint."""
    workload = arrival.workload
    name = workload["name"].replace("_", "-")
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": workload["namespace"],
            "labels": {QUEUE_LABEL: workload["queue"], PRIORITY_CLASS_LABEL: str(workload["priorityClass"])},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: str(workload["duration"])}},
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": PAUSE_IMAGE,
                            "resources": {"requests": dict(workload["podSets"][0]["requests"])},
                        }
                    ],
                },
            },
        },
    }


def job_plan(spec: HarnessSpec) -> list[PlannedObject]:
    return _plan(spec, job_manifest)
