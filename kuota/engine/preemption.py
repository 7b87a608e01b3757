"""Classic preemption: which admitted workloads a pending one may evict, and the fewest that make it fit.

Candidates (only workloads using a resource the preemptor is short of):
- in its own ClusterQueue, per ``withinClusterQueue``: lower priority (``LowerPriority``), or also equal
  priority but created after the preemptor's queue order time (``LowerOrNewerEqualPriority``; Kueue's
  ``GetQueueOrderTimestamp``: its creation, or the eviction it was requeued after, ``queues.orders_by_eviction``);
- in other ClusterQueues of the same cohort tree that are borrowing that resource: per
  ``reclaimWithinCohort`` (``Any``: any priority, ``LowerPriority``: lower) when the preemptor fits its own
  nominal quota; otherwise, only with ``borrowWithinCohort: LowerPriority``, those of lower priority and at
  most ``maxPriorityThreshold``.
Victim order: other queues before the own one, lower priority first, most recently admitted first. Victims
are taken in that order until the preemptor fits (skipping a queue that stopped borrowing along the way), then
every victim not needed is given back, newest decision first. The quota tree is restored before returning.

In a tree of nested cohorts, ``nested_classic_victims`` applies Kueue's hierarchical reclaim instead of the
cohort rules above (the own queue's rule is the same): see its docstring.

These rules cannot cycle: a victim of an in-queue preemption has strictly lower priority (or equal and is
newer) than its preemptor, and a reclaim leaves the preemptor's queue within its nominal quota, so the victim
cannot take the quota back while that holds.

With fair sharing, ``fair_sharing.fair_sharing_victims`` chooses among ``classic_candidates`` by share instead.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import StrEnum
from typing import Final

from kuota.engine.flavor_assignment import Assignment
from kuota.engine.model import (
    BorrowWithinCohortPolicy,
    ClusterQueue,
    ReclaimPolicy,
    WithinClusterQueuePolicy,
    Workload,
)
from kuota.engine.quota_tree import FlavorResource, QuotaNode, QuotaTree
from kuota.engine.topology_admission import VictimCheck


class PreemptionReason(StrEnum):
    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"


class AdmittedWorkload:
    """A running workload as preemption sees it. (Plain classes here: see ``setup.py``.)"""

    def __init__(
        self, workload: Workload, cluster_queue: str, assignment: Assignment, admitted_at: float, sequence: int = 0
    ) -> None:
        self.workload: Final = workload
        self.cluster_queue: Final = cluster_queue
        self.assignment: Final = assignment
        self.admitted_at: Final = admitted_at
        # Orders admissions made at the same instant: a later decision counts as more recently admitted.
        self.sequence: Final = sequence

    def uses_any(self, frs: Iterable[FlavorResource]) -> bool:
        return any(fr in self.assignment.usage for fr in frs)

    def __repr__(self) -> str:
        return f"AdmittedWorkload({self.workload.key!r} in {self.cluster_queue!r} at {self.admitted_at!r})"


class Target:
    """A victim, and why it may go."""

    def __init__(
        self,
        victim: AdmittedWorkload,
        reason: PreemptionReason,
        boundary: QuotaNode | None = None,
        only_without_borrowing: bool = False,
    ) -> None:
        self.victim: Final = victim
        self.reason: Final = reason
        # In a nested cohort tree, for a victim in another ClusterQueue: the cohort (the lowest common one with
        # the preemptor) below which its queue and every cohort on the way must stay over their quota for it
        # to remain a victim as others go; and whether it may go only if the preemptor ends up not borrowing.
        self.boundary: Final = boundary
        self.only_without_borrowing: Final = only_without_borrowing

    def __repr__(self) -> str:
        return f"Target({self.victim!r}, {self.reason.value})"


def victim_order(target: Target, preemptor_queue: str) -> tuple[bool, int, float, int, str]:
    victim = target.victim
    return (
        victim.cluster_queue == preemptor_queue,
        victim.workload.priority,
        -victim.admitted_at,
        -victim.sequence,
        victim.workload.key,
    )


def fits(tree: QuotaTree, cluster_queue: str, usage: Mapping[FlavorResource, int]) -> bool:
    node = tree.cluster_queues[cluster_queue]
    return all(amount <= tree.available(node, fr) for fr, amount in usage.items())


def classic_candidates(
    preemptor: Workload,
    cq: ClusterQueue,
    assignment: Assignment,
    *,
    tree: QuotaTree,
    admitted: Mapping[str, Mapping[str, AdmittedWorkload]],
    cohort_queues: Iterable[str],
    preemptor_order_time: float,
    fair_sharing: bool = False,
) -> list[Target]:
    """Everything ``preemptor`` may evict; with fair sharing, borrowers per ``reclaimWithinCohort`` alone."""
    node = tree.cluster_queues[cq.name]
    short = assignment.short
    priority = preemptor.priority
    candidates: list[Target] = []
    within = cq.preemption.within_cluster_queue
    if within is not WithinClusterQueuePolicy.NEVER:
        newer_than = (preemptor_order_time, preemptor.uid, preemptor.key)
        for victim in admitted.get(cq.name, {}).values():
            other = victim.workload
            lower = other.priority < priority
            newer_equal = (
                within is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
                and other.priority == priority
                and (other.created, other.uid, other.key) > newer_than
            )
            if (lower or newer_equal) and victim.uses_any(short):
                candidates.append(Target(victim, PreemptionReason.IN_CLUSTER_QUEUE))
    if node.parent is None:
        return candidates
    within_nominal = all(node.usage.get(fr, 0) + assignment.usage[fr] <= node.subtree.get(fr, 0) for fr in short)
    reclaim = cq.preemption.reclaim_within_cohort
    borrow_policy = cq.preemption.borrow_within_cohort
    threshold = cq.preemption.max_priority_threshold
    for other_queue in cohort_queues:
        if other_queue == cq.name or not tree.is_borrowing(other_queue, short):
            continue
        for victim in admitted.get(other_queue, {}).values():
            if not victim.uses_any(short):
                continue
            other_priority = victim.workload.priority
            if (within_nominal or fair_sharing) and reclaim is not ReclaimPolicy.NEVER:
                if reclaim is ReclaimPolicy.ANY or other_priority < priority:
                    candidates.append(Target(victim, PreemptionReason.IN_COHORT_RECLAMATION))
            elif (
                borrow_policy is BorrowWithinCohortPolicy.LOWER_PRIORITY
                and other_priority < priority
                and (threshold is None or other_priority <= threshold)
            ):
                candidates.append(Target(victim, PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING))
    return candidates


class AdmittedByPriority:
    """One ClusterQueue's admitted workloads by priority, each priority's newest first (the victim order).

    Admissions normally arrive in that order already, so a bucket is re-sorted only after an admission older
    than the newest one (a restored admission).
    """

    __slots__ = ("_buckets", "_unsorted", "_usage")

    def __init__(self) -> None:
        self._buckets: dict[int, dict[str, AdmittedWorkload]] = {}
        self._unsorted: set[int] = set()
        self._usage: dict[int, dict[FlavorResource, int]] = {}  # per priority, what its workloads use

    def add(self, admitted: AdmittedWorkload) -> None:
        priority = admitted.workload.priority
        bucket = self._buckets.get(priority)
        if bucket is None:
            bucket = self._buckets[priority] = {}
        elif _recency(admitted) < _recency(next(reversed(bucket.values()))):
            self._unsorted.add(priority)
        bucket[admitted.workload.key] = admitted
        usage = self._usage.setdefault(priority, {})
        for fr, amount in admitted.assignment.usage.items():
            usage[fr] = usage.get(fr, 0) + amount

    def remove(self, admitted: AdmittedWorkload) -> None:
        priority = admitted.workload.priority
        bucket = self._buckets[priority]
        del bucket[admitted.workload.key]
        if not bucket:
            del self._buckets[priority]
            del self._usage[priority]
            self._unsorted.discard(priority)
            return
        usage = self._usage[priority]
        for fr, amount in admitted.assignment.usage.items():
            usage[fr] -= amount

    def usage_up_to(self, priority: int, fr: FlavorResource, *, inclusive: bool) -> int:
        """What the workloads below ``priority`` (and at it, if ``inclusive``) use of ``fr``."""
        return sum(
            usage.get(fr, 0)
            for level, usage in self._usage.items()
            if level < priority or (inclusive and level == priority)
        )

    def lowest(self) -> int | None:
        return min(self._buckets, default=None)

    def priorities(self) -> list[int]:
        return sorted(self._buckets)

    def newest_first(self, priority: int) -> Iterator[AdmittedWorkload]:
        bucket = self._buckets.get(priority)
        if bucket is None:
            return iter(())
        if priority in self._unsorted:
            self._unsorted.discard(priority)
            ordered = sorted(bucket.values(), key=_recency)
            bucket.clear()
            bucket.update((admitted.workload.key, admitted) for admitted in ordered)
        return reversed(bucket.values())


def _recency(admitted: AdmittedWorkload) -> tuple[float, int]:
    return admitted.admitted_at, admitted.sequence


def _newest_first_key(admitted: AdmittedWorkload) -> tuple[float, int]:
    return -admitted.admitted_at, -admitted.sequence


def classic_candidates_in_order(
    preemptor: Workload,
    cq: ClusterQueue,
    assignment: Assignment,
    *,
    tree: QuotaTree,
    admitted: Mapping[str, AdmittedByPriority],
    cohort_queues: Iterable[str],
    preemptor_order_time: float,
) -> Iterator[Target]:
    """``classic_candidates`` without fair sharing, lazily and already in victim order."""
    node = tree.cluster_queues[cq.name]
    short = assignment.short
    priority = preemptor.priority
    if node.parent is not None:
        within_nominal = all(node.usage.get(fr, 0) + assignment.usage[fr] <= node.subtree.get(fr, 0) for fr in short)
        reclaim = cq.preemption.reclaim_within_cohort
        borrow_policy = cq.preemption.borrow_within_cohort
        threshold = cq.preemption.max_priority_threshold
        # The queues borrowing something it is short of (QuotaTree.is_borrowing, inlined: every queue of the
        # cohort is looked at on every search).
        others: list[AdmittedByPriority] = []
        for name in cohort_queues:
            queue = admitted.get(name)
            if queue is None or name == cq.name:
                continue
            borrower = tree.cluster_queues[name]
            usage, subtree = borrower.usage, borrower.subtree
            for fr in short:
                if usage.get(fr, 0) > subtree.get(fr, 0):
                    others.append(queue)
                    break
        for level in sorted({p for queue in others for p in queue.priorities()}):
            if within_nominal and reclaim is not ReclaimPolicy.NEVER:
                if not (reclaim is ReclaimPolicy.ANY or level < priority):
                    continue
                reason = PreemptionReason.IN_COHORT_RECLAMATION
            elif (
                borrow_policy is BorrowWithinCohortPolicy.LOWER_PRIORITY
                and level < priority
                and (threshold is None or level <= threshold)
            ):
                reason = PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
            else:
                continue
            streams = [queue.newest_first(level) for queue in others]
            merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_newest_first_key)
            for victim in merged:
                if victim.uses_any(short):
                    yield Target(victim, reason)
    within = cq.preemption.within_cluster_queue
    own = admitted.get(cq.name)
    if within is WithinClusterQueuePolicy.NEVER or own is None:
        return
    newer_equal = within is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
    newer_than = (preemptor_order_time, preemptor.uid, preemptor.key)
    for level in own.priorities():
        if level > priority or (level == priority and not newer_equal):
            break
        for victim in own.newest_first(level):
            other = victim.workload
            if (level < priority or (other.created, other.uid, other.key) > newer_than) and victim.uses_any(short):
                yield Target(victim, PreemptionReason.IN_CLUSTER_QUEUE)


def minimal_victims(
    cluster_queue: str,
    usage: Mapping[FlavorResource, int],
    short: frozenset[FlavorResource],
    candidates: list[Target],
    tree: QuotaTree,
) -> list[Target]:
    """The fewest candidates, in victim order, whose eviction lets ``usage`` fit; [] when none suffices."""
    ordered = sorted(candidates, key=lambda target: victim_order(target, cluster_queue))
    return fewest_victims(cluster_queue, usage, short, ordered, tree)


def fewest_victims(
    cluster_queue: str,
    usage: Mapping[FlavorResource, int],
    short: frozenset[FlavorResource],
    ordered: Iterable[Target],
    tree: QuotaTree,
    *,
    topology: VictimCheck | None = None,
) -> list[Target]:
    """``minimal_victims`` over candidates already in victim order, taken only as far as needed; with
    ``topology``, until the preemptor's placement fits too (Kueue's ``workloadFits`` with TAS)."""
    removed: list[Target] = []
    fitted = False
    for target in ordered:
        victim = target.victim
        if victim.cluster_queue != cluster_queue and not tree.is_borrowing(victim.cluster_queue, short):
            continue
        _take(tree, topology, victim, -1)
        removed.append(target)
        if fits(tree, cluster_queue, usage) and (topology is None or topology.fits()):
            fitted = True
            break
    if not fitted:
        for target in removed:
            _take(tree, topology, target.victim, 1)
        return []
    return needed_victims(
        tree, topology, removed, lambda: fits(tree, cluster_queue, usage) and (topology is None or topology.fits())
    )


def needed_victims(
    tree: QuotaTree, topology: VictimCheck | None, removed: list[Target], admissible: Callable[[], bool]
) -> list[Target]:
    """Of ``removed``, all taken and the preemptor ``admissible`` without them, those still needed once every
    other is given back, the newest removal first and the last kept (Kueue's ``fillBackWorkloads``); the tree and
    the placements are restored."""
    needed = list(removed)
    for target in reversed(removed[:-1]):
        _take(tree, topology, target.victim, 1)
        if admissible():
            needed.remove(target)
        else:
            _take(tree, topology, target.victim, -1)
    for target in needed:
        _take(tree, topology, target.victim, 1)
    return needed


def _take(tree: QuotaTree, topology: VictimCheck | None, victim: AdmittedWorkload, sign: int) -> None:
    """A victim's usage gone from the tree (``sign`` -1) or back (1), and its placement with it."""
    tree.add_usage(victim.cluster_queue, victim.assignment.usage, sign)
    if topology is not None:
        if sign < 0:
            topology.take(victim.workload.key)
        else:
            topology.give_back(victim.workload.key)


def nested_classic_victims(
    preemptor: Workload,
    cq: ClusterQueue,
    assignment: Assignment,
    *,
    tree: QuotaTree,
    admitted: Mapping[str, Mapping[str, AdmittedWorkload]],
    preemptor_order_time: float,
    topology: VictimCheck | None = None,
) -> list[Target]:
    """Classic preemption in a tree of nested cohorts, Kueue's hierarchical way (``classical`` package).

    Walking up from the preemptor's queue, each cohort's subtree (less the part already walked) gives the
    workloads of the queues that use more than their quota, looking only into sub-cohorts that do too: a
    subtree within its quota is nobody's to reclaim from. Where the preemptor's request fits its queue's quota,
    or the quota of a cohort already walked (what the levels below cannot cover counts against the next), it
    has the hierarchical advantage over the rest of the tree: those workloads are reclaimed per
    ``reclaimWithinCohort`` alone. The others may go while the preemptor borrows only per ``borrowWithinCohort``,
    else only if it ends up within its nominal quota. Candidates: advantaged ones, then the others, then its own
    queue's, each in victim order; tried allowing borrowing and not, in Kueue's order. With ``topology``, victims
    are taken until the preemptor's placement fits too, and one is given back only while it still does.
    """
    node = tree.cluster_queues[cq.name]
    short = assignment.short
    usage = assignment.usage
    advantaged, by_priority = _cohort_candidates(preemptor, cq, assignment, tree=tree, admitted=admitted)
    own: list[Target] = []
    within = cq.preemption.within_cluster_queue
    if within is not WithinClusterQueuePolicy.NEVER:
        newer_than = (preemptor_order_time, preemptor.uid, preemptor.key)
        for victim in admitted.get(cq.name, {}).values():
            other = victim.workload
            newer_equal = (
                within is WithinClusterQueuePolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
                and other.priority == preemptor.priority
                and (other.created, other.uid, other.key) > newer_than
            )
            if (other.priority < preemptor.priority or newer_equal) and victim.uses_any(short):
                own.append(Target(victim, PreemptionReason.IN_CLUSTER_QUEUE))
    ordered: list[Target] = []
    for targets in (advantaged, by_priority, own):
        ordered.extend(sorted(targets, key=lambda target: victim_order(target, cq.name)))
    borrowing_forbidden = cq.preemption.borrow_within_cohort is BorrowWithinCohortPolicy.NEVER
    under_nominal = all(node.usage.get(fr, 0) < node.subtree.get(fr, 0) for fr in short)
    attempts: tuple[bool, ...]
    if not (advantaged or by_priority) or (borrowing_forbidden and not under_nominal):
        attempts = (True,)
    elif borrowing_forbidden and not advantaged:
        attempts = (False, True)
    else:
        attempts = (True, False)
    for allow_borrowing in attempts:
        victims = _fewest_valid_victims(
            node, usage, short, ordered, tree=tree, allow_borrowing=allow_borrowing, topology=topology
        )
        if victims:
            return victims
    return []


def _cohort_candidates(
    preemptor: Workload,
    cq: ClusterQueue,
    assignment: Assignment,
    *,
    tree: QuotaTree,
    admitted: Mapping[str, Mapping[str, AdmittedWorkload]],
) -> tuple[list[Target], list[Target]]:
    """The candidates in other queues: those over which the preemptor has the hierarchical advantage, and the
    others (see ``nested_classic_victims``)."""
    advantaged: list[Target] = []
    by_priority: list[Target] = []
    node = tree.cluster_queues[cq.name]
    reclaim = cq.preemption.reclaim_within_cohort
    if node.parent is None or reclaim is ReclaimPolicy.NEVER:
        return advantaged, by_priority
    short = assignment.short
    priority = preemptor.priority
    while_borrowing = cq.preemption.borrow_within_cohort is BorrowWithinCohortPolicy.LOWER_PRIORITY
    threshold = cq.preemption.max_priority_threshold
    remaining = dict(assignment.usage)
    advantage = all(node.usage.get(fr, 0) + amount <= node.subtree.get(fr, 0) for fr, amount in remaining.items())
    walked: QuotaNode = node
    above: QuotaNode | None = node.parent
    while above is not None:
        remaining = {fr: max(0, amount - walked.local_available(fr)) for fr, amount in remaining.items()}
        for queue_node in _over_quota_queues(above, walked, short):
            for victim in admitted.get(queue_node.name, {}).values():
                other = victim.workload.priority
                if not victim.uses_any(short) or (reclaim is ReclaimPolicy.LOWER_PRIORITY and other >= priority):
                    continue
                if advantage:
                    advantaged.append(Target(victim, PreemptionReason.IN_COHORT_RECLAMATION, above))
                elif while_borrowing and other < priority and (threshold is None or other <= threshold):
                    by_priority.append(Target(victim, PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING, above))
                else:
                    by_priority.append(Target(victim, PreemptionReason.IN_COHORT_RECLAMATION, above, True))
        advantage = advantage or all(
            above.usage.get(fr, 0) + amount <= above.subtree.get(fr, 0) for fr, amount in remaining.items()
        )
        walked = above
        above = above.parent
    return advantaged, by_priority


def _over_quota_queues(cohort: QuotaNode, walked: QuotaNode, short: frozenset[FlavorResource]) -> Iterator[QuotaNode]:
    """The ClusterQueues under ``cohort``, outside the subtree ``walked``, using more than their quota of
    something in ``short``, found only through sub-cohorts that do too."""
    for child in cohort.children:
        if child is walked or child.within_quota(short):
            continue
        if child.is_cluster_queue:
            yield child
        else:
            yield from _over_quota_queues(child, walked, short)


def _fewest_valid_victims(
    node: QuotaNode,
    usage: Mapping[FlavorResource, int],
    short: frozenset[FlavorResource],
    ordered: list[Target],
    *,
    tree: QuotaTree,
    allow_borrowing: bool,
    topology: VictimCheck | None,
) -> list[Target]:
    """``fewest_victims`` over nested cohorts: a candidate in another queue stays one only while its queue, and
    every cohort between it and the boundary, uses more than its quota; without borrowing, the preemptor must
    end up within its nominal quota, and candidates that require that count."""

    def valid(target: Target) -> bool:
        victim_node = tree.cluster_queues[target.victim.cluster_queue]
        if victim_node is node:
            return True
        if allow_borrowing and target.only_without_borrowing:
            return False
        current: QuotaNode | None = victim_node
        while current is not None and current is not target.boundary:
            if current.within_quota(short):
                return False
            current = current.parent
        return True

    def admissible() -> bool:
        for fr, amount in usage.items():
            if amount > tree.available(node, fr):
                return False
            if not allow_borrowing and node.usage.get(fr, 0) + amount > node.subtree.get(fr, 0):
                return False
        return topology is None or topology.fits()

    removed: list[Target] = []
    fitted = False
    for target in ordered:
        if not valid(target):
            continue
        _take(tree, topology, target.victim, -1)
        removed.append(target)
        if admissible():
            fitted = True
            break
    if not fitted:
        for target in removed:
            _take(tree, topology, target.victim, 1)
        return []
    return needed_victims(tree, topology, removed, admissible)
