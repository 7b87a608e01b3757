"""Fair sharing: a ClusterQueue's weighted dominant resource share (DRS), as Kueue computes it.

For each resource (summed over flavors) the queue borrows ``max(0, usage + request - subtree quota)``; its
share of that resource is ``borrowed * 1000 / lendable`` where lendable is what its parent could lend; the DRS
is the largest such share, divided by the weight. A weight of 0 makes any borrowing an infinite share.
Shares are compared at ClusterQueue level (a deeper cohort tournament is not modelled).
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.engine.quota_tree import FlavorResource, QuotaNode, QuotaTree

INFINITE_SHARE = 2**62


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
