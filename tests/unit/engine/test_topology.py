"""Topology-aware placement, case by case from Kueue's ``TestFindTopologyAssignments``
(pkg/cache/scheduler/tas_cache_test.go): each test names the case it rewrites."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.engine.decoding import parse_object
from kuota.engine.errors import InvalidObjectError
from kuota.engine.model import (
    HOSTNAME_LABEL,
    PodSet,
    ResourceFlavor,
    Taint,
    TaintEffect,
    Toleration,
    Topology,
    TopologyNode,
    TopologyRequest,
)
from kuota.engine.topology import TopologyAssignment, TopologySnapshot

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
THREE_LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)
TWO_LEVELS = (BLOCK, RACK)
GI = 2**30


def node(
    block: str, rack: str, host: str, cpu: int, *, memory: int = GI, pods: int = 10, **extra: object
) -> TopologyNode:
    labels = {BLOCK: block, RACK: rack, HOSTNAME_LABEL: host}
    labels.update({str(k): str(v) for k, v in extra.items() if k not in {"taints", "ready", "unschedulable"}})
    taints = extra.get("taints", ())
    assert isinstance(taints, tuple)
    return TopologyNode(
        f"{block}-{rack}-{host}",
        labels,
        {"cpu": cpu, "memory": memory, "pods": pods},
        taints,
        ready=bool(extra.get("ready", True)),
        unschedulable=bool(extra.get("unschedulable", False)),
    )


# Kueue's defaultNodes: five 1-cpu hosts and one 2-cpu host in two blocks.
DEFAULT_NODES = (
    node("b1", "r1", "x3", 1000),
    node("b1", "r2", "x5", 1000),
    node("b1", "r2", "x1", 1000),
    node("b1", "r2", "x6", 1000),
    node("b2", "r1", "x2", 1000),
    node("b2", "r2", "x4", 2000, memory=4 * GI, pods=40),
)
# Kueue's scatteredNodes: 6 cpus in block b1's one rack, 3 in b2's.
SCATTERED_NODES = (
    node("b1", "r1", "x3", 4000),
    node("b1", "r1", "x5", 1000),
    node("b1", "r1", "x1", 1000),
    node("b2", "r1", "x6", 2000),
    node("b2", "r1", "x2", 1000),
)
# Kueue's binaryTreesNodes: two blocks of two racks of two 1-cpu hosts.
BINARY_TREES_NODES = tuple(
    node(block, rack, host, 1000)
    for block, rack, host in (
        ("b1", "r1", "x3"),
        ("b1", "r1", "x5"),
        ("b1", "r2", "x1"),
        ("b1", "r2", "x6"),
        ("b2", "r1", "x2"),
        ("b2", "r1", "x4"),
        ("b2", "r2", "x7"),
        ("b2", "r2", "x8"),
    )
)


def snapshot(nodes: tuple[TopologyNode, ...], levels: tuple[str, ...]) -> TopologySnapshot:
    return TopologySnapshot(Topology("default", levels), ResourceFlavor("tas-flavor"), nodes)


def pods(count: int, cpu: int = 1000, **fields: Any) -> tuple[PodSet, int]:
    return PodSet("main", count, {"cpu": cpu}, **fields), count


def place(
    nodes: tuple[TopologyNode, ...],
    levels: tuple[str, ...],
    request: TopologyRequest | None,
    count: int,
    **fields: Any,
) -> TopologyAssignment | str:
    pod_set, count = pods(count, **fields)
    placement = snapshot(nodes, levels).place(pod_set, count, request)
    return placement.reason if placement.assignment is None else placement.assignment


def hosts(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOSTNAME_LABEL,), tuple(((host,), count) for host, count in domains))


def test_implied_tas_spreads_unconstrained_over_the_least_free_hosts() -> None:
    # "no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across the whole
    # datacenter even they could fit into single rack; BestFit"
    assert place(SCATTERED_NODES, THREE_LEVELS, None, 6) == hosts(("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2))


def test_unconstrained_spreads_even_when_one_rack_could_hold_every_pod() -> None:
    # "unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could fit into
    # single rack; BestFit"
    request = TopologyRequest(unconstrained=True)
    assert place(SCATTERED_NODES, THREE_LEVELS, request, 6) == hosts(
        ("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2)
    )


def test_unconstrained_single_pod_takes_the_first_least_free_host() -> None:
    # "unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed"
    assert place(DEFAULT_NODES, THREE_LEVELS, TopologyRequest(unconstrained=True), 1) == hosts(("x3", 1))


def test_block_required_puts_four_pods_on_four_hosts_of_one_block() -> None:
    # "block required; 4 pods fit into one host each; BestFit"
    request = TopologyRequest(required=BLOCK)
    assert place(BINARY_TREES_NODES, THREE_LEVELS, request, 4) == hosts(("x3", 1), ("x5", 1), ("x1", 1), ("x6", 1))


def test_host_required_single_pod_fits_in_the_host() -> None:
    # "host required; single Pod fits in the host; BestFit"
    assert place(DEFAULT_NODES, THREE_LEVELS, TopologyRequest(required=HOSTNAME_LABEL), 1) == hosts(("x3", 1))


def test_rack_required_single_pod_fits_in_a_rack() -> None:
    # "rack required; single Pod fits in a rack; BestFit"
    assert place(DEFAULT_NODES, TWO_LEVELS, TopologyRequest(required=RACK), 1) == TopologyAssignment(
        TWO_LEVELS, ((("b1", "r1"), 1),)
    )


def test_rack_required_multiple_pods_fit_in_a_rack() -> None:
    # "rack required; multiple Pods fit in a rack; BestFit"
    assert place(DEFAULT_NODES, TWO_LEVELS, TopologyRequest(required=RACK), 3) == TopologyAssignment(
        TWO_LEVELS, ((("b1", "r2"), 3),)
    )


def test_rack_required_best_fit_picks_the_tightest_rack() -> None:
    # "rack required; multiple Pods fit in some racks; BestFit"
    assert place(DEFAULT_NODES, TWO_LEVELS, TopologyRequest(required=RACK), 2) == TopologyAssignment(
        TWO_LEVELS, ((("b2", "r2"), 2),)
    )


def test_rack_required_fails_with_the_most_any_rack_fits() -> None:
    # "rack required; too many pods to fit in any rack; BestFit"
    reason = place(DEFAULT_NODES, TWO_LEVELS, TopologyRequest(required=RACK), 4)
    assert reason == 'topology "default" allows to fit only 3 out of 4 pod(s)'


def test_block_preferred_spreads_over_the_fewest_blocks() -> None:
    # "block preferred; Pods fit in 2 blocks; BestFit"
    nodes = tuple(
        TopologyNode(name, {BLOCK: name}, {"cpu": cpu, "pods": 10 * cpu // 1000})
        for name, cpu in (("b1", 2000), ("b2", 1000), ("b3", 4000))
    )
    assert place(nodes, (BLOCK,), TopologyRequest(preferred=BLOCK), 5) == TopologyAssignment(
        (BLOCK,), ((("b2",), 1), (("b3",), 4))
    )


def test_block_required_single_pod_which_cannot_be_split() -> None:
    # "block required; single Pod which cannot be split; BestFit"
    reason = place(DEFAULT_NODES, TWO_LEVELS, TopologyRequest(required=BLOCK), 1, cpu=4000)
    assert reason == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: resource "cpu": 4'
    )


def test_block_required_too_many_pods() -> None:
    # "block required; too many Pods to fit requested; BestFit"
    reason = place(DEFAULT_NODES, TWO_LEVELS, TopologyRequest(required=BLOCK), 5)
    assert reason == 'topology "default" allows to fit only 4 out of 5 pod(s)'


def test_rack_preferred_climbs_to_a_block_that_holds_the_workload() -> None:
    # "rack preferred; but only block can accommodate the workload; BestFit"
    assert place(DEFAULT_NODES, TWO_LEVELS, TopologyRequest(preferred=RACK), 4) == TopologyAssignment(
        TWO_LEVELS, ((("b1", "r1"), 1), (("b1", "r2"), 3))
    )


def test_rack_preferred_climbs_to_several_blocks_when_no_block_holds_it() -> None:
    # "rack preferred; but only multiple blocks can accommodate the workload; BestFit"
    assert place(DEFAULT_NODES, TWO_LEVELS, TopologyRequest(preferred=RACK), 6) == TopologyAssignment(
        TWO_LEVELS, ((("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2))
    )


def test_block_preferred_fails_when_the_whole_topology_cannot_hold_it() -> None:
    # "block preferred; but the workload cannot be accommodate in entire topology; BestFit"
    reason = place(DEFAULT_NODES, TWO_LEVELS, TopologyRequest(preferred=BLOCK), 10)
    assert reason == 'topology "default" allows to fit only 7 out of 10 pod(s)'


def test_node_not_ready_or_unschedulable_gives_nothing() -> None:
    # "no assignment as node is not ready; BestFit" and "no assignment as node is unschedulable; BestFit"
    for state in ({"ready": False}, {"unschedulable": True}):
        nodes = (node("b1", "r1", "x1", 1000, **state),)
        reason = place(nodes, THREE_LEVELS, TopologyRequest(required=BLOCK), 1)
        assert reason == "no topology domains at level: cloud.com/topology-block"


def test_detailed_failure_message_with_exclusion_stats() -> None:
    # "detailed failure message with exclusion stats"
    taint = Taint("key", "value", TaintEffect.NO_SCHEDULE)
    nodes = (
        TopologyNode("x1", {HOSTNAME_LABEL: "x1"}, {"cpu": 1000, "pods": 10}, (taint,)),
        TopologyNode("x2", {HOSTNAME_LABEL: "x2", "zone": "zone-b"}, {"cpu": 1000, "pods": 10}),
        TopologyNode("x3", {HOSTNAME_LABEL: "x3", "zone": "zone-b"}, {"cpu": 2000, "pods": 10}),
        TopologyNode("x4", {HOSTNAME_LABEL: "x4", "zone": "zone-a"}, {"cpu": 100, "pods": 10}),
    )
    reason = place(
        nodes, (HOSTNAME_LABEL,), TopologyRequest(required=HOSTNAME_LABEL), 1, node_selector={"zone": "zone-a"}
    )
    assert reason == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: nodeSelector: 2, '
        'resource "cpu": 1, taint "key=value:NoSchedule": 1'
    )


def test_tolerated_taint_allows_the_node() -> None:
    # "allow to schedule on node with tolerated taint; BestFit"
    taint = Taint("example.com/gpu", "present", TaintEffect.NO_SCHEDULE)
    nodes = (node("b1", "r1", "x1", 1000, taints=(taint,)),)
    toleration = Toleration("example.com/gpu", "Exists", "", TaintEffect.NO_SCHEDULE)
    found = place(nodes, THREE_LEVELS, TopologyRequest(required=BLOCK), 1, tolerations=(toleration,))
    assert found == hosts(("x1", 1))


def test_allocatable_pods_limit_the_count() -> None:
    # "no assignment as node does not have enough allocatable pods (.status.allocatable['pods']); BestFit"
    nodes = (node("b1", "r1", "x1", 1000, pods=0),)
    reason = place(nodes, THREE_LEVELS, TopologyRequest(required=BLOCK), 1, cpu=100)
    assert reason == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "pods": 1'
    )


def test_slices_go_to_the_tightest_block_and_fail_counted_in_slices() -> None:
    # "block required for podset; host required for slices; BestFit", in kuota's numbers: both blocks hold two
    # slices of 2 pods on their hosts, and the block with fewer free pods wins.
    nodes = (
        node("b1", "r1", "x1", 2000),
        node("b1", "r1", "x2", 1000),
        node("b1", "r2", "x3", 2000),
        node("b2", "r1", "x4", 4000),
    )
    request = TopologyRequest(required=BLOCK, slice_level=HOSTNAME_LABEL, slice_size=2)
    assert place(nodes, THREE_LEVELS, request, 4) == hosts(("x4", 4))
    assert place(nodes, THREE_LEVELS, request, 6) == 'topology "default" allows to fit only 2 out of 3 slice(s)'
    preferred = TopologyRequest(preferred=BLOCK, slice_level=HOSTNAME_LABEL, slice_size=2)
    # Below the block level the descent is greedy over every chosen block's racks: the fullest rack first, then
    # the tightest that holds the rest.
    assert place(nodes, THREE_LEVELS, preferred, 6) == hosts(("x3", 2), ("x4", 4))


def test_slice_size_missing_and_unknown_levels_are_named() -> None:
    missing = TopologyRequest(required=BLOCK, slice_level=HOSTNAME_LABEL)
    assert place(DEFAULT_NODES, THREE_LEVELS, missing, 2) == "slice topology requested, but slice size not provided"
    assert (
        place(DEFAULT_NODES, THREE_LEVELS, TopologyRequest(required="zone"), 1) == "no requested topology level: zone"
    )
    above = TopologyRequest(required=RACK, slice_level=BLOCK, slice_size=1)
    assert place(DEFAULT_NODES, THREE_LEVELS, above, 1) == (
        f"podset slice topology {BLOCK} is above the podset topology {RACK}"
    )


def test_admitted_usage_is_taken_and_simulate_empty_ignores_it() -> None:
    # "include usage from running non-TAS pods, blocked assignment; BestFit", with the usage admitted through TAS:
    # a full rack refuses the next pod unless every TAS workload is assumed gone (the preemption probe).
    tas = snapshot((node("b1", "r1", "x1", 1000),), THREE_LEVELS)
    pod_set, count = pods(1)
    first = tas.place(pod_set, count, TopologyRequest(required=RACK)).assignment
    assert first == hosts(("x1", 1))
    tas.add_usage(first, pod_set.requests)
    assert tas.place(pod_set, count, TopologyRequest(required=RACK)).reason == (
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1'
    )
    assert tas.place(pod_set, count, TopologyRequest(required=RACK), simulate_empty=True).assignment == first
    tas.remove_usage(first, pod_set.requests)
    assert tas.place(pod_set, count, TopologyRequest(required=RACK)).assignment == first


def test_nodes_without_the_flavor_labels_or_a_level_label_are_not_domains() -> None:
    # "only nodes with matching labels are considered; no matching node; BestFit" and "only nodes with matching
    # levels are considered; no host label on node; BestFit"
    flavor = ResourceFlavor("tas-flavor", {"zone": "zone-a"}, topology_name="default")
    labelled = node("b1", "r1", "x1", 1000, zone="zone-b")
    unlabelled = TopologyNode("x2", {BLOCK: "b1", RACK: "r1", "zone": "zone-a"}, {"cpu": 1000, "pods": 10})
    tas = TopologySnapshot(Topology("default", THREE_LEVELS), flavor, (labelled, unlabelled))
    pod_set, count = pods(1)
    placement = tas.place(pod_set, count, TopologyRequest(required=BLOCK))
    assert placement.reason == "no topology domains at level: cloud.com/topology-block"


def _topology(levels: list[str]) -> dict[str, object]:
    spec = {"levels": [{"nodeLabel": level} for level in levels]}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"}, "spec": spec}


def test_a_topology_decodes_its_levels_in_order() -> None:
    assert parse_object(_topology([BLOCK, RACK, HOSTNAME_LABEL])) == Topology("t", THREE_LEVELS)


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        (
            [HOSTNAME_LABEL, RACK],
            "Topology 't' is invalid: spec.levels: Invalid value: ['kubernetes.io/hostname', "
            "'cloud.com/topology-rack']: the kubernetes.io/hostname label can only be used at the lowest level of "
            "topology",
        ),
        (
            [f"level-{i}" for i in range(17)],
            "Topology 't' is invalid: spec.levels: Too many: 17: must have at most 16 items",
        ),
        (
            [RACK, RACK],
            "Topology 't' is invalid: spec.levels: Invalid value: ['cloud.com/topology-rack', "
            "'cloud.com/topology-rack']: must be unique",
        ),
    ],
)
def test_a_bad_topology_is_refused_in_one_line(levels: list[str], message: str) -> None:
    with pytest.raises(InvalidObjectError) as refused:
        parse_object(_topology(levels))
    assert str(refused.value) == message
    assert "\n" not in str(refused.value)


def test_a_snapshot_kept_through_admissions_releases_and_non_tas_pods_places_as_a_fresh_one() -> None:
    # The domain counts are updated leaf by leaf as usage changes: after every admission, release and non-TAS
    # pod bound or gone, each shape of request must be placed (or refused, with the same counts in the message),
    # with the admitted usage and as if none were admitted, exactly as a snapshot built afresh places it.
    nodes = tuple(
        node(f"b{block}", f"r{rack}", f"x{block}{rack}{host}", 1000 * (1 + host % 2))
        for block in range(2)
        for rack in range(3)
        for host in range(3)
    )
    kept = snapshot(nodes, THREE_LEVELS)
    shapes = [
        (PodSet("main", 2, {"cpu": 1000}), 2, TopologyRequest(required=RACK)),
        (PodSet("main", 5, {"cpu": 1000}), 5, TopologyRequest(preferred=RACK)),
        (PodSet("main", 4, {"cpu": 500}), 4, TopologyRequest(required=BLOCK, slice_level=RACK, slice_size=2)),
        (PodSet("main", 3, {"cpu": 1000}), 3, None),
    ]
    admitted: list[tuple[TopologyAssignment, PodSet]] = []
    non_tas: list[tuple[str, dict[str, int]]] = []
    refused = 0
    for step in range(60):
        if step % 3 == 2 and admitted:
            assignment, released = admitted.pop(step % len(admitted))
            kept.remove_usage(assignment, released.requests)
        if step % 4 == 1:
            bound = (nodes[(7 * step) % len(nodes)].name, {"cpu": 500})
            kept.add_node_usage(*bound)
            non_tas.append(bound)
        elif step % 8 == 3 and non_tas:
            kept.remove_node_usage(*non_tas.pop(step % len(non_tas)))
        pod_set, count, request = shapes[step % len(shapes)]
        fresh = snapshot(nodes, THREE_LEVELS)
        for assignment, held in admitted:
            fresh.add_usage(assignment, held.requests)
        for bound in non_tas:
            fresh.add_node_usage(*bound)
        emptied = kept.place(pod_set, count, request, simulate_empty=True)
        expected_emptied = fresh.place(pod_set, count, request, simulate_empty=True)
        assert (emptied.assignment, emptied.reason) == (expected_emptied.assignment, expected_emptied.reason)
        placement = kept.place(pod_set, count, request)
        expected = fresh.place(pod_set, count, request)
        assert (placement.assignment, placement.reason) == (expected.assignment, expected.reason)
        if placement.assignment is not None:
            kept.add_usage(placement.assignment, pod_set.requests)
            admitted.append((placement.assignment, pod_set))
        else:
            refused += 1
    assert len(admitted) > 3
    assert refused > 3
    assert non_tas


def test_a_non_tas_pod_takes_its_requests_and_one_pod_from_its_node() -> None:
    # Kueue's non-TAS pod cache: a bound pod outside TAS leaves its node only what it does not request, and one
    # pod fewer; once it goes, the node is whole again.
    nodes = (
        node("b1", "r1", "x1", 2000, pods=2),
        node("b1", "r2", "x2", 2000, pods=2),
    )
    kept = snapshot(nodes, THREE_LEVELS)
    two_pods, count = pods(2)
    rack = TopologyRequest(required=RACK)
    assert kept.place(two_pods, count, rack).assignment == hosts(("x1", 2))
    kept.add_node_usage("b1-r1-x1", {"cpu": 1000})
    assert kept.place(two_pods, count, rack).assignment == hosts(("x2", 2))
    kept.add_node_usage("b1-r2-x2", {})  # no requests, but it takes one of the node's two pods
    assert kept.place(two_pods, count, rack).reason == 'topology "default" allows to fit only 1 out of 2 pod(s)'
    kept.remove_node_usage("b1-r1-x1", {"cpu": 1000})
    assert kept.place(two_pods, count, rack).assignment == hosts(("x1", 2))


def test_a_non_tas_pod_on_a_node_outside_the_tree_changes_nothing() -> None:
    kept = snapshot((node("b1", "r1", "x1", 2000),), THREE_LEVELS)
    kept.add_node_usage("elsewhere", {"cpu": 2000})
    one_pod, count = pods(2)
    assert kept.place(one_pod, count, TopologyRequest(required=RACK)).assignment == hosts(("x1", 2))
