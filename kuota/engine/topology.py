"""Topology-aware placement: where in a Topology's tree of domains a pod set's pods go, Kueue's way.

Kueue v0.20's ``TASFlavorSnapshot`` (pkg/cache/scheduler/tas_flavor_snapshot.go) with its default feature gates:
the tree of one TAS ResourceFlavor is built from the nodes that carry the flavor's labels and every level label,
Ready and schedulable. Each leaf's free capacity is what its nodes can still give (allocatable minus the
requests of bound pods that are not TAS pods, as the caller counts them) minus the TAS assignments admitted on
it. A placement counts how many pods (and slices) fit in each leaf, sums the counts up the tree, picks a domain at
the requested level (BestFit: the fullest that still fits; LeastFreeCapacity for unconstrained requests) and
descends, at each level choosing the fewest domains. A required level fails when no single domain there fits;
a preferred one climbs a level; an unconstrained one spreads over as many domains as it needs.

Leader/worker pod set groups, multi-layer slices, balanced placement and node replacement are not implemented:
a pod set group is placed pod set by pod set.

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


class _Domain:
    """One domain of the tree, with the counts of the placement under way."""

    def __init__(self, values: tuple[str, ...], parent: _Domain | None) -> None:
        self.values: Final = values
        self.parent: Final = parent
        self.children: list[_Domain] = []
        self.node: TopologyNode | None = None  # the node of a hostname leaf
        self.free: dict[str, int] = {}  # a leaf's: what its nodes can still give
        self.tas_usage: dict[str, int] = {}  # a leaf's: what admitted TAS workloads take
        self.remaining: dict[str, int] = {}  # a leaf's: free minus its TAS usage
        # A leaf's pod counts by one pod's requests, until its usage changes: most placements find most leaves
        # as the last one left them.
        self.counts: dict[tuple[tuple[str, int], ...], tuple[int, str]] = {}
        # The same with no TAS usage (preemption's question: could it fit at all?), fixed with the node.
        self.empty_counts: dict[tuple[tuple[str, int], ...], tuple[int, str]] = {}
        self.pod_count = 0
        self.slice_count = 0


class _Exclusions:
    """Why leaves could not take a single pod, counted as Kueue's ``tasExclusionStats``."""

    def __init__(self) -> None:
        self.total_nodes = 0
        self.node_selector = 0
        self.affinity = 0
        self.taints: dict[str, int] = {}
        self.resources: dict[str, int] = {}

    def add(self, other: _Exclusions) -> None:
        self.total_nodes += other.total_nodes
        self.node_selector += other.node_selector
        self.affinity += other.affinity
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


def _best_fit(domains: list[_Domain], needed: int, slices: bool) -> _Domain:
    """The first domain with the smallest count still >= ``needed``; the first domain when none fits."""
    best = domains[0]
    best_count = -1
    for domain in domains:
        count = domain.slice_count if slices else domain.pod_count
        if count >= needed and (best_count < 0 or count < best_count):
            best, best_count = domain, count
    return best


