"""The quota engine: holds queues, flavors and workloads, and decides admissions, preemptions and evictions.

State changes come in as calls (``apply``/``delete_object`` for configuration objects, ``submit``,
``finish``, ``remove``, ``evict`` for workloads); decisions come out of ``schedule(now)``. The engine has no
clock: every time is the caller's ``now``, so the controller and the simulator get the same decisions.

How it stays fast. Pending workloads of a ClusterQueue are kept in groups of identical shape (LocalQueue,
priority, pod sets): within a group only the head (oldest) can be the next admission, and if the head cannot
be admitted then no member can, so a failed head sets the whole group aside at once. Set-aside groups are
tried again only when something in their cohort tree could make them admissible: quota freed (finish,
eviction, configuration change) wakes every group; an admission wakes only groups that could preempt the new
workload. Each cohort tree is scheduled independently and only when something in it changed. Usage is kept
per node of the quota tree and updated in O(depth).

The rule the batching keeps exact: in each cohort tree, repeatedly admit the best-ordered pending workload
that can be admitted now (by fitting, by preempting, or partially); ``StrictFIFO`` queues offer only their
head. Best-ordered means highest priority, then oldest, then uid (with fair sharing: lowest share after
admission first). Victims of a preemption free their quota at once and are requeued at once.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from webhook.engine.errors import UnknownObjectError
from webhook.engine.fair_share import weighted_share
from webhook.engine.flavor_assignment import Assignment, FlavorAssigner, Mode, PodSetAssignment
from webhook.engine.model import (
    ApiObject,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    Cohort,
    Configuration,
    LocalQueue,
    Namespace,
    QueueingStrategy,
    ReclaimPolicy,
    ResourceFlavor,
    StopPolicy,
    WithinClusterQueuePolicy,
    Workload,
    WorkloadPriorityClass,
)
from webhook.engine.preemption import (
    AdmittedWorkload,
    PreemptionReason,
    Target,
    classic_candidates,
    fair_sharing_victims,
    minimal_victims,
)
from webhook.engine.quota_tree import FlavorResource, QuotaTree

SortKey = tuple[int, float, str, str]


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


class _Record:
    __slots__ = (
        "_shape",
        "admitted",
        "deadline",
        "executed",
        "group",
        "inadmissible",
        "preempted_at",
        "queue",
        "reason",
        "requeue_at",
        "requeue_count",
        "sort_key",
        "state",
        "workload",
    )

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.sort_key: SortKey = (-workload.priority, workload.created, workload.uid, workload.key)
        self.state = WorkloadState.PENDING
        self.queue: _Queue | None = None
        self.group: _Group | None = None
        self.reason: str | None = None
        self.inadmissible = False
        self.admitted: AdmittedWorkload | None = None
        self.deadline: float | None = None
        self.executed = 0.0
        self.requeue_count = 0
        self.requeue_at: float | None = None
        self._shape: tuple[object, ...] | None = None
        # When it was last preempted: at that same instant it may not preempt anyone (no preemption cycles).
        self.preempted_at: float | None = None

    def shape(self) -> tuple[object, ...]:
        """What decides admissibility besides age: two workloads of one shape fit (or not) alike."""
        if self._shape is None:
            workload = self.workload
            pod_sets = tuple(
                (
                    p.name,
                    p.count,
                    p.min_count,
                    tuple(sorted(p.requests.items())),
                    tuple(sorted(p.node_selector.items())),
                    p.tolerations,
                )
                for p in workload.pod_sets
            )
            self._shape = (workload.namespace, workload.queue_name, workload.priority, pod_sets)
        return (*self._shape, self.preempted_at)


@dataclass(frozen=True)
class _Help:
    """Which admissions could make a set-aside head admissible (freed quota always could)."""

    # an admission in its own queue: a new candidate for in-queue preemption
    own_queue: bool
    # an admission elsewhere in the tree: a new borrower to reclaim from, or a fair-share change
    other_queues: bool
    # Freed quota helps only once one of these amounts is available; None: any freed quota may help.
    needs: Mapping[FlavorResource, int] | None = None
    # Once the queue's own usage is down to one of these, it fits its nominal quota and may reclaim.
    reclaim_limits: Mapping[FlavorResource, int] = field(default_factory=dict)


class _Group:
    """Pending workloads of one queue with identical shape; only the head is ever tried."""

    __slots__ = ("epoch", "help", "members", "parked", "queue", "reason", "shape", "version")

    def __init__(self, queue: _Queue, shape: tuple[object, ...]) -> None:
        self.queue = queue
        self.shape = shape
        self.members: list[tuple[SortKey, str]] = []
        self.parked = False
        self.reason: str | None = None
        self.version = 0
        self.help = _Help(False, False)
        self.epoch = 0  # bumped whenever it is set aside or woken: older wake-index entries are stale

    def head(self, records: Mapping[str, _Record]) -> _Record | None:
        while self.members:
            record = records.get(self.members[0][1])
            if record is not None and record.group is self and record.state is WorkloadState.PENDING:
                return record
            heapq.heappop(self.members)
        return None


class _Queue:
    """One ClusterQueue's runtime state."""

    def __init__(self, model: ClusterQueue, assigner: FlavorAssigner | None, root: str, inactive: str | None) -> None:
        self.model = model
        self.assigner = assigner
        self.root = root
        self.inactive = inactive
        self.heap: list[tuple[SortKey, int, int, _Group]] = []
        self.groups: dict[tuple[object, ...], _Group] = {}
        self.blocked: str | None = None  # StrictFIFO: the reason its head waits
        self.admitted: dict[str, AdmittedWorkload] = {}
        self.admitted_priorities: Counter[int] = Counter()
        # Set-aside heads waiting for this queue's usage to fall to a limit: (-limit, seq, epoch, group).
        self.reclaim_waiting: dict[FlavorResource, list[tuple[int, int, int, _Group]]] = {}
        self.pending = 0

    @property
    def stopped(self) -> bool:
        return self.model.stop_policy is not StopPolicy.NONE

    def push(self, group: _Group, head: _Record) -> None:
        group.version += 1
        heapq.heappush(self.heap, (head.sort_key, group.version, id(group), group))

    def peek(self, records: Mapping[str, _Record]) -> tuple[_Group, _Record] | None:
        while self.heap:
            _, version, _, group = self.heap[0]
            if version == group.version and not group.parked:
                head = group.head(records)
                if head is not None and head.sort_key == self.heap[0][0]:
                    return group, head
            heapq.heappop(self.heap)
        return None


