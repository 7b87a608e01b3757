"""Failed-node replacement for an admitted TAS pod set, case by case from Kueue's ``TestScheduleForTAS``
(pkg/scheduler/scheduler_tas_test.go, the "workload with unhealthyNode annotation; second pass" cases): only the
pods of the failed node move, confined to the domain of the required level that holds the pods that stay."""

from __future__ import annotations

import pytest

from kuota.engine.decisions import EvictionReason
from kuota.engine.decoding import parse_object
from kuota.engine.errors import UnknownObjectError
from kuota.engine.model import (
    HOSTNAME_LABEL,
    PodSet,
    ResourceFlavor,
    Topology,
    TopologyNode,
    TopologyRequest,
    Workload,
)
from kuota.engine.quota_engine import QuotaEngine
from kuota.engine.topology import TopologyAssignment, TopologySnapshot
from tests.unit.engine.builders import admitted, cluster_queue, flavor, local_queue, quota, workload

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
GI = 2**30


def node(block: str, rack: str, host: str, cpu: int, *, memory: int = GI, pods: int = 10) -> TopologyNode:
    labels = {BLOCK: block, RACK: rack, HOSTNAME_LABEL: host}
    return TopologyNode(f"{block}-{rack}-{host}", labels, {"cpu": cpu, "memory": memory, "pods": pods}, ())


# The scheduler test's defaultNodes: five 1-cpu hosts and one 2-cpu host; the failed x0 is none of them (gone
# from the snapshot, as a node that is not Ready is).
DEFAULT_NODES = (
    node("b1", "r1", "x1", 1000),
    node("b1", "r2", "x2", 1000),
    node("b1", "r2", "x3", 1000),
    node("b1", "r2", "x4", 1000),
    node("b2", "r1", "x5", 1000),
    node("b2", "r2", "x6", 2000, memory=4 * GI, pods=40),
)


def hosts(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOSTNAME_LABEL,), tuple(((host,), count) for host, count in domains))


def replace(
    request: TopologyRequest,
    admitted: TopologyAssignment,
    requests: dict[str, int],
    *others: tuple[TopologyAssignment, dict[str, int]],
) -> TopologyAssignment | str:
    """Replaces node x0 in ``admitted``, held on the nodes with ``others`` (admitted pod sets beside it)."""
    snapshot = TopologySnapshot(
        Topology("tas-three-level", (BLOCK, RACK, HOSTNAME_LABEL)), ResourceFlavor("tas-default"), DEFAULT_NODES
    )
    snapshot.add_usage(admitted, requests)
    for assignment, held in others:
        snapshot.add_usage(assignment, held)
    pod_set = PodSet("one", sum(count for _, count in admitted.domains), requests)
    placement = snapshot.replace_node(pod_set, request, admitted, "x0")
    return placement.reason if placement.assignment is None else placement.assignment


def test_a_lone_pod_moves_to_the_tightest_healthy_host() -> None:
    # "workload with unhealthyNode annotation; second pass; baseline scenario"
    assert replace(TopologyRequest(preferred=HOSTNAME_LABEL), hosts(("x0", 1)), {"cpu": 1000}) == hosts(("x1", 1))


def test_preferred_rack_joins_the_pod_that_stays_where_it_fits() -> None:
    # "workload with unhealthyNode annotation; second pass; preferred; fit in different rack"
    admitted = hosts(("x0", 1), ("x1", 1))
    assert replace(TopologyRequest(preferred=RACK), admitted, {"cpu": 500}) == hosts(("x1", 2))


def test_preferred_rack_with_no_node_able_to_hold_the_pod_says_why() -> None:
    # "workload with unhealthyNode annotation; second pass; preferred; no fit" (and "...; no fit; FailFast", whose
    # eviction follows from this reason)
    assert replace(TopologyRequest(preferred=RACK), hosts(("x0", 1)), {"cpu": 3000}) == (
        'topology "tas-three-level" doesn\'t allow to fit any of 1 pod(s). Total nodes: 6; excluded: resource "cpu": 6'
    )


def test_every_request_of_the_pod_decides_where_it_moves() -> None:
    # "workload with unhealthyNode annotation; second pass; podspec constraints apply"
    moved = replace(TopologyRequest(preferred=RACK), hosts(("x0", 1)), {"cpu": 1000, "memory": 2 * GI})
    assert moved == hosts(("x6", 1))


def test_required_rack_moves_the_pod_into_the_rack_of_the_pods_that_stay() -> None:
    # "workload with unhealthyNode annotation; second pass; required rack; fit"
    admitted = hosts(("x0", 1), ("x2", 1))
    assert replace(TopologyRequest(required=RACK), admitted, {"cpu": 1000}) == hosts(("x2", 1), ("x3", 1))


def test_required_rack_of_a_single_pod_on_the_failed_node_may_go_to_any_rack() -> None:
    # "workload with unhealthyNode annotation; second pass; required rack for a single node; fit"
    assert replace(TopologyRequest(required=RACK), hosts(("x0", 1)), {"cpu": 1000}) == hosts(("x1", 1))


def test_required_rack_without_room_left_in_it_fails_counting_the_other_domains() -> None:
    # "workload with unhealthyNode annotation; second pass; required rack; no fit"
    admitted = hosts(("x0", 1), ("x1", 1))
    assert replace(TopologyRequest(required=RACK), admitted, {"cpu": 1000}) == (
        'topology "tas-three-level" doesn\'t allow to fit any of 1 pod(s). Total nodes: 6; excluded: '
        'resource "cpu": 1, topologyDomain: 5'
    )


