"""Topology-aware scheduling in the admission cycle: which pod sets need a placement, where they go, and the
TAS usage each admitted workload holds on the nodes, Kueue's way (pkg/scheduler/flavorassigner/
tas_flavorassigner.go and the TAS steps of flavorassigner.go and preemption.go).

After the flavor walk, a workload whose quota fits is placed (the pod sets of one group on one flavor together, as
a leader and its workers); when it does not fit the topology, it is placed
again as if no TAS workload were admitted: if it fits so, preemption may free the right domains (its mode becomes
PREEMPT, short of its TAS flavors' resources); if not, nothing can (NO_FIT). Either way the assignment says the
topology refused it, so that it waits for capacity freed on its flavors' nodes rather than for quota. Victims are
chosen until the placement fits with their usage gone (``VictimCheck``). Capacity is shared by every
ClusterQueue whose flavors name the same nodes, across cohorts: capacity freed on a flavor's nodes (``release``,
``forget_pod``) wakes the heads waiting for that flavor in every tree.
"""

from __future__ import annotations

from collections.abc import Mapping

from kuota.engine.flavor_assignment import Assignment, Mode, PodSetAssignment, tas_only
from kuota.engine.model import ClusterQueue, PodSet, ResourceFlavor, Topology, TopologyNode, Workload
from kuota.engine.quota_tree import FlavorResource
from kuota.engine.topology import TopologyAssignment, TopologySnapshot, with_one_pod

# Kueue's words before a pod set's placement failure.
_COULD_NOT = "couldn't assign flavors to pod set"
# One admitted pod set's hold on a flavor's nodes: the flavor, where its pods went and one pod's requests.
_Held = tuple[str, TopologyAssignment, Mapping[str, int]]