@dataclass
class _Tree:
    queues: list[str] = field(default_factory=list)
    parked: dict[int, _Group] = field(default_factory=dict)  # set aside, and heads of blocked StrictFIFO queues
    any_free: dict[int, _Group] = field(default_factory=dict)  # those any freed quota may help
    # The others, by what must be available for them: (need, seq, epoch, group), smallest need first.
    waiting: dict[FlavorResource, list[tuple[int, int, int, _Group]]] = field(default_factory=dict)


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
        self._records: dict[str, _Record] = {}
        self._queues: dict[str, _Queue] = {}
        self._trees: dict[str, _Tree] = {}
        self._dirty: set[str] = set()
        self._held: dict[str, _Record] = {}  # pending, but no queue can take them as configured
        self._stale = True
        self._backoffs: list[tuple[float, str]] = []
        self._deadlines: list[tuple[float, int, str]] = []
        self._sequence = itertools.count()
        self._drains: list[tuple[str, EvictionReason]] = []
        self._last_now: float | None = None
        # Heads set aside only because they were preempted at this instant: tried again at the next one.
        self._guarded: list[_Group] = []
        self.tree = QuotaTree({}, {})

    # ----- configuration objects -------------------------------------------------------------------------

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
        if found is None:
            raise UnknownObjectError(kind, f"{namespace}/{name}" if namespace else name)
        self._stale = True

    def priority_of(self, priority_class: str | None) -> int:
        """The value of a WorkloadPriorityClass (the ``default`` class when None; 0 when there is none)."""
        name = "default" if priority_class is None else priority_class
        found = self.priority_classes.get(name)
        if found is None:
            if priority_class is not None:
                raise UnknownObjectError("WorkloadPriorityClass", priority_class)
            return 0
        return found.value

    # ----- workloads -------------------------------------------------------------------------------------

    def submit(self, workload: Workload) -> None:
        """Add a pending workload, or replace the spec of a pending one."""
        self._refresh()
        old = self._records.get(workload.key)
        if old is not None and old.state is not WorkloadState.PENDING:
            # An admitted workload's spec is immutable in Kueue; only activity matters here.
            if not workload.active and old.state is WorkloadState.ADMITTED:
                self._evict(old, EvictionReason.DEACTIVATED, None, deactivate=True)
            return
        if old is not None:
            self._unroute(old)
        record = _Record(workload)
        self._records[workload.key] = record
        if workload.active:
            self._route(record)
        else:
            record.state = WorkloadState.DEACTIVATED
            record.reason = "the workload is deactivated (spec.active is false)"

    def restore_admitted(
        self, workload: Workload, cluster_queue: str, pod_sets: tuple[PodSetAssignment, ...], admitted_at: float
    ) -> None:
        """Record an admission made earlier (a controller restarting reads it from the Workload's status)."""
        self._refresh()
        if cluster_queue not in self._queues:
            raise UnknownObjectError("ClusterQueue", cluster_queue)
        record = _Record(workload)
        self._records[workload.key] = record
        usage: dict[FlavorResource, int] = {}
        for pod_set in pod_sets:
            for resource, amount in pod_set.usage.items():
                fr = (pod_set.flavors[resource], resource)
                usage[fr] = usage.get(fr, 0) + amount
        node = self.tree.cluster_queues.get(cluster_queue)
        borrowing = node is not None and any(
            node.usage.get(fr, 0) + amount > node.subtree.get(fr, 0) for fr, amount in usage.items()
        )
        assignment = Assignment(pod_sets, Mode.FIT, borrowing, usage)
        self._admit(record, cluster_queue, assignment, admitted_at)

    def finish(self, key: str) -> None:
        """The workload finished or was deleted: free its quota and forget it."""
        self._refresh()
        record = self._records.pop(key, None)
        if record is None:
            raise UnknownObjectError("Workload", key)
        if record.state is WorkloadState.ADMITTED:
            self._release(record)
        self._unroute(record)

    remove = finish

    def evict(self, key: str, reason: EvictionReason, now: float) -> Eviction:
        """Evict an admitted workload for a reason the engine does not decide itself (PodsReady timeout)."""
        self._refresh()
        record = self._records.get(key)
        if record is None or record.state is not WorkloadState.ADMITTED:
            raise UnknownObjectError("admitted Workload", key)
        return self._evict(record, reason, now)

    def status(self, key: str) -> WorkloadStatus:
        self._refresh()
        record = self._records.get(key)
        if record is None:
            raise UnknownObjectError("Workload", key)
        queue = record.queue.model.name if record.queue is not None else None
        if record.state is WorkloadState.ADMITTED and record.admitted is not None:
            queue = record.admitted.cluster_queue
        return WorkloadStatus(record.state, queue, self._reason(record), record.inadmissible)

    def workloads(self) -> Iterable[str]:
        return self._records.keys()

    # ----- decisions -------------------------------------------------------------------------------------

    def next_wakeup(self) -> float | None:
        """The earliest time at which ``schedule`` has something time-driven to do (backoff, deadline)."""
        times: list[float] = []
        while self._backoffs and self._backoff_stale(self._backoffs[0]):
            heapq.heappop(self._backoffs)
        while self._deadlines and self._deadline_stale(self._deadlines[0]):
            heapq.heappop(self._deadlines)
        if self._backoffs:
            times.append(self._backoffs[0][0])
        if self._deadlines:
            times.append(self._deadlines[0][0])
        return min(times) if times else None

    def schedule(self, now: float, limit: int | None = None) -> list[Decision]:
        """Every decision due at ``now``; with ``limit`` at most that many admissions (the rest stay due)."""
        self._refresh()
        decisions: list[Decision] = []
        if now != self._last_now:
            self._last_now = now
            for group in self._guarded:
                if id(group) in self._trees[group.queue.root].parked:
                    self._unpark(group)
            self._guarded.clear()
        for key, reason in self._drains:
            record = self._records.get(key)
            if record is not None and record.state is WorkloadState.ADMITTED:
                decisions.append(self._evict(record, reason, now))
        self._drains.clear()
        while self._deadlines and self._deadlines[0][0] <= now:
            entry = heapq.heappop(self._deadlines)
            if not self._deadline_stale(entry):
                decisions.append(self._evict(self._records[entry[2]], EvictionReason.DEACTIVATED, now, deactivate=True))
        while self._backoffs and self._backoffs[0][0] <= now:
            backoff = heapq.heappop(self._backoffs)
            if not self._backoff_stale(backoff):
                record = self._records[backoff[1]]
                record.state = WorkloadState.PENDING
                record.requeue_at = None
                self._route(record)
        budget = [limit if limit is not None else -1]
        for root in sorted(self._dirty):
            if budget[0] == 0:
                break
            if self._run_tree(root, now, decisions, budget):
                self._dirty.discard(root)
        return decisions

    def cluster_queue_status(self, name: str) -> ClusterQueueStatus:
        self._refresh()
        queue = self._queues.get(name)
        if queue is None:
            raise UnknownObjectError("ClusterQueue", name)
        node = self.tree.cluster_queues[name]
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
        share = weighted_share(self.tree, node) if self.configuration.fair_sharing is not None else 0
        return ClusterQueueStatus(
            name, queue.inactive is None, queue.inactive, queue.pending, len(queue.admitted), usage, share
        )

    # ----- internals: routing ------------------------------------------------------------------------------

    def _refresh(self) -> None:
        if not self._stale:
            return
        self._stale = False
        self.tree = QuotaTree(self.cluster_queues, self.cohorts)
        fair = self.configuration.fair_sharing is not None
        self._queues = {}
        self._trees = {}
        for name in sorted(self.cluster_queues):
            cq = self.cluster_queues[name]
            root = "cohort/" + self.tree.cluster_queues[name].root().name if cq.cohort else "queue/" + name
            inactive = self._inactive_reason(cq)
            assigner = None if inactive else FlavorAssigner(cq, self.tree, self.flavors, fair)
            self._queues[name] = _Queue(cq, assigner, root, inactive)
            self._trees.setdefault(root, _Tree()).queues.append(name)
        self._dirty = set(self._trees)
        self._held = {}
        for record in self._records.values():
            record.queue = None
            record.group = None
            if record.state is WorkloadState.ADMITTED and record.admitted is not None:
                queue = self._queues.get(record.admitted.cluster_queue)
                if queue is not None:
                    queue.admitted[record.workload.key] = record.admitted
                    queue.admitted_priorities[record.workload.priority] += 1
                    self.tree.add_usage(queue.model.name, record.admitted.assignment.usage, 1)
                    record.queue = queue
                    if queue.model.stop_policy is StopPolicy.HOLD_AND_DRAIN:
                        self._drains.append((record.workload.key, EvictionReason.CLUSTER_QUEUE_STOPPED))
                    local = self.local_queues.get((record.workload.namespace, record.workload.queue_name))
                    if local is not None and local.stop_policy is StopPolicy.HOLD_AND_DRAIN:
                        self._drains.append((record.workload.key, EvictionReason.LOCAL_QUEUE_STOPPED))
        for record in sorted(self._records.values(), key=lambda r: r.sort_key):
            if record.state is WorkloadState.PENDING:
                self._route(record)

    def _inactive_reason(self, cq: ClusterQueue) -> str | None:
        missing = [
            flavor.name for group in cq.resource_groups for flavor in group.flavors if flavor.name not in self.flavors
        ]
        if missing:
            return (
                f"ClusterQueue {cq.name} is inactive: ResourceFlavor {', '.join(missing)} does not exist "
                "(FlavorNotFound): create it"
            )
        cycle = self.tree.in_cycle(cq.name)
        if cycle is not None:
            return f"ClusterQueue {cq.name} is inactive: its Cohort {cycle} is in a parentName cycle: break the cycle"
        return None

    def _route(self, record: _Record) -> None:
        """Put a pending workload into its ClusterQueue's groups, or hold it with the reason it cannot go."""
        workload = record.workload
        record.reason = None
        record.inadmissible = False
        problem = self._routing_problem(workload)
        if problem is not None:
            record.reason, record.inadmissible = problem
            self._held[workload.key] = record
            return
        local = self.local_queues[(workload.namespace, workload.queue_name)]
        queue = self._queues[local.cluster_queue]
        record.queue = queue
        queue.pending += 1
        if queue.inactive is not None or queue.stopped:
            self._held[workload.key] = record
            return
        shape = record.shape()
        group = queue.groups.get(shape)
        if group is None or (
            group.parked and (head := group.head(self._records)) is not None and record.sort_key < head.sort_key
        ):
            # A newcomer that sorts before a set-aside head starts its own group: it may do better.
            group = _Group(queue, shape)
            queue.groups[shape] = group
        record.group = group
        heapq.heappush(group.members, (record.sort_key, workload.key))
        head = group.head(self._records)
        if not group.parked and head is record:
            queue.push(group, record)
        if queue.blocked is not None:
            peeked = queue.peek(self._records)
            if peeked is not None and peeked[1] is record:
                queue.blocked = None
        self._dirty.add(queue.root)

    def _routing_problem(self, workload: Workload) -> tuple[str, bool] | None:
        if not workload.queue_name:
            return ("the workload names no LocalQueue: set the kueue.x-k8s.io/queue-name label", True)
        local = self.local_queues.get((workload.namespace, workload.queue_name))
        if local is None:
            return (
                f"LocalQueue {workload.queue_name} does not exist in namespace {workload.namespace}: create it "
                "or fix the kueue.x-k8s.io/queue-name label",
                True,
            )
        cq = self.cluster_queues.get(local.cluster_queue)
        if cq is None:
            return (
                f"ClusterQueue {local.cluster_queue} (of LocalQueue {workload.namespace}/{local.name}) does "
                "not exist: create it",
                True,
            )
        namespace = self.namespaces.get(workload.namespace)
        labels = namespace.labels if namespace else {"kubernetes.io/metadata.name": workload.namespace}
        if cq.namespace_selector is None or not cq.namespace_selector.matches(labels):
            return (
                f"namespace {workload.namespace} is not selected by ClusterQueue {cq.name}: fix its "
                "namespaceSelector (unset selects no namespace, {} selects all)",
                True,
            )
        if local.stop_policy is not StopPolicy.NONE:
            return (
                f"LocalQueue {workload.namespace}/{local.name} is stopped (stopPolicy {local.stop_policy.value})",
                False,
            )
        return None

    def _unroute(self, record: _Record) -> None:
        self._held.pop(record.workload.key, None)
        if record.state is WorkloadState.PENDING and record.queue is not None:
            record.queue.pending -= 1
        group = record.group
        record.group = None
        record.queue = None
        if group is not None and not group.parked:
            head = group.head(self._records)
            if head is not None:
                group.queue.push(group, head)

    def _reason(self, record: _Record) -> str | None:
        if record.state is WorkloadState.ADMITTED:
            return None
        if record.state is WorkloadState.BACKOFF:
            return f"requeued after a PodsReady timeout; backing off until {record.requeue_at}"
        if record.reason is not None:
            return record.reason
        queue = record.queue
        if queue is None:
            return None
        if queue.inactive is not None:
            return queue.inactive
        if queue.stopped:
            return f"ClusterQueue {queue.model.name} is stopped (stopPolicy {queue.model.stop_policy.value})"
        group = record.group
        if group is not None and group.parked:
            return group.reason
        if queue.blocked is not None:
            return (
                f"waiting in StrictFIFO ClusterQueue {queue.model.name} behind a head that does not fit: "
                f"{queue.blocked}"
            )
        return f"waiting for its turn in ClusterQueue {queue.model.name}"

    # ----- internals: deciding -----------------------------------------------------------------------------

    def _run_tree(self, root: str, now: float, decisions: list[Decision], budget: list[int]) -> bool:
        """Admit in ``root``'s tree until nothing more can be; False if the admission budget ran out first."""
        tree = self._trees[root]
        queues = [self._queues[name] for name in tree.queues]
        fair = self.configuration.fair_sharing is not None
        while True:
            best: tuple[tuple[int, SortKey], _Queue, _Group, _Record] | None = None
            for queue in queues:
                if queue.blocked is not None or queue.assigner is None or queue.stopped:
                    continue
                peeked = queue.peek(self._records)
                if peeked is None:
                    continue
                group, head = peeked
                share = self._share_with(queue, head) if fair else 0
                rank = (share, head.sort_key)
                if best is None or rank < best[0]:
                    best = (rank, queue, group, head)
            if best is None:
                return True
            if budget[0] == 0:
                return False
            _, queue, group, head = best
            help_from = self._attempt(queue, head, now, decisions)
            if help_from is None:
                budget[0] -= 1
                continue
            group.help = help_from
            self._set_aside(tree, group)
            if queue.model.queueing_strategy is QueueingStrategy.STRICT_FIFO:
                queue.blocked = head.reason
                head.reason = None
                group.reason = queue.blocked
            else:
                group.parked = True
                group.reason = head.reason
                head.reason = None

    def _share_with(self, queue: _Queue, head: _Record) -> int:
        assert queue.assigner is not None
        assignment = queue.assigner.assign(head.workload.pod_sets, tuple(p.count for p in head.workload.pod_sets))
        return weighted_share(self.tree, self.tree.cluster_queues[queue.model.name], assignment.usage)

    def _attempt(self, queue: _Queue, record: _Record, now: float, decisions: list[Decision]) -> _Help | None:
        """Admit ``record`` if it can be now (None); otherwise say what could change that."""
        assert queue.assigner is not None
        workload = record.workload
        full = tuple(pod_set.count for pod_set in workload.pod_sets)
        assignment = queue.assigner.assign(workload.pod_sets, full)
        if assignment.mode is Mode.FIT:
            decisions.append(self._admit(record, queue.model.name, assignment, now))
            return None
        victims: list[Target] = []
        just_preempted = record.preempted_at == now
        victims_possible = False
        if assignment.mode is Mode.PREEMPT and not just_preempted:
            victims_possible = self._has_candidates(queue, record, assignment)
            if victims_possible:
                victims = self._victims(queue, record, assignment)
        victims_possible = victims_possible or (assignment.mode is Mode.PREEMPT and just_preempted)
        if victims:
            evicted = []
            for target in victims:
                victim = self._records[target.victim.workload.key]
                victim.preempted_at = now
                evicted.append(
                    self._evict(
                        victim,
                        EvictionReason.PREEMPTED,
                        now,
                        preempted_by=workload.key,
                        preemption_reason=target.reason,
                    )
                )
            decisions.extend(evicted)
            decisions.append(
                self._admit(record, queue.model.name, assignment, now, tuple(t.victim.workload.key for t in victims))
            )
            return None
        partial = self._partial(queue, record)
        if partial is not None:
            decisions.append(self._admit(record, queue.model.name, partial, now))
            return None
        reasons = list(dict.fromkeys(assignment.reasons))
        if assignment.mode is Mode.PREEMPT and just_preempted:
            reasons.append("it was itself preempted at this instant, so it may preempt others only later")
            if record.group is not None:
                self._guarded.append(record.group)
        if assignment.mode is Mode.PREEMPT and self._may_preempt(queue.model):
            reasons.append("preempting what the ClusterQueue's preemption policy allows would not free enough")
        record.reason = "; ".join(reasons) or "does not fit"
        record.inadmissible = assignment.never_fits
        help_from = self._help_for(queue.model, assignment)
        # Freed quota can only help once what it needs is available, unless preemption or a partial admission
        # could use a smaller amount (then any free may help).
        simple = (
            not victims_possible
            and len(workload.pod_sets) == 1
            and workload.pod_sets[0].min_count is None
            and assignment.short_needs
        )
        if simple:
            help_from = _Help(
                help_from.own_queue, help_from.other_queues, assignment.short_needs, help_from.reclaim_limits
            )
        return help_from

    def _help_for(self, cq: ClusterQueue, assignment: Assignment) -> _Help:
        """Which admissions could give a workload that needs preemption something to preempt."""
        if assignment.mode is not Mode.PREEMPT:
            return _Help(False, False)
        if self.configuration.fair_sharing is not None:
            return _Help(True, True)
        preemption = cq.preemption
        node = self.tree.cluster_queues[cq.name]
        within_nominal = all(
            node.usage.get(fr, 0) + assignment.usage[fr] <= node.subtree.get(fr, 0) for fr in assignment.short
        )
        may_reclaim = cq.cohort is not None and preemption.reclaim_within_cohort is not ReclaimPolicy.NEVER
        reclaims = (within_nominal and may_reclaim) or (
            cq.cohort is not None and preemption.borrow_within_cohort is not BorrowWithinCohortPolicy.NEVER
        )
        limits: dict[FlavorResource, int] = {}
        if may_reclaim and not within_nominal:
            for fr in assignment.short:
                limit = node.subtree.get(fr, 0) - assignment.usage[fr]
                if 0 <= limit < node.usage.get(fr, 0):
                    limits[fr] = limit
        own = preemption.within_cluster_queue is not WithinClusterQueuePolicy.NEVER
        return _Help(own, reclaims, None, limits)

    def _may_preempt(self, cq: ClusterQueue) -> bool:
        preemption = cq.preemption
        return (
            self.configuration.fair_sharing is not None
            or preemption.within_cluster_queue is not WithinClusterQueuePolicy.NEVER
            or (cq.cohort is not None and preemption.reclaim_within_cohort is not ReclaimPolicy.NEVER)
        )

    def _has_candidates(self, queue: _Queue, record: _Record, assignment: Assignment) -> bool:
        """Cheap test: could any admitted workload be a candidate at all (spares scanning them when not)?"""
        help_from = self._help_for(queue.model, assignment)
        if help_from.other_queues:
            return True
        lowest = min(queue.admitted_priorities, default=None)
        within = queue.model.preemption.within_cluster_queue
        newer_equal = within is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        priority = record.workload.priority
        return (
            help_from.own_queue and lowest is not None and (lowest < priority or (newer_equal and lowest == priority))
        )

    def _victims(self, queue: _Queue, record: _Record, assignment: Assignment) -> list[Target]:
        cq = queue.model
        fair = self.configuration.fair_sharing
        cohort_queues = self._trees[queue.root].queues
        admitted = {name: self._queues[name].admitted for name in cohort_queues}
        candidates = classic_candidates(
            record.workload,
            cq,
            assignment,
            tree=self.tree,
            admitted=admitted,
            cohort_queues=cohort_queues,
            fair_sharing=fair is not None,
        )
        if not candidates:
            return []
        if fair is None:
            return minimal_victims(cq.name, assignment.usage, assignment.short, candidates, self.tree)

        def share(name: str, request: Mapping[FlavorResource, int] | None) -> int:
            return weighted_share(self.tree, self.tree.cluster_queues[name], request)

        return fair_sharing_victims(
            cq, assignment, candidates, tree=self.tree, share=share, strategies=fair.preemption_strategies
        )

    def _partial(self, queue: _Queue, record: _Record) -> Assignment | None:
        """The largest admission that fits now with pod sets cut toward their minCount (binary search)."""
        assert queue.assigner is not None
        pod_sets = record.workload.pod_sets
        if all(pod_set.min_count is None for pod_set in pod_sets):
            return None
        spans = [pod_set.count - (pod_set.min_count or pod_set.count) for pod_set in pod_sets]
        steps = max(spans)

        def counts(step: int) -> tuple[int, ...]:
            return tuple(p.count - (span * step + steps - 1) // steps for p, span in zip(pod_sets, spans, strict=True))

        low, high, found = 1, steps, None
        while low <= high:
            middle = (low + high) // 2
            attempt = queue.assigner.assign(pod_sets, counts(middle))
            if attempt.mode is Mode.FIT:
                found, high = attempt, middle - 1
            else:
                low = middle + 1
        return found

    def _admit(
        self, record: _Record, cluster_queue: str, assignment: Assignment, now: float, preempted: tuple[str, ...] = ()
    ) -> Admission:
        queue = self._queues[cluster_queue]
        self._unroute(record)
        record.state = WorkloadState.ADMITTED
        record.reason = None
        record.queue = queue
        admitted = AdmittedWorkload(record.workload, cluster_queue, assignment, now, next(self._sequence))
        record.admitted = admitted
        queue.admitted[record.workload.key] = admitted
        queue.admitted_priorities[record.workload.priority] += 1
        self.tree.add_usage(cluster_queue, assignment.usage, 1)
        limit = record.workload.max_execution_seconds
        if limit is not None:
            record.deadline = now + max(0.0, limit - record.executed)
            heapq.heappush(self._deadlines, (record.deadline, next(self._sequence), record.workload.key))
        self._wake_preemptors(queue, admitted)
        return Admission(record.workload.key, cluster_queue, assignment.pod_sets, assignment.borrowing, now, preempted)

    def _release(self, record: _Record, now: float | None = None) -> AdmittedWorkload:
        admitted = record.admitted
        assert admitted is not None
        queue = self._queues.get(admitted.cluster_queue)
        if queue is not None and queue.admitted.pop(record.workload.key, None) is not None:
            queue.admitted_priorities[record.workload.priority] -= 1
            if not queue.admitted_priorities[record.workload.priority]:
                del queue.admitted_priorities[record.workload.priority]
            self.tree.add_usage(admitted.cluster_queue, admitted.assignment.usage, -1)
            self._wake_on_free(queue, admitted.assignment.usage)
        if now is not None:
            record.executed += max(0.0, now - admitted.admitted_at)
        record.admitted = None
        record.deadline = None
        record.queue = None
        return admitted

    def _evict(
        self,
        record: _Record,
        reason: EvictionReason,
        now: float | None,
        *,
        preempted_by: str | None = None,
        preemption_reason: PreemptionReason | None = None,
        deactivate: bool = False,
    ) -> Eviction:
        at = 0.0 if now is None else now
        admitted = self._release(record, now)
        requeue_at = None
        wait = self.configuration.wait_for_pods_ready
        if reason is EvictionReason.PODS_READY_TIMEOUT and wait is not None:
            record.requeue_count += 1
            if wait.backoff_limit_count is not None and record.requeue_count > wait.backoff_limit_count:
                deactivate = True
            else:
                delay = min(wait.backoff_base_seconds * 2 ** (record.requeue_count - 1), wait.backoff_max_seconds)
                requeue_at = at + delay
        if deactivate:
            record.state = WorkloadState.DEACTIVATED
            record.reason = (
                "deactivated: it ran past maximumExecutionTimeSeconds"
                if reason is EvictionReason.DEACTIVATED
                else f"deactivated after {reason.value}"
            )
        elif requeue_at is not None:
            record.state = WorkloadState.BACKOFF
            record.requeue_at = requeue_at
            heapq.heappush(self._backoffs, (requeue_at, record.workload.key))
        else:
            record.state = WorkloadState.PENDING
            self._route(record)
        return Eviction(
            record.workload.key,
            admitted.cluster_queue,
            reason,
            at,
            preempted_by,
            preemption_reason,
            requeue_at,
            deactivate,
        )

    def _set_aside(self, tree: _Tree, group: _Group) -> None:
        group.epoch += 1
        tree.parked[id(group)] = group
        needs = group.help.needs
        if needs is None:
            tree.any_free[id(group)] = group
            return
        for fr, need in needs.items():
            heapq.heappush(tree.waiting.setdefault(fr, []), (need, next(self._sequence), group.epoch, group))
        for fr, limit in group.help.reclaim_limits.items():
            heapq.heappush(
                group.queue.reclaim_waiting.setdefault(fr, []), (-limit, next(self._sequence), group.epoch, group)
            )

    def _unpark(self, group: _Group) -> None:
        tree = self._trees[group.queue.root]
        tree.parked.pop(id(group), None)
        tree.any_free.pop(id(group), None)
        group.epoch += 1
        if group.parked:
            group.parked = False
            head = group.head(self._records)
            if head is not None:
                group.queue.push(group, head)
        else:  # the head of a blocked StrictFIFO queue
            group.queue.blocked = None
        self._dirty.add(group.queue.root)

    def _wake_all(self, root: str) -> None:
        tree = self._trees[root]
        for group in list(tree.parked.values()):
            self._unpark(group)
        tree.waiting.clear()
        for name in tree.queues:
            self._queues[name].reclaim_waiting.clear()
        self._dirty.add(root)

    def _wake_on_free(self, queue: _Queue, freed: Mapping[FlavorResource, int]) -> None:
        """Quota was freed in ``queue``: wake the set-aside heads it could help; the others stay set aside."""
        tree = self._trees[queue.root]
        for group in list(tree.any_free.values()):
            self._unpark(group)
        node = self.tree.cluster_queues[queue.model.name]
        for fr in freed:
            waiting = tree.waiting.get(fr)
            if waiting:
                # No queue of the tree can have more available than this: heads needing more stay aside.
                most = max(self.tree.available(self.tree.cluster_queues[name], fr) for name in tree.queues)
                while waiting and waiting[0][0] <= most:
                    _, _, epoch, group = heapq.heappop(waiting)
                    if epoch == group.epoch:
                        self._unpark(group)
            limited = queue.reclaim_waiting.get(fr)
            if limited:
                usage = node.usage.get(fr, 0)
                while limited and -limited[0][0] >= usage:
                    _, _, epoch, group = heapq.heappop(limited)
                    if epoch == group.epoch:
                        self._unpark(group)
        self._dirty.add(queue.root)

    def _wake_preemptors(self, queue: _Queue, admitted: AdmittedWorkload) -> None:
        """Wake set-aside groups that could preempt the workload just admitted; nothing else can help them."""
        tree = self._trees[queue.root]
        if not tree.parked:
            return
        fair = self.configuration.fair_sharing is not None
        priority = admitted.workload.priority
        reclaimable = fair or self.tree.is_borrowing(queue.model.name, admitted.assignment.usage)
        for group in list(tree.parked.values()):
            owner = group.queue
            head_priority = group.shape[2]
            assert isinstance(head_priority, int)
            if owner is queue:
                newer_equal = (
                    owner.model.preemption.within_cluster_queue
                    is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
                )
                wakes = group.help.own_queue and (
                    fair or priority < head_priority or (newer_equal and priority == head_priority)
                )
            else:
                any_priority = owner.model.preemption.reclaim_within_cohort is ReclaimPolicy.ANY
                wakes = group.help.other_queues and reclaimable and (fair or any_priority or priority < head_priority)
            if wakes:
                self._unpark(group)

    def _backoff_stale(self, entry: tuple[float, str]) -> bool:
        record = self._records.get(entry[1])
        return record is None or record.state is not WorkloadState.BACKOFF or record.requeue_at != entry[0]

    def _deadline_stale(self, entry: tuple[float, int, str]) -> bool:
        record = self._records.get(entry[2])
        return record is None or record.state is not WorkloadState.ADMITTED or record.deadline != entry[0]
