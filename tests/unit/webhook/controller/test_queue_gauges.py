"""The scrape-time gauges only the metrics show (LocalQueue status and usage, finished Workloads, Cohorts), worked
out from a real engine and the controller's view of the Workloads."""

from __future__ import annotations

from typing import Any

from kuota.webhook.controller.metrics import CohortGauges, CohortQuotaLine, LocalQueueUsage
from kuota.webhook.controller.queue_gauges import (
    cluster_queue_gauges,
    cohort_gauges,
    finished_workloads,
    local_queue_details,
    local_queue_gauges,
    queue_conditions,
    with_finished,
)
from kuota.webhook.controller.state import NewestCopies, compact_workload
from tests.unit.engine.builders import admitted, engine_with, gpu_queue, workload


def _admitted_object(namespace: str, name: str, cluster_queue: str, gpus: int, *, finished: bool = False) -> Any:
    conditions = [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "2026-12-01T00:00:00Z"}]
    if finished:
        conditions.append({"type": "Finished", "status": "True", "lastTransitionTime": "2026-12-01T01:00:00Z"})
    assignment = {"name": "main", "flavors": {"nvidia.com/gpu": "gpu"}, "resourceUsage": {"nvidia.com/gpu": str(gpus)}}
    return {
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": "7"},
        "spec": {"queueName": "q"},
        "status": {
            "admission": {"clusterQueue": cluster_queue, "podSetAssignments": [{**assignment, "count": 1}]},
            "conditions": conditions,
        },
    }


def test_localqueue_usage_status_and_finished_workloads_and_the_cohort_totals() -> None:
    engine = engine_with(gpu_queue("research", 8), gpu_queue("inference", 8))
    trainer, waiting = workload("research", "trainer", 4), workload("research", "waiting", 8)
    engine.submit(trainer)
    assert admitted(engine.schedule(1.0)) == ["research/trainer"]
    engine.submit(waiting)
    view = NewestCopies()
    view.observe("research/trainer", compact_workload(_admitted_object("research", "trainer", "research", 4)))
    view.observe("research/done", compact_workload(_admitted_object("research", "done", "research", 2, finished=True)))
    parsed = {"research/trainer": trainer, "research/waiting": waiting}
    counted = {(g.namespace, g.name): (g.pending_active, g.admitted) for g in local_queue_gauges(engine, parsed)}
    assert counted == {("research", "q"): (1, 1), ("inference", "q"): (0, 0)}

    finished = finished_workloads(view)
    assert (finished.cluster_queues, finished.local_queues) == ({"research": 1}, {("research", "q"): 1})
    conditions = queue_conditions(engine, {})
    queues = {queue.name: queue for queue in with_finished(cluster_queue_gauges(engine, conditions), finished)}
    assert (queues["research"].finished, queues["research"].cohort, queues["inference"].finished) == (1, "pool", 0)

    details = {
        (local.namespace, local.name): local
        for local in local_queue_details(engine, view, local_queue_gauges(engine, parsed), finished, conditions)
    }
    research, inference = details[("research", "q")], details[("inference", "q")]
    assert (research.active, research.finished, list(research.usage)) == (
        "True",
        1,
        [LocalQueueUsage("gpu", "nvidia.com/gpu", 4.0)],
    )
    assert (inference.active, inference.finished, list(inference.usage)) == ("True", 0, [])

    assert cohort_gauges(engine) == [
        CohortGauges("pool", 0.0, 1, [CohortQuotaLine("gpu", "nvidia.com/gpu", 16.0, 4.0)])
    ]


def test_stopped_missing_refused_and_stopped_parent_queues_are_inactive_alike_in_status_and_metrics() -> None:
    def local_queue(namespace: str, cluster_queue: str, **spec: str) -> dict[str, Any]:
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue, **spec},
        }

    engine = engine_with(
        gpu_queue("research", 8),
        gpu_queue("refused", 8),
        gpu_queue("held", 8, stopPolicy="Hold"),
        local_queue("research", "research", stopPolicy="Hold"),
        local_queue("lost", "gone"),
        local_queue("paused", "held"),
        local_queue("open", "research"),
        local_queue("bad", "refused"),
    )
    conditions = queue_conditions(engine, {"ClusterQueue refused": "its flavor h200 does not exist"})
    assert {name: (c.active, c.reason) for name, c in conditions.cluster_queues.items()} == {
        "research": (True, "Ready"),
        "refused": (False, "Inactive"),
        "held": (False, "Stopped"),
    }
    assert conditions.cluster_queues["refused"].message == "its flavor h200 does not exist"
    assert {namespace: (c.active, c.reason) for (namespace, _), c in conditions.local_queues.items()} == {
        "research": (False, "Stopped"),
        "lost": (False, "ClusterQueueDoesNotExist"),
        "paused": (False, "ClusterQueueIsInactive"),
        "open": (True, "Ready"),
        "bad": (False, "ClusterQueueIsInactive"),
    }
    view = NewestCopies()
    details = local_queue_details(engine, view, local_queue_gauges(engine, {}), finished_workloads(view), conditions)
    assert {local.namespace: local.active for local in details} == {
        "research": "False",
        "lost": "False",
        "paused": "False",
        "open": "True",
        "bad": "False",
    }, "the metric's Active is the status condition's"
    assert {queue.name: queue.status for queue in cluster_queue_gauges(engine, conditions)} == {
        "research": "active",
        "refused": "pending",
        "held": "pending",
    }