class TopologyPlacer:
    """The engine's TAS state: the Topologies, the nodes, the bound pods that are not TAS pods, a snapshot per
    TAS flavor, and what each admitted workload holds there."""

    def __init__(self) -> None:
        self.topologies: dict[str, Topology] = {}
        self.nodes: dict[str, TopologyNode] = {}
        self.flavors: Mapping[str, ResourceFlavor] = {}
        self._snapshots: dict[str, TopologySnapshot] | None = None
        self._held: dict[str, list[_Held]] = {}
        # Per bound pod that is not a TAS pod (by its key): its node and its requests.
        self._non_tas_pods: dict[str, tuple[str, Mapping[str, int]]] = {}
        self._tas_flavors: dict[str, tuple[str, ...]] = {}  # per ClusterQueue

    def configure(self, flavors: Mapping[str, ResourceFlavor]) -> None:
        """The flavors, topologies or nodes changed: the snapshots are built again on their next use."""
        self.flavors = flavors
        self._snapshots = None
        self._tas_flavors = {}

    def _snapshot(self, flavor: str) -> TopologySnapshot | None:
        snapshots = self._snapshots
        if snapshots is None:
            snapshots = self._snapshots = {}
            nodes = sorted(self.nodes.values(), key=lambda n: n.name)
            for name, model in self.flavors.items():
                topology = None if model.topology_name is None else self.topologies.get(model.topology_name)
                if topology is not None:
                    snapshots[name] = TopologySnapshot(topology, model, nodes)
            for node, requests in self._non_tas_pods.values():
                for built in snapshots.values():
                    built.add_node_usage(node, requests)
            for held in self._held.values():
                for flavor_name, assignment, requests in held:
                    found = snapshots.get(flavor_name)
                    if found is not None:
                        found.add_usage(assignment, requests)
        return snapshots.get(flavor)

    def uses_topology(self, cluster_queue: ClusterQueue) -> bool:
        """Whether some flavor of ``cluster_queue`` is a TAS flavor: only then is anything placed."""
        return bool(self.tas_flavors(cluster_queue))

    def tas_flavors(self, cluster_queue: ClusterQueue) -> tuple[str, ...]:
        """The TAS flavors of ``cluster_queue``, in its order."""
        known = self._tas_flavors.get(cluster_queue.name)
        if known is None:
            names = [flavor.name for group in cluster_queue.resource_groups for flavor in group.flavors]
            known = self._tas_flavors[cluster_queue.name] = tuple(
                dict.fromkeys([name for name in names if self._is_tas(name)])
            )
        return known

    def flavors_on(self, node: str) -> tuple[str, ...]:
        """The TAS flavors whose trees hold ``node`` (none while no placement has built them)."""
        if self._snapshots is None:
            return ()
        return tuple(name for name, snapshot in self._snapshots.items() if snapshot.has_node(node))

    def settle(self, cluster_queue: ClusterQueue, workload: Workload, assignment: Assignment) -> Assignment:
        """``assignment`` with its TAS pod sets placed when it fits; else with the mode and reason Kueue gives a
        workload whose quota fits but whose topology does not."""
        if assignment.mode is Mode.NO_FIT or not self.uses_topology(cluster_queue):
            return assignment
        if assignment.mode is Mode.FIT:
            placed, reason = self.place(cluster_queue, workload, assignment.pod_sets)
            if placed is not None:
                return with_pod_sets(assignment, placed)
        else:
            reason = ""
        emptied, empty_reason = self.place(cluster_queue, workload, assignment.pod_sets, simulate_empty=True)
        if emptied is None:
            return _refused(assignment, Mode.NO_FIT, empty_reason, never_fits=False)
        if assignment.mode is Mode.PREEMPT:
            return assignment
        return _refused(assignment, Mode.PREEMPT, reason, never_fits=False)

    def place(
        self,
        cluster_queue: ClusterQueue,
        workload: Workload,
        pod_sets: tuple[PodSetAssignment, ...],
        *,
        simulate_empty: bool = False,
    ) -> tuple[tuple[PodSetAssignment, ...] | None, str]:
        """The pod set assignments with their topology, or None and the first pod set's reason. The pod sets of
        one group (``podSetGroupName``) on one flavor are placed together, the one with fewer pods as the leader
        (Kueue's ``FindTopologyAssignmentsForFlavor``)."""
        implied: bool | None = None  # asked only for a pod set without a topology request
        flavors: list[str | None] = []
        for pod_set, assigned in zip(workload.pod_sets, pod_sets, strict=True):
            if implied is None and pod_set.topology_request is None:
                implied = tas_only(cluster_queue, self.flavors)
            flavors.append(self._tas_flavor(pod_set, assigned, bool(implied)))
        assumed: dict[str, dict[tuple[str, ...], dict[str, int]]] = {}
        placed = list(pod_sets)
        done: set[int] = set()
        for index, flavor in enumerate(flavors):
            if flavor is None or index in done:
                continue
            pod_set = workload.pod_sets[index]
            snapshot = self._snapshot(flavor)
            if snapshot is None:
                return None, f'{_COULD_NOT} {pod_set.name}: Flavor "{flavor}" information missing in TAS cache'
            on_flavor = assumed.setdefault(flavor, {})
            group = pod_set.topology_request.group if pod_set.topology_request is not None else None
            members = [index]
            if group is not None:
                members += [
                    other
                    for other in range(index + 1, len(flavors))
                    if flavors[other] == flavor and _group_of(workload.pod_sets[other]) == group
                ]
            done.update(members)
            if len(members) == 1:
                placement = snapshot.place(
                    pod_set,
                    pod_sets[index].count,
                    pod_set.topology_request,
                    simulate_empty=simulate_empty,
                    assumed=on_flavor,
                )
                if placement.assignment is None:
                    return None, f"{_COULD_NOT} {pod_set.name}: {placement.reason}"
                found = [(index, placement.assignment)]
            else:
                grouped, reason = self._place_group(snapshot, workload, pod_sets, members, simulate_empty, on_flavor)
                if grouped is None:
                    return None, f"{_COULD_NOT} {pod_set.name}: {reason}"
                found = grouped
            # The workload's pod sets still to place go around these.
            more = any(other not in done for other in range(index + 1, len(flavors)) if flavors[other] is not None)
            for member, topology in found:
                assigned = pod_sets[member]
                if more:
                    _assume(on_flavor, topology, workload.pod_sets[member].requests)
                placed[member] = PodSetAssignment(
                    assigned.name, assigned.flavors, assigned.count, assigned.usage, topology
                )
        return tuple(placed), ""

    @staticmethod
    def _place_group(  # noqa: PLR0917 (one group's placement inputs)
        snapshot: TopologySnapshot,
        workload: Workload,
        pod_sets: tuple[PodSetAssignment, ...],
        members: list[int],
        simulate_empty: bool,
        assumed: dict[tuple[str, ...], dict[str, int]],
    ) -> tuple[list[tuple[int, TopologyAssignment]] | None, str]:
        """A pod set group's placement: Kueue's ``findLeaderAndWorkers`` (the second pod set leads unless it has
        more pods than the first) and its leader-aware placement."""
        group = _group_of(workload.pod_sets[members[0]])
        if len(members) != 2:
            return None, f'pod set group "{group}" has {len(members)} pod sets on one flavor; a group has 2'
        workers, leader = members
        if pod_sets[leader].count > pod_sets[workers].count:
            workers, leader = leader, workers
        if pod_sets[leader].count != 1:
            return None, (
                f'pod set group "{group}" needs a pod set of 1 pod (its leader), got {pod_sets[workers].count} and '
                f"{pod_sets[leader].count} pods"
            )
        worker_set = workload.pod_sets[workers]
        placement = snapshot.place_group(
            worker_set,
            pod_sets[workers].count,
            workload.pod_sets[leader],
            worker_set.topology_request,
            simulate_empty=simulate_empty,
            assumed=assumed,
        )
        if placement.workers is None or placement.leader is None:
            return None, placement.reason
        return sorted([(workers, placement.workers), (leader, placement.leader)], key=lambda pair: pair[0]), ""

    def _tas_flavor(self, pod_set: PodSet, assigned: PodSetAssignment, implied: bool) -> str | None:
        if assigned.count == 0 or (pod_set.topology_request is None and not implied):
            return None
        for flavor in sorted(set(assigned.flavors.values())):
            model = self.flavors.get(flavor)
            if model is not None and model.topology_name is not None:
                return flavor
        return None

    def count_pod(self, key: str, node: str, requests: Mapping[str, int]) -> None:
        """A bound pod that is not a TAS pod takes ``requests`` (and one pod) of ``node``."""
        counted = (node, dict(requests))
        if self._non_tas_pods.get(key) == counted:
            return
        self.forget_pod(key)
        self._non_tas_pods[key] = counted
        if self._snapshots is not None:
            for snapshot in self._snapshots.values():
                snapshot.add_node_usage(node, requests)

    def forget_pod(self, key: str) -> str | None:
        """The pod finished, left its node or became a TAS pod: its node's capacity is free. The node it was
        counted on (None: it was not counted)."""
        counted = self._non_tas_pods.pop(key, None)
        if counted is None:
            return None
        if self._snapshots is not None:
            for snapshot in self._snapshots.values():
                snapshot.remove_node_usage(*counted)
        return counted[0]

    def hold(self, key: str, workload: Workload, pod_sets: tuple[PodSetAssignment, ...]) -> None:
        """An admitted workload's placements take their nodes' capacity."""
        held: list[_Held] = []
        for pod_set, assigned in zip(workload.pod_sets, pod_sets, strict=True):
            topology = assigned.topology
            if topology is None:
                continue
            flavor = next(f for f in sorted(set(assigned.flavors.values())) if self._is_tas(f))
            held.append((flavor, topology, pod_set.requests))
        if not held:
            return
        self._held[key] = held
        if self._snapshots is not None:
            self._change(held, 1)

    def release(self, key: str) -> tuple[str, ...]:
        """The workload left: its placements free their capacity. The flavors it held capacity on."""
        held = self._held.pop(key, None)
        if held is None:
            return ()
        if self._snapshots is not None:
            self._change(held, -1)
        return tuple(dict.fromkeys([flavor for flavor, _, _ in held]))

    def holds(self, key: str) -> bool:
        return key in self._held

    def _is_tas(self, flavor: str) -> bool:
        model = self.flavors.get(flavor)
        return model is not None and model.topology_name is not None

    def _change(self, held: list[_Held], sign: int) -> None:
        for flavor, assignment, requests in held:
            snapshot = self._snapshot(flavor)
            if snapshot is None:
                continue
            if sign > 0:
                snapshot.add_usage(assignment, requests)
            else:
                snapshot.remove_usage(assignment, requests)

    def take(self, key: str) -> None:
        """Preemption's simulation: ``key``'s placements freed, for ``give_back`` to restore."""
        held = self._held.get(key)
        if held is not None:
            self._change(held, -1)

    def give_back(self, key: str) -> None:
        held = self._held.get(key)
        if held is not None:
            self._change(held, 1)


