"""ClusterQueue and LocalQueue status as ``kubectl get`` and Kueue's tools read it: counts, usage, fair share and
the Active condition, written only when they change and rationed, so that busy queues never cost the API server
a write each per second.
"""

from __future__ import annotations

import time
from typing import Any

from kuota.engine import quantities
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import CLUSTER_QUEUES, LOCAL_QUEUES, ApiWriter, Resource
from kuota.webhook.controller.errors import StaleObjectError
from kuota.webhook.controller.metrics import ClusterQueueGauges
from kuota.webhook.controller.queue_gauges import cluster_queue_gauges, local_queue_gauges
from kuota.webhook.controller.state import ControllerState, gather

_STATUS_WRITES_PER_ROUND = 10


class QueueStatusWriter:
    def __init__(self, state: ControllerState, reporter: ApiWriter) -> None:
        self._state = state
        self._reporter = reporter
        self._active_since: dict[str, tuple[bool, float]] = {}  # ClusterQueue Active condition and its transition
        self._last_status: dict[str, Any] = {}
        self._status_written_at: dict[str, float] = {}  # monotonic time of each queue's last status write

    async def write(self) -> None:
        """Write each queue's status when it differs from what this replica last wrote: at most
        ``_STATUS_WRITES_PER_ROUND`` a round, the longest unwritten first. A few changing queues are current
        within a round; under a storm of admissions every queue's counts change every round, and hundreds of
        queues would otherwise cost the API server a write each per second."""
        changed: list[tuple[float, str, Resource, str | None, str, dict[str, Any]]] = []

        def consider(resource: Resource, namespace: str | None, name: str, body: dict[str, Any]) -> None:
            slot = f"{resource.plural}/{namespace}/{name}"
            if self._last_status.get(slot) != body:
                changed.append((self._status_written_at.get(slot, 0.0), slot, resource, namespace, name, body))

        for gauges in cluster_queue_gauges(self._state.engine):
            consider(CLUSTER_QUEUES, None, gauges.name, self._cluster_queue_status(gauges))
        for local in local_queue_gauges(self._state.engine, self._state.workloads):
            body = {
                "pendingWorkloads": local.pending_active + local.pending_inadmissible,
                "reservingWorkloads": local.reserving,
                "admittedWorkloads": local.admitted,
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

    def _cluster_queue_status(self, gauges: ClusterQueueGauges) -> dict[str, Any]:
        invalid = self._state.invalid.get(f"ClusterQueue {gauges.name}")
        engine_status = self._state.engine.cluster_queue_status(gauges.name)
        active = engine_status.active and invalid is None
        message = invalid or engine_status.inactive_reason or "Can admit new workloads"
        flavors: dict[str, list[dict[str, Any]]] = {}
        for usage in engine_status.usage:
            flavors.setdefault(usage.flavor, []).append(
                {
                    "name": usage.resource,
                    "total": quantities.format_quantity(usage.resource, usage.total),
                    "borrowed": quantities.format_quantity(usage.resource, usage.borrowed),
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
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if active else "False",
                    "reason": "Ready" if active else "Inactive",
                    "message": message,
                    "lastTransitionTime": status.rfc3339(self._active_transition(gauges.name, active)),
                }
            ],
        }

    def _active_transition(self, name: str, active: bool) -> float:
        """When the ClusterQueue's Active condition last flipped: fixed between flips, so an idle queue's status
        is not rewritten every round."""
        known = self._active_since.get(name)
        if known is None or known[0] != active:
            known = (active, self._state.clock())
            self._active_since[name] = known
        return known[1]
