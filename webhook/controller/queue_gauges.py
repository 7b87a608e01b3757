"""Each queue's counts and quota usage in the shape of Kueue's queue gauges, worked out from the engine when
asked (at scrape time, and for each round of queue status writes) rather than kept up to date as thousands of
gauge children; the queues' status and the metrics thus show the same numbers.
"""

from __future__ import annotations

from kuota.engine.engine import QuotaEngine, WorkloadState
from kuota.engine.errors import EngineError
from kuota.webhook.controller.metrics import ClusterQueueGauges, LocalQueueGauges, QuotaLine
from kuota.webhook.controller.state import View


def cluster_queue_gauges(engine: QuotaEngine) -> list[ClusterQueueGauges]:
    inadmissible: dict[str, int] = {}
    for _, workload_status in engine.statuses_without_reasons():
        queue_name = workload_status.cluster_queue
        if workload_status.state is WorkloadState.PENDING and workload_status.inadmissible and queue_name:
            inadmissible[queue_name] = inadmissible.get(queue_name, 0) + 1
    result = []
    for name, queue in sorted(engine.cluster_queues.items()):
        try:
            queue_status = engine.cluster_queue_status(name)
        except EngineError:
            continue
        quotas = []
        limits = {
            (flavor.name, resource.name): resource
            for group in queue.resource_groups
            for flavor in group.flavors
            for resource in flavor.resources
        }
        for usage in queue_status.usage:
            limit = limits.get((usage.flavor, usage.resource))
            quotas.append(
                QuotaLine(
                    cohort=queue.cohort or "",
                    cluster_queue=name,
                    flavor=usage.flavor,
                    resource=usage.resource,
                    usage=_metric_units(usage.resource, usage.total),
                    nominal=_metric_units(usage.resource, usage.nominal),
                    borrowing_limit=_optional_units(usage.resource, limit.borrowing_limit if limit else None),
                    lending_limit=_optional_units(usage.resource, limit.lending_limit if limit else None),
                )
            )
        stuck = inadmissible.get(name, 0)
        result.append(
            ClusterQueueGauges(
                name=name,
                status="active" if queue_status.active else "pending",
                pending_active=queue_status.pending - stuck,
                pending_inadmissible=stuck,
                reserving=queue_status.admitted,
                admitted=queue_status.admitted,
                weighted_share=float(queue_status.weighted_share),
                quotas=quotas,
            )
        )
    return result


def local_queue_gauges(engine: QuotaEngine, workloads: View) -> list[LocalQueueGauges]:
    counts: dict[tuple[str, str], list[int]] = {key: [0, 0, 0] for key in engine.local_queues}
    for key, engine_status in engine.statuses_without_reasons():
        obj = workloads.get(key)
        if obj is None:
            continue
        slot = counts.get((obj["metadata"]["namespace"], obj["spec"].get("queueName", "")))
        if slot is None:
            continue
        if engine_status.state is WorkloadState.ADMITTED:
            slot[2] += 1
        elif engine_status.inadmissible:
            slot[1] += 1
        else:
            slot[0] += 1
    return [
        LocalQueueGauges(namespace, name, active, inadmissible, admitted, admitted)
        for (namespace, name), (active, inadmissible, admitted) in sorted(counts.items())
    ]


def _metric_units(resource: str, units: int) -> float:
    return units / 1000 if resource == "cpu" else float(units)


def _optional_units(resource: str, units: int | None) -> float | None:
    return None if units is None else _metric_units(resource, units)