def _sorted(domains: list[_Domain], least_free: bool) -> list[_Domain]:
    """BestFit: most slices first; LeastFreeCapacity: fewest first; then fewest pods, then by level values."""
    if least_free:
        return sorted(domains, key=lambda d: (d.slice_count, d.pod_count, d.values))
    return sorted(domains, key=lambda d: (-d.slice_count, d.pod_count, d.values))


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
        # Per pod set's node constraints (nodeSelector, tolerations, required affinity): the leaves whose nodes
        # take its pods and why the others do not (Kueue's TASCacheNodeMatchResults).
        self._matching: dict[object, tuple[list[_Domain], _Exclusions, list[_Domain]]] = {}
        # Every domain, in one order; the TAS usage's version (any change bumps it); and per placement's inputs
        # (requests, node constraints, whether empty, slices) the counts of every domain it filled at a version,
        # with the exclusions it found: heads of one shape retried after a free fill the tree once.
        self._domains: Final = [domain for level in self.per_level for domain in level.values()]
        self._version = 0
        self._filled: dict[object, tuple[int, list[int], list[int], _Exclusions]] = {}

    def _domain(self, values: tuple[str, ...]) -> _Domain:
        level = len(values) - 1
        found = self.per_level[level].get(values)
        if found is not None:
            return found
        parent = self._domain(values[:-1]) if level > 0 else None
        domain = _Domain(values, parent)
        self.per_level[level][values] = domain
        if parent is None:
            self.roots.append(domain)
        else:
            parent.children.append(domain)
        return domain

    def has_level(self, request: TopologyRequest | None) -> bool:
        """Whether every level ``request`` names is one of this topology's."""
        levels = self.topology.levels
        if request is None:
            return True
        named = [request.required, request.preferred, request.slice_level]
        return all(level is None or level in levels for level in named)

    def add_usage(self, assignment: TopologyAssignment, requests: Mapping[str, int]) -> None:
        """Counts an admitted pod set's assignment (``requests``: one pod's) against its leaves."""
        self._change_usage(assignment, requests, 1)

    def remove_usage(self, assignment: TopologyAssignment, requests: Mapping[str, int]) -> None:
        self._change_usage(assignment, requests, -1)

    def _change_usage(self, assignment: TopologyAssignment, requests: Mapping[str, int], sign: int) -> None:
        for values, count in assignment.domains:
            leaf = self.leaves.get(values)
            if leaf is None:  # a node gone since admission: its usage went with it
                continue
            usage = leaf.tas_usage
            for resource, amount in with_one_pod(requests).items():
                usage[resource] = usage.get(resource, 0) + sign * amount * count
                leaf.remaining[resource] = leaf.free.get(resource, 0) - usage[resource]
            leaf.counts.clear()
        self._version += 1

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
        levels = self.topology.levels
        required = request is not None and request.required is not None
        slice_only = (
            request is not None
            and request.required is None
            and request.preferred is None
            and request.slice_level is not None
        )
        unconstrained = request is None or request.unconstrained or slice_only
        slice_size = 1
        if request is not None and request.slice_level is not None:
            if request.slice_size is None or request.slice_size <= 0:
                return Placement(None, "slice topology requested, but slice size not provided")
            slice_size = request.slice_size
        if request is None or request.unconstrained:
            key = levels[-1]
        elif request.required is not None:
            key = request.required
        elif request.preferred is not None:
            key = request.preferred
        elif slice_only:
            key = levels[0]
        else:
            return Placement(None, "topology level not specified")
        if key not in levels:
            return Placement(None, f"no requested topology level: {key}")
        level_index = levels.index(key)
        slice_key = levels[-1] if request is None or request.slice_level is None else request.slice_level
        if slice_key not in levels:
            return Placement(None, f"no requested topology level for slices: {slice_key}")
        slice_index = levels.index(slice_key)
        if level_index > slice_index:
            return Placement(None, f"podset slice topology {slice_key} is above the podset topology {key}")
        exclusions = _Exclusions()
        self._fill_counts(
            pod_set, simulate_empty, assumed, slice_size=slice_size, slice_index=slice_index, exclusions=exclusions
        )
        fit = self._fit_level(level_index, count, slice_size, required, unconstrained, exclusions)
        if isinstance(fit, str):
            return Placement(None, fit)
        fit_index, chosen = fit
        chosen = _minimum(chosen, count, slice_size, unconstrained, True)
        index = fit_index
        while index < min(len(levels) - 1, slice_index):
            lower = [child for domain in chosen for child in domain.children]
            chosen = _minimum(_sorted(lower, unconstrained), count, slice_size, unconstrained, True)
            index += 1
        while index < len(levels) - 1:
            below: list[_Domain] = []
            for domain in chosen:
                below.extend(
                    _minimum(_sorted(domain.children, unconstrained), domain.pod_count, 1, unconstrained, False)
                )
            chosen = below
            index += 1
        start = self.assignment_level
        domains = tuple(
            (domain.values[start:], domain.pod_count)
            for domain in sorted(chosen, key=lambda d: d.values)
            if domain.pod_count > 0
        )
        return Placement(TopologyAssignment(levels[start:], domains), "")

    def _fill_counts(
        self,
        pod_set: PodSet,
        simulate_empty: bool,
        assumed: dict[tuple[str, ...], dict[str, int]] | None,
        *,
        slice_size: int,
        slice_index: int,
        exclusions: _Exclusions,
    ) -> None:
        requests = with_one_pod(pod_set.requests)
        signature = tuple(sorted(requests.items()))
        key = (signature, pod_set.tolerations, pod_set.node_affinity, tuple(sorted(pod_set.node_selector.items())))
        filled_key = (key, simulate_empty, slice_size, slice_index)
        reusable = not assumed
        if reusable:
            known = self._filled.get(filled_key)
            if known is not None and known[0] == self._version:
                for domain, pods, slices in zip(self._domains, known[1], known[2], strict=True):
                    domain.pod_count = pods
                    domain.slice_count = slices
                exclusions.add(known[3])
                return
        found = _Exclusions()
        self._count_leaves(pod_set, requests, signature, simulate_empty, assumed, found)
        _sum_counts(self.per_level, slice_size, slice_index)
        exclusions.add(found)
        if reusable:
            domains = self._domains
            self._filled[filled_key] = (
                self._version,
                [domain.pod_count for domain in domains],
                [domain.slice_count for domain in domains],
                found,
            )

    def _count_leaves(  # noqa: PLR0917 (one fill's inputs)
        self,
        pod_set: PodSet,
        requests: dict[str, int],
        signature: tuple[tuple[str, int], ...],
        simulate_empty: bool,
        assumed: dict[tuple[str, ...], dict[str, int]] | None,
        exclusions: _Exclusions,
    ) -> None:
        """Each leaf's pod count, and why the leaves that take none do not."""
        leaves, excluded, others = self._matching_leaves(pod_set)
        exclusions.add(excluded)
        for leaf in others:
            leaf.pod_count = 0
        start = self.assignment_level
        for leaf in leaves:
            on_leaf = assumed.get(leaf.values[start:]) if assumed else None
            if on_leaf is not None:
                remaining = dict(leaf.free if simulate_empty else leaf.remaining)
                for resource, amount in on_leaf.items():
                    remaining[resource] = remaining.get(resource, 0) - amount
                counted = _count_in(requests, remaining)
            else:
                cache = leaf.empty_counts if simulate_empty else leaf.counts
                known = cache.get(signature)
                if known is None:
                    known = cache[signature] = _count_in(requests, leaf.free if simulate_empty else leaf.remaining)
                counted = known
            leaf.pod_count = counted[0]
            if counted[0] == 0 and counted[1]:
                exclusions.resources[counted[1]] = exclusions.resources.get(counted[1], 0) + 1

    def _matching_leaves(self, pod_set: PodSet) -> tuple[list[_Domain], _Exclusions, list[_Domain]]:
        """The leaves whose nodes take ``pod_set``'s pods, the exclusions of the others, and those others; below
        a level other than the hostname, every leaf (Kueue checks nodes only at the hostname level)."""
        key = (tuple(sorted(pod_set.node_selector.items())), pod_set.tolerations, pod_set.node_affinity)
        known = self._matching.get(key)
        if known is not None:
            return known
        excluded = _Exclusions()
        leaves: list[_Domain] = []
        others: list[_Domain] = []
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
                others.append(leaf)
                continue
            labels = node.labels
            if any(labels.get(key) != value for key, value in pod_set.node_selector.items()):
                excluded.node_selector += 1
                others.append(leaf)
                continue
            if pod_set.node_affinity and not any(
                all(requirement.matches(labels) for requirement in term) for term in pod_set.node_affinity
            ):
                excluded.affinity += 1
                others.append(leaf)
                continue
            leaves.append(leaf)
        found = self._matching[key] = (leaves, excluded, others)
        return found

    def _fit_level(  # noqa: PLR0917 (one placement's parameters, as Kueue's state)
        self,
        index: int,
        count: int,
        slice_size: int,
        required: bool,
        unconstrained: bool,
        exclusions: _Exclusions,
    ) -> tuple[int, list[_Domain]] | str:
        """Kueue's ``findLevelWithFitDomains``: the level and domains the placement starts from, or why none."""
        levels = self.topology.levels
        domains = list(self.per_level[index].values())
        if not domains:
            return f"no topology domains at level: {levels[index]}"
        ordered = _sorted(domains, unconstrained)
        top = ordered[0]
        needed = count // slice_size
        if not unconstrained and top.slice_count >= needed:
            top = _best_fit(ordered, needed, True)
        if unconstrained:
            for domain in ordered:
                if domain.slice_count >= needed:
                    return index, [domain]
        if top.slice_count >= needed:
            return index, [top]
        if required:
            return self._not_fit(top.slice_count, needed, slice_size, exclusions)
        if index > 0 and not unconstrained:
            return self._fit_level(index - 1, count, slice_size, required, unconstrained, exclusions)
        chosen: list[_Domain] = []
        remaining = needed
        position = 0
        while remaining > 0 and position < len(ordered):
            domain = ordered[position]
            if not unconstrained and domain.slice_count >= remaining:
                domain = _best_fit(ordered[position:], remaining, True)
            chosen.append(domain)
            remaining -= domain.slice_count
            position += 1
        if remaining > 0:
            return self._not_fit(needed - remaining, needed, slice_size, exclusions)
        return index, chosen

    def _not_fit(self, fitting: int, needed: int, slice_size: int, exclusions: _Exclusions) -> str:
        unit = "pod" if slice_size == 1 else "slice"
        name = _go_quote(self.topology.name)
        if fitting == 0:
            head = f"topology {name} doesn't allow to fit any of {needed} {unit}(s)"
        else:
            head = f"topology {name} allows to fit only {fitting} out of {needed} {unit}(s)"
        return head + exclusions.formatted()


