"""Pod set groups (``podSetGroupName``: a leader of one pod and its workers) placed together, case by case from
Kueue's ``TestFindTopologyAssignments`` (pkg/cache/scheduler/tas_cache_test.go), ``TestAssignFlavors``
(pkg/scheduler/flavorassigner/flavorassigner_test.go) and its job webhooks' ``ValidatePodSetGroupingTopology``; each
test names the case it rewrites, or says it is kuota's own."""

from __future__ import annotations

import pytest

from kuota.engine.decoding import parse_object
from kuota.engine.model import HOSTNAME_LABEL, PodSet, ResourceFlavor, Topology, TopologyNode, TopologyRequest
from kuota.engine.quota_engine import QuotaEngine
from kuota.engine.topology import GroupPlacement, TopologyAssignment, TopologySnapshot, pod_set_group_problem
from tests.unit.engine.builders import admitted, cluster_queue, evicted, flavor, local_queue, quota, workload

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
GPU = "example.com/gpu"


def host(name: str, block: str, rack: str, cpu: int, gpu: int = 0) -> TopologyNode:
    labels = {BLOCK: block, RACK: rack, HOSTNAME_LABEL: name}
    return TopologyNode(name, labels, {"cpu": cpu, GPU: gpu, "pods": 10})


def snapshot(nodes: tuple[TopologyNode, ...], levels: tuple[str, ...]) -> TopologySnapshot:
    return TopologySnapshot(Topology("default", levels), ResourceFlavor("tas-flavor"), nodes)


