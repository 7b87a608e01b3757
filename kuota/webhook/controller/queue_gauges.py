"""Each queue's counts and quota usage in the shape of Kueue's queue gauges, worked out from the engine when
asked (at scrape time, and for each round of queue status writes) rather than kept up to date as thousands of
gauge children; the queues' status and the metrics thus show the same numbers. What only the metrics show
(LocalQueue status and usage, finished Workloads, Cohorts) is worked out at scrape time alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kuota.engine import (
    INFINITE_SHARE,
    EngineError,
    InvalidObjectError,
    QuotaEngine,
    StopPolicy,
    Workload,
    WorkloadState,
    weighted_share,
)
from kuota.simulator.forecast import Eta
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.metrics import (
    ClusterQueueGauges,
    CohortGauges,
    CohortQuotaLine,
    LocalQueueGauges,
    LocalQueueUsage,
    QuotaLine,
)
from kuota.webhook.controller.state import NewestCopies


@dataclass(frozen=True)
class ActiveCondition:
    """A queue's Active condition in Kueue's reasons and words."""

    active: bool
    reason: str
    message: str


@dataclass(frozen=True)
class QueueConditions:
    """Every queue's Active condition, decided once so that the queues' status and the metrics agree."""

    cluster_queues: dict[str, ActiveCondition]
    local_queues: dict[tuple[str, str], ActiveCondition]


def queue_conditions(engine: QuotaEngine, invalid: Mapping[str, str]) -> QueueConditions:
    """``invalid``: the configuration objects the controller refused, keyed "ClusterQueue NAME", with why."""
    cluster_queues = {}
    for name, queue in engine.cluster_queues.items():
        try:
            engine_status = engine.cluster_queue_status(name)
        except EngineError:
            continue
        refused = invalid.get(f"ClusterQueue {name}")
        if refused is not None:
            condition = ActiveCondition(False, "Inactive", refused)
        elif not engine_status.active:
            reason, message = engine_status.inactive_condition or ("Inactive", engine_status.inactive_reason or "")
            condition = ActiveCondition(False, reason, message)
        elif queue.stop_policy is not StopPolicy.NONE:
            condition = ActiveCondition(False, "Stopped", "Can't admit new workloads: is stopped.")
        else:
            condition = ActiveCondition(True, "Ready", "Can admit new workloads")
        cluster_queues[name] = condition
    local_queues = {}
    for key, local in engine.local_queues.items():
        cluster_queue = cluster_queues.get(local.cluster_queue)
        if local.stop_policy is not StopPolicy.NONE:
            condition = ActiveCondition(False, "Stopped", "LocalQueue is stopped")
        elif cluster_queue is None:
            condition = ActiveCondition(False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
        elif cluster_queue.active:
            condition = ActiveCondition(True, "Ready", "Can submit new workloads to localQueue")
        else:
            condition = ActiveCondition(False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
        local_queues[key] = condition
    return QueueConditions(cluster_queues, local_queues)


def cluster_queue_gauges(engine: QuotaEngine, conditions: QueueConditions) -> list[ClusterQueueGauges]:
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
        condition = conditions.cluster_queues.get(name)
        result.append(
            ClusterQueueGauges(
                name=name,
                status="active" if condition is not None and condition.active else "pending",
                pending_active=queue_status.pending - stuck,
                pending_inadmissible=stuck,
                reserving=queue_status.admitted,
                admitted=queue_status.admitted,
                weighted_share=_share(queue_status.weighted_share),
                quotas=quotas,
                cohort=queue.cohort or "",
            )
        )
    return result


def local_queue_gauges(engine: QuotaEngine, parsed: Mapping[str, Workload]) -> list[LocalQueueGauges]:
    """Each LocalQueue's pending and admitted Workloads. ``parsed``: the Workloads as the engine was last given
    them (:attr:`ControllerState.parsed`), whose namespace and queue are read without decoding a kept copy: this
    runs every second, over every Workload the engine holds."""
    counts: dict[tuple[str, str], list[int]] = {key: [0, 0, 0] for key in engine.local_queues}
    for key, engine_status in engine.statuses_without_reasons():
        workload = parsed.get(key)
        if workload is None:
            continue
        slot = counts.get((workload.namespace, workload.queue_name))
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


@dataclass
class FinishedWorkloads:
    """Finished Workloads still kept in the API, per ClusterQueue and per (namespace, LocalQueue)."""

    cluster_queues: dict[str, int] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], int] = field(default_factory=dict)


def finished_workloads(workloads: NewestCopies) -> FinishedWorkloads:
    counts = FinishedWorkloads()
    for obj in workloads.finished():
        cluster_queue = status.admitted_cluster_queue(obj)
        if cluster_queue is None:
            continue
        counts.cluster_queues[cluster_queue] = counts.cluster_queues.get(cluster_queue, 0) + 1
        local = (obj["metadata"]["namespace"], obj["spec"].get("queueName", ""))
        counts.local_queues[local] = counts.local_queues.get(local, 0) + 1
    return counts


def with_finished(gauges: list[ClusterQueueGauges], finished: FinishedWorkloads) -> list[ClusterQueueGauges]:
    return [replace(queue, finished=finished.cluster_queues.get(queue.name, 0)) for queue in gauges]


def with_head_etas(gauges: list[ClusterQueueGauges], heads: Mapping[str, Eta], now: float) -> list[ClusterQueueGauges]:
    """The gauges with each ClusterQueue's head ETA, in seconds from ``now``."""
    return [
        replace(gauge, next_admission_eta=max(0.0, heads[gauge.name].at - now)) if gauge.name in heads else gauge
        for gauge in gauges
    ]


