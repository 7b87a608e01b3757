"""Choosing a ResourceFlavor for every resource of every pod set, Kueue's way, with a reason when none fits.

Per pod set and resource group, the ClusterQueue's flavors are walked in order. A flavor is skipped when its
taints are not tolerated, or when its nodeLabels do not satisfy the pod set's nodeSelector or required node
affinity, both cut down to the label keys that flavor itself labels (Kueue v0.19+). Otherwise each requested
resource gets a mode: FIT (fits what is available now), PREEMPT (could fit if workloads were preempted) or
NO_FIT, and a borrowing level (0: within the queue's nominal quota; else the height of the lowest subtree
whose quota covers it). A request past the queue's nominal quota can need preemption only if the queue may
evict its own, may preempt while borrowing, or may reclaim a sub-cohort's quota (``lowest_fitting_subtree``).
Where a resource group offers several flavors, a PREEMPT resource is probed (``PreemptionProbe``): whether
preemption would find victims (reclaim: all in other queues), and the borrowing level once they are gone.
A flavor's mode is its worst resource's (mode first, then borrowing level). The walk goes on past a flavor
that does not fit or has nobody to preempt, past one needing preemption under ``whenCanPreempt:
TryNextFlavor``, and past one that borrows under ``whenCanBorrow: TryNextFlavor``; else it stops there.
Among the flavors seen, the better mode wins (fit, reclaim, preempt, nobody to preempt), then the lower
borrowing level; ties go to the earlier flavor. Pod sets are assigned in order, each seeing the usage the
earlier ones take.

Partial admission (``reduce_counts``) probes smaller counts as Kueue's order-based ``PodSetReducer`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from typing import Final, NamedTuple, TypeVar

from kuota.engine.model import (
    BorrowWithinCohortPolicy,
    ClusterQueue,
    PodSet,
    ReclaimPolicy,
    ResourceFlavor,
    ResourceGroup,
    Topology,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
)
from kuota.engine.quantities import format_quantity
from kuota.engine.quota_tree import FlavorResource, QuotaNode, QuotaTree
from kuota.engine.topology import TopologyAssignment, has_level


class Mode(IntEnum):
    NO_FIT = 0
    PREEMPT = 1
    FIT = 2


class Possibility(IntEnum):
    """What preempting for one flavor and resource would do, in Kueue's order of preference."""

    NOBODY = 1  # no victims would make it fit: the flavor cannot be admitted now
    PREEMPT = 2  # victims found, some in the queue itself
    RECLAIM = 3  # victims found, all in other queues


_Admissible = TypeVar("_Admissible")

# Kueue's finer modes inside a flavor walk: NO_FIT, then the possibilities, then FIT.
_FIT_RANK = 4

# Asked for a flavor and resource the queue would have to preempt for, and the amount it needs there: what
# preemption would do, and the borrowing level once its victims are gone.
PreemptionProbe = Callable[[FlavorResource, int], tuple[Possibility, int]]


class PodSetAssignment:
    """The flavor chosen for each resource of one pod set, the pod count admitted and, on a TAS flavor, where
    its pods go. Equal when all five are. (Plain classes here, built at every attempt: see ``setup.py``.)"""

    def __init__(
        self,
        name: str,
        flavors: Mapping[str, str],
        count: int,
        usage: Mapping[str, int],
        topology: TopologyAssignment | None = None,
    ) -> None:
        self.name: Final = name
        self.flavors: Final = flavors
        self.count: Final = count
        self.usage: Final = usage  # resource -> total for all pods
        self.topology: Final = topology

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PodSetAssignment):
            return NotImplemented
        return (self.name, self.flavors, self.count, self.usage, self.topology) == (
            other.name,
            other.flavors,
            other.count,
            other.usage,
            other.topology,
        )

    __hash__ = None  # type: ignore[assignment]  # equal by value, and its mappings are not hashable

    def __repr__(self) -> str:
        shown = "" if self.topology is None else f", topology={self.topology!r}"
        return (
            f"PodSetAssignment(name={self.name!r}, flavors={self.flavors!r}, count={self.count!r}, "
            f"usage={self.usage!r}{shown})"
        )


class Shortfall(NamedTuple):
    """A flavor lacks what a pod set needs. Most are never read (the workload fits soon after), so the
    message is written only when ``str()`` asks for it (and a tuple is the cheapest record to build)."""

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


