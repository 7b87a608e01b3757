"""The quota engine: holds queues, flavors and workloads, and decides admissions, preemptions and evictions.

State changes come in as calls (``apply``/``delete_object`` for configuration objects, ``submit``,
``finish``, ``remove``, ``evict`` for workloads); decisions come out of ``schedule(now)``. The engine has no
clock: every time is the caller's ``now``, so the controller and the simulator get the same decisions.

How it stays fast. Pending workloads of a ClusterQueue are kept in groups of identical shape (LocalQueue,
priority, pod sets, and whether preempted at the current instant): within a group only the head (oldest) can
be the next admission, and if the head cannot be admitted then no member can, so a failed head sets the whole
group aside at once. A set-aside group is tried again only when something could make its head admissible:

- one that needs preemption (victims exist but do not suffice): any quota freed in its cohort tree;
- one that only waits for quota: it sleeps in an index of its tree by what it needs, and the scheduling loop
  wakes it when that is available to its queue (every flavor's requests, a request that kept it from
  preempting, or, where it may preempt, all it waited for in one flavor: what else it requests may have been
  taken meanwhile, by borrowers it could reclaim from), in order with the other heads, so freed quota wakes
  only what can use it; one that would not get that even with the rest of the tree idle (its own usage and
  borrowingLimit keep it out: ``QuotaTree.ceiling``) is held until its own queue frees quota;
- one whose own usage must fall before it may reclaim: a free in its own queue that reaches that limit;
- one that could preempt a newly admitted workload (by priority and policy): that admission.
- one whose flavor walk stopped at a flavor needing preemption that more usage could rule out, so that a
  later flavor is tried (``whenCanPreempt: MayStopSearch``): any admission in its tree.

Heads across a tree's queues come from one heap (O(log queues) per step; fair sharing scans, as shares move).
Admitted workloads are kept per queue by priority, newest first, so victims are taken in Kueue's order
lazily, without sorting every candidate. Each cohort tree is scheduled independently and only when something
in it changed. Usage is kept per node of the quota tree and updated in O(depth).

A set-aside group's reason is the one from its head's last attempt; as heads are tried only when they may
succeed, the amounts "in use" it quotes can be older than the current ones.

The rule the batching keeps exact: in each cohort tree, repeatedly admit the best-ordered pending workload
that can be admitted now (by fitting, by preempting, or partially); ``StrictFIFO`` queues offer only their
head. Best-ordered means highest priority, then oldest, then uid; with fair sharing, each cohort first
prefers the child (ClusterQueue or Cohort) of lowest share with its candidate admitted, as Kueue's tournament
does, and a set-aside head is tried again at every instant so that it ranks its queue. Victims of a
preemption free their quota at once and are requeued at once.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from webhook.engine.errors import UnknownObjectError
from webhook.engine.fair_share import path_shares, weighted_share
from webhook.engine.flavor_assignment import Assignment, FlavorAssigner, Mode, PodSetAssignment, Reason
from webhook.engine.model import (
    ApiObject,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    Cohort,
    Configuration,
    LocalQueue,
    Namespace,
    PodSet,
    QueueingStrategy,
    ReclaimPolicy,
    ResourceFlavor,
    StopPolicy,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
    Workload,
    WorkloadPriorityClass,
)
from webhook.engine.preemption import (
    AdmittedByPriority,
    AdmittedWorkload,
    PreemptionReason,
    Target,
    classic_candidates,
    classic_candidates_in_order,
    fair_sharing_victims,
    fewest_victims,
)
from webhook.engine.quota_tree import FlavorResource, QuotaNode, QuotaTree

SortKey = tuple[int, float, str, str]
# Heaps whose outdated entries leave only from the top are swept when they pass twice their live size
# (at least this many entries), so sweeping costs O(1) a push over the run.
_COMPACT_FLOOR = 64
# Per resource group a pod set uses, per flavor: each (flavor, resource) it would take there, and how much.
_FitOptions = tuple[tuple[tuple[tuple[FlavorResource, int], ...], ...], ...]


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


@dataclass(frozen=True, slots=True)
class _WhyNot:
    """Why an attempt failed, as parts. Most are replaced by the next attempt before anyone reads them, so
    the text is joined only when a status asks."""

    parts: tuple[Reason, ...]

    def __str__(self) -> str:
        return "; ".join(dict.fromkeys(str(part) for part in self.parts)) or "does not fit"


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
        "counts",
        "deadline",
        "executed",
        "group",
        "inadmissible",
        "partial",
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
        pod_sets = workload.pod_sets
        self.counts = tuple(pod_set.count for pod_set in pod_sets)  # its full size, tried first
        self.partial = any(pod_set.min_count is not None for pod_set in pod_sets)  # minCount allows less
        self.sort_key: SortKey = (-workload.priority, workload.created, workload.uid, workload.key)
        self.state = WorkloadState.PENDING
        self.queue: _Queue | None = None
        self.group: _Group | None = None
        self.reason: str | _WhyNot | None = None
        self.inadmissible = False
        self.admitted: AdmittedWorkload | None = None
        self.deadline: float | None = None
        self.executed = 0.0
        self.requeue_count = 0
        self.requeue_at: float | None = None
        self._shape: tuple[object, ...] | None = None
        # When it was last preempted: at that same instant it may not preempt anyone (no preemption cycles).
        self.preempted_at: float | None = None

    def shape(self, instant: float | None) -> tuple[object, ...]:
        """What decides admissibility besides age: two workloads of one shape fit (or not) alike. Being
        preempted at ``instant`` (the current one) is part of it."""
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
                    p.node_affinity,
                )
                for p in workload.pod_sets
            )
            self._shape = (workload.namespace, workload.queue_name, workload.priority, pod_sets)
        return (*self._shape, instant if self.preempted_at == instant else None)


@dataclass(frozen=True, slots=True)
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
    # Any admission in the tree: the flavor walk stopped at a flavor needing preemption, and more usage could
    # make that flavor not fit at all, so that the walk goes on to a later flavor, which may fit.
    any_admission: bool = False
    # Freed quota helps (needs is None) only when freed in its own queue: its borrowingLimit keeps it from
    # fitting even with all it may preempt there gone, and nothing elsewhere changes that.
    own_frees_only: bool = False


class _Group:
    """Pending workloads of one queue with identical shape; only the head is ever tried."""

    __slots__ = (
        "elder",
        "epoch",
        "help",
        "inadmissible",
        "members",
        "naps",
        "parked",
        "prepared",
        "queue",
        "reason",
        "shape",
        "version",
    )

    def __init__(self, queue: _Queue, shape: tuple[object, ...]) -> None:
        self.queue = queue
        self.shape = shape
        self.members: list[tuple[SortKey, str]] = []
        self.parked = False
        self.reason: str | _WhyNot | None = None
        self.inadmissible = False
        # The set-aside group of the same shape it split from, its newcomer sorting before that one's head.
        self.elder: _Group | None = None
        self.version = 0
        self.help = _Help(False, False)
        self.epoch = 0  # bumped whenever it is set aside or woken: older wake-index entries are stale
        # Also bumped when a sleeping check finds it cannot succeed yet: older cooling/sleeping entries are stale.
        self.naps = 0
        self.prepared: tuple[_FitOptions, dict[FlavorResource, int]] | None = None  # see QuotaEngine._prepare

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
        self.blocked: str | _WhyNot | None = None  # StrictFIFO: the reason its head waits
        self.admitted: dict[str, AdmittedWorkload] = {}
        self.by_priority = AdmittedByPriority()  # the same workloads, in victim order
        # Set-aside heads waiting for this queue's usage to fall to a limit: (-limit, seq, epoch, group).
        self.reclaim_waiting: dict[FlavorResource, list[tuple[int, int, int, _Group]]] = {}
        self.reclaim_compact_at: dict[FlavorResource, int] = {}
        # Set-aside groups that an admission in this queue could give someone to preempt.
        self.own_waiters: dict[int, _Group] = {}
        # Set-aside groups that only quota freed in this queue may help (see _Help.own_frees_only).
        self.capped: dict[int, _Group] = {}
        # Sleeping groups that this queue's own usage keeps from fitting, however much the rest of the tree
        # frees (see QuotaTree.ceiling), as (naps, group): they cool down again only when this queue frees.
        self.held_by_own_usage: list[tuple[int, _Group]] = []
        self.held_compact_at = _COMPACT_FLOOR
        # QuotaEngine._prepare's answers, per shape (without the preempted-at instant).
        self.prepared: dict[tuple[object, ...], tuple[_FitOptions, dict[FlavorResource, int]]] = {}
        # Whether a flavor needing preemption can stop its flavor walk while a later one might fit: then more
        # usage (which can make that flavor not fit at all) may help a set-aside head.
        self.fragile = (
            assigner is not None
            and not assigner.may_preempt_past_nominal
            and model.flavor_fungibility.when_can_preempt is WhenCanPreempt.MAY_STOP_SEARCH
            and any(len(group.flavors) > 1 for group in model.resource_groups)
        )
        self.pending = 0
        # The tree's heap of queue heads (see _Tree.heads), and this queue's tiebreak for entries in it.
        self.heads: list[tuple[SortKey, int, _Queue]] = []
        self.offers = 0

    @property
    def stopped(self) -> bool:
        return self.model.stop_policy is not StopPolicy.NONE

    def push(self, group: _Group, head: _Record) -> None:
        group.version += 1
        heapq.heappush(self.heap, (head.sort_key, group.version, id(group), group))
        self.offer(head)

    def offer(self, head: _Record) -> None:
        """Tell the tree this queue's head may now be ``head`` (an entry of at most its key must exist)."""
        self.offers += 1
        heapq.heappush(self.heads, (head.sort_key, self.offers, self))

    def peek(self, records: Mapping[str, _Record]) -> tuple[_Group, _Record] | None:
        while self.heap:
            _, version, _, group = self.heap[0]
            if version == group.version and not group.parked:
                head = group.head(records)
                if head is not None and head.sort_key == self.heap[0][0]:
                    return group, head
            heapq.heappop(self.heap)
        return None


