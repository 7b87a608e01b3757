"""The pending workloads of a ClusterQueue or LocalQueue, in the order the engine admits them, as Kueue's
``PendingWorkloadsSummary``.

The order is the engine's own: within a ClusterQueue every pending head is tried by its record's sort key
(priority, highest first; then creation time, oldest first; then uid and key as tiebreaks), which is Kueue's
``queueOrderingFunc`` for its ``PendingWorkloadsInfo``. Pending means what the engine holds pending in that
ClusterQueue, including workloads set aside because their head does not fit and those held by a stopped or
inactive ClusterQueue (Kueue lists those too); workloads backing off after an eviction, deactivated ones and
ones no queue can take (their LocalQueue is missing) are not listed.

Windows are Kueue's: ``offset`` counts from the first of the queue asked for (the ClusterQueue, or the
LocalQueue's own workloads), ``limit`` (default 1000; 0 means the default; at most :data:`MAX_LIMIT`) caps
the items. Positions start at 0: ``positionInClusterQueue`` among all of the ClusterQueue's pending workloads,
``positionInLocalQueue`` among those of the same LocalQueue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kuota.engine import QuotaEngine, WorkloadState
from kuota.webhook.visibility.errors import BadQueryError

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # the preferred version first, as Kueue registers them
DEFAULT_LIMIT = 1000
# The most one answer holds, whatever ``limit`` asks: a bound on the response, far above any queue people read.
MAX_LIMIT = 100_000


@dataclass(frozen=True, slots=True)
class QueuedWorkload:
    """One pending workload where it stands in its ClusterQueue."""

    namespace: str
    name: str
    local_queue: str
    priority: int
    position_in_cluster_queue: int


@dataclass(frozen=True, slots=True)
class Window:
    offset: int = 0
    limit: int = DEFAULT_LIMIT


def parse_window(query: Mapping[str, str]) -> Window:
    """``offset`` and ``limit`` from a request's query, as Kueue reads them (a missing or 0 limit: 1000)."""
    values: dict[str, int] = {}
    for name in ("offset", "limit"):
        raw = query.get(name)
        if raw is None or raw == "":
            values[name] = 0
            continue
        try:
            values[name] = int(raw)
        except ValueError:
            raise BadQueryError(f"query parameter {name}={raw!r} is not an integer: give a whole number >= 0") from None
        if values[name] < 0:
            raise BadQueryError(f"query parameter {name}={raw} is negative: give a whole number >= 0")
    return Window(offset=values["offset"], limit=min(values["limit"] or DEFAULT_LIMIT, MAX_LIMIT))


def cluster_queue_order(engine: QuotaEngine, cluster_queue: str) -> list[QueuedWorkload] | None:
    """Every workload pending in ``cluster_queue``, first to be admitted first; None when it does not exist."""
    if cluster_queue not in engine.cluster_queues:
        return None
    keys = [
        key
        for key, status in engine.statuses_without_reasons()
        if status.state is WorkloadState.PENDING and status.cluster_queue == cluster_queue
    ]
    # The engine's records hold the sort key its queues are ordered by; they are read here, never changed.
    records = engine._manager.records
    ordered = sorted((records[key] for key in keys), key=lambda record: record.sort_key)
    return [
        QueuedWorkload(
            namespace=record.workload.namespace,
            name=record.workload.name,
            local_queue=record.workload.queue_name,
            priority=record.workload.priority,
            position_in_cluster_queue=position,
        )
        for position, record in enumerate(ordered)
    ]


def cluster_queue_of(engine: QuotaEngine, namespace: str, local_queue: str) -> str | None:
    """The ClusterQueue a LocalQueue points at, when both exist."""
    found = engine.local_queues.get((namespace, local_queue))
    if found is None or found.cluster_queue not in engine.cluster_queues:
        return None
    return found.cluster_queue


@dataclass(frozen=True, slots=True)
class Listed:
    """One item of an answer: the workload and its position in its LocalQueue."""

    workload: QueuedWorkload
    position_in_local_queue: int


def cluster_queue_window(order: list[QueuedWorkload], window: Window) -> list[Listed]:
    """The items ``window`` selects from a ClusterQueue's order, with their LocalQueue positions."""
    seen: dict[tuple[str, str], int] = {}
    listed: list[Listed] = []
    for workload in order[: window.offset + window.limit]:
        local = (workload.namespace, workload.local_queue)
        position = seen.get(local, 0)
        seen[local] = position + 1
        if workload.position_in_cluster_queue >= window.offset:
            listed.append(Listed(workload, position))
    return listed


def local_queue_window(order: list[QueuedWorkload], namespace: str, local_queue: str, window: Window) -> list[Listed]:
    """The items ``window`` selects from one LocalQueue's workloads within its ClusterQueue's order."""
    own = [w for w in order if (w.namespace, w.local_queue) == (namespace, local_queue)]
    return [
        Listed(workload, window.offset + index) for index, workload in enumerate(own[window.offset :][: window.limit])
    ]


Metadata = Callable[[str], Mapping[str, Any] | None]
Extra = Callable[[str], Mapping[str, Any] | None]


def summary(version: str, listed: list[Listed], metadata: Metadata, extra: Extra) -> dict[str, Any]:
    """Kueue's ``PendingWorkloadsSummary``: each item a ``PendingWorkload`` with the Workload's name, namespace,
    owner references and creation time (``metadata`` gives the Workload object's metadata by key), plus what
    ``extra`` adds by key (kuota's admission estimate, which Kueue's clients ignore)."""
    items = []
    for entry in listed:
        workload = entry.workload
        key = f"{workload.namespace}/{workload.name}"
        found = metadata(key) or {}
        item_metadata: dict[str, Any] = {
            "name": workload.name,
            "namespace": workload.namespace,
            "creationTimestamp": found.get("creationTimestamp"),
        }
        owners = [
            {field: owner[field] for field in ("apiVersion", "kind", "name", "uid") if field in owner}
            for owner in found.get("ownerReferences") or ()
        ]
        if owners:
            item_metadata["ownerReferences"] = owners
        item: dict[str, Any] = {
            "metadata": item_metadata,
            "priority": workload.priority,
            "localQueueName": workload.local_queue,
            "positionInClusterQueue": workload.position_in_cluster_queue,
            "positionInLocalQueue": entry.position_in_local_queue,
        }
        item.update(extra(key) or {})
        items.append(item)
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {},
        "items": items,
    }