def _group_of(pod_set: PodSet) -> str | None:
    request = pod_set.topology_request
    return None if request is None else request.group


def _assume(
    assumed: dict[tuple[str, ...], dict[str, int]], topology: TopologyAssignment, requests: Mapping[str, int]
) -> None:
    """Counts a pod set just placed in ``assumed``, the usage its workload's later pod sets place around."""
    one_pod = with_one_pod(requests)
    for values, count in topology.domains:
        leaf = assumed.setdefault(values, {})
        for resource, amount in one_pod.items():
            leaf[resource] = leaf.get(resource, 0) + amount * count


class VictimCheck:
    """What ``preemption.fewest_victims`` asks of the topology while it tries victims: it fits once the
    preemptor can be placed with the tried victims' placements gone."""

    def __init__(
        self, placer: TopologyPlacer, cluster_queue: ClusterQueue, workload: Workload, assignment: Assignment
    ) -> None:
        self.placer = placer
        self.cluster_queue = cluster_queue
        self.workload = workload
        self.assignment = assignment

    def take(self, key: str) -> None:
        self.placer.take(key)

    def give_back(self, key: str) -> None:
        self.placer.give_back(key)

    def fits(self) -> bool:
        placed, _ = self.placer.place(self.cluster_queue, self.workload, self.assignment.pod_sets)
        return placed is not None


def with_pod_sets(assignment: Assignment, pod_sets: tuple[PodSetAssignment, ...]) -> Assignment:
    """``assignment`` with its pod sets placed."""
    return Assignment(
        pod_sets,
        assignment.mode,
        assignment.borrowing,
        assignment.usage,
        assignment.reasons,
        assignment.short,
        assignment.never_fits,
        assignment.short_needs,
        assignment.probed,
    )


def _refused(assignment: Assignment, mode: Mode, reason: str, *, never_fits: bool) -> Assignment:
    # Preemption has to free the TAS flavors' resources the workload takes, whatever the quota says.
    short: frozenset[FlavorResource] = frozenset(assignment.usage)
    return Assignment(
        assignment.pod_sets,
        mode,
        assignment.borrowing,
        assignment.usage,
        (*assignment.reasons, reason),
        short,
        never_fits,
        assignment.short_needs,
        assignment.probed,
        topology_refused=True,
    )
