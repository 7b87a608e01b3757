"""The cohort tree and its quota arithmetic: how much each ClusterQueue may use right now and at most.

Nodes are ClusterQueues (leaves) and Cohorts. Each node holds, per (flavor, resource), its own quota, its
subtree quota (own nominal plus what its children lend up) and its usage as seen by its parent. This follows
Kueue's hierarchical model: a child with a ``lendingLimit`` keeps ``subtree - lendingLimit`` for itself
(its guaranteed quota); only usage above the guaranteed part counts against the parent; ``borrowingLimit``
caps what a node may take from its parent beyond its own subtree quota.

Usage changes propagate up the tree in O(depth); ``available`` is O(depth) and ``potential_available``, fixed by
the quotas, is computed once per node and flavor-resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from kuota.engine.model import ClusterQueue, Cohort, ResourceGroup, ResourceQuota

# (flavor, resource). Spelt as a tuple of any length, not tuple[str, str]: mypyc keeps a fixed-length tuple
# unboxed, as a C struct, and so builds a new tuple object every time one is used as a dict key, which is at
# every quota lookup; a tuple of any length stays the one object it was built as.
FlavorResource = tuple[str, ...]


class QuotaNode:
    """One ClusterQueue or Cohort in the tree (mutable usage, fixed quotas)."""

    __slots__ = (
        "borrow_caps",
        "children",
        "descent",
        "floors",
        "height",
        "is_cluster_queue",
        "lineage",
        "name",
        "parent",
        "potential",
        "quotas",
        "subtree",
        "upward",
        "usage",
        "weight",
    )

    def __init__(
        self, name: str, is_cluster_queue: bool, groups: Iterable[ResourceGroup], weight: Fraction = Fraction(1)
    ) -> None:
        self.name = name
        self.weight = weight
        self.is_cluster_queue = is_cluster_queue
        self.parent: QuotaNode | None = None
        self.children: list[QuotaNode] = []
        self.quotas: dict[FlavorResource, ResourceQuota] = {
            (flavor.name, quota.name): quota
            for group in groups
            for flavor in group.flavors
            for quota in flavor.resources
        }
        self.subtree: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        # Fixed once the subtree quotas are summed (``settle``), read on every quota check: the guaranteed
        # part where it is not 0, and the most it may hold in its parent where borrowingLimit caps that.
        self.floors: dict[FlavorResource, int] = {}
        self.borrow_caps: dict[FlavorResource, int] = {}
        # ``QuotaTree.potential_available``, remembered: it depends on the quotas alone.
        self.potential: dict[FlavorResource, int] = {}
        # The root, then every node below it down to this one (fixed once the tree is built): ``available``
        # walks it downward instead of recursing upward.
        self.lineage: tuple[QuotaNode, ...] = (self,)
        self.descent: tuple[QuotaNode, ...] = ()  # the lineage without the root
        self.upward: tuple[QuotaNode, ...] = (self,)  # the lineage from this node up
        # Kueue's height of the node: 0 for a ClusterQueue (or an empty cohort), else one more than its highest
        # child cohort, at least 1. A cohort tree of height 2 or more nests cohorts.
        self.height = 0

    def guaranteed(self, fr: FlavorResource) -> int:
        """The part of this node's subtree quota it never lends to its parent."""
        quota = self.quotas.get(fr)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree.get(fr, 0) - quota.lending_limit)

    def within_quota(self, frs: Iterable[FlavorResource]) -> bool:
        """Whether this node uses no more than its subtree quota of each of ``frs``."""
        usage = self.usage
        subtree = self.subtree
        return all(usage.get(fr, 0) <= subtree.get(fr, 0) for fr in frs)

    def local_available(self, fr: FlavorResource) -> int:
        """What is left of its guaranteed part: quota it may use that its parent never sees."""
        left = self.floors.get(fr, 0) - self.usage.get(fr, 0)
        return left if left > 0 else 0

    def settle(self) -> None:
        for fr, quota in self.quotas.items():
            floor = self.guaranteed(fr)
            if floor:
                self.floors[fr] = floor
            if quota.borrowing_limit is not None:
                self.borrow_caps[fr] = self.subtree.get(fr, 0) - floor + quota.borrowing_limit

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node


