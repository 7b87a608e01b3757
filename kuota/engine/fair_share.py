"""Fair sharing: a ClusterQueue's weighted dominant resource share (DRS), as Kueue computes it.

For each resource (summed over flavors) the queue borrows ``max(0, usage + request - subtree quota)``; its
share of that resource is ``borrowed * 1000 / lendable`` where lendable is what its parent could lend; the DRS
is the largest such share, divided by the weight. A weight of 0 makes any borrowing an infinite share.
A Cohort's DRS is the same sum over its subtree usage and subtree quota, with the Cohort's own weight.

Admission order follows Kueue's tournament: each cohort compares its children (ClusterQueues and child
Cohorts) by their DRS with the child's nominated head counted in, lowest first; a child Cohort nominates the
winner of its own tournament. ``path_shares`` gives those DRS values for one head along its ClusterQueue's path.
"""

from __future__ import annotations

from collections.abc import Mapping

from kuota.engine.quota_tree import FlavorResource, QuotaNode, QuotaTree

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
