"""Fair sharing, all of it: the shares, the tournament that orders admissions by them, and the preemption
that evens them out, as Kueue computes them. ``scheduler`` calls it where a Configuration sets ``fairSharing``.

Shares. A ClusterQueue's weighted dominant resource share (DRS): for each resource (summed over flavors) the
queue borrows ``max(0, usage + request - subtree quota)``; its share of that resource is ``borrowed * 1000 /
lendable`` where lendable is what its parent could lend; the DRS is the largest such share, divided by the
weight. A weight of 0 makes any borrowing an infinite share. A Cohort's DRS is the same sum over its subtree
usage and subtree quota, with the Cohort's own weight (``weighted_share``, ``path_shares``).

Tournament. Admission order follows Kueue's tournament: each cohort compares its children (ClusterQueues and
child Cohorts) by their DRS with the child's nominated head counted in, lowest first, ties to the
best-ordered head; a child Cohort nominates the winner of its own tournament (``tournament_winner``). A
queue enters with its first workload in order, even one of a group set aside in this step: when that wins,
it is passed over (it would fail again) and its queue enters with its next one (``TournamentStep``).

Preemption. Victims come from the queue of highest share while the Configuration's strategies allow
(``fair_sharing_victims``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from kuota.engine.decisions import WorkloadState
from kuota.engine.flavor_assignment import Assignment
from kuota.engine.model import ClusterQueue, FairSharingStrategy, Workload
from kuota.engine.preemption import (
    AdmittedWorkload,
    PreemptionReason,
    Target,
    classic_candidates,
    fits,
    needed_victims,
    victim_order,
)
from kuota.engine.queues import Group, Queue, Record, SortKey, Tree
from kuota.engine.quota_tree import FlavorResource, QuotaNode, QuotaTree
from kuota.engine.topology_admission import VictimCheck

INFINITE_SHARE = 2**62


def path_shares(tree: QuotaTree, node: QuotaNode, request: Mapping[FlavorResource, int]) -> list[int]:
    """The DRS of ``node`` and of each cohort above it (in ``node.upward`` order) with ``request`` admitted:
    the request rises as usage does, only above each node's guaranteed part."""
    shares: list[int] = []
    rising: Mapping[FlavorResource, int] = request
    for level in node.upward:
        shares.append(weighted_share(tree, level, rising))
        lent: dict[FlavorResource, int] = {}
        for fr, amount in rising.items():
            floor = level.floors.get(fr)
            if floor is None:
                lent[fr] = amount
            else:
                before = level.usage.get(fr, 0)
                lent[fr] = max(0, before + amount - floor) - max(0, before - floor)
        rising = lent
    return shares


