"""The quota engine's one entry point: ``QuotaEngine`` holds queues, flavors and workloads, and decides
admissions, preemptions and evictions.

State changes come in as calls (``apply``/``delete_object`` for configuration objects, ``submit``,
``finish``, ``remove``, ``evict`` for workloads); decisions come out of ``schedule(now)``. The engine has no
clock: every time is the caller's ``now``, so the controller and the simulator get the same decisions.

This module is the facade and nothing more: the configuration objects as applied, and the calls that shells
make. Behind it, ``queue_manager`` keeps where every workload is (the structures of ``queues``) and when a
set-aside head is tried again, and ``scheduler`` runs the scheduling cycle over that state; what they hand
out is in ``decisions`` (re-exported here). The one-at-a-time rule that the batching keeps exact is stated
in ``scheduler``; the scheduler rules are in docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from kuota.engine.decisions import (
    Admission,
    ClusterQueueStatus,
    Decision,
    Eviction,
    EvictionReason,
    ResourceUsage,
    WorkloadState,
    WorkloadStatus,
)
from kuota.engine.errors import UnknownObjectError
from kuota.engine.fair_sharing import weighted_share
from kuota.engine.flavor_assignment import Assignment, Mode, PodSetAssignment
from kuota.engine.model import (
    AdmissionCheck,
    ApiObject,
    ClusterQueue,
    Cohort,
    Configuration,
    LocalQueue,
    Namespace,
    ResourceFlavor,
    Topology,
    TopologyNode,
    Workload,
    WorkloadPriorityClass,
)
from kuota.engine.preemption import AdmittedWorkload
from kuota.engine.queue_manager import QueueManager, reason_of, workload_status
from kuota.engine.queues import Record, orders_by_eviction
from kuota.engine.quota_tree import FlavorResource, QuotaTree
from kuota.engine.scheduler import Scheduler

__all__ = [
    "Admission",
    "AdmittedWorkload",
    "ClusterQueueStatus",
    "Decision",
    "Eviction",
    "EvictionReason",
    "QuotaEngine",
    "ResourceUsage",
    "WorkloadState",
    "WorkloadStatus",
]

# The reason a workload submitted with spec.active false gives, pending or evicted for it.
_INACTIVE = "the workload is deactivated (spec.active is false)"
# The reason of the head blockAdmission holds back: Kueue's message.
WAITING_FOR_PODS_READY = "waiting for all admitted workloads to be in PodsReady condition"


class QuotaEngine:
    """Pure, deterministic Kueue-compatible admission over an in-memory state; see the package docstring."""

    def __init__(self, configuration: Configuration | None = None) -> None:
        self.configuration = configuration or Configuration()
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.local_queues: dict[tuple[str, str], LocalQueue] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.priority_classes: dict[str, WorkloadPriorityClass] = {}
        self.namespaces: dict[str, Namespace] = {}
        self.admission_checks: dict[str, AdmissionCheck] = {}
        self._manager = QueueManager()
        self._scheduler = Scheduler(self._manager)
        self._stale = True

    @property
    def tree(self) -> QuotaTree:
        """The quota tree with its usage, as last built from the configuration."""
        return self._manager.tree

    def apply(self, obj: ApiObject) -> None:
        """Add or replace a configuration object; the state is rebuilt lazily before the next decision."""
        if isinstance(obj, ResourceFlavor):
            self.flavors[obj.name] = obj
        elif isinstance(obj, ClusterQueue):
            self.cluster_queues[obj.name] = obj
        elif isinstance(obj, LocalQueue):
            self.local_queues[(obj.namespace, obj.name)] = obj
        elif isinstance(obj, Cohort):
            self.cohorts[obj.name] = obj
        elif isinstance(obj, WorkloadPriorityClass):
            self.priority_classes[obj.name] = obj
        elif isinstance(obj, Namespace):
            self.namespaces[obj.name] = obj
        elif isinstance(obj, AdmissionCheck):
            self.admission_checks[obj.name] = obj
        elif isinstance(obj, Topology):
            self._manager.topology.topologies[obj.name] = obj
        else:
            self.configuration = obj
        self._stale = True

    def delete_object(self, kind: str, name: str, namespace: str = "") -> None:
        """Forget a configuration object (``namespace`` only for a LocalQueue)."""
        found: object = None
        if kind == "LocalQueue":
            found = self.local_queues.pop((namespace, name), None)
        elif kind == "ResourceFlavor":
            found = self.flavors.pop(name, None)
        elif kind == "ClusterQueue":
            found = self.cluster_queues.pop(name, None)
        elif kind == "Cohort":
            found = self.cohorts.pop(name, None)
        elif kind == "WorkloadPriorityClass":
            found = self.priority_classes.pop(name, None)
        elif kind == "Namespace":
            found = self.namespaces.pop(name, None)
        elif kind == "AdmissionCheck":
            found = self.admission_checks.pop(name, None)
        elif kind == "Topology":
            found = self._manager.topology.topologies.pop(name, None)
        if found is None:
            raise UnknownObjectError(kind, f"{namespace}/{name}" if namespace else name)
        self._stale = True

    def apply_node(self, node: TopologyNode) -> None:
        """Add or replace a node as topology-aware placement sees it (its labels, free capacity, taints and
        readiness); the placements are made again from the next decision."""
        self._manager.topology.nodes[node.name] = node
        self._stale = True

    def delete_node(self, name: str) -> None:
        if self._manager.topology.nodes.pop(name, None) is None:
            raise UnknownObjectError("Node", name)
        self._stale = True

    def apply_pod_usage(self, key: str, node: str, requests: Mapping[str, int]) -> None:
        """Add or replace a bound, unfinished pod that is not a TAS pod (``key``: its namespace/name): its
        ``requests`` and one pod are taken from ``node``'s free capacity for TAS."""
        self._manager.topology.count_pod(key, node, requests)

    def delete_pod_usage(self, key: str) -> None:
        """The pod ``key`` finished or went: its node's capacity is free for TAS again."""
        topology = self._manager.topology
        node = topology.forget_pod(key)
        if node is None:
            raise UnknownObjectError("Pod", key)
        self._manager.wake_on_topology_free(topology.flavors_on(node))

    def priority_of(self, priority_class: str | None) -> int:
        """The value of a WorkloadPriorityClass (the ``default`` class when None; 0 when there is none)."""
        name = "default" if priority_class is None else priority_class
        found = self.priority_classes.get(name)
        if found is None:
            if priority_class is not None:
                raise UnknownObjectError("WorkloadPriorityClass", priority_class)
            return 0
        return found.value

    def submit(
        self, workload: Workload, now: float | None = None, *, evicted: tuple[EvictionReason, float] | None = None
    ) -> Eviction | None:
        """Add a pending workload, or replace the spec of a pending one.

        ``evicted``: the eviction it was requeued after, as its ``Evicted`` condition says (reason, time), which
        orders it instead of its creation where Kueue's queue order timestamp says so (a PodsReady timeout under
        ``requeuingStrategy.timestamp`` ``Eviction``, an AdmissionCheck); the engine's own evictions order so too.

        An admitted workload's spec is immutable in Kueue; only activity matters: one submitted with
        ``spec.active`` false is evicted (at ``now``) and deactivated here, and the Eviction is returned for
        the caller to write. Every other call returns None."""
        self._refresh()
        manager = self._manager
        old = manager.records.get(workload.key)
        if old is not None and old.state is not WorkloadState.PENDING:
            if workload.active or old.state is not WorkloadState.ADMITTED:
                return None
            eviction = self._scheduler.evict(old, EvictionReason.DEACTIVATED, now, deactivate=True)
            old.reason = _INACTIVE
            return eviction
        if old is not None:
            manager.unroute(old)
        ordered_by_eviction = evicted is not None and orders_by_eviction(
            evicted[0], self.configuration.wait_for_pods_ready
        )
        record = Record(workload, evicted[1] if evicted is not None and ordered_by_eviction else None)
        manager.records[workload.key] = record
        if workload.active:
            manager.route(record)
        else:
            record.state = WorkloadState.DEACTIVATED
            record.reason = _INACTIVE
        return None

    def restore_admitted(
        self, workload: Workload, cluster_queue: str, pod_sets: tuple[PodSetAssignment, ...], admitted_at: float
    ) -> None:
        """Record an admission made earlier (a controller restarting reads it from the Workload's status)."""
        self._refresh()
        manager = self._manager
        if cluster_queue not in manager.queues:
            raise UnknownObjectError("ClusterQueue", cluster_queue)
        record = Record(workload)
        manager.records[workload.key] = record
        usage: dict[FlavorResource, int] = {}
        for pod_set in pod_sets:
            for resource, amount in pod_set.usage.items():
                fr: FlavorResource = (pod_set.flavors[resource], resource)
                usage[fr] = usage.get(fr, 0) + amount
        node = manager.tree.cluster_queues.get(cluster_queue)
        borrowing = node is not None and any(
            node.usage.get(fr, 0) + amount > node.subtree.get(fr, 0) for fr, amount in usage.items()
        )
        assignment = Assignment(pod_sets, Mode.FIT, borrowing, usage)
        self._scheduler.admit(record, cluster_queue, assignment, admitted_at)

    def finish(self, key: str) -> None:
        """The workload finished or was deleted: free its quota and forget it."""
        self._refresh()
        record = self._manager.records.pop(key, None)
        if record is None:
            raise UnknownObjectError("Workload", key)
        if record.state is WorkloadState.ADMITTED:
            self._scheduler.release(record)
        self._manager.unroute(record)

    def remove(self, key: str) -> None:
        """The workload was deleted: the same as ``finish``."""
        self.finish(key)

    def evict(
        self,
        key: str,
        reason: EvictionReason,
        now: float,
        *,
        requeue_at: float | None = None,
        deactivate: bool = False,
    ) -> Eviction:
        """Evict an admitted workload for a reason the engine does not decide itself: a PodsReady timeout (its
        backoff is the engine's), an AdmissionCheck in Retry (requeued at ``requeue_at``, None: at once) or
        Rejected (``deactivate``)."""
        self._refresh()
        record = self._manager.records.get(key)
        if record is None or record.state is not WorkloadState.ADMITTED:
            raise UnknownObjectError("admitted Workload", key)
        return self._scheduler.evict(record, reason, now, deactivate=deactivate, requeue_at=requeue_at)

    def pods_ready(self, key: str, ready: bool) -> None:
        """Whether an admitted workload's pods are all ready (a shell reads its ``PodsReady`` condition). Under
        waitForPodsReady's ``blockAdmission``, an admitted workload counts as not ready from its admission (or
        ``restore_admitted``) until reported ready, and while any does, the head that would be admitted next waits
        instead (``status``: ``waiting_for_pods_ready``). Otherwise, and for a workload not admitted, it changes
        nothing."""
        self._refresh()
        manager = self._manager
        record = manager.records.get(key)
        if record is None:
            raise UnknownObjectError("Workload", key)
        if not manager.blocks_admission or record.state is not WorkloadState.ADMITTED:
            return
        if ready:
            manager.not_ready.discard(key)
        else:
            manager.not_ready.add(key)

    def restore_requeue_state(self, key: str, count: int, requeue_at: float | None) -> None:
        """A PodsReady backoff read back from a Workload's ``status.requeueState`` (a restarted controller): its
        count, and a pending workload waits until ``requeue_at``."""
        self._refresh()
        record = self._manager.records.get(key)
        if record is None:
            raise UnknownObjectError("Workload", key)
        record.requeue_count = count
        if requeue_at is not None and record.state is WorkloadState.PENDING:
            self._manager.unroute(record)
            self._scheduler.back_off(record, requeue_at)

    def status(self, key: str) -> WorkloadStatus:
        self._refresh()
        record = self._manager.records.get(key)
        if record is None:
            raise UnknownObjectError("Workload", key)
        if key == self._manager.pods_ready_waiter and record.state is WorkloadState.PENDING:
            return workload_status(record, WAITING_FOR_PODS_READY, waiting_for_pods_ready=True)
        return workload_status(record, reason_of(record))

    def admission(self, key: str) -> AdmittedWorkload | None:
        """An admitted workload's ClusterQueue, flavors and admission time; None for any other state."""
        self._refresh()
        record = self._manager.records.get(key)
        return record.admitted if record is not None and record.state is WorkloadState.ADMITTED else None

    def statuses_without_reasons(self) -> Iterator[tuple[str, WorkloadStatus]]:
        """Every workload's status with ``reason`` None: the reason's text is most of a status's cost, and
        counting workloads per queue, every second, needs none of it."""
        self._refresh()
        for key, record in self._manager.records.items():
            yield key, workload_status(record, None)

    def workloads(self) -> Iterable[str]:
        return self._manager.records.keys()

    def next_wakeup(self) -> float | None:
        """The earliest time at which ``schedule`` has something time-driven to do (backoff, deadline)."""
        return self._scheduler.next_wakeup()

    def schedule(self, now: float, limit: int | None = None) -> list[Decision]:
        """Every decision due at ``now``; with ``limit`` at most that many admissions (the rest stay due)."""
        self._refresh()
        return self._scheduler.schedule(now, limit)

    def cluster_queue_status(self, name: str) -> ClusterQueueStatus:
        self._refresh()
        queue = self._manager.queues.get(name)
        if queue is None:
            raise UnknownObjectError("ClusterQueue", name)
        tree = self._manager.tree
        node = tree.cluster_queues[name]
        usage = tuple(
            ResourceUsage(
                fr[0],
                fr[1],
                node.usage.get(fr, 0),
                max(0, node.usage.get(fr, 0) - node.subtree.get(fr, 0)),
                node.quotas[fr].nominal,
            )
            for fr in node.quotas
        )
        share = weighted_share(tree, node) if self.configuration.fair_sharing is not None else 0
        return ClusterQueueStatus(
            name,
            queue.inactive is None,
            queue.inactive,
            queue.pending,
            len(queue.admitted),
            usage,
            share,
            queue.inactive_condition,
        )

    def _refresh(self) -> None:
        """Rebuild the state if the configuration changed since it was built (every call but ``apply``,
        ``delete_object`` and ``next_wakeup`` starts here)."""
        if not self._stale:
            return
        self._stale = False
        self._manager.rebuild(
            self.configuration,
            flavors=self.flavors,
            cluster_queues=self.cluster_queues,
            cohorts=self.cohorts,
            local_queues=self.local_queues,
            namespaces=self.namespaces,
            admission_checks=self.admission_checks,
        )
