"""The engine's runtime state per ClusterQueue and cohort tree: what is pending where, grouped so that only heads are
tried, what is admitted in victim order, and the indexes set-aside heads wait in.

These are Kueue's ``pkg/cache`` and ``pkg/queue`` structures for this engine: ``queue_manager`` keeps them (routing,
set-aside, wake-ups) and ``scheduler`` reads them to decide. They hold no policy of their own.

How it stays fast. Pending workloads of a ClusterQueue are kept in groups of identical shape (LocalQueue, priority,
pod sets, and whether preempted at the current instant): within a group only the head (oldest) can be the next
admission, and if the head cannot be admitted then no member can, so a failed head sets the whole group aside at
once, until something could make its head admissible (``WakeConditions`` says what; ``queue_manager`` says how
each kind waits and wakes). Heads across a tree's queues come from one heap (O(log queues) per step; with fair
sharing the scheduler scans them, as shares move). Admitted workloads are kept per queue by priority, newest
first, so victims are taken in Kueue's order lazily, without sorting every candidate. Usage is kept per node of
the quota tree and updated in O(depth).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kuota.engine.decisions import EvictionReason, WorkloadState
from kuota.engine.flavor_assignment import FlavorAssigner, Reason
from kuota.engine.model import ClusterQueue, StopPolicy, WaitForPodsReady, WhenCanPreempt, Workload
from kuota.engine.preemption import AdmittedByPriority, AdmittedWorkload
from kuota.engine.quota_tree import FlavorResource, QuotaNode

# (-priority, queue order time, uid, key): a tuple of any length for the reason FlavorResource is one (quota_tree):
# every heap push and comparison would otherwise box a new tuple, and its float and int, from the unboxed struct.
SortKey = tuple[int | float | str, ...]
# Heaps whose outdated entries leave only from the top are swept when they pass twice their live size
# (at least this many entries), so sweeping costs O(1) a push over the run.
COMPACT_FLOOR = 64
# Per resource group a pod set uses, per flavor: each (flavor, resource) it would take there, and how much.
FitOptions = tuple[tuple[tuple[tuple[FlavorResource, int], ...], ...], ...]


class PendingReason:
    """Why a pending workload's last attempt failed, as parts (``flavor_assignment.Reason``). Most are replaced
    by the next attempt before anyone reads them, so the text is joined only when a status asks. (A plain
    class, built per failed attempt: see ``setup.py``.)"""

    def __init__(self, parts: tuple[Reason, ...]) -> None:
        self.parts: Final = parts

    def __str__(self) -> str:
        return "; ".join(dict.fromkeys(str(part) for part in self.parts)) or "does not fit"


class Record:
    """One workload the engine knows, in whatever state, and where it waits or runs."""

    __slots__ = (
        "_shape",
        "admitted",
        "counts",
        "deadline",
        "executed",
        "group",
        "inadmissible",
        "order_time",
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

    def __init__(self, workload: Workload, order_time: float | None = None) -> None:
        self.workload = workload
        pod_sets = workload.pod_sets
        self.counts = tuple(pod_set.count for pod_set in pod_sets)  # its full size, tried first
        self.partial = any(pod_set.min_count is not None for pod_set in pod_sets)  # minCount allows less
        # Kueue's queue order timestamp: its creation, or the eviction it is requeued after (``orders_by_eviction``).
        self.order_time = workload.created if order_time is None else order_time
        self.sort_key: SortKey = (-workload.priority, self.order_time, workload.uid, workload.key)
        self.state = WorkloadState.PENDING
        self.queue: Queue | None = None
        self.group: Group | None = None
        self.reason: str | PendingReason | None = None
        self.inadmissible = False
        self.admitted: AdmittedWorkload | None = None
        self.deadline: float | None = None
        self.executed = 0.0
        self.requeue_count = 0
        self.requeue_at: float | None = None
        self._shape: tuple[object, ...] | None = None
        # When it was last preempted: at that same instant it may not preempt anyone (no preemption cycles).
        self.preempted_at: float | None = None

    def queue_from(self, at: float) -> None:
        """Order it by ``at`` from now on (it is in no queue or group: they are keyed by its sort key)."""
        workload = self.workload
        self.order_time = at
        self.sort_key = (-workload.priority, at, workload.uid, workload.key)

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
                    p.topology_request,  # where its pods must go, and with which pod sets
                )
                for p in workload.pod_sets
            )
            self._shape = (workload.namespace, workload.queue_name, workload.priority, pod_sets)
        return (*self._shape, instant if self.preempted_at == instant else None)


def orders_by_eviction(reason: EvictionReason, wait: WaitForPodsReady | None) -> bool:
    """Whether a workload requeued after an eviction for ``reason`` queues from that eviction rather than from its
    creation (Kueue's ``GetQueueOrderTimestamp``): after an AdmissionCheck's, always; after a PodsReady timeout,
    under ``requeuingStrategy.timestamp`` ``Eviction`` (the default)."""
    if reason is EvictionReason.ADMISSION_CHECK:
        return True
    return reason is EvictionReason.PODS_READY_TIMEOUT and (wait is None or wait.timestamp == "Eviction")


class WakeConditions:
    """What could make a set-aside head admissible, and so wakes its group: which admissions, and which frees
    (freed quota always could, but most heads wait for an amount). (A plain class, built per failed attempt:
    see ``setup.py``.)"""

    def __init__(  # noqa: PLR0917 (positional, as the dataclass it replaced was built)
        self,
        own_queue: bool,
        other_queues: bool,
        needs: Mapping[FlavorResource, int] | None = None,
        reclaim_limits: Mapping[FlavorResource, int] | None = None,
        any_admission: bool = False,
        own_frees_only: bool = False,
        topology_flavors: tuple[str, ...] = (),
    ) -> None:
        # an admission in its own queue: a new candidate for in-queue preemption
        self.own_queue: Final = own_queue
        # an admission elsewhere in the tree: a new borrower to reclaim from, or a fair-share change
        self.other_queues: Final = other_queues
        # Freed quota helps only once one of these amounts is available (none of them: freed quota cannot help);
        # None: any freed quota may help.
        self.needs: Final = needs
        # Once the queue's own usage is down to one of these, it fits its nominal quota and may reclaim.
        self.reclaim_limits: Final[Mapping[FlavorResource, int]] = {} if reclaim_limits is None else reclaim_limits
        # Any admission in the tree: the flavor walk stopped at a flavor needing preemption, and more usage
        # could make that flavor not fit at all, so that the walk goes on to a later flavor, which may fit.
        self.any_admission: Final = any_admission
        # Freed quota helps (needs is None) only when freed in its own queue: its borrowingLimit keeps it from
        # fitting even with all it may preempt there gone, and nothing elsewhere changes that.
        self.own_frees_only: Final = own_frees_only
        # Capacity freed on the nodes of these TAS flavors, in any tree (a TAS workload leaving, a non-TAS pod
        # going), may let it be placed.
        self.topology_flavors: Final = topology_flavors


class Group:
    """Pending workloads of one queue with identical shape; only the head is ever tried."""

    __slots__ = (
        "elder",
        "epoch",
        "inadmissible",
        "members",
        "need_epoch",
        "prepared",
        "queue",
        "reason",
        "set_aside",
        "shape",
        "version",
        "wake_conditions",
    )

    def __init__(self, queue: Queue, shape: tuple[object, ...]) -> None:
        self.queue = queue
        self.shape = shape
        self.members: list[tuple[SortKey, str]] = []
        self.set_aside = False
        self.reason: str | PendingReason | None = None
        self.inadmissible = False
        # The set-aside group of the same shape it split from, its newcomer sorting before that one's head.
        self.elder: Group | None = None
        self.version = 0
        self.wake_conditions = WakeConditions(False, False)
        self.epoch = 0  # bumped whenever it is set aside or woken: older reclaim_waiting entries are stale
        # Bumped then too, and when a check against the need index finds it cannot succeed yet: older entries in
        # awaiting_free, by_need and awaiting_own_free are stale.
        self.need_epoch = 0
        self.prepared: tuple[FitOptions, dict[FlavorResource, int]] | None = None  # see QueueManager.prepare

    def head(self, records: dict[str, Record]) -> Record | None:
        while self.members:
            record = records.get(self.members[0][1])
            if record is not None and record.group is self and record.state is WorkloadState.PENDING:
                return record
            heapq.heappop(self.members)
        return None


class Queue:
    """One ClusterQueue's runtime state."""

    def __init__(
        self,
        model: ClusterQueue,
        assigner: FlavorAssigner | None,
        root: str,
        inactive: str | None,
        inactive_condition: tuple[str, str] | None = None,
    ) -> None:
        self.model = model
        self.assigner = assigner
        self.root = root
        self.inactive = inactive
        self.inactive_condition = inactive_condition  # Kueue's Active reason and message, where it has words
        self.heap: list[tuple[SortKey, int, int, Group]] = []
        self.groups: dict[tuple[object, ...], Group] = {}
        self.blocked: str | PendingReason | None = None  # StrictFIFO: the reason its head waits
        self.admitted: dict[str, AdmittedWorkload] = {}
        self.by_priority = AdmittedByPriority()  # the same workloads, in victim order
        # Set-aside heads waiting for this queue's usage to fall to a limit: (-limit, seq, epoch, group).
        self.reclaim_waiting: dict[FlavorResource, list[tuple[int, int, int, Group]]] = {}
        self.reclaim_compact_at: dict[FlavorResource, int] = {}
        # Set-aside groups that an admission in this queue could give someone to preempt.
        self.own_waiters: dict[int, Group] = {}
        # Set-aside groups that only quota freed in this queue may help (see WakeConditions.own_frees_only).
        self.capped: dict[int, Group] = {}
        # Set-aside groups waiting for quota that this queue's own usage keeps from fitting, however much the
        # rest of the tree frees (see QuotaTree.ceiling), as (need_epoch, group): they go back to awaiting a
        # free in the tree (Tree.awaiting_free) only when this queue frees.
        self.awaiting_own_free: list[tuple[int, Group]] = []
        self.awaiting_own_free_compact_at = COMPACT_FLOOR
        # QueueManager.prepare's answers, per shape (without the preempted-at instant).
        self.prepared: dict[tuple[object, ...], tuple[FitOptions, dict[FlavorResource, int]]] = {}
        # Whether a flavor needing preemption can stop its flavor walk while a later one might fit: then more
        # usage (which can make that flavor not fit at all) may help a set-aside head.
        self.preemption_may_stop_walk = (
            assigner is not None
            and not assigner.may_preempt_past_nominal
            and model.flavor_fungibility.when_can_preempt is WhenCanPreempt.MAY_STOP_SEARCH
            and any(len(group.flavors) > 1 for group in model.resource_groups)
        )
        self.pending = 0
        # The tree's heap of queue heads (see Tree.heads), and this queue's tiebreak for entries in it.
        self.heads: list[tuple[SortKey, int, Queue]] = []
        self.offers = 0

    @property
    def stopped(self) -> bool:
        return self.model.stop_policy is not StopPolicy.NONE

    def push(self, group: Group, head: Record) -> None:
        group.version += 1
        heapq.heappush(self.heap, (head.sort_key, group.version, id(group), group))
        self.offer(head)

    def offer(self, head: Record) -> None:
        """Tell the tree this queue's head may now be ``head`` (an entry of at most its key must exist)."""
        self.offers += 1
        heapq.heappush(self.heads, (head.sort_key, self.offers, self))

    def peek(self, records: dict[str, Record]) -> tuple[Group, Record] | None:
        while self.heap:
            _, version, _, group = self.heap[0]
            if version == group.version and not group.set_aside:
                head = group.head(records)
                if head is not None and head.sort_key == self.heap[0][0]:
                    return group, head
            heapq.heappop(self.heap)
        return None


class NeedIndex:
    """Set-aside groups waiting for one flavor and resource: by the amount they need, then by head."""

    __slots__ = ("amounts", "buckets", "compact_at")

    def __init__(self) -> None:
        self.amounts: list[int] = []  # sorted keys of ``buckets``
        self.buckets: dict[int, list[tuple[SortKey, int, int, Group]]] = {}
        self.compact_at: dict[int, int] = {}

    def add(self, need: int, entry: tuple[SortKey, int, int, Group]) -> None:
        bucket = self.buckets.get(need)
        if bucket is None:
            bucket = self.buckets[need] = []
            bisect.insort(self.amounts, need)
        heapq.heappush(bucket, entry)
        # A group is indexed again after every check that fails, and only a bucket's top is checked: under a top
        # that stays valid, outdated entries would pile up for the whole run. Dropping them keeps the live ones'
        # order.
        if len(bucket) > self.compact_at.get(need, COMPACT_FLOOR):
            bucket[:] = [e for e in bucket if e[2] == e[3].need_epoch]
            heapq.heapify(bucket)
            self.compact_at[need] = max(COMPACT_FLOOR, 2 * len(bucket))

    def drop(self, position: int) -> None:
        need = self.amounts.pop(position)
        del self.buckets[need]
        self.compact_at.pop(need, None)


@dataclass
class Tree:
    """One cohort tree (or a ClusterQueue outside any cohort): its queues, their heads, and the indexes its
    set-aside groups wait in. Trees are scheduled independently of each other."""

    root: QuotaNode
    # Resources some node of the tree has a lendingLimit on: a queue may have more available than the root.
    lending_limited: frozenset[FlavorResource]
    queues: list[str] = field(default_factory=list)
    set_aside: dict[int, Group] = field(default_factory=dict)  # set aside, and heads of blocked StrictFIFO queues
    any_free: dict[int, Group] = field(default_factory=dict)  # those any freed quota may help
    # The others wait for quota: first for some to be freed in the tree (as (need_epoch, group)); then they are
    # indexed ``by_need``, under one resource per flavor they could use, until the scheduling loop finds what
    # they need available (or they go back to awaiting a free).
    awaiting_free: list[tuple[int, Group]] = field(default_factory=list)
    by_need: dict[FlavorResource, NeedIndex] = field(default_factory=dict)
    # Set-aside groups that an admission in another queue could give someone to reclaim from.
    reclaimers: dict[int, Group] = field(default_factory=dict)
    # Set-aside groups that any admission in the tree could help (see WakeConditions.any_admission).
    any_admission_waiters: dict[int, Group] = field(default_factory=dict)
    # Every queue with a head to offer has an entry here keyed at most by its head: the best-ordered head of
    # the tree is found in O(log queues); stale entries are fixed when they reach the top.
    heads: list[tuple[SortKey, int, Queue]] = field(default_factory=list)


def lending_limited_under(top: QuotaNode) -> frozenset[FlavorResource]:
    """The (flavor, resource) pairs some node under ``top`` has a lendingLimit on."""
    limited: set[FlavorResource] = set()
    nodes = [top]
    while nodes:
        node = nodes.pop()
        limited.update(fr for fr, quota in node.quotas.items() if quota.lending_limit is not None)
        nodes.extend(node.children)
    return frozenset(limited)