class _NeedIndex:
    """Set-aside groups waiting for one flavor and resource: by the amount they need, then by head."""

    __slots__ = ("amounts", "buckets", "compact_at")

    def __init__(self) -> None:
        self.amounts: list[int] = []  # sorted keys of ``buckets``
        self.buckets: dict[int, list[tuple[SortKey, int, int, _Group]]] = {}
        self.compact_at: dict[int, int] = {}

    def add(self, need: int, entry: tuple[SortKey, int, int, _Group]) -> None:
        bucket = self.buckets.get(need)
        if bucket is None:
            bucket = self.buckets[need] = []
            bisect.insort(self.amounts, need)
        heapq.heappush(bucket, entry)
        # A group sleeps again after every wake, and only a bucket's top is checked: under a top that stays
        # valid, outdated entries would pile up for the whole run. Dropping them keeps the live ones' order.
        if len(bucket) > self.compact_at.get(need, _COMPACT_FLOOR):
            bucket[:] = [e for e in bucket if e[2] == e[3].naps]
            heapq.heapify(bucket)
            self.compact_at[need] = max(_COMPACT_FLOOR, 2 * len(bucket))

    def drop(self, position: int) -> None:
        need = self.amounts.pop(position)
        del self.buckets[need]
        self.compact_at.pop(need, None)


