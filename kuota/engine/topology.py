"""Topology-aware placement: where in a Topology's tree of domains a pod set's pods go, Kueue's way.

Kueue v0.20's ``TASFlavorSnapshot`` (pkg/cache/scheduler/tas_flavor_snapshot.go) with its default feature gates: the
tree of one TAS ResourceFlavor is built from the nodes that carry the flavor's labels and every level label, Ready
and schedulable. Each leaf's free capacity is what its nodes can still give (allocatable minus the requests, plus
one pod each, of the bound pods that are not TAS pods: Kueue's non-TAS pod cache) minus the TAS assignments admitted
on it. A placement counts how many pods (and slices) fit in each leaf, sums the counts up the tree, picks a domain
at the requested level (BestFit: the fullest that still fits; LeastFreeCapacity for unconstrained requests) and
descends, at each level choosing the fewest domains. A required level fails when no single domain there fits; a
preferred one climbs a level; an unconstrained one spreads over as many domains as it needs.

A pod set group (``podSetGroupName``: a leader of one pod and its workers, as a LeaderWorkerSet's) is placed as
one: each domain also counts whether the leader fits and how many workers fit beside it, and the placement picks
domains that hold both (Kueue's leader-aware ``findTopologyAssignment``). Multi-layer slices, balanced placement and
node replacement are not implemented.

Pure: plain data in, an assignment or Kueue's failure message out; no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from kuota.engine.model import (
    HOSTNAME_LABEL,
    PodSet,
    ResourceFlavor,
    Taint,
    Toleration,
    Topology,
    TopologyNode,
    TopologyRequest,
)

# Each pod takes one of a node's allocatable pods, as Kueue's resources.OnePodRequest.
PODS_RESOURCE = "pods"


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """Where a pod set's pods go: per domain, its values for ``levels`` and its pod count (Kueue's internal
    ``TopologyAssignment``; only the hostname level when the topology's last level is the hostname)."""

    levels: tuple[str, ...]
    domains: tuple[tuple[tuple[str, ...], int], ...] = field(default_factory=tuple)


class Placement:
    """The outcome of one placement: an assignment, or Kueue's reason why none was found."""

    def __init__(self, assignment: TopologyAssignment | None, reason: str) -> None:
        self.assignment: Final = assignment
        self.reason: Final = reason

    def __repr__(self) -> str:
        return f"Placement(assignment={self.assignment!r}, reason={self.reason!r})"


class GroupPlacement:
    """The outcome of placing a pod set group: the workers' and the leader's assignments, or Kueue's reason why
    they were not found."""

    def __init__(self, workers: TopologyAssignment | None, leader: TopologyAssignment | None, reason: str) -> None:
        self.workers: Final = workers
        self.leader: Final = leader
        self.reason: Final = reason

    def __repr__(self) -> str:
        return f"GroupPlacement(workers={self.workers!r}, leader={self.leader!r}, reason={self.reason!r})"


class _Counts:
    """Kueue's domain state, by domain index, for the placements counted afresh (pod set groups, layers of
    slices): the workers' pods and slices, the same beside the leader, and how many leaders (0 or 1) the domain
    holds. The descent cuts the chosen domains' counts down to what they take, in place."""

    def __init__(self, size: int) -> None:
        self.pods: Final = [0] * size
        self.slices: Final = [0] * size
        self.pods_with_leader: Final = [0] * size
        self.slices_with_leader: Final = [0] * size
        self.leaders: Final = [0] * size
        self.exclusions: Final = _Exclusions()

    def sum_children(
        self, domain: _Domain, at_slice_level: bool, slice_size: int, leader_required: bool, child_size: int
    ) -> None:
        """Kueue's ``fillInCountsHelper`` for a parent: each child counts its pods in whole slices of
        ``child_size`` (an inner layer's), and the count beside the leader gives up what the cheapest child able
        to hold it (any child, without a leader) gives up."""
        pods = slices = leaders = 0
        pods_given_up: int | None = None
        slices_given_up = 0
        for child in domain.children:
            index = child.index
            child_pods = self.pods[index] // child_size * child_size
            child_with_leader = self.pods_with_leader[index] // child_size * child_size
            pods += child_pods
            slices += self.slices[index]
            if not leader_required or self.leaders[index] > 0:
                given_up = child_pods - child_with_leader
                slices_lost = self.slices[index] - self.slices_with_leader[index]
                if pods_given_up is None:
                    pods_given_up, slices_given_up = given_up, slices_lost
                else:
                    pods_given_up = min(pods_given_up, given_up)
                    slices_given_up = min(slices_given_up, slices_lost)
            leaders = max(leaders, self.leaders[index])
        index = domain.index
        self.pods[index] = pods
        self.leaders[index] = leaders
        self.pods_with_leader[index] = 0 if pods_given_up is None else pods - pods_given_up
        with_leader = 0 if pods_given_up is None else slices - slices_given_up
        if at_slice_level:
            slices = pods // slice_size
            with_leader = self.pods_with_leader[index] // slice_size
        self.slices[index] = slices
        self.slices_with_leader[index] = with_leader


class _Domain:
    """One domain of the tree; its counts live in each :class:`_Fill`, at ``index``."""

    def __init__(self, values: tuple[str, ...], parent: _Domain | None, index: int) -> None:
        self.values: Final = values
        self.parent: Final = parent
        self.index: Final = index
        self.children: list[_Domain] = []
        self.node: TopologyNode | None = None  # the node of a hostname leaf
        self.free: dict[str, int] = {}  # a leaf's: what its nodes can still give, less the non-TAS pods
        self.tas_usage: dict[str, int] = {}  # a leaf's: what admitted TAS workloads take
        self.remaining: dict[str, int] = {}  # a leaf's: free minus its TAS usage