def with_one_pod(requests: Mapping[str, int]) -> dict[str, int]:
    """One pod's requests with the one of its node's allocatable pods it takes."""
    with_pod = dict(requests)
    with_pod[PODS_RESOURCE] = with_pod.get(PODS_RESOURCE, 0) + 1
    return with_pod


def _sum_counts(per_level: list[dict[tuple[str, ...], _Domain]], slice_size: int, slice_index: int) -> None:
    """Kueue's ``fillInCountsHelper`` without leaders: pods and slices summed up from the leaves, level by
    level; slices counted at the slice level and summed above it."""
    deepest = len(per_level) - 1
    for leaf in per_level[deepest].values():
        leaf.slice_count = leaf.pod_count // slice_size if deepest == slice_index else 0
    for level in range(deepest - 1, -1, -1):
        at_slice_level = level == slice_index
        for domain in per_level[level].values():
            pods = slices = 0
            for child in domain.children:
                pods += child.pod_count
                slices += child.slice_count
            domain.pod_count = pods
            domain.slice_count = pods // slice_size if at_slice_level else slices


def _minimum(domains: list[_Domain], count: int, slice_size: int, unconstrained: bool, slices: bool) -> list[_Domain]:
    """Kueue's ``updateCountsToMinimumGeneric`` without leaders: the fewest of ``domains`` (in order, the last
    one the best fit under BestFit) that hold ``count`` pods, their counts cut to what they take."""
    chosen: list[_Domain] = []
    remaining = count // slice_size if slices else count
    for position, candidate in enumerate(domains):
        domain = candidate
        have = domain.slice_count if slices else domain.pod_count
        if not unconstrained and have >= remaining:
            domain = _best_fit(domains[position:], remaining, slices)
            have = domain.slice_count if slices else domain.pod_count
        chosen.append(domain)
        if have >= remaining:
            if slices:
                domain.slice_count = remaining
                domain.pod_count = remaining * slice_size
            else:
                domain.pod_count = remaining
            return chosen
        if slices:
            domain.pod_count = have * slice_size
        remaining -= have
    return chosen