def test_the_pods_of_another_pod_set_keep_their_node() -> None:
    # "workload with unhealthyNode annotation; second pass; two podsets": pod set two holds x1
    preferred = TopologyRequest(preferred=HOSTNAME_LABEL)
    other = (hosts(("x1", 1)), {"cpu": 1000})
    assert replace(preferred, hosts(("x0", 1)), {"cpu": 1000}, other) == hosts(("x2", 1))


def test_an_assignment_without_the_failed_node_is_kept_as_it_is() -> None:
    admitted = hosts(("x1", 1), ("x2", 1))
    assert replace(TopologyRequest(required=BLOCK), admitted, {"cpu": 1000}) == admitted


def test_an_assignment_naming_another_node_gone_cannot_be_repaired() -> None:
    # Kueue's IsTopologyAssignmentStale in findReplacementAssignment
    admitted = hosts(("x0", 1), ("x9", 1))
    assert replace(TopologyRequest(required=RACK), admitted, {"cpu": 1000}) == (
        "Cannot replace the node, because the existing topologyAssignment is invalid, as it contains the stale "
        "domain x9"
    )


GPU = "nvidia.com/gpu"


def gpu_node(name: str, rack: str, *, ready: bool = True) -> TopologyNode:
    return TopologyNode(name, {"pool": "gpu", RACK: rack, HOSTNAME_LABEL: name}, {GPU: 8, "pods": 110}, ready=ready)


def tas_engine() -> QuotaEngine:
    """Kuota's test cluster: three 8-GPU nodes, n1 and n2 in rack r1, n3 in rack r2; quota to spare."""
    engine = QuotaEngine()
    engine.apply(Topology("default", (RACK, HOSTNAME_LABEL)))
    tas_flavor = flavor("tas", {"pool": "gpu"})
    tas_flavor["spec"]["topologyName"] = "default"
    engine.apply(parse_object(tas_flavor))
    engine.apply(parse_object(cluster_queue("cq", {"tas": [quota(GPU, 48)]})))
    engine.apply(parse_object(local_queue("ns", "cq")))
    for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2")):
        engine.apply_node(gpu_node(name, rack))
    return engine


def gang(name: str, count: int, *, at: float, gpus: int = 8) -> Workload:
    pod_set = PodSet("main", count, {GPU: gpus}, topology_request=TopologyRequest(required=RACK))
    return workload("ns", name, at=at, pod_sets=(pod_set,))


def placement(engine: QuotaEngine, key: str) -> TopologyAssignment | None:
    admission = engine.admission(key)
    assert admission is not None
    return admission.assignment.pod_sets[0].topology


def test_an_admitted_rack_gang_moves_off_its_failed_node_within_its_rack() -> None:
    # Kueue's "workload with unhealthyNode annotation; second pass; required rack; fit", on kuota's cluster: the
    # gang holds n1 and the rack's n2 has room once the other workload there finished.
    engine = tas_engine()
    engine.apply_pod_usage("other/holder", "n3", {GPU: 8})
    engine.submit(gang("first", 1, at=1.0))
    assert admitted(engine.schedule(2.0)) == ["ns/first"]
    engine.submit(gang("pair", 2, at=3.0, gpus=4))
    assert admitted(engine.schedule(4.0)) == ["ns/pair"]
    assert placement(engine, "ns/first") == hosts(("n1", 1))
    assert placement(engine, "ns/pair") == hosts(("n2", 2))
    engine.finish("ns/first")
    engine.apply_node(gpu_node("n2", "r1", ready=False))
    replaced = engine.replace_node("ns/pair", "n2")
    assert not isinstance(replaced, str)
    assert replaced[0].topology == hosts(("n1", 2))
    assert placement(engine, "ns/pair") == hosts(("n1", 2))
    # The new placement holds n1: a gang that needs a whole node of rack r1 waits.
    engine.submit(gang("late", 1, at=5.0))
    assert admitted(engine.schedule(6.0)) == []


def test_an_admitted_rack_gang_with_no_room_left_in_its_rack_is_told_why_and_evicted() -> None:
    # Kueue's "workload with unhealthyNode annotation; second pass; required rack; no fit" and, FailFast being on
    # by default, its eviction with reason NodeFailures.
    engine = tas_engine()
    engine.submit(gang("pair", 2, at=1.0))
    assert admitted(engine.schedule(2.0)) == ["ns/pair"]
    assert placement(engine, "ns/pair") == hosts(("n1", 1), ("n2", 1))
    engine.apply_node(gpu_node("n1", "r1", ready=False))
    assert engine.replace_node("ns/pair", "n1") == (
        "couldn't assign flavors to pod set main: topology \"default\" doesn't allow to fit any of 1 pod(s). "
        'Total nodes: 2; excluded: resource "nvidia.com/gpu": 1, topologyDomain: 1'
    )
    assert placement(engine, "ns/pair") == hosts(("n1", 1), ("n2", 1))
    eviction = engine.evict("ns/pair", EvictionReason.NODE_FAILURES, 3.0)
    assert eviction.reason is EvictionReason.NODE_FAILURES
    assert engine.admission("ns/pair") is None


def test_replacing_a_node_of_a_workload_not_admitted_is_an_unknown_object() -> None:
    engine = tas_engine()
    with pytest.raises(UnknownObjectError, match="ns/ghost"):
        engine.replace_node("ns/ghost", "n1")