def local_queue_details(
    engine: QuotaEngine,
    workloads: NewestCopies,
    gauges: list[LocalQueueGauges],
    finished: FinishedWorkloads,
    conditions: QueueConditions,
) -> list[LocalQueueGauges]:
    """The LocalQueue gauges with what only the metrics show: the Active status, finished Workloads, and the
    quota their admitted Workloads hold (read from each admission, so only at scrape time)."""
    usage: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
    for key, engine_status in engine.statuses_without_reasons():
        obj = workloads.get(key)
        if obj is None or engine_status.state is not WorkloadState.ADMITTED:
            continue
        try:
            pod_sets = status.admitted_pod_sets(obj) or ()
        except InvalidObjectError:
            continue
        held = usage.setdefault((obj["metadata"]["namespace"], obj["spec"].get("queueName", "")), {})
        for pod_set in pod_sets:
            for resource, amount in pod_set.usage.items():
                flavor = pod_set.flavors.get(resource, "")
                held[(flavor, resource)] = held.get((flavor, resource), 0) + amount
    detailed = []
    for local in gauges:
        queue_key = (local.namespace, local.name)
        condition = conditions.local_queues.get(queue_key)
        lines = [
            LocalQueueUsage(flavor, resource, _metric_units(resource, amount))
            for (flavor, resource), amount in sorted(usage.get(queue_key, {}).items())
        ]
        detailed.append(
            replace(
                local,
                active="Unknown" if condition is None else str(condition.active),
                finished=finished.local_queues.get(queue_key, 0),
                usage=lines,
            )
        )
    return detailed


def cohort_gauges(engine: QuotaEngine) -> list[CohortGauges]:
    """Each Cohort's share, subtree quota, the quota reserved in its subtree and its admitted workloads."""
    admitted: dict[str, int] = {}
    for _, engine_status in engine.statuses_without_reasons():  # also brings the tree up to date
        if engine_status.state is WorkloadState.ADMITTED and engine_status.cluster_queue:
            admitted[engine_status.cluster_queue] = admitted.get(engine_status.cluster_queue, 0) + 1
    tree = engine.tree
    below: dict[str, int] = {}
    for name, node in tree.cluster_queues.items():
        for cohort in node.upward[1:]:
            below[cohort.name] = below.get(cohort.name, 0) + admitted.get(name, 0)
    fair = engine.configuration.fair_sharing is not None
    result = []
    for name, node in sorted(tree.cohorts.items()):
        if name in tree.cyclic_cohorts:
            continue
        quotas = [
            CohortQuotaLine(
                flavor,
                resource,
                _metric_units(resource, amount),
                _metric_units(resource, node.usage.get((flavor, resource), 0)),
            )
            for (flavor, resource), amount in sorted(node.subtree.items())
        ]
        share = _share(weighted_share(tree, node)) if fair else 0.0
        result.append(CohortGauges(name, share, below.get(name, 0), quotas))
    return result


def _share(share: int) -> float:
    """A weighted share as Kueue reports it: NaN where the engine's is infinite (zero weight, borrowing)."""
    return math.nan if share >= INFINITE_SHARE else float(share)


def _metric_units(resource: str, units: int) -> float:
    return units / 1000 if resource == "cpu" else float(units)


def _optional_units(resource: str, units: int | None) -> float | None:
    return None if units is None else _metric_units(resource, units)