@dataclass
class _Tree:
    root: QuotaNode
    # Resources some node of the tree has a lendingLimit on: a queue may have more available than the root.
    lent: frozenset[FlavorResource]
    queues: list[str] = field(default_factory=list)
    parked: dict[int, _Group] = field(default_factory=dict)  # set aside, and heads of blocked StrictFIFO queues
    any_free: dict[int, _Group] = field(default_factory=dict)  # those any freed quota may help
    # The others wait for quota to be freed (as (naps, group)); after that they sleep in ``sleeping``, under
    # one resource per flavor they could use, until the scheduling loop finds what they need available.
    cooling: list[tuple[int, _Group]] = field(default_factory=list)
    sleeping: dict[FlavorResource, _NeedIndex] = field(default_factory=dict)
    # Set-aside groups that an admission in another queue could give someone to reclaim from.
    reclaimers: dict[int, _Group] = field(default_factory=dict)
    # Set-aside groups that any admission in the tree could help (see _Help.any_admission).
    fragile: dict[int, _Group] = field(default_factory=dict)
    # Every queue with a head to offer has an entry here keyed at most by its head: the best-ordered head of
    # the tree is found in O(log queues); stale entries are fixed when they reach the top.
    heads: list[tuple[SortKey, int, _Queue]] = field(default_factory=list)


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
        # _routing_problem's answer per (namespace, LocalQueue name): it depends on the configuration alone.
        self._routes: dict[tuple[str, str], tuple[str, bool] | None] = {}
        self._stale = True
        self._backoffs: list[tuple[float, str]] = []
        self._deadlines: list[tuple[float, int, str]] = []
        self._sequence = itertools.count()
        self._drains: list[tuple[str, EvictionReason]] = []
        self._last_now: float | None = None
        # Heads set aside only because they were preempted at this instant: tried again at the next one.
        self._guarded: list[_Group] = []
        # Groups of workloads preempted at this instant: at the next one they join their shape's usual group.
        self._preempted_groups: list[_Group] = []
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

    def remove(self, key: str) -> None:
        """The workload was deleted: the same as ``finish``."""
        self.finish(key)

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
        return self._status(record, self._reason(record))

    def statuses_without_reasons(self) -> Iterator[tuple[str, WorkloadStatus]]:
        """Every workload's status with ``reason`` None: the reason's text is most of a status's cost, and
        counting workloads per queue, every second, needs none of it."""
        self._refresh()
        for key, record in self._records.items():
            yield key, self._status(record, None)

    @staticmethod
    def _status(record: _Record, reason: str | None) -> WorkloadStatus:
        queue = record.queue.model.name if record.queue is not None else None
        if record.state is WorkloadState.ADMITTED and record.admitted is not None:
            queue = record.admitted.cluster_queue
        # A set-aside group's members share its head's verdict, as they share its reason.
        group = record.group
        inadmissible = record.inadmissible or (group is not None and group.parked and group.inadmissible)
        return WorkloadStatus(record.state, queue, reason, inadmissible)

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
            for group in self._preempted_groups:
                self._regroup(group)
            self._preempted_groups.clear()
            for group in self._guarded:
                if id(group) in self._trees[group.queue.root].parked:
                    self._unpark(group)
            self._guarded.clear()
            if self.configuration.fair_sharing is not None:
                # Shares, not age, order the queues: a set-aside head ranks its queue by its own share at every
                # instant (it is tried and set aside again), or the workload behind it would jump that rank.
                for root, tree in self._trees.items():
                    if tree.parked:
                        self._wake_all(root)
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
            tree = self._trees.get(root)
            if tree is None:
                top = self.tree.cluster_queues[name].root()
                tree = self._trees[root] = _Tree(top, _lent_under(top))
            tree.queues.append(name)
            self._queues[name].heads = tree.heads
        self._dirty = set(self._trees)
        self._held = {}
        self._routes = {}
        self._preempted_groups = []
        for record in self._records.values():
            record.queue = None
            record.group = None
            if record.state is WorkloadState.ADMITTED and record.admitted is not None:
                queue = self._queues.get(record.admitted.cluster_queue)
                if queue is not None:
                    queue.admitted[record.workload.key] = record.admitted
                    queue.by_priority.add(record.admitted)
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
        route = (workload.namespace, workload.queue_name)
        if route in self._routes:
            problem = self._routes[route]
        else:
            problem = self._routes[route] = self._routing_problem(workload)
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
        self._place(queue, record)

    def _place(self, queue: _Queue, record: _Record) -> None:
        """Put a routed pending workload into the group of its shape."""
        shape = record.shape(self._last_now)
        group = queue.groups.get(shape)
        if group is None or (
            group.parked and (head := group.head(self._records)) is not None and record.sort_key < head.sort_key
        ):
            # A newcomer that sorts before a set-aside head starts its own group: it may do better.
            elder = group
            group = _Group(queue, shape)
            group.elder = elder
            queue.groups[shape] = group
            if shape[-1] is not None:
                self._preempted_groups.append(group)
        record.group = group
        heapq.heappush(group.members, (record.sort_key, record.workload.key))
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
            elif group.queue.groups.get(group.shape) is group:
                del group.queue.groups[group.shape]  # empty and not set aside: nothing to remember

    def _regroup(self, group: _Group) -> None:
        """The instant its members were preempted at has passed: they now share their shape's usual group."""
        queue = group.queue
        if queue.groups.get(group.shape) is group:
            del queue.groups[group.shape]
        members = [
            record
            for _, key in group.members
            if (record := self._records.get(key)) is not None
            and record.group is group
            and record.state is WorkloadState.PENDING
        ]
        group.members = []
        if id(group) in self._trees[queue.root].parked:
            self._unpark(group)
        for record in members:
            self._place(queue, record)

    def _reason(self, record: _Record) -> str | None:
        if record.state is WorkloadState.ADMITTED:
            return None
        if record.state is WorkloadState.BACKOFF:
            return f"requeued after a PodsReady timeout; backing off until {record.requeue_at}"
        if record.reason is not None:
            return str(record.reason)
        queue = record.queue
        if queue is None:
            return None
        if queue.inactive is not None:
            return queue.inactive
        if queue.stopped:
            return f"ClusterQueue {queue.model.name} is stopped (stopPolicy {queue.model.stop_policy.value})"
        group = record.group
        if group is not None and group.parked:
            return None if group.reason is None else str(group.reason)
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
        fair = self.configuration.fair_sharing is not None
        queues = [self._queues[name] for name in tree.queues] if fair else []
        while True:
            if fair:  # shares, not age, order the heads: every sleeper that may fit now competes
                while tree.sleeping and (sleeper := self._best_sleeper(tree)) is not None:
                    self._wake_sleeper(tree, sleeper[1])
            best: tuple[tuple[int, SortKey], _Queue, _Group, _Record] | None = None
            if fair:
                best = self._fair_best(tree, queues)
            else:
                found = self._best_head(tree)
                if found is not None:
                    best = ((0, found[2].sort_key), *found)
            if tree.sleeping and not fair:
                sleeper = self._best_sleeper(tree)
                if sleeper is not None and (best is None or sleeper[0] < best[0][1]):
                    self._wake_sleeper(tree, sleeper[1])
                    continue
            if best is None:
                return True
            if budget[0] == 0:
                return False
            _, queue, group, head = best
            help_from = self._attempt(queue, head, now, decisions)
            if help_from is None:
                budget[0] -= 1
                continue
            if queue.model.queueing_strategy is not QueueingStrategy.STRICT_FIFO:
                elder = group.elder
                group.elder = None
                if elder is not None and elder.parked:
                    group = self._fold(tree, group, elder)
            group.help = help_from
            self._set_aside(tree, group)
            if queue.model.queueing_strategy is QueueingStrategy.STRICT_FIFO:
                queue.blocked = head.reason
                head.reason = None
                group.reason = queue.blocked
            else:
                group.parked = True
                group.reason = head.reason
                group.inadmissible = head.inadmissible
                head.reason = None

    def _best_head(self, tree: _Tree) -> tuple[_Queue, _Group, _Record] | None:
        heads = tree.heads
        while heads:
            key, _, queue = heads[0]
            if queue.blocked is None:
                peeked = queue.peek(self._records)
                if peeked is not None:
                    if peeked[1].sort_key == key:
                        return queue, peeked[0], peeked[1]
                    queue.offers += 1
                    heapq.heapreplace(heads, (peeked[1].sort_key, queue.offers, queue))
                    continue
            heapq.heappop(heads)
        return None

    def _fair_best(
        self, tree: _Tree, queues: list[_Queue]
    ) -> tuple[tuple[int, SortKey], _Queue, _Group, _Record] | None:
        """The head Kueue's fair-sharing tournament picks: every queue's head enters with its shares along its
        path; each cohort keeps the child (with the head it nominates) of lowest share, then best order."""
        entries: dict[QuotaNode, _FairEntry] = {}
        for queue in queues:
            if queue.blocked is not None or queue.assigner is None or queue.stopped:
                continue
            peeked = queue.peek(self._records)
            if peeked is None:
                continue
            group, head = peeked
            node = self.tree.cluster_queues[queue.model.name]
            assignment = queue.assigner.assign(head.workload.pod_sets, tuple(p.count for p in head.workload.pod_sets))
            entries[node] = _FairEntry(path_shares(self.tree, node, assignment.usage), queue, group, head)
        best = _tournament(tree.root, entries)
        if best is None:
            return None
        return (best.shares[-1], best.head.sort_key), best.queue, best.group, best.head

    def _attempt(self, queue: _Queue, record: _Record, now: float, decisions: list[Decision]) -> _Help | None:
        """Admit ``record`` if it can be now (None); otherwise say what could change that."""
        assert queue.assigner is not None
        workload = record.workload
        assignment = queue.assigner.assign(workload.pod_sets, record.counts)
        if assignment.mode is Mode.FIT:
            decisions.append(self._admit(record, queue.model.name, assignment, now))
            return None
        victims: list[Target] = []
        just_preempted = record.preempted_at == now
        victims_possible = False
        # Preemption leaves the tree as it found it, so this holds after a failed search too.
        help_from = self._help_for(queue.model, assignment)
        if assignment.mode is Mode.PREEMPT and not just_preempted:
            victims_possible = self._has_candidates(queue, record, help_from)
            if victims_possible:
                victims = self._victims(queue, record, assignment)
        victims_possible = victims_possible or (assignment.mode is Mode.PREEMPT and just_preempted)
        if victims:
            self._preempt_and_admit(queue, record, assignment, victims, now=now, decisions=decisions)
            return None
        partial = self._partial(queue, record, now)
        if partial is not None:
            self._preempt_and_admit(queue, record, *partial, now=now, decisions=decisions)
            return None
        reasons = list(assignment.reasons)
        may_preempt_smaller = record.partial and self._may_preempt(queue.model)
        if just_preempted and (assignment.mode is Mode.PREEMPT or may_preempt_smaller):
            reasons.append("it was itself preempted at this instant, so it may preempt others only later")
            if record.group is not None:
                self._guarded.append(record.group)
        if assignment.mode is Mode.PREEMPT and self._may_preempt(queue.model):
            reasons.append("preempting what the ClusterQueue's preemption policy allows would not free enough")
        record.reason = _WhyNot(tuple(reasons))
        record.inadmissible = assignment.never_fits
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
        elif help_from.needs is None and self.configuration.fair_sharing is None and self._capped(queue, record):
            help_from = _Help(help_from.own_queue, help_from.other_queues, None, help_from.reclaim_limits, False, True)
        if may_preempt_smaller:
            # A smaller admission may preempt where the full one may not: any admission (a new candidate, a
            # new borrower, a share change) and any free may make one possible.
            help_from = _Help(True, True, None, {}, True)
        elif assignment.mode is Mode.PREEMPT and queue.fragile:
            help_from = _Help(
                help_from.own_queue,
                help_from.other_queues,
                help_from.needs,
                help_from.reclaim_limits,
                True,
                help_from.own_frees_only,
            )
        return help_from

    def _capped(self, queue: _Queue, record: _Record) -> bool:
        """Whether its queue's borrowingLimit keeps ``record`` from fitting in every flavor of some resource
        group, even after preempting everything it may in that queue (other queues cannot change that)."""
        group = record.group
        pod_sets = record.workload.pod_sets
        node = self.tree.cluster_queues[queue.model.name]
        if not node.borrow_caps or group is None or len(pod_sets) != 1 or pod_sets[0].min_count is not None:
            return False
        options, _ = self._prepare(group, record)
        within = queue.model.preemption.within_cluster_queue
        priority = record.workload.priority

        def most(fr: FlavorResource) -> int | None:
            cap = node.borrow_caps.get(fr)
            if cap is None:
                return None
            own = (
                0
                if within is WithinClusterQueuePolicy.NEVER
                else queue.by_priority.usage_up_to(
                    priority, fr, inclusive=within is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
                )
            )
            usage = node.usage.get(fr, 0) - own
            floor = node.floors.get(fr, 0)
            return (floor - usage if usage < floor else 0) + cap - (usage - floor if usage > floor else 0)

        def short(fr: FlavorResource, need: int) -> bool:
            limit = most(fr)
            return limit is not None and need > limit

        return any(all(any(short(fr, need) for fr, need in flavor) for flavor in flavors) for flavors in options)

    def _help_for(self, cq: ClusterQueue, assignment: Assignment) -> _Help:
        """Which admissions could give a workload that needs preemption something to preempt."""
        if assignment.mode is not Mode.PREEMPT:
            return _Help(False, False)
        if self.configuration.fair_sharing is not None:
            return _Help(True, True)
        preemption = cq.preemption
        node = self.tree.cluster_queues[cq.name]
        usage = node.usage
        subtree = node.subtree
        wanted = assignment.usage
        within_nominal = True
        for fr in assignment.short:
            if usage.get(fr, 0) + wanted[fr] > subtree.get(fr, 0):
                within_nominal = False
                break
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

    def _has_candidates(self, queue: _Queue, record: _Record, help_from: _Help) -> bool:
        """Cheap test: could any admitted workload be a candidate at all (spares scanning them when not)?"""
        if help_from.other_queues:
            return True
        lowest = queue.by_priority.lowest()
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
        if fair is None:
            ordered = classic_candidates_in_order(
                record.workload,
                cq,
                assignment,
                tree=self.tree,
                admitted={name: self._queues[name].by_priority for name in cohort_queues},
                cohort_queues=cohort_queues,
            )
            return fewest_victims(cq.name, assignment.usage, assignment.short, ordered, self.tree)
        candidates = classic_candidates(
            record.workload,
            cq,
            assignment,
            tree=self.tree,
            admitted={name: self._queues[name].admitted for name in cohort_queues},
            cohort_queues=cohort_queues,
            fair_sharing=True,
        )
        if not candidates:
            return []

        def share(name: str, request: Mapping[FlavorResource, int] | None) -> int:
            return weighted_share(self.tree, self.tree.cluster_queues[name], request)

        return fair_sharing_victims(
            cq, assignment, candidates, tree=self.tree, share=share, strategies=fair.preemption_strategies
        )

    def _partial(self, queue: _Queue, record: _Record, now: float) -> tuple[Assignment, list[Target]] | None:
        """The largest admission that can be made now with pod sets cut toward their minCount, as Kueue's
        reducer searches (binary search): one that fits, or one that fits once victims the policy allows are
        preempted (a workload preempted at this instant may not preempt)."""
        assert queue.assigner is not None
        if not record.partial:
            return None
        assigner = queue.assigner
        pod_sets = record.workload.pod_sets
        spans = [pod_set.count - (pod_set.min_count or pod_set.count) for pod_set in pod_sets]
        steps = max(spans)
        may_preempt = record.preempted_at != now

        def counts(step: int) -> tuple[int, ...]:
            return tuple(p.count - (span * step + steps - 1) // steps for p, span in zip(pod_sets, spans, strict=True))

        def admissible(step: int) -> tuple[Assignment, list[Target]] | None:
            attempt = assigner.assign(pod_sets, counts(step))
            if attempt.mode is Mode.FIT:
                return attempt, []
            if (
                attempt.mode is Mode.PREEMPT
                and may_preempt
                and self._has_candidates(queue, record, self._help_for(queue.model, attempt))
            ):
                victims = self._victims(queue, record, attempt)
                if victims:
                    return attempt, victims
            return None

        # Not monotone in general (a smaller count may change flavors, borrowing or the policy that applies), but
        # Kueue's reducer makes the same binary search, so for one pod set the same probes give the same answer.
        low, high = 1, steps
        found: tuple[Assignment, list[Target]] | None = None
        while low <= high:
            middle = (low + high) // 2
            outcome = admissible(middle)
            if outcome is not None:
                found, high = outcome, middle - 1
            else:
                low = middle + 1
        return found

    def _preempt_and_admit(
        self,
        queue: _Queue,
        record: _Record,
        assignment: Assignment,
        victims: list[Target],
        *,
        now: float,
        decisions: list[Decision],
    ) -> None:
        for target in victims:
            victim = self._records[target.victim.workload.key]
            victim.preempted_at = now
            decisions.append(
                self._evict(
                    victim,
                    EvictionReason.PREEMPTED,
                    now,
                    preempted_by=record.workload.key,
                    preemption_reason=target.reason,
                )
            )
        decisions.append(
            self._admit(record, queue.model.name, assignment, now, tuple(t.victim.workload.key for t in victims))
        )

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
        queue.by_priority.add(admitted)
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
            queue.by_priority.remove(admitted)
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
        group.naps += 1
        tree.parked[id(group)] = group
        if group.help.own_queue:
            group.queue.own_waiters[id(group)] = group
        if group.help.other_queues:
            tree.reclaimers[id(group)] = group
        if group.help.any_admission:
            tree.fragile[id(group)] = group
        needs = group.help.needs
        if needs is None:
            (group.queue.capped if group.help.own_frees_only else tree.any_free)[id(group)] = group
            return
        tree.cooling.append((group.naps, group))
        for fr, limit in group.help.reclaim_limits.items():
            waiting = group.queue.reclaim_waiting.setdefault(fr, [])
            heapq.heappush(waiting, (-limit, next(self._sequence), group.epoch, group))
            # Outdated entries leave only from the top; drop them in bulk now and then (see _NeedIndex.add).
            compact_at = group.queue.reclaim_compact_at
            if len(waiting) > compact_at.get(fr, _COMPACT_FLOOR):
                waiting[:] = [e for e in waiting if e[2] == e[3].epoch]
                heapq.heapify(waiting)
                compact_at[fr] = max(_COMPACT_FLOOR, 2 * len(waiting))

    def _fold(self, tree: _Tree, young: _Group, elder: _Group) -> _Group:
        """``young``'s head, which sorts before ``elder``'s, just failed: ``elder``'s members can do no better,
        so both become one group (``elder``, to be set aside again with ``young``'s verdict)."""
        for entry in young.members:
            record = self._records.get(entry[1])
            if record is not None and record.group is young:
                record.group = elder
                heapq.heappush(elder.members, entry)
        young.members = []
        queue = young.queue
        if queue.groups.get(young.shape) is young:
            queue.groups[young.shape] = elder
        for index in (tree.parked, tree.any_free, tree.reclaimers, tree.fragile, queue.own_waiters, queue.capped):
            index.pop(id(elder), None)
        return elder

    def _sleep(self, tree: _Tree, group: _Group) -> None:
        """Index a cooled-down group under what could let it succeed: one resource of each flavor it waits for
        (all of a flavor's requests must be available to fit there), and each resource that keeps it from
        preempting (see ``_may_succeed``)."""
        head = group.head(self._records)
        if head is None:
            self._unpark(group)
            return
        needs = group.help.needs
        assert needs is not None
        keys: dict[FlavorResource, int] = {}
        flavors: set[str] = set()
        # Where it may reclaim, any one resource becoming available may leave a shortage it can reclaim.
        every = self._may_reclaim(group.queue.model)
        for fr in sorted(needs):
            if every or fr[0] not in flavors:
                flavors.add(fr[0])
                keys[fr] = needs[fr]
        blocking = self._prepare(group, head)[1]
        if blocking:
            keys.update(blocking)
        sleeping = tree.sleeping
        for fr, need in keys.items():
            index = sleeping.get(fr)
            if index is None:
                index = sleeping[fr] = _NeedIndex()
            index.add(need, (head.sort_key, next(self._sequence), group.naps, group))

    def _prepare(self, group: _Group, head: _Record) -> tuple[_FitOptions, dict[FlavorResource, int]]:
        """What ``_may_succeed`` checks for the group's shape: what its (single) pod set would take per
        resource group and flavor, and what keeps it from trying to preempt. Worked out once per queue and
        shape (it depends on quotas only)."""
        if group.prepared is not None:
            return group.prepared
        queue = group.queue
        shape = group.shape[:-1]  # whether preempted at this instant changes neither
        prepared = queue.prepared.get(shape)
        if prepared is None:
            assert queue.assigner is not None
            options = self._fit_options(queue, head.workload.pod_sets[0])
            blocking: dict[FlavorResource, int] = {}
            # Requests past nominal quota make a flavor NO_FIT, for a queue that may not preempt past it: once
            # such a request is available the mode may become PREEMPT, and a full attempt may find victims.
            if not queue.assigner.may_preempt_past_nominal:
                node = self.tree.cluster_queues[queue.model.name]
                blocking = {
                    fr: need
                    for flavors in options
                    for flavor in flavors
                    for fr, need in flavor
                    if node.subtree.get(fr, 0) < need <= self.tree.potential_available(node, fr)
                }
            prepared = queue.prepared[shape] = (options, blocking)
        group.prepared = prepared
        return prepared

    def _may_succeed(self, group: _Group, head: _Record, available: Callable[[QuotaNode, FlavorResource], int]) -> bool:
        """Whether an attempt of ``head`` could succeed with ``available`` quota: every resource group has a
        flavor with all its requests available (it may fit), or a request that kept it from preempting is
        available, or (in a queue that may preempt) all it waited for in some flavor is available."""
        options, blocking = self._prepare(group, head)
        queue = group.queue
        node = self.tree.cluster_queues[queue.model.name]
        for flavors in options:
            for option in flavors:
                for fr, amount in option:
                    if amount > available(node, fr):
                        break
                else:
                    break  # this flavor may fit
            else:
                break  # no flavor of this resource group may fit
        else:
            return True
        for fr, need in blocking.items():
            if need <= available(node, fr):
                return True
        if not self._may_preempt(queue.model):
            return False
        # Its help was worked out when only the resources it waits for were short. If they are available now
        # and it still does not fit, others were taken since (by a borrower, say): it may preempt for those.
        # Or a shortage that is left only where it fits its nominal quota, which it may reclaim from borrowers.
        needs = group.help.needs
        assert needs is not None
        may_reclaim = self._may_reclaim(queue.model)
        usage = node.usage
        subtree = node.subtree
        waited: dict[str, bool] = {}
        for fr, need in needs.items():
            reachable = need <= available(node, fr) or (may_reclaim and usage.get(fr, 0) + need <= subtree.get(fr, 0))
            waited[fr[0]] = waited.get(fr[0], True) and reachable
        return any(waited.values())

    @staticmethod
    def _may_reclaim(cq: ClusterQueue) -> bool:
        return cq.cohort is not None and cq.preemption.reclaim_within_cohort is not ReclaimPolicy.NEVER

    @staticmethod
    def _fit_options(queue: _Queue, pod_set: PodSet) -> _FitOptions:
        """Per resource group the pod set uses: per flavor, what it would take there (a resource no group
        covers gives a group with no flavor, which never fits)."""
        assert queue.assigner is not None
        requests = pod_set.requests
        uncovered, steps = queue.assigner.plan(tuple(requests))
        if uncovered:
            return ((),)
        return tuple(
            tuple(tuple(((name, r), requests[r] * pod_set.count) for r in resources) for name, _, _ in flavors)
            for resources, flavors, _ in steps
        )

    def _bound(self, tree: _Tree, fr: FlavorResource) -> int:
        """At least what any queue of the tree has available of ``fr`` (exact at the root without lendingLimits)."""
        if fr in tree.lent:
            return max(self.tree.available(self.tree.cluster_queues[name], fr) for name in tree.queues)
        root = tree.root
        return root.subtree.get(fr, 0) - root.usage.get(fr, 0)

    def _best_sleeper(self, tree: _Tree) -> tuple[SortKey, _Group] | None:
        """The best-ordered sleeping group whose needs may be available; stale entries are dropped on the way."""
        best: tuple[SortKey, _Group] | None = None
        lent = tree.lent
        root = tree.root
        for fr, index in list(tree.sleeping.items()):
            amounts = index.amounts
            bound = self._bound(tree, fr) if fr in lent else root.subtree.get(fr, 0) - root.usage.get(fr, 0)
            stop = bisect.bisect_right(amounts, bound)
            position = 0
            while position < stop:
                bucket = index.buckets[amounts[position]]
                top = self._valid_top(bucket)
                if top is None:
                    index.drop(position)
                    stop -= 1
                    continue
                if best is None or top[0] < best[0]:
                    best = top
                position += 1
            if not amounts:
                del tree.sleeping[fr]
        return best

    def _valid_top(self, bucket: list[tuple[SortKey, int, int, _Group]]) -> tuple[SortKey, _Group] | None:
        while bucket:
            key, _, naps, group = bucket[0]
            if naps == group.naps:
                head = group.head(self._records)
                if head is None:
                    self._unpark(group)
                elif head.sort_key == key:
                    return key, group
                else:  # its head left: re-sort it under the new one
                    heapq.heapreplace(bucket, (head.sort_key, next(self._sequence), naps, group))
                    continue
            heapq.heappop(bucket)
        return None

    def _wake_sleeper(self, tree: _Tree, group: _Group) -> None:
        """Wake a sleeping group if what it needs is available to its queue; else it waits for the next free."""
        head = group.head(self._records)
        if head is not None and self._may_succeed(group, head, self.tree.available):
            self._unpark(group)
            return
        group.naps += 1
        if head is not None and not self._may_succeed(group, head, self.tree.ceiling):
            # Until its own queue frees quota its usage only grows, so no free elsewhere can let it succeed.
            queue = group.queue
            held = queue.held_by_own_usage
            held.append((group.naps, group))
            # Outdated entries leave at the queue's next free; drop them in bulk if that is long in coming.
            if len(held) > queue.held_compact_at:
                held[:] = [entry for entry in held if entry[0] == entry[1].naps]
                queue.held_compact_at = max(_COMPACT_FLOOR, 2 * len(held))
        else:
            tree.cooling.append((group.naps, group))

    def _unpark(self, group: _Group) -> None:
        tree = self._trees[group.queue.root]
        tree.parked.pop(id(group), None)
        tree.any_free.pop(id(group), None)
        tree.reclaimers.pop(id(group), None)
        tree.fragile.pop(id(group), None)
        group.queue.own_waiters.pop(id(group), None)
        group.queue.capped.pop(id(group), None)
        group.epoch += 1
        group.naps += 1
        if group.parked:
            group.parked = False
            head = group.head(self._records)
            if head is not None:
                group.queue.push(group, head)
        else:  # the head of a blocked StrictFIFO queue
            queue = group.queue
            queue.blocked = None
            peeked = queue.peek(self._records)
            if peeked is not None:
                queue.offer(peeked[1])
        self._dirty.add(group.queue.root)

    def _wake_all(self, root: str) -> None:
        tree = self._trees[root]
        for group in list(tree.parked.values()):
            self._unpark(group)
        tree.cooling.clear()
        tree.sleeping.clear()
        for name in tree.queues:
            self._queues[name].reclaim_waiting.clear()
            self._queues[name].reclaim_compact_at.clear()
            self._queues[name].held_by_own_usage.clear()
        self._dirty.add(root)

    def _wake_on_free(self, queue: _Queue, freed: Mapping[FlavorResource, int]) -> None:
        """Quota was freed in ``queue``: wake the set-aside heads it could help; the others stay set aside."""
        tree = self._trees[queue.root]
        for group in (*tree.any_free.values(), *queue.capped.values()):
            self._unpark(group)
        if queue.held_by_own_usage:
            # Those that would still be held (even with nothing else in use) stay so without a detour.
            held = []
            for naps, group in queue.held_by_own_usage:
                if naps != group.naps:
                    continue
                head = group.head(self._records)
                if head is not None and not self._may_succeed(group, head, self.tree.ceiling):
                    held.append((naps, group))
                else:
                    tree.cooling.append((naps, group))
            queue.held_by_own_usage = held
        if tree.cooling:
            for naps, group in tree.cooling:
                if naps == group.naps:
                    self._sleep(tree, group)
            tree.cooling.clear()
        node = self.tree.cluster_queues[queue.model.name]
        for fr in freed:
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
        if tree.fragile:
            for group in list(tree.fragile.values()):
                self._unpark(group)
        if not (queue.own_waiters or tree.reclaimers):
            return
        fair = self.configuration.fair_sharing is not None
        priority = admitted.workload.priority
        if queue.own_waiters:
            newer_equal = (
                queue.model.preemption.within_cluster_queue is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
            )
            for group in list(queue.own_waiters.values()):
                head_priority = group.shape[2]
                assert isinstance(head_priority, int)
                if fair or priority < head_priority or (newer_equal and priority == head_priority):
                    self._unpark(group)
        if not tree.reclaimers:
            return
        if not (fair or self.tree.is_borrowing(queue.model.name, admitted.assignment.usage)):
            return
        for group in list(tree.reclaimers.values()):
            owner = group.queue
            if owner is queue:
                continue
            head_priority = group.shape[2]
            assert isinstance(head_priority, int)
            any_priority = owner.model.preemption.reclaim_within_cohort is ReclaimPolicy.ANY
            if fair or any_priority or priority < head_priority:
                self._unpark(group)

    def _backoff_stale(self, entry: tuple[float, str]) -> bool:
        record = self._records.get(entry[1])
        return record is None or record.state is not WorkloadState.BACKOFF or record.requeue_at != entry[0]

    def _deadline_stale(self, entry: tuple[float, int, str]) -> bool:
        record = self._records.get(entry[2])
        return record is None or record.state is not WorkloadState.ADMITTED or record.deadline != entry[0]


@dataclass(slots=True)
class _FairEntry:
    """A queue's head in the fair-sharing tournament, with its shares along ``upward`` of its ClusterQueue."""

    shares: list[int]
    queue: _Queue
    group: _Group
    head: _Record


def _tournament(node: QuotaNode, entries: Mapping[QuotaNode, _FairEntry]) -> _FairEntry | None:
    """The entry ``node`` nominates: its own head for a ClusterQueue; for a cohort, the nominee of the child
    with the lowest share (the child's, head counted in), ties to the best-ordered head, as in Kueue."""
    if node.is_cluster_queue:
        return entries.get(node)
    best: _FairEntry | None = None
    best_rank: tuple[int, SortKey] | None = None
    for child in node.children:
        found = _tournament(child, entries)
        if found is None:
            continue
        # The child's place in the head's path: the cohort's own path is its tail.
        rank = (found.shares[len(found.shares) - len(node.upward) - 1], found.head.sort_key)
        if best_rank is None or rank < best_rank:
            best, best_rank = found, rank
    return best


def _lent_under(top: QuotaNode) -> frozenset[FlavorResource]:
    lent: set[FlavorResource] = set()
    nodes = [top]
    while nodes:
        node = nodes.pop()
        lent.update(fr for fr, quota in node.quotas.items() if quota.lending_limit is not None)
        nodes.extend(node.children)
    return frozenset(lent)