def on(levels: tuple[str, ...], *domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment(levels, tuple(((value,), count) for value, count in domains))


def hosts(*domains: tuple[str, int]) -> TopologyAssignment:
    return on((HOSTNAME_LABEL,), *domains)


def group(
    placing: TopologySnapshot,
    workers: tuple[int, dict[str, int]],
    leader: dict[str, int],
    request: TopologyRequest,
) -> GroupPlacement:
    count, requests = workers
    worker_set = PodSet("workers", count, requests, topology_request=request)
    leader_set = PodSet("leader", 1, leader, topology_request=request)
    return placing.place_group(worker_set, count, leader_set, request)


def test_the_leader_goes_where_it_costs_the_workers_nothing() -> None:
    # "find topology assignment for grouped podsets preserves worker capacity when placing leader"
    nodes = (host("h1", "b1", "r1", 2000), host("h2", "b1", "r1", 4000), host("h3", "b1", "r1", 3000))
    placed = group(snapshot(nodes, (RACK, HOSTNAME_LABEL)), (4, {"cpu": 2000}), {"cpu": 1000}, TopologyRequest(RACK))
    assert placed.reason == ""
    assert placed.leader == hosts(("h3", 1))
    assert placed.workers == hosts(("h1", 1), ("h2", 2), ("h3", 1))


def test_the_domain_that_holds_leader_and_workers_tightly_wins() -> None:
    # "find topology assignment for two podsets with the same group with domains that can tightly fit leader and
    # workers"
    nodes = tuple(
        TopologyNode(name, {BLOCK: name}, {"cpu": size * 1000, GPU: size, "pods": 10})
        for name, size in (("b1", 2), ("b2", 8), ("b3", 2))
    )
    placed = group(
        snapshot(nodes, (BLOCK,)), (4, {"cpu": 1000, GPU: 2}), {"cpu": 1000}, TopologyRequest(required=BLOCK)
    )
    assert placed.leader == on((BLOCK,), ("b2", 1))
    assert placed.workers == on((BLOCK,), ("b2", 4))


def test_a_rack_where_only_the_workers_fit_without_the_leader_is_skipped() -> None:
    # "find topology assignment for grouped podsets skips domain where only workers fit without leader": the two
    # pod sets have one pod each, so the second leads; a filler pod outside TAS takes most of small-used.
    nodes = (
        host("small-used", "b1", "small", 2800),
        host("small-free", "b1", "small", 2800),
        host("large-free", "b1", "large", 6000),
    )
    placing = snapshot(nodes, (BLOCK, RACK, HOSTNAME_LABEL))
    placing.add_node_usage("small-used", {"cpu": 2500})
    placed = group(placing, (1, {"cpu": 2500}), {"cpu": 2500}, TopologyRequest(required=RACK))
    assert placed.leader == hosts(("large-free", 1))
    assert placed.workers == hosts(("large-free", 1))


def test_a_leader_that_fits_nowhere_fails_the_group_with_the_workers_count() -> None:
    # "find topology assignment for two podsets with the same group - leader does not fit anywhere"
    nodes = tuple(TopologyNode(name, {BLOCK: name}, {"cpu": 4000, GPU: 4, "pods": 10}) for name in ("b1", "b2"))
    placed = group(
        snapshot(nodes, (BLOCK,)), (4, {"cpu": 1000, GPU: 1}), {"cpu": 10_000}, TopologyRequest(required=BLOCK)
    )
    assert (placed.workers, placed.leader) == (None, None)
    assert placed.reason == 'topology "default" allows to fit only 4 out of 4 pod(s)'


def test_sliced_workers_spread_from_the_leaders_host() -> None:
    # "BestFit: podset group workers spread across hosts"
    nodes = (
        host("x1", "b1", "r1", 20_000, 4),
        host("x2", "b1", "r1", 20_000, 2),
        host("x3", "b1", "r1", 20_000, 2),
        host("x4", "b1", "r1", 20_000, 2),
    )
    request = TopologyRequest(preferred=BLOCK, slice_level=HOSTNAME_LABEL, slice_size=2)
    placed = group(snapshot(nodes, (BLOCK, RACK, HOSTNAME_LABEL)), (6, {"cpu": 1000, GPU: 1}), {"cpu": 1000}, request)
    assert placed.leader == hosts(("x1", 1))
    assert placed.workers == hosts(("x1", 4), ("x2", 2))


def tas_engine(
    flavors: dict[str, list[dict[str, object]]] | None = None, preemption: dict[str, str] | None = None
) -> QuotaEngine:
    """Three nodes of 8 GPUs and 8 cpus, n1 and n2 in rack r1, n3 in rack r2, under TAS flavors (``tas`` unless
    named) with quota for more GPUs than the nodes have."""
    engine = QuotaEngine()
    engine.apply(Topology("default", (RACK, HOSTNAME_LABEL)))
    flavors = flavors or {"tas": [quota(GPU, 48)]}
    for name in flavors:
        tas_flavor = flavor(name, {"pool": "gpu"})
        tas_flavor["spec"]["topologyName"] = "default"
        engine.apply(parse_object(tas_flavor))
    spec = {} if preemption is None else {"preemption": preemption}
    engine.apply(parse_object(cluster_queue("cq", flavors, **spec)))
    engine.apply(parse_object(local_queue("ns", "cq")))
    for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2")):
        labels = {"pool": "gpu", RACK: rack, HOSTNAME_LABEL: name}
        engine.apply_node(TopologyNode(name, labels, {GPU: 8, "cpu": 8000, "pods": 110}))
    return engine


def grouped(
    name: str, leader: dict[str, int], workers: tuple[int, dict[str, int]], *, at: float = 1.0, priority: int = 0
) -> object:
    request = TopologyRequest(required=RACK, group="g")
    pod_sets = (
        PodSet("leader", 1, leader, topology_request=request),
        PodSet("worker", workers[0], workers[1], topology_request=request),
    )
    return workload("ns", name, at=at, priority=priority, pod_sets=pod_sets)


def placements(engine: QuotaEngine, key: str) -> dict[str, TopologyAssignment | None]:
    admission = engine.admission(key)
    assert admission is not None
    return {pod_set.name: pod_set.topology for pod_set in admission.assignment.pod_sets}


def test_a_leader_and_its_worker_share_a_rack_where_one_by_one_they_would_split() -> None:
    # kuota's own, on its test racks: alone, the 4-GPU leader would take the fullest rack that holds it (r2) and
    # the 8-GPU worker would find no room left there; as a group both land in r1.
    engine = tas_engine()
    engine.submit(grouped("lws", {GPU: 4}, (1, {GPU: 8})))  # type: ignore[arg-type]
    assert admitted(engine.schedule(2.0)) == ["ns/lws"]
    assert placements(engine, "ns/lws") == {"leader": hosts(("n2", 1)), "worker": hosts(("n1", 1))}


def test_a_group_preempts_only_what_frees_one_rack_for_its_leader_and_worker() -> None:
    # kuota's own, after Kueue's "low priority workload is preempted even though there is enough capacity, but
    # fragmented" (TestScheduleForTASPreemption): n2 alone is free; the group needs a rack holding both its 8-GPU
    # worker and its 4-GPU leader. The lowest-priority pod, on n3, is tried first but frees no such rack; the pod
    # on n1 does, and goes alone.
    engine = tas_engine(preemption={"withinClusterQueue": "LowerPriority"})
    rack = TopologyRequest(required=RACK)
    for name, at, priority in (("low-a", 1.0, 0), ("low-b", 2.0, 1), ("low-c", 3.0, 1)):
        pod_sets = (PodSet("main", 1, {GPU: 8}, topology_request=rack),)
        engine.submit(workload("ns", name, at=at, priority=priority, pod_sets=pod_sets))
        assert admitted(engine.schedule(at)) == [f"ns/{name}"]
    engine.finish("ns/low-c")
    holders = {name: placements(engine, f"ns/{name}")["main"] for name in ("low-a", "low-b")}
    assert holders == {"low-a": hosts(("n3", 1)), "low-b": hosts(("n1", 1))}
    engine.submit(grouped("lws", {GPU: 4}, (1, {GPU: 8}), at=5.0, priority=10))  # type: ignore[arg-type]
    decisions = engine.schedule(6.0)
    assert evicted(decisions) == ["ns/low-b"]
    assert admitted(decisions) == ["ns/lws"]
    assert placements(engine, "ns/lws") == {"leader": hosts(("n2", 1)), "worker": hosts(("n1", 1))}


def test_a_leader_asking_for_nothing_the_queue_covers_gets_the_groups_tas_flavor_and_a_place() -> None:
    # "leader without a managed request infers the group's TAS flavor" (TestAssignFlavors), then placed beside
    # its workers.
    engine = tas_engine()
    engine.submit(grouped("lws", {}, (2, {GPU: 8})))  # type: ignore[arg-type]
    assert admitted(engine.schedule(2.0)) == ["ns/lws"]
    admission = engine.admission("ns/lws")
    assert admission is not None
    leader = admission.assignment.pod_sets[0]
    assert (leader.name, dict(leader.flavors), dict(leader.usage)) == ("leader", {GPU: "tas"}, {})
    assert placements(engine, "ns/lws") == {"leader": hosts(("n1", 1)), "worker": hosts(("n1", 1), ("n2", 1))}


def test_a_group_takes_one_flavor_for_all_its_pod_sets_even_where_apart_they_would_fit() -> None:
    # "multiple flavors, leader worker set, workers request GPU, leader does not request GPU, does not fit,
    # without group it would fit" (TestAssignFlavors), on TAS flavors: together the group needs 5 cpus of flavor
    # one (4) or 4 GPUs of flavor two (0); apart, the workers take one and the leader two.
    engine = tas_engine({"one": [quota("cpu", 4), quota(GPU, 4)], "two": [quota("cpu", 5), quota(GPU, 0)]})
    request = TopologyRequest(required=RACK, group="group1")
    pod_sets = (
        PodSet("worker", 4, {"cpu": 1000, GPU: 1}, topology_request=request),
        PodSet("leader", 1, {"cpu": 1000}, topology_request=request),
    )
    engine.submit(workload("ns", "lws", at=1.0, pod_sets=pod_sets))
    assert admitted(engine.schedule(2.0)) == []
    apart = TopologyRequest(required=RACK)
    ungrouped = tuple(PodSet(p.name, p.count, p.requests, topology_request=apart) for p in pod_sets)
    engine.submit(workload("ns", "apart", at=3.0, pod_sets=ungrouped))
    assert admitted(engine.schedule(4.0)) == ["ns/apart"]
    admission = engine.admission("ns/apart")
    assert admission is not None
    assert [dict(p.flavors) for p in admission.assignment.pod_sets] == [{"cpu": "one", GPU: "one"}, {"cpu": "two"}]


def _pod_set(name: str, count: int, group: str | None, **level: str) -> PodSet:
    return PodSet(name, count, {}, topology_request=TopologyRequest(**level, group=group))


@pytest.mark.parametrize(
    ("pod_sets", "problem"),
    [
        ((_pod_set("a", 1, "g", required=RACK), _pod_set("b", 4, "g", required=RACK)), None),
        ((_pod_set("a", 1, "g", preferred=RACK), _pod_set("b", 1, "g", preferred=RACK)), None),
        (
            (_pod_set("a", 1, "g", required=RACK),),
            'pod set group "g": can only define groups of exactly 2 pod sets, got: 1',
        ),
        (
            (_pod_set("a", 2, "g", required=RACK), _pod_set("b", 3, "g", required=RACK)),
            'pod set group "g": one of its pod sets must have 1 pod, got: 2 and 3',
        ),
        (
            (_pod_set("a", 1, "g", required=RACK), _pod_set("b", 3, "g", preferred=RACK)),
            'pod set group "g": both pod sets must ask for the same required or preferred level',
        ),
        (
            (_pod_set("a", 1, "g", required=RACK), _pod_set("b", 3, "g", required=BLOCK)),
            'pod set group "g": both pod sets must ask for the same required or preferred level',
        ),
    ],
)
def test_a_group_is_two_pod_sets_one_of_one_pod_asking_the_same_level(
    pod_sets: tuple[PodSet, ...], problem: str | None
) -> None:
    # Kueue's ValidatePodSetGroupingTopology (pkg/controller/jobframework/tas_validation.go), for the simulator's
    # workloads.
    assert pod_set_group_problem(pod_sets) == problem