class Assignment:
    """The outcome for a whole workload: admitted only when ``mode`` is FIT (or PREEMPT with victims)."""

    def __init__(  # noqa: PLR0917 (positional, as the dataclass it replaced was built)
        self,
        pod_sets: tuple[PodSetAssignment, ...],
        mode: Mode,
        borrowing: bool,
        usage: dict[FlavorResource, int],
        reasons: tuple[Reason, ...] = (),
        short: frozenset[FlavorResource] = frozenset(),
        never_fits: bool = False,
        short_needs: Mapping[FlavorResource, int] | None = None,
        probed: bool = False,
        topology_refused: bool = False,
    ) -> None:
        self.pod_sets: Final = pod_sets
        self.mode: Final = mode
        self.borrowing: Final = borrowing
        self.usage: Final = usage
        self.reasons: Final = reasons
        # Resources whose request exceeds what is available now: what preemption has to free.
        self.short: Final = short
        # True when no amount of waiting or preemption can admit it as configured.
        self.never_fits: Final = never_fits
        # Every flavor and resource it was short of, with the amount it needs there: until one of these is
        # available, waiting cannot admit it.
        self.short_needs: Final[Mapping[FlavorResource, int]] = {} if short_needs is None else short_needs
        # Whether the flavor walk asked a PreemptionProbe: then admissions anywhere may change the choice.
        self.probed: Final = probed
        # Whether the topology refused it (its quota fits, or preemption could make it fit): only capacity freed
        # on its TAS flavors' nodes, or the flavor walk choosing other flavors, can change that.
        self.topology_refused: Final = topology_refused

    def __repr__(self) -> str:
        return (
            f"Assignment(pod_sets={self.pod_sets!r}, mode={self.mode!r}, borrowing={self.borrowing!r}, "
            f"usage={self.usage!r}, short={set(self.short)!r})"
        )


def tas_only(cluster_queue: ClusterQueue, flavors: Mapping[str, ResourceFlavor]) -> bool:
    """Whether every flavor of ``cluster_queue`` is a TAS flavor (Kueue's ``IsTASOnly``)."""
    names = [flavor.name for group in cluster_queue.resource_groups for flavor in group.flavors]
    found = [flavors.get(name) for name in names]
    return bool(names) and all(flavor is not None and flavor.topology_name is not None for flavor in found)


def flavor_mismatch(flavor: ResourceFlavor, pod_set: PodSet) -> str | None:
    """Why ``pod_set`` cannot run on ``flavor``'s nodes, or None. As Kueue (v0.19+) does, only the keys this
    flavor labels count in the pod set's nodeSelector and required affinity: the others select among nodes
    the flavor says nothing about."""
    labels = flavor.node_labels
    for key, wanted in pod_set.node_selector.items():
        have = labels.get(key)
        if have is not None and have != wanted:
            return f"its nodeSelector {key}={wanted} contradicts flavor {flavor.name}'s node label {key}={have}"
    if pod_set.node_affinity:
        terms = [tuple(r for r in term if r.key in labels) for term in pod_set.node_affinity]
        # A term left with no expression matches every node, so then the affinity decides nothing here.
        if all(terms) and not any(all(r.matches(labels) for r in term) for term in terms):
            shown = ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"
            return f"its required node affinity matches no node of flavor {flavor.name} (node labels: {shown})"
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


# Per resource group used: its requested resources and its flavors (name, flavor or None if missing, whether it
# has no labels or taints to check).
_Plan = tuple[
    tuple[str, ...],
    tuple[tuple[tuple[str, ...], tuple[tuple[str, ResourceFlavor | None, bool], ...]], ...],
]


# For one flavor and resource of a queue: its nominal quota (subtree), the root's subtree quota and live
# usage, per node below the root down to the queue its live usage, guaranteed part and borrowing cap, and the
# most the queue can ever use.
_Limits = tuple[int, int, dict[FlavorResource, int], tuple[tuple[dict[FlavorResource, int], int, int | None], ...], int]