class _Fill:
    """The pods and slices each domain holds for one placement's inputs (requests, node constraints, slices,
    whether empty), by domain index, kept up to date leaf by leaf as TAS usage changes: a placement or release
    touches a few leaves, so only they and their ancestors are counted again."""

    def __init__(self, size: int, seen: int, matched: _Exclusions) -> None:
        self.pods: Final = [0] * size
        self.slices: Final = [0] * size
        # Each matching leaf's pod count and limiting resource, by index.
        self.leaves: Final[dict[int, tuple[int, str]]] = {}
        self.matched: Final = matched  # the exclusions by node constraints, shared by the fills of one pod set
        self.resources: Final[dict[str, int]] = {}  # leaves that take no pod, by limiting resource
        self.seen = seen  # the position in the usage change log the counts include
        self.outside_domain = 0  # leaves left out for lying outside the domain a replacement is confined to

    def exclusions(self) -> _Exclusions:
        found = _Exclusions()
        found.add(self.matched)
        found.topology_domain = self.outside_domain
        for name, count in self.resources.items():
            if count:
                found.resources[name] = found.resources.get(name, 0) + count
        return found

    def count_leaf(self, leaf: _Domain, counted: tuple[int, str]) -> None:
        """Records a leaf's pod count and limiting resource (its first, or a new one), with the exclusions by
        resource; the sums are the caller's."""
        old = self.leaves.get(leaf.index)
        if old is not None and old[0] == 0 and old[1]:
            self.resources[old[1]] -= 1
        if counted[0] == 0 and counted[1]:
            self.resources[counted[1]] = self.resources.get(counted[1], 0) + 1
        self.leaves[leaf.index] = counted


class _Exclusions:
    """Why leaves could not take a single pod, counted as Kueue's ``tasExclusionStats``."""

    def __init__(self) -> None:
        self.total_nodes = 0
        self.node_selector = 0
        self.affinity = 0
        self.topology_domain = 0
        self.taints: dict[str, int] = {}
        self.resources: dict[str, int] = {}

    def add(self, other: _Exclusions) -> None:
        self.total_nodes += other.total_nodes
        self.node_selector += other.node_selector
        self.affinity += other.affinity
        self.topology_domain += other.topology_domain
        for taint, count in other.taints.items():
            self.taints[taint] = self.taints.get(taint, 0) + count
        for name, count in other.resources.items():
            self.resources[name] = self.resources.get(name, 0) + count

    def formatted(self) -> str:
        reasons: list[str] = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        reasons.extend(f"taint {_go_quote(taint)}: {count}" for taint, count in self.taints.items())
        reasons.extend(f"resource {_go_quote(name)}: {count}" for name, count in self.resources.items())
        if self.topology_domain:
            reasons.append(f"topologyDomain: {self.topology_domain}")
        if not reasons:
            return ""
        return f". Total nodes: {self.total_nodes}; excluded: {', '.join(sorted(reasons))}"


