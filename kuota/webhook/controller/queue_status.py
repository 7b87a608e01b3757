"""ClusterQueue and LocalQueue status as ``kubectl get`` and Kueue's tools read it: counts, usage, fair share and
the Active condition, written only when they change and rationed, so that busy queues never cost the API server
a write each per second.
"""

from __future__ import annotations

import time
from typing import Any

from kuota.engine import format_quantity
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import CLUSTER_QUEUES, LOCAL_QUEUES, ApiWriter, Resource
from kuota.webhook.controller.errors import StaleObjectError
from kuota.webhook.controller.metrics import ClusterQueueGauges
from kuota.webhook.controller.queue_gauges import (
    ActiveCondition,
    QueueConditions,
    cluster_queue_gauges,
    local_queue_gauges,
    queue_conditions,
)
from kuota.webhook.controller.state import ControllerState, gather

_STATUS_WRITES_PER_ROUND = 10


class QueueStatusWriter:
    def __init__(self, state: ControllerState, reporter: ApiWriter) -> None:
        self._state = state
        self._reporter = reporter
        self._active_since: dict[str, tuple[bool, float]] = {}  # each queue's Active condition and its transition
        self._last_status: dict[str, Any] = {}
        self._status_written_at: dict[str, float] = {}  # monotonic time of each queue's last status write

    def forget(self, kind: str, key: str) -> None:
        """A queue was deleted: one created again under its name is a new object, whose status is written."""
        namespace, _, name = key.rpartition("/")
        resource = CLUSTER_QUEUES if kind == "ClusterQueue" else LOCAL_QUEUES
        slot = _slot(resource, namespace or None, name)
        for cache in (self._last_status, self._status_written_at, self._active_since):
            cache.pop(slot, None)

    async def write(self) -> None:
        """Write each queue's status when it differs from what this replica last wrote: at most
        ``_STATUS_WRITES_PER_ROUND`` a round, the longest unwritten first. A few changing queues are current
        within a round; under a storm of admissions every queue's counts change every round, and hundreds of
        queues would otherwise cost the API server a write each per second."""
        changed: list[tuple[float, str, Resource, str | None, str, dict[str, Any]]] = []

        def consider(resource: Resource, namespace: str | None, name: str, body: dict[str, Any]) -> None:
            slot = _slot(resource, namespace, name)
            if self._last_status.get(slot) != body:
                changed.append((self._status_written_at.get(slot, 0.0), slot, resource, namespace, name, body))

        engine = self._state.engine
        conditions = queue_conditions(engine, self._state.invalid)
        for gauges in cluster_queue_gauges(engine, conditions):
            consider(CLUSTER_QUEUES, None, gauges.name, self._cluster_queue_status(gauges, conditions))
        for local in local_queue_gauges(engine, self._state.parsed):
            condition = conditions.local_queues[(local.namespace, local.name)]
            stopped = condition.reason == "Stopped"
            slot = _slot(LOCAL_QUEUES, local.namespace, local.name)
            body = {
                # As Kueue: a stopped LocalQueue counts no pending workloads (none of them can be admitted).
                "pendingWorkloads": 0 if stopped else local.pending_active + local.pending_inadmissible,
                "reservingWorkloads": local.reserving,
                "admittedWorkloads": local.admitted,
                "conditions": [self._active_condition(slot, condition)],
            }
            consider(LOCAL_QUEUES, local.namespace, local.name, body)
        changed.sort(key=lambda entry: entry[:2])
        now = time.monotonic()
        writes = []
        for _, slot, resource, namespace, name, body in changed[:_STATUS_WRITES_PER_ROUND]:
            self._last_status[slot] = body
            self._status_written_at[slot] = now
            writes.append(self._write_status(slot, resource, namespace, name, body))
        await gather(writes)

    async def _write_status(
        self, slot: str, resource: Resource, namespace: str | None, name: str, body: dict[str, Any]
    ) -> None:
        try:
            await self._reporter.merge_patch(resource, namespace, name, {"status": body}, "status")
        except StaleObjectError:
            self._last_status.pop(slot, None)  # written again next round

    def _cluster_queue_status(self, gauges: ClusterQueueGauges, conditions: QueueConditions) -> dict[str, Any]:
        engine_status = self._state.engine.cluster_queue_status(gauges.name)
        condition = conditions.cluster_queues[gauges.name]
        flavors: dict[str, list[dict[str, Any]]] = {}
        for usage in engine_status.usage:
            flavors.setdefault(usage.flavor, []).append(
                {
                    "name": usage.resource,
                    "total": format_quantity(usage.resource, usage.total),
                    "borrowed": format_quantity(usage.resource, usage.borrowed),
                }
            )
        usage_list = [{"name": flavor, "resources": resources} for flavor, resources in flavors.items()]
        return {
            "pendingWorkloads": gauges.pending_active + gauges.pending_inadmissible,
            "reservingWorkloads": gauges.reserving,
            "admittedWorkloads": gauges.admitted,
            "flavorsReservation": usage_list,
            "flavorsUsage": usage_list,
            "fairSharing": {"weightedShare": engine_status.weighted_share},
            "conditions": [self._active_condition(_slot(CLUSTER_QUEUES, None, gauges.name), condition)],
        }

    def _active_condition(self, slot: str, condition: ActiveCondition) -> dict[str, Any]:
        """A queue's Active condition; its transition time is fixed between flips, so an idle queue's status is
        not rewritten every round."""
        known = self._active_since.get(slot)
        if known is None or known[0] != condition.active:
            known = (condition.active, self._state.clock())
            self._active_since[slot] = known
        return {
            "type": "Active",
            "status": str(condition.active),
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": status.rfc3339(known[1]),
        }


def _slot(resource: Resource, namespace: str | None, name: str) -> str:
    return f"{resource.plural}/{namespace}/{name}"
