"""What the quota engine hands out: its decisions (``Admission``, ``Eviction``) and the statuses it reports.

They live apart from ``quota_engine`` so that the queues (``queue_manager``) and the scheduling cycle
(``scheduler``) can build them without importing the facade; ``quota_engine`` re-exports every name.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

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
    ADMISSION_CHECK = "AdmissionCheck"
    # Kueue's WorkloadEvictedDueToNodeFailures: a failed node's pods found no replacement.
    NODE_FAILURES = "NodeFailures"


class Admission:
    """Admit ``workload`` to ``cluster_queue`` with these flavors; the victims listed were evicted for it.

    Here and in ``Eviction``, a plain class equal and hashed by value, as a frozen dataclass would be (built
    once per decision: see ``setup.py``)."""

    def __init__(  # noqa: PLR0917 (positional, as the dataclass it replaced was built)
        self,
        workload: str,
        cluster_queue: str,
        pod_sets: tuple[PodSetAssignment, ...],
        borrowing: bool,
        at: float,
        preempted: tuple[str, ...] = (),
    ) -> None:
        self.workload: Final = workload
        self.cluster_queue: Final = cluster_queue
        self.pod_sets: Final = pod_sets
        self.borrowing: Final = borrowing
        self.at: Final = at
        self.preempted: Final = preempted

    def _fields(self) -> tuple[object, ...]:
        return (self.workload, self.cluster_queue, self.pod_sets, self.borrowing, self.at, self.preempted)

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Admission) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Admission(workload={self.workload!r}, cluster_queue={self.cluster_queue!r}, "
            f"pod_sets={self.pod_sets!r}, borrowing={self.borrowing!r}, at={self.at!r}, "
            f"preempted={self.preempted!r})"
        )


class Eviction:
    """Evict an admitted ``workload``; it requeues (at ``requeue_at`` after a backoff) unless deactivated."""

    def __init__(  # noqa: PLR0917 (positional, as the dataclass it replaced was built)
        self,
        workload: str,
        cluster_queue: str,
        reason: EvictionReason,
        at: float,
        preempted_by: str | None = None,
        preemption_reason: PreemptionReason | None = None,
        requeue_at: float | None = None,
        deactivated: bool = False,
    ) -> None:
        self.workload: Final = workload
        self.cluster_queue: Final = cluster_queue
        self.reason: Final = reason
        self.at: Final = at
        self.preempted_by: Final = preempted_by
        self.preemption_reason: Final = preemption_reason
        self.requeue_at: Final = requeue_at
        self.deactivated: Final = deactivated

    def _fields(self) -> tuple[object, ...]:
        return (
            self.workload,
            self.cluster_queue,
            self.reason,
            self.at,
            self.preempted_by,
            self.preemption_reason,
            self.requeue_at,
            self.deactivated,
        )

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Eviction) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Eviction(workload={self.workload!r}, cluster_queue={self.cluster_queue!r}, reason={self.reason!r}, "
            f"at={self.at!r}, preempted_by={self.preempted_by!r}, preemption_reason={self.preemption_reason!r}, "
            f"requeue_at={self.requeue_at!r}, deactivated={self.deactivated!r})"
        )


Decision = Admission | Eviction


class WorkloadStatus:
    """Where a workload stands. Built for every workload at every status round (each second, by each reader), so a
    plain class: a frozen dataclass's generated ``__init__`` runs interpreted even when compiled."""

    def __init__(
        self,
        state: WorkloadState,
        cluster_queue: str | None,
        reason: str | None,
        inadmissible: bool = False,
        waiting_for_pods_ready: bool = False,
    ) -> None:
        self.state: Final = state
        self.cluster_queue: Final = cluster_queue
        self.reason: Final = reason
        # True when the workload cannot be admitted as configured, however long it waits.
        self.inadmissible: Final = inadmissible
        # True for the head held back by waitForPodsReady's blockAdmission (Kueue's QuotaReserved reason
        # WaitingForPodsReady): it is admitted once every admitted workload's pods are ready.
        self.waiting_for_pods_ready: Final = waiting_for_pods_ready

    def _fields(self) -> tuple[object, ...]:
        return (self.state, self.cluster_queue, self.reason, self.inadmissible, self.waiting_for_pods_ready)

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, WorkloadStatus) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"WorkloadStatus(state={self.state!r}, cluster_queue={self.cluster_queue!r}, reason={self.reason!r}, "
            f"inadmissible={self.inadmissible!r}, waiting_for_pods_ready={self.waiting_for_pods_ready!r})"
        )


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
    # Kueue's Active condition (reason, message) for an inactive queue, where Kueue has words for the cause.
    inactive_condition: tuple[str, str] | None = None