def weighted_share(tree: QuotaTree, node: QuotaNode, request: Mapping[FlavorResource, int] | None = None) -> int:
    """The DRS of ``node`` in its parent, with ``request`` added to its usage (0 for a root)."""
    parent = node.parent
    if parent is None:
        return 0
    borrowing: dict[str, int] = {}
    for fr, quota in node.subtree.items():
        borrowed = (request.get(fr, 0) if request else 0) + node.usage.get(fr, 0) - quota
        if borrowed > 0:
            borrowing[fr[1]] = borrowing.get(fr[1], 0) + borrowed
    if not borrowing:
        return 0
    if node.weight == 0:
        return INFINITE_SHARE
    lendable: dict[str, int] = {}
    for fr in parent.subtree:
        lendable[fr[1]] = lendable.get(fr[1], 0) + tree.potential_available(parent, fr)
    dominant = max(
        (
            amount * 1000 // lendable[resource]
            for resource, amount in borrowing.items()
            if lendable.get(resource, 0) > 0
        ),
        default=0,
    )
    return int(dominant * 1000 // (node.weight * 1000))


def tournament_winner(
    tree: Tree,
    queues: list[Queue],
    *,
    records: dict[str, Record],
    quota: QuotaTree,
    step: TournamentStep,
    shares_of: Callable[[Queue, Record], list[int]],
) -> TournamentEntry | None:
    """The head Kueue's fair-sharing tournament picks among ``queues`` of ``tree``: every queue's first workload
    in order enters with its shares along its path (``shares_of``: ``path_shares`` with it admitted); each
    cohort keeps the child (with the head it nominates) of lowest share, then best order. A queue's first may
    be in a group set aside in this step: it would fail again, so when it wins it is passed over and its queue
    enters with its next one, as when each is tried in turn."""
    set_aside: dict[str, list[Group]] = {}  # per queue, its groups set aside (not heads of blocked queues)
    for group in tree.set_aside.values():
        if group.set_aside:
            set_aside.setdefault(group.queue.model.name, []).append(group)
    nodes = quota.cluster_queues
    entries: dict[QuotaNode, TournamentEntry] = {}
    for queue in queues:
        if queue.blocked is not None or queue.assigner is None or queue.stopped:
            continue
        entry = _entry(queue, set_aside.get(queue.model.name, []), records, step, shares_of)
        if entry is not None:
            entries[nodes[queue.model.name]] = entry
    nominees: dict[QuotaNode, TournamentEntry] = {}
    while (best := _tournament(tree.root, entries, nominees)) is not None and best.set_aside:
        name = best.queue.model.name
        node = nodes[name]
        # Its group's next members win in turn until one sorts after what could beat it, or after its
        # queue's next workload of another shape: they are passed over at once.
        rivals = _tied_rivals(best, node, nominees)
        peeked = best.queue.peek(records)
        if peeked is not None:
            rivals.append(peeked[1].sort_key)
        for group in set_aside.get(name, []):
            if group is not best.group and (member := step.first(group, records)) is not None:
                rivals.append(member.sort_key)
        step.pass_over(best.group, records, min(rivals, default=None))
        entry = _entry(best.queue, set_aside.get(name, []), records, step, shares_of)
        if entry is None:
            del entries[node]
        else:
            entries[node] = entry
    return best


def _entry(
    queue: Queue,
    set_aside: list[Group],
    records: dict[str, Record],
    step: TournamentStep,
    shares_of: Callable[[Queue, Record], list[int]],
) -> TournamentEntry | None:
    """``queue``'s first workload in order not passed over in ``step``, with its shares along its path."""
    peeked = queue.peek(records)
    waiting: tuple[Group, Record] | None = None
    for group in set_aside:
        member = step.first(group, records)
        if member is not None and (waiting is None or member.sort_key < waiting[1].sort_key):
            waiting = (group, member)
    if waiting is not None and (peeked is None or waiting[1].sort_key < peeked[1].sort_key):
        group, member = waiting
        shares = step.shares.get(id(group))
        if shares is None:  # one shape, one share: computed once a step
            shares = step.shares[id(group)] = shares_of(queue, member)
        return TournamentEntry(shares, queue, group, member, True)
    if peeked is None:
        return None
    group, head = peeked
    return TournamentEntry(shares_of(queue, head), queue, group, head, False)


class TournamentEntry:
    """A queue's head in the fair-sharing tournament, with its shares along ``upward`` of its ClusterQueue;
    ``set_aside``: a member of a group set aside in this step, which would fail again. (A plain class, built
    per queue and step: see ``setup.py``.)"""

    def __init__(self, shares: list[int], queue: Queue, group: Group, head: Record, set_aside: bool) -> None:
        self.shares: Final = shares
        self.queue: Final = queue
        self.group: Final = group
        self.head: Final = head
        self.set_aside: Final = set_aside


class TournamentStep:
    """What a step of the tournament (the attempts up to an admission, which changes every share) has passed
    over."""

    __slots__ = ("ordered", "passed", "shares")

    def __init__(self) -> None:
        self.passed: set[str] = set()  # workloads tried, or passed over, in this step
        self.shares: dict[int, list[int]] = {}  # per set-aside group: its members' shares
        self.ordered: dict[int, list[tuple[SortKey, str]]] = {}  # per set-aside group: members, last first

    def pass_over(self, group: Group, records: dict[str, Record], bound: SortKey | None) -> None:
        """Pass over ``group``'s first member not passed yet, and those after it that sort before ``bound``."""
        member = self.first(group, records)
        while member is not None:
            self.passed.add(member.workload.key)
            member = self.first(group, records)
            if member is not None and bound is not None and not member.sort_key < bound:
                return

    def first(self, group: Group, records: dict[str, Record]) -> Record | None:
        """``group``'s first pending member in order not passed over yet."""
        head = group.head(records)
        if head is None or head.workload.key not in self.passed:
            return head
        ordered = self.ordered.get(id(group))
        if ordered is None:
            ordered = self.ordered[id(group)] = sorted(group.members, reverse=True)
        while ordered:
            key = ordered[-1][1]
            record = records.get(key)
            if (
                record is not None
                and record.group is group
                and record.state is WorkloadState.PENDING
                and key not in self.passed
            ):
                return record
            ordered.pop()
        return None


def _tournament(
    node: QuotaNode, entries: Mapping[QuotaNode, TournamentEntry], nominees: dict[QuotaNode, TournamentEntry]
) -> TournamentEntry | None:
    """The entry ``node`` nominates (also kept in ``nominees``): its own head for a ClusterQueue; for a cohort,
    the nominee of the child with the lowest share (the child's, head counted in), ties to the best-ordered
    head, as in Kueue."""
    if node.is_cluster_queue:
        best = entries.get(node)
    else:
        best = None
        best_rank: tuple[int, SortKey] | None = None
        for child in node.children:
            found = _tournament(child, entries, nominees)
            if found is None:
                continue
            # The child's place in the head's path: the cohort's own path is its tail.
            rank = (found.shares[len(found.shares) - len(node.upward) - 1], found.head.sort_key)
            if best_rank is None or rank < best_rank:
                best, best_rank = found, rank
    if best is None:
        nominees.pop(node, None)
    else:
        nominees[node] = best
    return best


def _tied_rivals(
    winner: TournamentEntry, node: QuotaNode, nominees: Mapping[QuotaNode, TournamentEntry]
) -> list[SortKey]:
    """The sort keys of the nominees ``winner`` (from the ClusterQueue ``node``) beat only by being older, tying
    with it in share where they meet: a workload of its shape sorting after one of them loses to it there."""
    keys: list[SortKey] = []
    upward = node.upward
    for level in range(1, len(upward)):
        cohort, path = upward[level], upward[level - 1]
        share = winner.shares[level - 1]
        for child in cohort.children:
            rival = nominees.get(child) if child is not path else None
            if rival is not None and rival.shares[len(rival.shares) - len(cohort.upward) - 1] == share:
                keys.append(rival.head.sort_key)
    return keys


def fair_sharing_victims(
    preemptor: Workload,
    cq: ClusterQueue,
    assignment: Assignment,
    *,
    tree: QuotaTree,
    admitted: Mapping[str, Mapping[str, AdmittedWorkload]],
    cohort_queues: Iterable[str],
    strategies: tuple[FairSharingStrategy, ...],
    preemptor_order_time: float,
    topology: VictimCheck | None = None,
) -> list[Target]:
    """Fair-sharing preemption: take victims from the queue with the highest share while the strategy allows.

    The candidates are ``classic_candidates`` with fair sharing: in other queues, borrowers per
    ``reclaimWithinCohort`` alone, whether or not the preemptor fits its nominal quota. Own-queue candidates
    need no share test, and neither do others' while the preemptor stays within its nominal quota; a queue
    that stopped borrowing along the way is no target any more. Otherwise a victim in queue T is taken only if
    the preemptor's share with the new workload is <= T's share after losing it (LessThanOrEqualToFinalShare)
    or < T's share before (LessThanInitialShare). Each strategy is tried in turn; the first that makes the
    workload fit wins. With ``topology``, it fits once its placement does too (Kueue's
    ``workloadFitsForFairSharing``).
    """
    candidates = classic_candidates(
        preemptor,
        cq,
        assignment,
        tree=tree,
        admitted=admitted,
        cohort_queues=cohort_queues,
        preemptor_order_time=preemptor_order_time,
        fair_sharing=True,
    )
    if not candidates:
        return []
    nodes = tree.cluster_queues
    node = nodes[cq.name]
    usage = assignment.usage
    by_queue: dict[str, list[Target]] = {}
    for target in sorted(candidates, key=lambda t: victim_order(t, cq.name)):
        by_queue.setdefault(target.victim.cluster_queue, []).append(target)
    for strategy in strategies:
        removed: list[Target] = []
        pools = {queue: list(targets) for queue, targets in by_queue.items()}
        fitted = False
        while pools and not fitted:
            queue = max(pools, key=lambda q: (q == cq.name, weighted_share(tree, nodes[q]), q))
            target = pools[queue].pop(0)
            if not pools[queue]:
                del pools[queue]
            within_nominal = all(
                node.usage.get(fr, 0) + amount <= node.subtree.get(fr, 0) for fr, amount in usage.items()
            )
            if queue != cq.name and not tree.is_borrowing(queue, assignment.short):
                continue  # it stopped borrowing: what it has left is its own
            if queue != cq.name and not within_nominal:
                victim_usage = target.victim.assignment.usage
                before = weighted_share(tree, nodes[queue])
                tree.add_usage(queue, victim_usage, -1)
                after = weighted_share(tree, nodes[queue])
                tree.add_usage(queue, victim_usage, 1)
                mine = weighted_share(tree, node, usage)
                allowed = (
                    mine <= after
                    if strategy is FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
                    else mine < before
                )
                if not allowed:
                    pools.pop(queue, None)
                    continue
            tree.add_usage(queue, target.victim.assignment.usage, -1)
            if topology is not None:
                topology.take(target.victim.workload.key)
            removed.append(target)
            fitted = fits(tree, cq.name, usage) and (topology is None or topology.fits())
        if not fitted:
            for target in removed:
                tree.add_usage(target.victim.cluster_queue, target.victim.assignment.usage, 1)
                if topology is not None:
                    topology.give_back(target.victim.workload.key)
            continue
        # The victims not needed once the others are gone are given back, as Kueue's fairPreemptions does.
        removed = needed_victims(
            tree, topology, removed, lambda: fits(tree, cq.name, usage) and (topology is None or topology.fits())
        )
        return [
            Target(
                t.victim,
                PreemptionReason.IN_CLUSTER_QUEUE
                if t.victim.cluster_queue == cq.name
                else PreemptionReason.IN_COHORT_FAIR_SHARING,
            )
            for t in removed
        ]
    return []