def _go_quote(text: str) -> str:
    """Go's ``%q`` for the label-like strings written here."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _taint_text(taint: Taint) -> str:
    # corev1.Taint.ToString
    if taint.value:
        return f"{taint.key}={taint.value}:{taint.effect.value}"
    return f"{taint.key}:{taint.effect.value}"


def _untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> Taint | None:
    for taint in taints:
        if taint.effect.value == "PreferNoSchedule":  # only NoSchedule and NoExecute keep a pod off
            continue
        if not any(toleration.tolerates(taint) for toleration in tolerations):
            return taint
    return None


def _count_in(requests: dict[str, int], capacity: dict[str, int]) -> tuple[int, str]:
    """How many times ``requests`` fit in ``capacity``, and the resource that limits it (ties to the first by
    name), as Kueue's ``CountInWithLimitingResource``."""
    best = -1
    limiting = ""
    for name, amount in requests.items():
        count = 2**31 - 1 if amount == 0 else max(0, capacity.get(name, 0) // amount)
        if best < 0 or count < best or (count == best and name < limiting):
            best, limiting = count, name
    return max(best, 0), limiting


def _best_fit(domains: list[_Domain], needed: int, counts: list[int]) -> _Domain:
    """The first domain with the smallest count (in ``counts``: pods or slices) still >= ``needed``; the first
    domain when none fits."""
    best = domains[0]
    best_count = -1
    for domain in domains:
        count = counts[domain.index]
        if count >= needed and (best_count < 0 or count < best_count):
            best, best_count = domain, count
    return best


def _smallest_fitting(domains: list[_Domain], needed: int, fill: _Fill) -> _Domain | None:
    """The domain with the fewest slices still >= ``needed``, then the fewest pods, then by level values (None
    when none fits): BestFit's choice and LeastFreeCapacity's alike, found without sorting the level."""
    pods, slices = fill.pods, fill.slices
    best: _Domain | None = None
    best_slices = 0
    for domain in domains:
        have = slices[domain.index]
        if have < needed:
            continue
        if (
            best is None
            or have < best_slices
            or (have == best_slices and (pods[domain.index], domain.values) < (pods[best.index], best.values))
        ):
            best, best_slices = domain, have
    return best


def _sorted(domains: list[_Domain], least_free: bool, fill: _Fill) -> list[_Domain]:
    """BestFit: most slices first; LeastFreeCapacity: fewest first; then fewest pods, then by level values."""
    pods, slices = fill.pods, fill.slices
    if least_free:
        return sorted(domains, key=lambda d: (slices[d.index], pods[d.index], d.values))
    return sorted(domains, key=lambda d: (-slices[d.index], pods[d.index], d.values))


def has_level(topology: Topology, request: TopologyRequest | None) -> bool:
    """Kueue's ``HasLevel``: whether every level ``request`` names is one of ``topology``'s."""
    if request is None:
        return True
    levels = topology.levels
    named = [request.required, request.preferred, request.slice_level]
    named += [level for level, _ in request.slice_layers]
    return all(level is None or level in levels for level in named)


class TopologySnapshot:
    """The domains of one TAS flavor's Topology, their free capacity and the TAS usage admitted on them."""

    def __init__(self, topology: Topology, flavor: ResourceFlavor, nodes: Iterable[TopologyNode]) -> None:
        self.topology: Final = topology
        self.flavor: Final = flavor
        levels = topology.levels
        self.hostname_leaves: Final = levels[-1] == HOSTNAME_LABEL
        # The index of the first level an assignment names: only the hostname's when it is the last level.
        self.assignment_level: Final = len(levels) - 1 if self.hostname_leaves else 0
        self.per_level: Final[list[dict[tuple[str, ...], _Domain]]] = [{} for _ in levels]
        self.roots: Final[list[_Domain]] = []
        # Leaves by the values an assignment names them with.
        self.leaves: Final[dict[tuple[str, ...], _Domain]] = {}
        self._node_leaves: Final[dict[str, _Domain]] = {}  # each node's leaf, by node name
        self._domain_count = 0
        wanted = flavor.node_labels
        for node in sorted(nodes, key=lambda n: n.name):
            labels = node.labels
            if not node.ready or node.unschedulable:
                continue
            if any(labels.get(key) != value for key, value in wanted.items()):
                continue
            if any(level not in labels for level in levels):
                continue
            values = tuple(labels[level] for level in levels)
            leaf = self._domain(values)
            if self.hostname_leaves:
                leaf.node = node
            for resource, amount in node.free.items():
                leaf.free[resource] = leaf.free.get(resource, 0) + amount
            leaf.remaining = dict(leaf.free)
            self.leaves[values[self.assignment_level :]] = leaf
            self._node_leaves[node.name] = leaf
        # Per pod set's node constraints (nodeSelector, tolerations, required affinity): the leaves whose nodes
        # take its pods and why the others do not (Kueue's TASCacheNodeMatchResults).
        self._matching: dict[object, tuple[list[_Domain], _Exclusions]] = {}
        # The leaves whose TAS usage changed, in order, from position ``_log_start`` on; and per placement's
        # inputs the fill kept up to date with it (each recounts only the leaves changed since it last looked).
        self._changed: list[_Domain] = []
        self._log_start = 0
        self._fills: dict[object, _Fill] = {}
        # Per placement's inputs, the last placement and the log position it saw (an empty placement: how many
        # times the free capacity changed, negated, as it counts no TAS usage).
        self._placed: dict[object, tuple[int, Placement]] = {}
        self._free_changes = 0

    def _domain(self, values: tuple[str, ...]) -> _Domain:
        level = len(values) - 1
        found = self.per_level[level].get(values)
        if found is not None:
            return found
        parent = self._domain(values[:-1]) if level > 0 else None
        domain = _Domain(values, parent, self._domain_count)
        self._domain_count += 1
        self.per_level[level][values] = domain
        if parent is None:
            self.roots.append(domain)
        else:
            parent.children.append(domain)
        return domain

    def add_usage(self, assignment: TopologyAssignment, requests: Mapping[str, int]) -> None:
        """Counts an admitted pod set's assignment (``requests``: one pod's) against its leaves."""
        self._change_usage(assignment, requests, 1)

    def remove_usage(self, assignment: TopologyAssignment, requests: Mapping[str, int]) -> None:
        self._change_usage(assignment, requests, -1)

    def has_node(self, node: str) -> bool:
        """Whether ``node`` is a leaf's (it carries the flavor's labels and every level, Ready and schedulable)."""
        return node in self._node_leaves

    def add_node_usage(self, node: str, requests: Mapping[str, int]) -> None:
        """Counts a bound pod that is not a TAS pod (``requests``: its own) against its node's free capacity."""
        self._change_node_usage(node, requests, 1)

    def remove_node_usage(self, node: str, requests: Mapping[str, int]) -> None:
        self._change_node_usage(node, requests, -1)

    def _change_node_usage(self, node: str, requests: Mapping[str, int], sign: int) -> None:
        leaf = self._node_leaves.get(node)
        if leaf is None:  # a node outside this flavor's tree
            return
        usage = leaf.tas_usage
        for resource, amount in with_one_pod(requests).items():
            leaf.free[resource] = leaf.free.get(resource, 0) - sign * amount
            leaf.remaining[resource] = leaf.free[resource] - usage.get(resource, 0)
        self._free_changes += 1
        self._log_change(leaf)

    def _change_usage(self, assignment: TopologyAssignment, requests: Mapping[str, int], sign: int) -> None:
        one_pod = with_one_pod(requests)
        for values, count in assignment.domains:
            leaf = self.leaves.get(values)
            if leaf is None:  # a node gone since admission: its usage went with it
                continue
            usage = leaf.tas_usage
            for resource, amount in one_pod.items():
                usage[resource] = usage.get(resource, 0) + sign * amount * count
                leaf.remaining[resource] = leaf.free.get(resource, 0) - usage[resource]
            self._log_change(leaf)

    def _log_change(self, leaf: _Domain) -> None:
        self._changed.append(leaf)
        if len(self._changed) > 4 * len(self.leaves):  # a fill this far behind counts every leaf again
            self._log_start += len(self._changed)
            self._changed.clear()

    def place(
        self,
        pod_set: PodSet,
        count: int,
        request: TopologyRequest | None,
        *,
        simulate_empty: bool = False,
        assumed: dict[tuple[str, ...], dict[str, int]] | None = None,
    ) -> Placement:
        """Where ``count`` pods of ``pod_set`` go. ``request`` None is implied TAS (every flavor of the queue is
        a TAS flavor): unconstrained at the lowest level. ``simulate_empty`` places as if every admitted TAS
        workload were gone (may preemption help at all?); ``assumed`` is usage of the same workload's earlier
        pod sets, by leaf."""
        if request is not None and len(request.slice_layers) > 1:
            counted = self._place_counted(pod_set, count, None, request, simulate_empty, assumed or {})
            return Placement(counted.workers, counted.reason)
        if assumed:
            return self._place(pod_set, count, request, simulate_empty, assumed)
        # Heads of one shape retried while no usage changed are placed where the first was.
        key = (
            tuple(sorted(pod_set.requests.items())),
            tuple(sorted(pod_set.node_selector.items())),
            pod_set.tolerations,
            pod_set.node_affinity,
            count,
            request,
            simulate_empty,
        )
        position = -1 - self._free_changes if simulate_empty else self._log_start + len(self._changed)
        known = self._placed.get(key)
        if known is not None and known[0] == position:
            return known[1]
        placement = self._place(pod_set, count, request, simulate_empty, assumed)
        self._placed[key] = (position, placement)
        return placement

    def place_group(
        self,
        workers: PodSet,
        count: int,
        leader: PodSet,
        request: TopologyRequest | None,
        *,
        simulate_empty: bool = False,
        assumed: dict[tuple[str, ...], dict[str, int]] | None = None,
    ) -> GroupPlacement:
        """Where ``count`` pods of ``workers`` and the one pod of ``leader`` go, together, as Kueue places a pod
        set group: the workers' request and node constraints decide, and each domain chosen must also hold the
        leader beside the workers it takes."""
        return self._place_counted(workers, count, leader, request, simulate_empty, assumed or {})

    def _place_counted(  # noqa: PLR0917 (one placement's inputs)
        self,
        workers: PodSet,
        count: int,
        leader: PodSet | None,
        request: TopologyRequest | None,
        simulate_empty: bool,
        assumed: dict[tuple[str, ...], dict[str, int]],
    ) -> GroupPlacement:
        """Kueue's ``findTopologyAssignment`` in full, counted afresh each time: with a leader (a pod set group)
        and with layers of slices, both rare, that the kept counts of :meth:`_place` do not cover."""
        resolved = self._resolve(request)
        if isinstance(resolved, str):
            return GroupPlacement(None, None, resolved)
        level_index, slice_index, slice_size, required, unconstrained = resolved
        inner = self._inner_slice_sizes(request, slice_size, slice_index)
        if isinstance(inner, str):
            return GroupPlacement(None, None, inner)
        leader_count = 0 if leader is None else 1
        counts = self._counts(workers, leader, simulate_empty, assumed, slice_size, slice_index, inner)
        fit = self._fit_level_counted(
            level_index, count, slice_size, required, unconstrained, leader_count, counts, request
        )
        if isinstance(fit, str):
            return GroupPlacement(None, None, fit)
        index, chosen = fit
        chosen = _minimum_counted(chosen, count, leader_count, slice_size, unconstrained, True, counts)
        deepest = len(self.per_level) - 1
        while index < min(deepest, slice_index):
            lower = _sorted_counts([child for domain in chosen for child in domain.children], unconstrained, counts)
            chosen = _minimum_counted(lower, count, leader_count, slice_size, unconstrained, True, counts)
            index += 1
        while index < deepest:
            # At and below the slice level each domain's pods go to its children in whole inner slices.
            size = inner.get(index + 1, 1)
            below: list[_Domain] = []
            for domain in chosen:
                lower = _sorted_counts(domain.children, unconstrained, counts)
                if size > 1:  # sorted by the counts of the outer slices, as Kueue sorts them, then recounted
                    for child in lower:
                        counts.slices[child.index] = counts.pods[child.index] // size
                        counts.slices_with_leader[child.index] = counts.pods_with_leader[child.index] // size
                pods, leaders = counts.pods[domain.index], counts.leaders[domain.index]
                below.extend(_minimum_counted(lower, pods, leaders, size, unconstrained, size > 1, counts))
            chosen = below
            index += 1
        return GroupPlacement(
            self._assignment([(domain, counts.pods[domain.index]) for domain in chosen]),
            self._assignment([(domain, counts.leaders[domain.index]) for domain in chosen]),
            "",
        )

    def _inner_slice_sizes(
        self, request: TopologyRequest | None, slice_size: int, slice_index: int
    ) -> dict[int, int] | str:
        """Kueue's ``buildSliceSizeAtLevel``: per level index below the outermost slice layer, the size of the
        slices its domains take, each inner layer's from the level under the previous one to its own; or why the
        layers do not fit this topology."""
        sizes: dict[int, int] = {}
        if request is None or len(request.slice_layers) < 2:
            return sizes
        levels = self.topology.levels
        previous_size, previous_index = slice_size, slice_index
        for level, size in request.slice_layers[1:]:
            if level not in levels:
                return f"no requested topology level for additional slice layer: {level}"
            index = levels.index(level)
            if index <= previous_index:
                return f"additional slice layer topology {level} must be at a lower level than {levels[previous_index]}"
            if previous_size % size != 0:
                return f"additional slice layer size {size} must evenly divide parent layer size {previous_size}"
            for between in range(previous_index + 1, index + 1):
                sizes[between] = size
            previous_size, previous_index = size, index
        return sizes

    def _counts(  # noqa: PLR0917 (one placement's inputs)
        self,
        workers: PodSet,
        leader: PodSet | None,
        simulate_empty: bool,
        assumed: dict[tuple[str, ...], dict[str, int]],
        slice_size: int,
        slice_index: int,
        inner: dict[int, int],
    ) -> _Counts:
        """Kueue's ``fillInCounts``: per leaf, the workers that fit, whether the leader fits and the workers that
        fit beside it; summed up the tree (a child counting only its whole inner slices), where a domain's count
        beside the leader gives up what its cheapest child able to hold the leader gives up."""
        worker_requests = with_one_pod(workers.requests)
        leader_requests = None if leader is None else with_one_pod(leader.requests)
        constraints = (tuple(sorted(workers.node_selector.items())), workers.tolerations, workers.node_affinity)
        leaves, matched = self._matching_leaves(workers, constraints)
        counts = _Counts(self._domain_count)
        counts.exclusions.add(matched)
        start = self.assignment_level
        for leaf in leaves:
            remaining = dict(leaf.free if simulate_empty else leaf.remaining)
            for resource, amount in assumed.get(leaf.values[start:], {}).items():
                remaining[resource] = remaining.get(resource, 0) - amount
            pods, limiting = _count_in(worker_requests, remaining)
            if pods == 0 and limiting:
                counts.exclusions.resources[limiting] = counts.exclusions.resources.get(limiting, 0) + 1
            counts.pods[leaf.index] = pods
            if leader_requests is not None and _count_in(leader_requests, remaining)[0] > 0:
                counts.leaders[leaf.index] = 1
                for resource, amount in leader_requests.items():
                    remaining[resource] = remaining.get(resource, 0) - amount
                pods = _count_in(worker_requests, remaining)[0]
            counts.pods_with_leader[leaf.index] = pods
        deepest = len(self.per_level) - 1
        if deepest == slice_index:
            for leaf in self.per_level[deepest].values():
                counts.slices[leaf.index] = counts.pods[leaf.index] // slice_size
                counts.slices_with_leader[leaf.index] = counts.pods_with_leader[leaf.index] // slice_size
        for level in range(deepest - 1, -1, -1):
            child_size = inner.get(level + 1, 1)
            for domain in self.per_level[level].values():
                counts.sum_children(domain, level == slice_index, slice_size, leader is not None, child_size)
        return counts

    def _fit_level_counted(  # noqa: PLR0917 (one placement's parameters, as Kueue's state)
        self,
        index: int,
        count: int,
        slice_size: int,
        required: bool,
        unconstrained: bool,
        leader_count: int,
        counts: _Counts,
        request: TopologyRequest | None,
    ) -> tuple[int, list[_Domain]] | str:
        """Kueue's ``findLevelWithFitDomains`` with leaders: the level and domains the placement starts from,
        domains able to hold the leader first, or why none."""
        levels = self.topology.levels
        domains = list(self.per_level[index].values())
        if not domains:
            return f"no topology domains at level: {levels[index]}"
        needed = count // slice_size
        leaders, slices, with_leader = counts.leaders, counts.slices, counts.slices_with_leader
        ordered = _sorted_with_leader(domains, unconstrained, counts)
        top = ordered[0]
        if unconstrained:  # LeastFreeCapacity: the first that holds the leader and the workers
            for domain in ordered:
                if leaders[domain.index] >= leader_count and with_leader[domain.index] >= needed:
                    return index, [domain]
        elif with_leader[top.index] >= needed and leaders[top.index] >= leader_count:
            top = _best_fit_by(ordered, needed, with_leader, leaders, leader_count)
        if with_leader[top.index] >= needed and leaders[top.index] >= leader_count:
            return index, [top]
        if required:
            return self._not_fit_counted(slices[top.index], needed, slice_size, index, count, counts, request)
        if index > 0 and not unconstrained:
            return self._fit_level_counted(
                index - 1, count, slice_size, required, unconstrained, leader_count, counts, request
            )
        # Spread: the leader's domain first, then the workers' by capacity.
        ordered = _prioritize_leader(ordered, count, leader_count, slice_size, True, counts)
        chosen: list[_Domain] = []
        remaining = needed
        remaining_leaders = leader_count
        position = 0
        while remaining_leaders > 0 and position < len(ordered) and leaders[ordered[position].index] > 0:
            domain = ordered[position]
            if not unconstrained and with_leader[domain.index] >= remaining:
                domain = _best_fit_by(ordered[position:], remaining, with_leader, leaders, remaining_leaders)
            chosen.append(domain)
            remaining_leaders -= leaders[domain.index]
            remaining -= with_leader[domain.index]
            position += 1
        if remaining_leaders > 0:
            fitting = leader_count - remaining_leaders
            return self._not_fit_counted(fitting, needed, slice_size, index, count, counts, request)
        rest = _sorted_counts(ordered[position:], unconstrained, counts)
        for position, candidate in enumerate(rest):
            if remaining <= 0:
                break
            domain = candidate
            if not unconstrained and slices[domain.index] >= remaining:
                domain = _best_fit_by(rest[position:], remaining, slices, leaders, 0)
            chosen.append(domain)
            remaining -= slices[domain.index]
        if remaining > 0:
            return self._not_fit_counted(needed - remaining, needed, slice_size, index, count, counts, request)
        return index, chosen

    def _not_fit_counted(  # noqa: PLR0917 (Kueue's notFitReason)
        self,
        fitting: int,
        needed: int,
        slice_size: int,
        index: int,
        count: int,
        counts: _Counts,
        request: TopologyRequest | None,
    ) -> str:
        """Kueue's failure message; with layers of slices, how many of each layer's slices the best domain of
        the level holds (``multiLayerNotFitMessage``)."""
        if request is None or len(request.slice_layers) < 2:
            return self._not_fit(fitting, needed, slice_size, counts.exclusions)
        domains = list(self.per_level[index].values())
        best = domains[0]
        for domain in domains:  # the most slices, then the first by level values
            have, best_have = counts.slices[domain.index], counts.slices[best.index]
            if have > best_have or (have == best_have and domain.values < best.values):
                best = domain
        levels = self.topology.levels
        parts = [f"topology {_go_quote(self.topology.name)} doesn't allow to fit"]
        for level, size in request.slice_layers:
            if level in levels:
                fit = self._slices_in(best, index, levels.index(level), size, counts)
                parts.append(f"{fit}/{count // size} slice(s) fit on level {level}")
        return "; ".join(parts) + counts.exclusions.formatted()

    def _slices_in(self, domain: _Domain, index: int, target: int, size: int, counts: _Counts) -> int:
        """Kueue's ``countSlicesInSubtree``: whole slices of ``size`` in ``domain``'s domains at level ``target``."""
        if index == target:
            return counts.pods[domain.index] // size
        return sum(self._slices_in(child, index + 1, target, size, counts) for child in domain.children)

    def replace_node(
        self,
        pod_set: PodSet,
        request: TopologyRequest | None,
        assignment: TopologyAssignment,
        node: str,
        assumed: dict[tuple[str, ...], dict[str, int]] | None = None,
    ) -> Placement:
        """``assignment`` of an admitted pod set with the pods it put on the failed ``node`` moved to healthy
        nodes (Kueue's ``findReplacementAssignment``): placed as ``request`` asks, inside the domain of its
        required level that holds the pods that stay; or why they cannot move."""
        moved = sum(count for values, count in assignment.domains if values[-1] == node)
        if moved == 0:
            return Placement(assignment, "")
        kept = [(values, count) for values, count in assignment.domains if values[-1] != node]
        for values, _ in kept:
            if values not in self.leaves:
                return Placement(
                    None,
                    "Cannot replace the node, because the existing topologyAssignment is invalid, as it contains "
                    f"the stale domain {values[0]}",
                )
        resolved = self._resolve(request)
        if isinstance(resolved, str):
            return Placement(None, resolved)
        level_index, _, slice_size, required, _ = resolved
        if moved % slice_size != 0:
            return Placement(None, f"cannot replace {moved} pod(s) of node {node} in whole slices of {slice_size}")
        # Only a required level confines the pods that move: to the domain at that level of the pods that stay.
        within = self.leaves[kept[0][0]].values[: level_index + 1] if required and kept else ()
        placement = self._place(pod_set, moved, request, False, assumed, (node, within))
        if placement.assignment is None:
            return placement
        if not placement.assignment.domains:
            return Placement(None, f"cannot find replacement assignment for unhealthy node: {node}")
        merged = dict(kept)
        for values, count in placement.assignment.domains:
            merged[values] = merged.get(values, 0) + count
        return Placement(TopologyAssignment(assignment.levels, tuple(sorted(merged.items()))), "")

    def _place(  # noqa: PLR0917 (one placement's inputs)
        self,
        pod_set: PodSet,
        count: int,
        request: TopologyRequest | None,
        simulate_empty: bool,
        assumed: dict[tuple[str, ...], dict[str, int]] | None,
        confined: tuple[str, tuple[str, ...]] | None = None,
    ) -> Placement:
        levels = self.topology.levels
        resolved = self._resolve(request)
        if isinstance(resolved, str):
            return Placement(None, resolved)
        level_index, slice_index, slice_size, required, unconstrained = resolved
        fill = self._fill(pod_set, simulate_empty, assumed, slice_size, slice_index, confined)
        fit = self._fit_level(level_index, count, slice_size, required, unconstrained, fill)
        if isinstance(fit, str):
            return Placement(None, fit)
        fit_index, start_domains = fit
        chosen = _minimum(start_domains, count, slice_size, unconstrained, fill.slices)
        index = fit_index
        while index < min(len(levels) - 1, slice_index):
            lower = [child for domain, _ in chosen for child in domain.children]
            chosen = _minimum(_sorted(lower, unconstrained, fill), count, slice_size, unconstrained, fill.slices)
            index += 1
        while index < len(levels) - 1:
            below: list[tuple[_Domain, int]] = []
            for domain, pods in chosen:
                below.extend(_minimum(_sorted(domain.children, unconstrained, fill), pods, 1, unconstrained, fill.pods))
            chosen = below
            index += 1
        return Placement(self._assignment(chosen), "")

    def _resolve(self, request: TopologyRequest | None) -> tuple[int, int, int, bool, bool] | str:
        """``request`` against this topology: the index of the level the placement starts at, of the slice level,
        the slice size, whether the level is required and whether it is unconstrained; or why it cannot be
        placed."""
        levels = self.topology.levels
        required = request is not None and request.required is not None
        slice_only = (
            request is not None
            and request.required is None
            and request.preferred is None
            and _outer_slice(request)[0] is not None
        )
        unconstrained = request is None or request.unconstrained or slice_only
        slice_level, slice_size_asked = _outer_slice(request)
        slice_size = 1
        if slice_level is not None:
            if slice_size_asked is None or slice_size_asked <= 0:
                return "slice topology requested, but slice size not provided"
            slice_size = slice_size_asked
        if request is None or request.unconstrained:
            key = levels[-1]
        elif request.required is not None:
            key = request.required
        elif request.preferred is not None:
            key = request.preferred
        elif slice_only:
            key = levels[0]
        else:
            return "topology level not specified"
        if key not in levels:
            return f"no requested topology level: {key}"
        level_index = levels.index(key)
        slice_key = levels[-1] if slice_level is None else slice_level
        if slice_key not in levels:
            return f"no requested topology level for slices: {slice_key}"
        slice_index = levels.index(slice_key)
        if level_index > slice_index:
            return f"podset slice topology {slice_key} is above the podset topology {key}"
        return level_index, slice_index, slice_size, required, unconstrained

    def _assignment(self, chosen: list[tuple[_Domain, int]]) -> TopologyAssignment:
        start = self.assignment_level
        domains = tuple(
            (domain.values[start:], pods) for domain, pods in sorted(chosen, key=lambda c: c[0].values) if pods > 0
        )
        return TopologyAssignment(self.topology.levels[start:], domains)

    def _fill(  # noqa: PLR0917 (one placement's inputs)
        self,
        pod_set: PodSet,
        simulate_empty: bool,
        assumed: dict[tuple[str, ...], dict[str, int]] | None,
        slice_size: int,
        slice_index: int,
        confined: tuple[str, tuple[str, ...]] | None = None,
    ) -> _Fill:
        """The counts of every domain for this placement: the kept fill of its inputs brought up to date with
        the leaves whose usage changed since, or (with ``assumed`` usage, ``confined`` to the leaves of a domain
        but a failed node's, or too far behind) counted afresh."""
        requests = with_one_pod(pod_set.requests)
        constraints = (tuple(sorted(pod_set.node_selector.items())), pod_set.tolerations, pod_set.node_affinity)
        key = (tuple(sorted(requests.items())), constraints, simulate_empty, slice_size, slice_index)
        now = self._log_start + len(self._changed)
        kept = not assumed and confined is None
        known = self._fills.get(key) if kept else None
        if known is not None and known.seen >= self._log_start:
            deepest = len(self.per_level) - 1
            for leaf in dict.fromkeys(self._changed[known.seen - self._log_start :]):
                old = known.leaves.get(leaf.index)
                if old is None:  # a leaf the pod set's constraints exclude: it holds none
                    continue
                counted = _count_in(requests, leaf.free if simulate_empty else leaf.remaining)
                if counted != old:
                    known.count_leaf(leaf, counted)
                    _add_up(leaf, counted[0] - old[0], known, slice_size, slice_index, deepest)
            known.seen = now
            return known
        leaves, matched = self._matching_leaves(pod_set, constraints)
        fill = _Fill(self._domain_count, now, matched)
        start = self.assignment_level
        for leaf in leaves:
            if confined is not None:
                failed, within = confined
                if leaf.values[-1] == failed:
                    continue
                if leaf.values[: len(within)] != within:
                    fill.outside_domain += 1
                    continue
            remaining = leaf.free if simulate_empty else leaf.remaining
            on_leaf = assumed.get(leaf.values[start:]) if assumed else None
            if on_leaf is not None:
                remaining = dict(remaining)
                for resource, amount in on_leaf.items():
                    remaining[resource] = remaining.get(resource, 0) - amount
            counted = _count_in(requests, remaining)
            fill.count_leaf(leaf, counted)
            fill.pods[leaf.index] = counted[0]
        _sum_counts(self.per_level, fill, slice_size, slice_index)
        if kept:
            self._fills[key] = fill
        return fill

    def _matching_leaves(self, pod_set: PodSet, key: object) -> tuple[list[_Domain], _Exclusions]:
        """The leaves whose nodes take ``pod_set``'s pods (``key``: its node constraints) and the exclusions of
        the others; below a level other than the hostname, every leaf (Kueue checks nodes only at the hostname
        level)."""
        known = self._matching.get(key)
        if known is not None:
            return known
        excluded = _Exclusions()
        leaves: list[_Domain] = []
        if not self.hostname_leaves:
            excluded.total_nodes = len(self.leaves)
            leaves = list(self.leaves.values())
        tolerations = pod_set.tolerations + self.flavor.tolerations
        for leaf in self.leaves.values() if self.hostname_leaves else ():
            node = leaf.node
            assert node is not None
            excluded.total_nodes += 1
            taint = _untolerated(node.taints, tolerations)
            if taint is not None:
                text = _taint_text(taint)
                excluded.taints[text] = excluded.taints.get(text, 0) + 1
                continue
            labels = node.labels
            if any(labels.get(key) != value for key, value in pod_set.node_selector.items()):
                excluded.node_selector += 1
                continue
            if pod_set.node_affinity and not any(
                all(requirement.matches(labels) for requirement in term) for term in pod_set.node_affinity
            ):
                excluded.affinity += 1
                continue
            leaves.append(leaf)
        found = self._matching[key] = (leaves, excluded)
        return found

    def _fit_level(  # noqa: PLR0917 (one placement's parameters, as Kueue's state)
        self,
        index: int,
        count: int,
        slice_size: int,
        required: bool,
        unconstrained: bool,
        fill: _Fill,
    ) -> tuple[int, list[_Domain]] | str:
        """Kueue's ``findLevelWithFitDomains``: the level and domains the placement starts from, or why none."""
        levels = self.topology.levels
        domains = list(self.per_level[index].values())
        if not domains:
            return f"no topology domains at level: {levels[index]}"
        needed = count // slice_size
        fitting = _smallest_fitting(domains, needed, fill)
        if fitting is not None:
            return index, [fitting]
        # None fits alone. A required level tells the most any domain holds (BestFit's first); a preferred one
        # climbs; only spreading over the domains needs their order.
        slices = fill.slices
        if required:
            return self._not_fit(
                max([slices[domain.index] for domain in domains]), needed, slice_size, fill.exclusions()
            )
        if index > 0 and not unconstrained:
            return self._fit_level(index - 1, count, slice_size, required, unconstrained, fill)
        ordered = _sorted(domains, unconstrained, fill)
        chosen: list[_Domain] = []
        remaining = needed
        position = 0
        while remaining > 0 and position < len(ordered):
            domain = ordered[position]
            if not unconstrained and slices[domain.index] >= remaining:
                domain = _best_fit(ordered[position:], remaining, slices)
            chosen.append(domain)
            remaining -= slices[domain.index]
            position += 1
        if remaining > 0:
            return self._not_fit(needed - remaining, needed, slice_size, fill.exclusions())
        return index, chosen

    def _not_fit(self, fitting: int, needed: int, slice_size: int, exclusions: _Exclusions) -> str:
        unit = "pod" if slice_size == 1 else "slice"
        name = _go_quote(self.topology.name)
        if fitting == 0:
            head = f"topology {name} doesn't allow to fit any of {needed} {unit}(s)"
        else:
            head = f"topology {name} allows to fit only {fitting} out of {needed} {unit}(s)"
        return head + exclusions.formatted()


def _outer_slice(request: TopologyRequest | None) -> tuple[str | None, int | None]:
    """The slice level and size of ``request``: its first layer's when it has layers (Kueue's
    ``PodSetSliceRequiredTopologyConstraints``)."""
    if request is None:
        return None, None
    if request.slice_layers:
        return request.slice_layers[0]
    return request.slice_level, request.slice_size


def pod_set_group_problem(pod_sets: tuple[PodSet, ...]) -> str | None:
    """What is wrong with a workload's pod set groups, or None: as Kueue's job webhooks check them, a group is
    exactly 2 pod sets, one of them of 1 pod, both asking for the same required or preferred level."""
    groups: dict[str, list[PodSet]] = {}
    for pod_set in pod_sets:
        request = pod_set.topology_request
        if request is not None and request.group is not None:
            groups.setdefault(request.group, []).append(pod_set)
    for group, members in groups.items():
        if len(members) != 2:
            return f'pod set group "{group}": can only define groups of exactly 2 pod sets, got: {len(members)}'
        first, second = members
        if first.count != 1 and second.count != 1:
            return (
                f'pod set group "{group}": one of its pod sets must have 1 pod, got: {first.count} and {second.count}'
            )
        levels = [(m.topology_request.required, m.topology_request.preferred) for m in members if m.topology_request]
        if levels[0] != levels[1] or levels[0] == (None, None):
            return f'pod set group "{group}": both pod sets must ask for the same required or preferred level'
    return None


def with_one_pod(requests: Mapping[str, int]) -> dict[str, int]:
    """One pod's requests with the one of its node's allocatable pods it takes."""
    with_pod = dict(requests)
    with_pod[PODS_RESOURCE] = with_pod.get(PODS_RESOURCE, 0) + 1
    return with_pod


def _sum_counts(
    per_level: list[dict[tuple[str, ...], _Domain]], fill: _Fill, slice_size: int, slice_index: int
) -> None:
    """Kueue's ``fillInCountsHelper`` without leaders: pods and slices summed up from the leaves' pods, level by
    level; slices counted at the slice level and summed above it."""
    pods, slices = fill.pods, fill.slices
    deepest = len(per_level) - 1
    for leaf in per_level[deepest].values():
        slices[leaf.index] = pods[leaf.index] // slice_size if deepest == slice_index else 0
    for level in range(deepest - 1, -1, -1):
        at_slice_level = level == slice_index
        for domain in per_level[level].values():
            pod_sum = slice_sum = 0
            for child in domain.children:
                pod_sum += pods[child.index]
                slice_sum += slices[child.index]
            pods[domain.index] = pod_sum
            slices[domain.index] = pod_sum // slice_size if at_slice_level else slice_sum


def _add_up(leaf: _Domain, delta: int, fill: _Fill, slice_size: int, slice_index: int, deepest: int) -> None:  # noqa: PLR0917 (one change's inputs)
    """A leaf's pod count changed by ``delta``: the leaf and its ancestors' sums as :func:`_sum_counts` makes
    them, without counting their other children again."""
    pods, slices = fill.pods, fill.slices
    domain: _Domain | None = leaf
    level = deepest
    slice_delta = 0
    while domain is not None:
        index = domain.index
        pods[index] += delta
        if level == slice_index:
            before = slices[index]
            slices[index] = pods[index] // slice_size
            slice_delta = slices[index] - before
        else:
            slices[index] += slice_delta  # below the slice level both are 0
        domain = domain.parent
        level -= 1


def _minimum(
    domains: list[_Domain], count: int, slice_size: int, unconstrained: bool, counts: list[int]
) -> list[tuple[_Domain, int]]:
    """Kueue's ``updateCountsToMinimumGeneric`` without leaders: the fewest of ``domains`` (in order, the last
    one the best fit under BestFit) that hold ``count`` pods, each with the pods it takes. ``counts`` are the
    fill's slices (``count`` is cut into slices of ``slice_size``) or its pods (``slice_size`` 1)."""
    chosen: list[tuple[_Domain, int]] = []
    remaining = count // slice_size
    for position, candidate in enumerate(domains):
        domain = candidate
        have = counts[domain.index]
        if not unconstrained and have >= remaining:
            domain = _best_fit(domains[position:], remaining, counts)
            have = counts[domain.index]
        if have >= remaining:
            chosen.append((domain, remaining * slice_size))
            return chosen
        chosen.append((domain, have * slice_size))
        remaining -= have
    return chosen


def _sorted_counts(domains: list[_Domain], least_free: bool, counts: _Counts) -> list[_Domain]:
    """:func:`_sorted` on a group's counts."""
    pods, slices = counts.pods, counts.slices
    if least_free:
        return sorted(domains, key=lambda d: (slices[d.index], pods[d.index], d.values))
    return sorted(domains, key=lambda d: (-slices[d.index], pods[d.index], d.values))


def _sorted_with_leader(domains: list[_Domain], least_free: bool, counts: _Counts) -> list[_Domain]:
    """Kueue's ``sortedDomainsWithLeader``: domains that hold the leader first, then by slices beside it (most
    first under BestFit, fewest under LeastFreeCapacity), fewest pods beside it, level values."""
    leaders, pods, slices = counts.leaders, counts.pods_with_leader, counts.slices_with_leader
    sign = 1 if least_free else -1
    return sorted(domains, key=lambda d: (-leaders[d.index], sign * slices[d.index], pods[d.index], d.values))


def _best_fit_by(
    domains: list[_Domain], needed: int, counts: list[int], leaders: list[int], leader_count: int
) -> _Domain:
    """Kueue's ``findBestFitDomainBy``: the first domain with the smallest count still >= ``needed`` among those
    holding ``leader_count`` leaders; the first domain when none does."""
    best = domains[0]
    best_count = -1
    for domain in domains:
        if leaders[domain.index] < leader_count:
            continue
        count = counts[domain.index]
        if count >= needed and (best_count < 0 or count < best_count):
            best, best_count = domain, count
    return best


def _prioritize_leader(  # noqa: PLR0917 (Kueue's parameters)
    domains: list[_Domain], count: int, leader_count: int, slice_size: int, by_slices: bool, counts: _Counts
) -> list[_Domain]:
    """Kueue's ``prioritizeLeaderDomain``: the first domain able to hold the leader whose cost in workers the
    others' capacity still covers goes first, so that the descent never drops the leader's only good domain."""
    if leader_count == 0 or len(domains) < 2:
        return domains
    primary = counts.slices if by_slices else counts.pods
    with_leader = counts.slices_with_leader if by_slices else counts.pods_with_leader
    needed = count // slice_size if by_slices else count
    available = sum(primary[domain.index] for domain in domains)
    for position, domain in enumerate(domains):
        if counts.leaders[domain.index] < leader_count:
            continue
        if available - (primary[domain.index] - with_leader[domain.index]) < needed:
            continue
        if position == 0:
            return domains
        return [domain, *domains[:position], *domains[position + 1 :]]
    return domains


def _minimum_counted(  # noqa: PLR0917 (Kueue's parameters)
    domains: list[_Domain],
    count: int,
    leader_count: int,
    slice_size: int,
    unconstrained: bool,
    by_slices: bool,
    counts: _Counts,
) -> list[_Domain]:
    """Kueue's ``updateCountsToMinimumGeneric`` with leaders: the fewest of ``domains`` that hold ``count`` pods
    (in slices of ``slice_size`` when ``by_slices``) and ``leader_count`` leaders, leaders first; each chosen
    domain's counts are cut to what it takes."""
    domains = _prioritize_leader(domains, count, leader_count, slice_size, by_slices, counts)
    primary = counts.slices if by_slices else counts.pods
    with_leader = counts.slices_with_leader if by_slices else counts.pods_with_leader
    leaders, pods = counts.leaders, counts.pods
    unit = slice_size if by_slices else 1
    remaining = count // unit
    remaining_leaders = leader_count
    chosen: list[_Domain] = []
    for position, candidate in enumerate(domains):
        domain = candidate
        if remaining_leaders > 0:
            fits = with_leader[domain.index] >= remaining and leaders[domain.index] >= remaining_leaders
            if not unconstrained and fits:
                domain = _best_fit_by(domains[position:], remaining, with_leader, leaders, remaining_leaders)
            index = domain.index
            chosen.append(domain)
            if with_leader[index] >= remaining and leaders[index] >= remaining_leaders:
                primary[index] = remaining
                leaders[index] = remaining_leaders
                pods[index] = remaining * unit
                return chosen
            with_leader[index] = min(with_leader[index], remaining)
            leaders[index] = min(leaders[index], remaining_leaders)
            primary[index] = with_leader[index]
            pods[index] = with_leader[index] * unit
            remaining_leaders -= leaders[index]
            remaining -= with_leader[index]
            continue
        if not unconstrained and primary[domain.index] >= remaining:
            domain = _best_fit_by(domains[position:], remaining, primary, leaders, 0)
        index = domain.index
        chosen.append(domain)
        leaders[index] = 0
        if primary[index] >= remaining:
            primary[index] = remaining
            pods[index] = remaining * unit
            return chosen
        pods[index] = primary[index] * unit
        remaining -= primary[index]
    return chosen
