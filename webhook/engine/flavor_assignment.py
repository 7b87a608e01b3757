"""Choosing a ResourceFlavor for every resource of every pod set, Kueue's way, with a reason when none fits.

Per pod set and resource group, the ClusterQueue's flavors are walked in order. A flavor is skipped when its
taints are not tolerated or its nodeLabels contradict the pod set's nodeSelector. Otherwise each requested
resource gets a mode: FIT (fits what is available now), PREEMPT (could fit if workloads were preempted) or
NO_FIT; the flavor's mode is the worst of its resources. The walk stops at the first FIT flavor, unless it
needs borrowing and ``whenCanBorrow: TryNextFlavor``; a PREEMPT flavor stops it only with
``whenCanPreempt: MayStopSearch``. Among the flavors seen, FIT beats PREEMPT and not borrowing beats borrowing;
ties go to the earlier flavor. Pod sets are assigned in order, each seeing the usage the earlier ones take.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from webhook.engine.model import (
    BorrowWithinCohortPolicy,
    ClusterQueue,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
)
from webhook.engine.quantities import format_quantity
from webhook.engine.quota_tree import FlavorResource, QuotaNode, QuotaTree


class Mode(IntEnum):
    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


@dataclass(frozen=True)
class PodSetAssignment:
    """The flavor chosen for each resource of one pod set, and the pod count admitted."""

    name: str
    flavors: Mapping[str, str]
    count: int
    usage: Mapping[str, int]  # resource -> total for all pods


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A flavor lacks what a pod set needs. Most are never read (the workload fits soon after), so the
    message is written only when ``str()`` asks for it."""

    cluster_queue: str
    flavor: str
    resource: str
    need: int
    potential: int  # the most the queue can ever use
    available: int

    def __str__(self) -> str:
        resource = self.resource
        shown = format_quantity(resource, self.need)
        if self.need > self.potential:
            return (
                f"needs {shown} {resource} in flavor {self.flavor}, more than ClusterQueue {self.cluster_queue} "
                f"can ever use ({format_quantity(resource, self.potential)}): lower the request or raise the quota"
            )
        in_use = format_quantity(resource, self.potential - max(self.available, 0))
        return (
            f"needs {shown} {resource} in flavor {self.flavor}, the most {self.cluster_queue} can ever use is "
            f"{format_quantity(resource, self.potential)} and {in_use} are in use"
        )


Reason = str | Shortfall


@dataclass(frozen=True)
class Assignment:
    """The outcome for a whole workload: admitted only when ``mode`` is FIT (or PREEMPT with victims)."""

    pod_sets: tuple[PodSetAssignment, ...]
    mode: Mode
    borrowing: bool
    usage: Mapping[FlavorResource, int]
    reasons: tuple[Reason, ...] = ()
    # Resources whose request exceeds what is available now: what preemption has to free.
    short: frozenset[FlavorResource] = field(default_factory=frozenset)
    # True when no amount of waiting or preemption can admit it as configured.
    never_fits: bool = False
    # Every flavor and resource it was short of, with the amount it needs there: until one of these is
    # available, waiting cannot admit it.
    short_needs: Mapping[FlavorResource, int] = field(default_factory=dict)


def flavor_mismatch(flavor: ResourceFlavor, pod_set: PodSet) -> str | None:
    """Why ``pod_set`` cannot run on ``flavor``'s nodes, or None."""
    for key, value in flavor.node_labels.items():
        wanted = pod_set.node_selector.get(key)
        if wanted is not None and wanted != value:
            return f"its nodeSelector {key}={wanted} contradicts flavor {flavor.name}'s node label {key}={value}"
    tolerations = pod_set.tolerations + flavor.tolerations
    for taint in flavor.node_taints:
        if taint.effect.value == "PreferNoSchedule":
            continue
        if not any(toleration.tolerates(taint) for toleration in tolerations):
            return (
                f"flavor {flavor.name} has taint {taint.key}={taint.value}:{taint.effect.value} that the pod "
                "set does not tolerate: add a toleration to the pod set or to the ResourceFlavor"
            )
    return None


_Plan = tuple[
    tuple[str, ...],
    tuple[tuple[tuple[str, ...], tuple[tuple[str, ResourceFlavor | None, bool], ...]], ...],
]