class QuotaTree:
    """All nodes, built from the ClusterQueues and Cohorts; cohorts named only by a ClusterQueue are implicit."""

    def __init__(self, cluster_queues: Mapping[str, ClusterQueue], cohorts: Mapping[str, Cohort]) -> None:
        self.cluster_queues: dict[str, QuotaNode] = {}
        self.cohorts: dict[str, QuotaNode] = {}
        self.cyclic_cohorts: set[str] = set()
        for cohort in cohorts.values():
            self.cohorts[cohort.name] = QuotaNode(cohort.name, False, cohort.resource_groups, cohort.fair_weight)
        for cohort in cohorts.values():
            if cohort.parent is not None:
                self._link(self.cohorts[cohort.name], self._cohort(cohort.parent))
        for cq in cluster_queues.values():
            node = QuotaNode(cq.name, True, cq.resource_groups, cq.fair_weight)
            self.cluster_queues[cq.name] = node
            if cq.cohort is not None:
                self._link(node, self._cohort(cq.cohort))
        self._find_cycles()
        for node in self.cohorts.values():
            if node.parent is None and node.name not in self.cyclic_cohorts:
                self._sum_subtree(node)
        for node in self.cluster_queues.values():
            if node.parent is None:
                self._sum_subtree(node)
        for node in (*self.cohorts.values(), *self.cluster_queues.values()):
            node.settle()
            if node.parent is not None:
                lineage = [node]
                while (above := lineage[-1].parent) is not None:
                    lineage.append(above)
                node.lineage = tuple(reversed(lineage))
                node.descent = node.lineage[1:]
                node.upward = tuple(lineage)

    def _cohort(self, name: str) -> QuotaNode:
        if name not in self.cohorts:
            self.cohorts[name] = QuotaNode(name, False, ())
        return self.cohorts[name]

    @staticmethod
    def _link(child: QuotaNode, parent: QuotaNode) -> None:
        child.parent = parent
        parent.children.append(child)

    def _find_cycles(self) -> None:
        # A parentName cycle disables every cohort on or under it, as in Kueue.
        for start in self.cohorts.values():
            seen: list[QuotaNode] = []
            node: QuotaNode | None = start
            while node is not None and node not in seen:
                seen.append(node)
                node = node.parent
            if node is not None:
                self.cyclic_cohorts.add(start.name)
        # Cut the disabled cohorts loose so every walk up the tree ends.
        for name in self.cyclic_cohorts:
            node = self.cohorts[name]
            if node.parent is not None:
                node.parent.children.remove(node)
                node.parent = None

    def in_cycle(self, cluster_queue: str) -> str | None:
        """The name of the cyclic cohort above ``cluster_queue``, if any."""
        parent = self.cluster_queues[cluster_queue].parent
        if parent is not None and parent.name in self.cyclic_cohorts:
            return parent.name
        return None

    def _sum_subtree(self, node: QuotaNode) -> None:
        node.subtree = {fr: quota.nominal for fr, quota in node.quotas.items()}
        if not node.is_cluster_queue and node.children:
            node.height = 1
        for child in node.children:
            self._sum_subtree(child)
            if not child.is_cluster_queue:
                node.height = max(node.height, child.height + 1)
            for fr, amount in child.subtree.items():
                node.subtree[fr] = node.subtree.get(fr, 0) + amount - child.guaranteed(fr)

    def add_usage(self, cluster_queue: str, usage: dict[FlavorResource, int], sign: int) -> None:
        """Add (sign 1) or remove (sign -1) a workload's usage, propagating the lent-out part upward."""
        upward = self.cluster_queues[cluster_queue].upward
        for fr, amount in usage.items():
            delta = sign * amount
            for node in upward:
                if delta == 0:
                    break
                node_usage = node.usage
                before = node_usage.get(fr, 0)
                after = before + delta
                node_usage[fr] = after
                floors = node.floors
                if floors:  # most nodes lend all they have: no lookup then (it is one per node and resource)
                    floor = floors.get(fr)
                    if floor is not None:
                        delta = max(0, after - floor) - max(0, before - floor)

    def available(self, node: QuotaNode, fr: FlavorResource) -> int:
        """What ``node`` could use of ``fr`` now, on top of its current usage: what its parent has available,
        capped by its borrowingLimit, plus what is left of its guaranteed part."""
        root = node.lineage[0]
        result = root.subtree.get(fr, 0) - root.usage.get(fr, 0)
        for below in node.descent:
            usage = below.usage.get(fr, 0)
            floor = below.floors.get(fr, 0) if below.floors else 0  # empty unless it has a lendingLimit
            cap = below.borrow_caps.get(fr)
            if cap is not None:
                result = min(result, cap - (usage - floor if usage > floor else 0))
            if usage < floor:
                result += floor - usage
        return result

    def ceiling(self, node: QuotaNode, fr: FlavorResource) -> int:
        """The most ``node`` could have ``available`` of ``fr`` however much the rest of the tree freed: it
        depends on the node's own usage alone, so only a free in the node itself can raise it."""
        usage = node.usage.get(fr, 0)
        parent = node.parent
        if parent is None:
            return node.subtree.get(fr, 0) - usage
        floor = node.floors.get(fr, 0) if node.floors else 0
        # What the parent can give never exceeds what it could hold with nothing else in use.
        from_parent = self.potential_available(parent, fr)
        cap = node.borrow_caps.get(fr)
        if cap is not None:
            from_parent = min(from_parent, cap - (usage - floor if usage > floor else 0))
        return (floor - usage if usage < floor else 0) + from_parent

    def potential_available(self, node: QuotaNode, fr: FlavorResource) -> int:
        """The most ``node`` could ever use of ``fr`` if nothing else in the tree used any."""
        total = node.potential.get(fr)
        if total is not None:
            return total
        parent = node.parent
        if parent is None:
            total = node.subtree.get(fr, 0)
        else:
            total = node.guaranteed(fr) + self.potential_available(parent, fr)
            quota = node.quotas.get(fr)
            if quota is not None and quota.borrowing_limit is not None:
                total = min(total, node.subtree.get(fr, 0) + quota.borrowing_limit)
        node.potential[fr] = total
        return total

    def lowest_fitting_subtree(self, node: QuotaNode, fr: FlavorResource, need: int) -> tuple[int, bool]:
        """Where ``need`` more of ``fr`` would come from, as Kueue's flavor assigner sees it: the height of the
        lowest subtree above ``node`` whose quota covers it (0: its own quota does; the root's height when
        none does), and whether that subtree lies below the root, so that the queue may reclaim that subtree's
        quota from borrowers elsewhere in the tree."""
        parent = node.parent
        if parent is None or node.usage.get(fr, 0) + need <= node.subtree.get(fr, 0):
            return 0, parent is not None
        remaining = need - node.local_available(fr)
        above = parent
        while True:
            fits = above.usage.get(fr, 0) + remaining <= above.subtree.get(fr, 0)
            if fits or above.parent is None:
                return above.height, fits and above.parent is not None
            remaining -= above.local_available(fr)
            above = above.parent

    def borrowed(self, cluster_queue: str, fr: FlavorResource) -> int:
        node = self.cluster_queues[cluster_queue]
        return max(0, node.usage.get(fr, 0) - node.subtree.get(fr, 0))

    def is_borrowing(self, cluster_queue: str, frs: Iterable[FlavorResource]) -> bool:
        node = self.cluster_queues[cluster_queue]
        usage = node.usage
        subtree = node.subtree
        return any(usage.get(fr, 0) > subtree.get(fr, 0) for fr in frs)
