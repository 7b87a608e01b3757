"""What the quota engine hands out: its decisions (``Admission``, ``Eviction``) and the statuses it reports.

They live apart from ``engine`` so that the queues (``queue_manager``) and the scheduling cycle
(``scheduler``) can build them without importing the facade; ``kuota.engine.engine`` re-exports every name.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kuota.engine.flavor_assignment import PodSetAssignment
from kuota.engine.preemption import PreemptionReason


class WorkloadState(StrEnum):
    PENDING = "Pending"
    ADMITTED = "Admitted"
    BACKOFF = "Backoff"
    DEACTIVATED = "Deactivated"


class EvictionReason(StrEnum):
    PREEMPTED = "Preempted"
    DEACTIVATED = "Deactivated"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    PODS_READY_TIMEOUT = "PodsReadyTimeout"


@dataclass(frozen=True)
class Admission:
    """Admit ``workload`` to ``cluster_queue`` with these flavors; the victims listed were evicted for it."""

    workload: str
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    borrowing: bool
    at: float
    preempted: tuple[str, ...] = ()


@dataclass(frozen=True)
class Eviction:
    """Evict an admitted ``workload``; it requeues (at ``requeue_at`` after a backoff) unless deactivated."""

    workload: str
    cluster_queue: str
    reason: EvictionReason
    at: float
    preempted_by: str | None = None
    preemption_reason: PreemptionReason | None = None
    requeue_at: float | None = None
    deactivated: bool = False


Decision = Admission | Eviction


@dataclass(frozen=True)
class WorkloadStatus:
    state: WorkloadState
    cluster_queue: str | None
    reason: str | None
    # True when the workload cannot be admitted as configured, however long it waits.
    inadmissible: bool = False


@dataclass(frozen=True)
class ResourceUsage:
    flavor: str
    resource: str
    total: int
    borrowed: int
    nominal: int


@dataclass(frozen=True)
class ClusterQueueStatus:
    name: str
    active: bool
    inactive_reason: str | None
    pending: int
    admitted: int
    usage: tuple[ResourceUsage, ...]
    weighted_share: int