class FlavorAssigner:
    """Assigns flavors for one ClusterQueue against the tree's current usage (read-only)."""

    def __init__(
        self,
        cluster_queue: ClusterQueue,
        tree: QuotaTree,
        flavors: Mapping[str, ResourceFlavor],
        fair_sharing: bool,
    ) -> None:
        self.cq = cluster_queue
        self.tree = tree
        self.node: QuotaNode = tree.cluster_queues[cluster_queue.name]
        self.flavors = flavors
        preemption = cluster_queue.preemption
        # Preempting can only help past nominal quota if the queue may evict its own or preempt while borrowing.
        self.may_preempt_past_nominal = (
            fair_sharing
            or preemption.within_cluster_queue is not WithinClusterQueuePolicy.NEVER
            or preemption.borrow_within_cohort is not BorrowWithinCohortPolicy.NEVER
        )
        self.group_of: dict[str, ResourceGroup] = {
            resource: group for group in cluster_queue.resource_groups for resource in group.covered_resources
        }
        # Per tuple of requested resource names: the uncovered ones, and per resource group used, its
        # requested resources and its flavors (None: does not exist; True: no labels or taints to check).
        self._plans: dict[tuple[str, ...], _Plan] = {}

    def plan(self, resources: tuple[str, ...]) -> _Plan:
        plan = self._plans.get(resources)
        if plan is not None:
            return plan
        uncovered: list[str] = []
        groups: list[ResourceGroup] = []
        for resource in resources:
            group = self.group_of.get(resource)
            if group is None:
                uncovered.append(resource)
            elif group not in groups:
                groups.append(group)
        steps = []
        for group in groups:
            flavors = []
            for flavor_quotas in group.flavors:
                flavor = self.flavors.get(flavor_quotas.name)
                plain = flavor is not None and not flavor.node_labels and not flavor.node_taints
                flavors.append((flavor_quotas.name, flavor, plain))
            steps.append((tuple(r for r in group.covered_resources if r in resources), tuple(flavors)))
        plan = self._plans[resources] = (tuple(uncovered), tuple(steps))
        return plan

    def assign(self, pod_sets: tuple[PodSet, ...], counts: tuple[int, ...]) -> Assignment:
        taken: dict[FlavorResource, int] = {}
        results: list[PodSetAssignment] = []
        reasons: list[Reason] = []
        short: set[FlavorResource] = set()
        short_needs: dict[FlavorResource, int] = {}
        mode = Mode.FIT
        never_fits = False
        for pod_set, count in zip(pod_sets, counts, strict=True):
            requests = pod_set.requests
            uncovered, steps = self.plan(tuple(requests))
            usage = {resource: amount * count for resource, amount in requests.items()}
            for resource in uncovered:
                reasons.append(
                    f"ClusterQueue {self.cq.name} does not cover resource {resource}: add it to "
                    "a resourceGroup's coveredResources or drop the request"
                )
                mode, never_fits = Mode.NO_FIT, True
            if mode is Mode.NO_FIT and never_fits:
                continue
            chosen: dict[str, str] = {}
            for resources, flavors in steps:
                requested = {r: usage[r] for r in resources}
                flavor, group_mode, group_short, group_reasons, group_never = self._pick(
                    flavors, pod_set, requested, taken, short_needs
                )
                reasons.extend(group_reasons)
                if flavor is None:
                    mode = Mode.NO_FIT
                    never_fits = never_fits or group_never
                    continue
                mode = min(mode, group_mode)
                short |= group_short
                for resource, amount in requested.items():
                    chosen[resource] = flavor
                    taken[(flavor, resource)] = taken.get((flavor, resource), 0) + amount
            results.append(PodSetAssignment(pod_set.name, chosen, count, usage))
        node_usage = self.node.usage
        subtree = self.node.subtree
        borrowing = any(node_usage.get(fr, 0) + amount > subtree.get(fr, 0) for fr, amount in taken.items())
        if mode is not Mode.FIT:
            short = short or set(taken)
        return Assignment(
            tuple(results), mode, borrowing, taken, tuple(reasons), frozenset(short), never_fits, short_needs
        )

    def _pick(
        self,
        flavors: tuple[tuple[str, ResourceFlavor | None, bool], ...],
        pod_set: PodSet,
        requested: Mapping[str, int],
        taken: Mapping[FlavorResource, int],
        short_needs: dict[FlavorResource, int],
    ) -> tuple[str | None, Mode, set[FlavorResource], list[Reason], bool]:
        best: tuple[Mode, bool, str, set[FlavorResource]] | None = None
        reasons: list[Reason] = []
        all_never = True
        fungibility = self.cq.flavor_fungibility
        for name, flavor, plain in flavors:
            if flavor is None:
                reasons.append(f"ResourceFlavor {name} does not exist: create it")
                continue
            if not plain:
                mismatch = flavor_mismatch(flavor, pod_set)
                if mismatch is not None:
                    reasons.append(f"pod set {pod_set.name}: {mismatch}")
                    continue
            mode, borrow, short, never = self._flavor_mode(name, requested, taken, reasons, short_needs)
            all_never = all_never and never
            if mode is Mode.NO_FIT:
                continue
            if best is None or (mode, not borrow) > (best[0], not best[1]):
                best = (mode, borrow, name, short)
            if mode is Mode.FIT and (not borrow or fungibility.when_can_borrow is WhenCanBorrow.MAY_STOP_SEARCH):
                break
            if mode is Mode.PREEMPT and fungibility.when_can_preempt is WhenCanPreempt.MAY_STOP_SEARCH:
                break
        if best is None:
            return None, Mode.NO_FIT, set(), reasons, all_never
        return best[2], best[0], best[3], ([] if best[0] is Mode.FIT else reasons), False

    def _flavor_mode(
        self,
        flavor: str,
        requested: Mapping[str, int],
        taken: Mapping[FlavorResource, int],
        reasons: list[Reason],
        short_needs: dict[FlavorResource, int],
    ) -> tuple[Mode, bool, set[FlavorResource], bool]:
        mode = Mode.FIT
        borrow = False
        short: set[FlavorResource] = set()
        never = False
        cq_name = self.cq.name
        node = self.node
        node_usage = node.usage
        subtree = node.subtree
        for resource, amount in requested.items():
            fr = (flavor, resource)
            need = amount + taken[fr] if fr in taken else amount
            nominal = subtree.get(fr, 0)
            if node_usage.get(fr, 0) + need > nominal:
                borrow = True
            available = self.tree.available(node, fr)
            if need <= available:
                continue
            short.add(fr)
            short_needs[fr] = max(short_needs.get(fr, 0), need)
            potential = self.tree.potential_available(self.node, fr)
            reasons.append(Shortfall(cq_name, flavor, resource, need, potential, available))
            if need > potential:
                mode, never = Mode.NO_FIT, True
                continue
            # Past nominal quota, preemption helps only if the queue may evict its own or preempt while borrowing.
            mode = min(mode, Mode.PREEMPT) if need <= nominal or self.may_preempt_past_nominal else Mode.NO_FIT
        return mode, borrow, short, never