class FlavorAssigner:
    """Assigns flavors for one ClusterQueue against the tree's current usage (read-only)."""

    def __init__(
        self,
        cluster_queue: ClusterQueue,
        tree: QuotaTree,
        flavors: Mapping[str, ResourceFlavor],
        fair_sharing: bool,
        topologies: Mapping[str, Topology] | None = None,
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
        # Below a sub-cohort, a request past nominal quota may still reclaim that sub-cohort's quota.
        self.may_reclaim_in_hierarchy = (
            preemption.reclaim_within_cohort is not ReclaimPolicy.NEVER and len(self.node.descent) >= 2
        )
        # Whether some resource group offers a choice of flavors: only then can a PreemptionProbe change one.
        self.chooses_flavors = any(len(group.flavors) > 1 for group in cluster_queue.resource_groups)
        self.group_of: dict[str, ResourceGroup] = {
            resource: group for group in cluster_queue.resource_groups for resource in group.covered_resources
        }
        # Per tuple of requested resource names: the uncovered ones, and per resource group used (see _Plan).
        self._plans: dict[tuple[str, ...], _Plan] = {}
        # Per tuple of requested resource names: when the plan is a single resource group covering them all
        # with a single flavor that has no labels or taints (the common case, assigned without the general
        # walk), that flavor and the resources in the group's order; else None.
        self._single: dict[tuple[str, ...], tuple[str, tuple[str, ...]] | None] = {}
        # Per flavor and resource, what only the quotas fix (see _Limits).
        self._limits: dict[FlavorResource, _Limits] = {}
        # Every flavor of the queue is a TAS flavor: pod sets without a topology request get one implied.
        self.tas_only = tas_only(cluster_queue, flavors)
        self.topologies: Mapping[str, Topology] = {} if topologies is None else topologies

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

    def assign(
        self, pod_sets: tuple[PodSet, ...], counts: tuple[int, ...], probe: PreemptionProbe | None = None
    ) -> Assignment:
        """The flavors for ``pod_sets`` at ``counts`` pods; ``probe`` tells flavors that need preemption apart
        (without it, every such flavor counts as one with victims)."""
        if len(pod_sets) == 1 and pod_sets[0].topology_request is None:
            names = tuple(pod_sets[0].requests)
            if names in self._single:
                single = self._single[names]
            else:
                single = self._single[names] = self._single_flavor(names)
            if single is not None:  # spelt out: a starred call would go through the generic Python call path
                only_flavor, covered = single
                return self._assign_single(pod_sets[0], counts[0], names, only_flavor, covered)
        taken: dict[FlavorResource, int] = {}
        results: dict[int, PodSetAssignment] = {}
        reasons: list[Reason] = []
        short: set[FlavorResource] = set()
        short_needs: dict[FlavorResource, int] = {}
        mode = Mode.FIT
        never_fits = False
        probed = False
        for members in _flavor_units(pod_sets):
            pod_set = pod_sets[members[0]]
            if len(members) == 1:
                count = counts[members[0]]
                usage = {resource: amount * count for resource, amount in pod_set.requests.items()}
                others: tuple[PodSet, ...] = ()
            else:  # a pod set group: one flavor per resource for all its pod sets, as Kueue assigns it
                usage = {}
                for member in members:
                    for resource, amount in pod_sets[member].requests.items():
                        usage[resource] = usage.get(resource, 0) + amount * counts[member]
                others = tuple(pod_sets[member] for member in members[1:])
            names = tuple(usage)
            uncovered, steps = self.plan(names)
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
                # One resource group covering the whole request, in its order: the usage is what it asks for.
                requested = usage if resources == names else {r: usage[r] for r in resources}
                flavor, group_mode, group_short, group_reasons, group_never, group_probed = self._pick(
                    flavors, pod_set, requested, taken=taken, short_needs=short_needs, probe=probe, others=others
                )
                probed = probed or group_probed
                if group_reasons:
                    reasons.extend(group_reasons)
                if flavor is None:
                    mode = Mode.NO_FIT
                    never_fits = never_fits or group_never
                    continue
                mode = min(mode, group_mode)
                if group_short:
                    short |= group_short
                for resource, amount in requested.items():
                    chosen[resource] = flavor
                    fr: FlavorResource = (flavor, resource)
                    taken[fr] = taken[fr] + amount if fr in taken else amount
            if not others:
                results[members[0]] = PodSetAssignment(pod_set.name, chosen, count, usage)
                continue
            for member in members:
                own = pod_sets[member]
                flavors_of = {r: chosen[r] for r in own.requests if r in chosen}
                if not own.requests:  # a leader asking for nothing still goes to the group's TAS flavor
                    flavors_of = {r: f for r, f in chosen.items() if self._is_tas(f)}
                own_usage = {resource: amount * counts[member] for resource, amount in own.requests.items()}
                results[member] = PodSetAssignment(own.name, flavors_of, counts[member], own_usage)
        node_usage = self.node.usage
        subtree = self.node.subtree
        borrowing = False
        for fr, amount in taken.items():
            if node_usage.get(fr, 0) + amount > subtree.get(fr, 0):
                borrowing = True
                break
        if mode is not Mode.FIT:
            short = short or set(taken)
        return Assignment(
            tuple(results[index] for index in sorted(results)),
            mode,
            borrowing,
            taken,
            tuple(reasons),
            frozenset(short),
            never_fits,
            short_needs,
            probed,
        )

    def _is_tas(self, flavor: str) -> bool:
        model = self.flavors.get(flavor)
        return model is not None and model.topology_name is not None

    def _topology_mismatch(self, flavor: ResourceFlavor, pod_set: PodSet) -> str | None:
        """Kueue's ``checkPodSetAndFlavorMatchForTAS``: a pod set asking for a topology needs a TAS flavor, and a
        TAS flavor takes only such pod sets, unless every flavor of the queue is one (implied TAS), and only if its
        Topology has every level they name."""
        request = pod_set.topology_request
        if request is not None and flavor.topology_name is None:
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
        if request is not None and flavor.topology_name is not None:
            # A missing Topology is left to the placement, which names the flavor's missing TAS information.
            topology = self.topologies.get(flavor.topology_name)
            if topology is not None and not has_level(topology, request):
                return f'Flavor "{flavor.name}" does not contain the requested level'
        if request is None and flavor.topology_name is not None and not self.tas_only:
            return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
        return None

    def _limits_of(self, fr: FlavorResource) -> _Limits:
        node = self.node
        root = node.lineage[0]
        below = tuple((n.usage, n.floors.get(fr, 0), n.borrow_caps.get(fr)) for n in node.descent)
        limits = self._limits[fr] = (
            node.subtree.get(fr, 0),
            root.subtree.get(fr, 0),
            root.usage,
            below,
            self.tree.potential_available(node, fr),
        )
        return limits

    def _single_flavor(self, names: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
        uncovered, steps = self.plan(names)
        if uncovered or len(steps) != 1:
            return None
        resources, flavors = steps[0]
        if len(flavors) != 1 or not flavors[0][2]:
            return None
        return flavors[0][0], resources

    def _assign_single(
        self, pod_set: PodSet, count: int, names: tuple[str, ...], flavor: str, resources: tuple[str, ...]
    ) -> Assignment:
        """``assign`` for one pod set whose resources one plain flavor covers: what the general walk gives."""
        usage = {resource: amount * count for resource, amount in pod_set.requests.items()}
        requested = usage if resources == names else {r: usage[r] for r in resources}
        reasons: list[Reason] = []
        short_needs: dict[FlavorResource, int] = {}
        mode, level, short, never = self._flavor_mode(flavor, requested, {}, reasons, short_needs)
        if mode is Mode.NO_FIT:
            result = PodSetAssignment(pod_set.name, {}, count, usage)
            return Assignment((result,), mode, False, {}, tuple(reasons), frozenset(), never, short_needs)
        result = PodSetAssignment(pod_set.name, dict.fromkeys(requested, flavor), count, usage)
        taken: dict[FlavorResource, int] = {(flavor, resource): amount for resource, amount in requested.items()}
        if mode is Mode.FIT:  # a fitting flavor borrows exactly when its level is above 0
            return Assignment((result,), mode, level > 0, taken, (), frozenset(short), never, short_needs)
        # As the general walk: whether any resource, short or not, goes past nominal quota.
        usage_now = self.node.usage
        subtree = self.node.subtree
        borrow = any(usage_now.get(fr, 0) + amount > subtree.get(fr, 0) for fr, amount in taken.items())
        return Assignment((result,), mode, borrow, taken, tuple(reasons), frozenset(short or taken), never, short_needs)

    def _pick(
        self,
        flavors: tuple[tuple[str, ResourceFlavor | None, bool], ...],
        pod_set: PodSet,
        requested: dict[str, int],
        *,
        taken: dict[FlavorResource, int],
        short_needs: dict[FlavorResource, int],
        probe: PreemptionProbe | None,
        others: tuple[PodSet, ...] = (),
    ) -> tuple[str | None, Mode, set[FlavorResource], list[Reason], bool, bool]:
        """The flavor for ``requested`` of ``pod_set`` (and of the ``others`` of its pod set group, which must
        match it too)."""
        # The best flavor so far: its rank (NO_FIT 0, a Possibility, FIT), minus its borrowing level, its mode,
        # name and shortages.
        best: tuple[int, int, Mode, str, set[FlavorResource]] | None = None
        reasons: list[Reason] = []
        all_never = True
        probed = False
        fungibility = self.cq.flavor_fungibility
        # One flavor to choose from: probing cannot change the choice.
        probe = probe if len(flavors) > 1 else None
        for name, flavor, plain in flavors:
            if flavor is None:
                reasons.append(f"ResourceFlavor {name} does not exist: create it")
                continue
            if not plain or pod_set.node_selector or pod_set.node_affinity or pod_set.topology_request is not None:
                mismatch = flavor_mismatch(flavor, pod_set) or self._topology_mismatch(flavor, pod_set)
                if mismatch is not None:
                    reasons.append(f"pod set {pod_set.name}: {mismatch}")
                    continue
            mismatched = False
            for other in others:
                mismatch = flavor_mismatch(flavor, other) or self._topology_mismatch(flavor, other)
                if mismatch is not None:
                    reasons.append(f"pod set {other.name}: {mismatch}")
                    mismatched = True
                    break
            if mismatched:
                continue
            mode, level, short, never = self._flavor_mode(name, requested, taken, reasons, short_needs)
            all_never = all_never and never
            if mode is Mode.NO_FIT:
                continue
            rank = _FIT_RANK if mode is Mode.FIT else int(Possibility.PREEMPT)
            if probe is not None and mode is Mode.PREEMPT:
                probed = True
                rank, level = self._probed(name, requested, taken, short, probe)
            if best is None or (rank, -level) > (best[0], best[1]):
                best = (rank, -level, mode, name, short)
            if rank == int(Possibility.NOBODY):
                continue
            if mode is Mode.PREEMPT and fungibility.when_can_preempt is WhenCanPreempt.TRY_NEXT_FLAVOR:
                continue
            if level > 0 and fungibility.when_can_borrow is WhenCanBorrow.TRY_NEXT_FLAVOR:
                continue
            break
        if best is None:
            return None, Mode.NO_FIT, set(), reasons, all_never, probed
        mode = best[2]
        return best[3], mode, best[4], ([] if mode is Mode.FIT else reasons), False, probed

    def _probed(
        self,
        flavor: str,
        requested: dict[str, int],
        taken: dict[FlavorResource, int],
        short: set[FlavorResource],
        probe: PreemptionProbe,
    ) -> tuple[int, int]:
        """The rank and borrowing level of a flavor that needs preemption: its worst short resource's, as the
        probe finds it (a resource that fits ranks above any that needs preemption)."""
        worst: tuple[int, int] | None = None
        for resource, amount in requested.items():
            fr: FlavorResource = (flavor, resource)
            if fr in short:
                possibility, after = probe(fr, amount + taken[fr] if fr in taken else amount)
                if worst is None or (int(possibility), -after) < worst:
                    worst = (int(possibility), -after)
        assert worst is not None
        return worst[0], -worst[1]

    def _flavor_mode(
        self,
        flavor: str,
        requested: dict[str, int],
        taken: dict[FlavorResource, int],
        reasons: list[Reason],
        short_needs: dict[FlavorResource, int],
    ) -> tuple[Mode, int, set[FlavorResource], bool]:
        """The flavor's mode, its borrowing level (its worst resource's: the highest among those it is short of,
        else among all), what it is short of, and whether it can never fit."""
        mode = Mode.FIT
        level = 0
        short_level = 0
        short: set[FlavorResource] = set()
        never = False
        node = self.node
        node_usage = node.usage
        limits = self._limits
        # Below the root, the borrowing level is the height of the lowest subtree that covers the request; a
        # queue right below the root borrows from it, at its height.
        flat = len(node.descent) == 1
        for resource, amount in requested.items():
            fr: FlavorResource = (flavor, resource)
            need = amount + taken[fr] if fr in taken else amount
            nominal, total, root_usage, below_root, potential = limits.get(fr) or self._limits_of(fr)
            borrowing_level = 0
            if node_usage.get(fr, 0) + need > nominal and node.parent is not None:
                borrowing_level = (
                    node.lineage[0].height if flat else self.tree.lowest_fitting_subtree(node, fr, need)[0]
                )
                level = max(level, borrowing_level)
            # QuotaTree.available, inlined over the fixed limits: this is the engine's innermost loop.
            available = total - root_usage.get(fr, 0)
            for usage_of, floor, cap in below_root:
                usage = usage_of.get(fr, 0)
                if cap is not None:
                    available = min(available, cap - (usage - floor if usage > floor else 0))
                if usage < floor:
                    available += floor - usage
            if need <= available:
                continue
            short.add(fr)
            short_level = max(short_level, borrowing_level)
            most = short_needs.get(fr)
            if most is None or need > most:
                short_needs[fr] = need
            reasons.append(Shortfall(self.cq.name, flavor, resource, need, potential, available))
            if need > potential:
                mode, never = Mode.NO_FIT, True
                continue
            # Past nominal quota, preemption helps only if the queue may evict its own, preempt while borrowing,
            # or reclaim the quota of a sub-cohort that covers the request.
            if (
                need > nominal
                and not self.may_preempt_past_nominal
                and not (self.may_reclaim_in_hierarchy and self.tree.lowest_fitting_subtree(node, fr, need)[1])
            ):
                mode = Mode.NO_FIT
            elif mode is Mode.FIT:
                mode = Mode.PREEMPT
        return mode, (level if mode is Mode.FIT else short_level), short, never


def _flavor_units(pod_sets: tuple[PodSet, ...]) -> list[tuple[int, ...]]:
    """The pod sets' indexes, one tuple per flavor choice: each pod set alone, but the pod sets of one group
    (``podSetGroupName``) together, where the group's first one stands (Kueue's ``orderedgroups``)."""
    units: dict[object, list[int]] = {}
    for index, pod_set in enumerate(pod_sets):
        request = pod_set.topology_request
        key: object = index if request is None or request.group is None else request.group
        units.setdefault(key, []).append(index)
    return [tuple(members) for members in units.values()]


def reduce_counts(
    pod_sets: Sequence[PodSet], admissible: Callable[[tuple[int, ...]], _Admissible | None]
) -> _Admissible | None:
    """What ``admissible`` gives for the counts Kueue's order-based reducer settles on (None: no cut toward
    minCount is admissible), probing the counts it probes in its order (``podset_reducer.go``, main).

    A budget of pods to give up is binary searched (Go's ``sort.Search``) from 0 to the sum of the pod sets'
    slack, the smallest admissible one winning; a budget is spent from the last pod set backward, each down
    to its minCount before the one before it gives up any. If that left two or more pod sets cut, each cut one
    is grown back in order, first to its full count, else to the largest count a binary search finds, later
    pod sets seeing what the earlier ones took. ``admissible`` need not be monotone: the probes are Kueue's.
    """
    full = [pod_set.count for pod_set in pod_sets]
    slack = [p.count - (p.count if p.min_count is None else p.min_count) for p in pod_sets]
    total = sum(slack)
    if total == 0:
        return None

    def cut(budget: int) -> list[int]:
        counts = list(full)
        for index in range(len(full) - 1, -1, -1):
            given = min(slack[index], budget)
            counts[index] -= given
            budget -= given
        return counts

    best: _Admissible | None = None
    counts = full
    low, high = 0, total + 1
    while low < high:
        middle = (low + high) // 2
        trial = cut(middle)
        outcome = admissible(tuple(trial))
        if outcome is None:
            low = middle + 1
        else:
            best, counts, high = outcome, trial, middle
    if low > total:
        return None
    if sum(1 for have, wanted in zip(counts, full, strict=True) if have < wanted) < 2:
        return best
    trial = list(counts)
    for index, wanted in enumerate(full):
        if counts[index] == wanted:
            continue
        trial[index] = wanted
        outcome = admissible(tuple(trial))
        if outcome is not None:
            counts[index], best = wanted, outcome
            continue
        # The largest count that still fits, strictly between the cut and the full count.
        grown, grown_best = counts[index], best
        first = counts[index] + 1
        low, high = 0, wanted - first
        while low < high:
            middle = (low + high) // 2
            trial[index] = first + middle
            outcome = admissible(tuple(trial))
            if outcome is None:
                high = middle
            else:
                grown, grown_best, low = trial[index], outcome, middle + 1
        counts[index] = trial[index] = grown
        best = grown_best
    return best
