"""Topology-aware placement: where in a Topology's tree of domains a pod set's pods go, Kueue's way.

Kueue v0.20's ``TASFlavorSnapshot`` (pkg/cache/scheduler/tas_flavor_snapshot.go) with its default feature gates: the
tree of one TAS ResourceFlavor is built from the nodes that carry the flavor's labels and every level label, Ready
and schedulable. Each leaf's free capacity is what its nodes can still give (allocatable minus the requests, plus
one pod each, of the bound pods that are not TAS pods: Kueue's non-TAS pod cache) minus the TAS assignments admitted
on it. A placement counts how many pods (and slices) fit in each leaf, sums the counts up the tree, picks a domain
at the requested level (BestFit: the fullest that still fits; LeastFreeCapacity for unconstrained requests) and
descends, at each level choosing the fewest domains. A required level fails when no single domain there fits; a
preferred one climbs a level; an unconstrained one spreads over as many domains as it needs.

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

    def exclusions(self) -> _Exclusions:
        found = _Exclusions()
        found.add(self.matched)
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

    def _place(
        self,
        pod_set: PodSet,
        count: int,
        request: TopologyRequest | None,
        simulate_empty: bool,
        assumed: dict[tuple[str, ...], dict[str, int]] | None,
    ) -> Placement:
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
        fill = self._fill(pod_set, simulate_empty, assumed, slice_size, slice_index)
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
        start = self.assignment_level
        domains = tuple(
            (domain.values[start:], pods) for domain, pods in sorted(chosen, key=lambda c: c[0].values) if pods > 0
        )
        return Placement(TopologyAssignment(levels[start:], domains), "")

    def _fill(
        self,
        pod_set: PodSet,
        simulate_empty: bool,
        assumed: dict[tuple[str, ...], dict[str, int]] | None,
        slice_size: int,
        slice_index: int,
    ) -> _Fill:
        """The counts of every domain for this placement: the kept fill of its inputs brought up to date with
        the leaves whose usage changed since, or (with ``assumed`` usage, or too far behind) counted afresh."""
        requests = with_one_pod(pod_set.requests)
        constraints = (tuple(sorted(pod_set.node_selector.items())), pod_set.tolerations, pod_set.node_affinity)
        key = (tuple(sorted(requests.items())), constraints, simulate_empty, slice_size, slice_index)
        now = self._log_start + len(self._changed)
        known = None if assumed else self._fills.get(key)
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
        if not assumed:
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
            return self._not_fit(max([slices[domain.index] for domain in domains]), needed, slice_size, fill)
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
            return self._not_fit(needed - remaining, needed, slice_size, fill)
        return index, chosen

    def _not_fit(self, fitting: int, needed: int, slice_size: int, fill: _Fill) -> str:
        unit = "pod" if slice_size == 1 else "slice"
        name = _go_quote(self.topology.name)
        if fitting == 0:
            head = f"topology {name} doesn't allow to fit any of {needed} {unit}(s)"
        else:
            head = f"topology {name} allows to fit only {fitting} out of {needed} {unit}(s)"
        return head + fill.exclusions().formatted()


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
