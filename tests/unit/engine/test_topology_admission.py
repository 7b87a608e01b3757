"""Topology-aware scheduling through the engine's admission cycle: quota that fits is not enough, the gang must
fit one domain; preemption frees the right domain. Cases follow Kueue's ``TestScheduleForTAS`` and
``TestScheduleForTASPreemption`` (pkg/scheduler/scheduler_tas_test.go), each citing the case."""

from __future__ import annotations

import pytest

from kuota.engine.decoding import parse_object
from kuota.engine.errors import UnknownObjectError
from kuota.engine.model import HOSTNAME_LABEL, PodSet, Topology, TopologyNode, TopologyRequest
from kuota.engine.quota_engine import QuotaEngine
from kuota.engine.topology import TopologyAssignment
from tests.unit.engine.builders import admitted, cluster_queue, evicted, flavor, local_queue, quota, workload

RACK = "cloud.com/topology-rack"
GPU = "nvidia.com/gpu"


def tas_engine(*, nominal: int = 48, preemption: dict[str, str] | None = None) -> QuotaEngine:
    """Kuota's test cluster: three 8-GPU nodes, two in rack r1 and one in rack r2, one TAS flavor; quota for
    more GPUs than the nodes have, so that only the topology refuses."""
    engine = QuotaEngine()
    engine.apply(Topology("default", (RACK, HOSTNAME_LABEL)))
    tas_flavor = flavor("tas", {"pool": "gpu"})
    tas_flavor["spec"]["topologyName"] = "default"
    engine.apply(parse_object(tas_flavor))
    spec = {} if preemption is None else {"preemption": preemption}
    engine.apply(parse_object(cluster_queue("cq", {"tas": [quota(GPU, nominal)]}, **spec)))
    engine.apply(parse_object(local_queue("ns", "cq")))
    for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2")):
        labels = {"pool": "gpu", RACK: rack, HOSTNAME_LABEL: name}
        engine.apply_node(TopologyNode(name, labels, {GPU: 8, "pods": 110}))
    return engine


def gang(name: str, count: int, *, at: float, priority: int = 0, level: str | None = RACK) -> object:
    request = None if level is None else TopologyRequest(required=level)
    pod_set = PodSet("main", count, {GPU: 8}, topology_request=request)
    return workload("ns", name, at=at, priority=priority, pod_sets=(pod_set,))


def placement(engine: QuotaEngine, key: str) -> TopologyAssignment | None:
    admission = engine.admission(key)
    assert admission is not None
    return admission.assignment.pod_sets[0].topology


def hosts(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOSTNAME_LABEL,), tuple(((host,), count) for host, count in domains))


def test_second_rack_gang_waits_with_the_topology_message_though_quota_fits() -> None:
    # The issue's story; Kueue: "workload does not get scheduled as the node capacity is already used by another
    # TAS workload" (TestScheduleForTAS).
    engine = tas_engine()
    engine.submit(gang("a", 2, at=1.0))  # type: ignore[arg-type]
    engine.submit(gang("b", 2, at=2.0))  # type: ignore[arg-type]
    assert admitted(engine.schedule(3.0)) == ["ns/a"]
    assert placement(engine, "ns/a") == hosts(("n1", 1), ("n2", 1))
    reason = engine.status("ns/b").reason
    assert reason is not None
    assert reason == (
        'couldn\'t assign flavors to pod set main: topology "default" allows to fit only 1 out of 2 pod(s). '
        'Total nodes: 3; excluded: resource "nvidia.com/gpu": 2'
    )
    engine.submit(gang("c", 1, at=4.0))  # type: ignore[arg-type]
    assert admitted(engine.schedule(5.0)) == ["ns/c"]
    assert placement(engine, "ns/c") == hosts(("n3", 1))


def test_a_finished_gang_frees_its_rack_for_the_waiting_one() -> None:
    # kuota's own: the waiting head is woken when a TAS workload leaves.
    engine = tas_engine()
    engine.submit(gang("a", 2, at=1.0))  # type: ignore[arg-type]
    engine.submit(gang("b", 2, at=2.0))  # type: ignore[arg-type]
    assert admitted(engine.schedule(3.0)) == ["ns/a"]
    engine.finish("ns/a")
    assert admitted(engine.schedule(4.0)) == ["ns/b"]
    assert placement(engine, "ns/b") == hosts(("n1", 1), ("n2", 1))


def test_a_non_tas_pod_on_a_node_sends_the_rack_gang_to_the_other_rack_until_it_goes() -> None:
    # Kueue's non-TAS pod cache (pkg/cache/scheduler/tas_non_tas_pod_cache.go): a bound pod outside TAS takes
    # its node's GPUs; the 1-pod gang that would take the fuller rack r1 lands on r2, and a 2-pod gang waits
    # until the pod goes, which wakes it.
    engine = tas_engine()
    engine.apply_pod_usage("other/holder", "n3", {GPU: 4})
    engine.apply_pod_usage("other/holder", "n3", {GPU: 4})  # the same pod seen again counts once
    engine.apply_pod_usage("other/sidecar", "n1", {GPU: 4})
    engine.submit(gang("one", 1, at=1.0))  # type: ignore[arg-type]
    engine.submit(gang("two", 2, at=2.0))  # type: ignore[arg-type]
    assert admitted(engine.schedule(3.0)) == ["ns/one"]
    assert placement(engine, "ns/one") == hosts(("n2", 1))
    reason = engine.status("ns/two").reason
    assert reason is not None
    assert reason.endswith('Total nodes: 3; excluded: resource "nvidia.com/gpu": 2')  # n1 and n3, half taken
    engine.delete_pod_usage("other/sidecar")
    engine.finish("ns/one")
    assert admitted(engine.schedule(4.0)) == ["ns/two"]
    assert placement(engine, "ns/two") == hosts(("n1", 1), ("n2", 1))


def test_a_non_tas_pod_going_wakes_the_waiting_gang() -> None:
    engine = tas_engine()
    for name in ("n1", "n3"):
        engine.apply_pod_usage(f"other/{name}", name, {GPU: 1})
    engine.submit(gang("two", 2, at=1.0))  # type: ignore[arg-type]
    assert admitted(engine.schedule(2.0)) == []
    engine.delete_pod_usage("other/n1")
    assert admitted(engine.schedule(3.0)) == ["ns/two"]


def test_deleting_a_pod_never_counted_is_an_unknown_object() -> None:
    engine = tas_engine()
    with pytest.raises(UnknownObjectError, match="other/ghost"):
        engine.delete_pod_usage("other/ghost")


def test_a_gang_larger_than_any_rack_never_fits_even_with_everything_preempted() -> None:
    # "workload does not get scheduled as it does not fit within the node capacity" (TestScheduleForTAS): no
    # preemption can help.
    engine = tas_engine(preemption={"withinClusterQueue": "LowerPriority"})
    engine.submit(gang("big", 3, at=1.0))  # type: ignore[arg-type]
    assert admitted(engine.schedule(2.0)) == []
    reason = engine.status("ns/big").reason
    assert reason is not None
    assert "allows to fit only 2 out of 3 pod(s)" in reason


def test_preemption_frees_the_rack_the_gang_needs() -> None:
    # "low priority workload is preempted even though there is enough capacity, but fragmented"
    # (TestScheduleForTASPreemption), on kuota's racks: quota has room
    # (48 GPUs, 16 used) but no rack does; the victim is the one whose node lets the gang into a rack.
    engine = tas_engine(preemption={"withinClusterQueue": "LowerPriority"})
    engine.submit(gang("low-r2", 1, at=1.0))  # type: ignore[arg-type]
    assert admitted(engine.schedule(2.0)) == ["ns/low-r2"]
    engine.submit(gang("low-r1", 1, at=3.0, priority=1))  # type: ignore[arg-type]
    assert admitted(engine.schedule(4.0)) == ["ns/low-r1"]
    assert placement(engine, "ns/low-r2") == hosts(("n3", 1))
    assert placement(engine, "ns/low-r1") == hosts(("n1", 1))
    # Victim order tries low-r2 first (lowest priority), but only low-r1's node frees a rack for the gang.
    engine.submit(gang("gang", 2, at=5.0, priority=10))  # type: ignore[arg-type]
    decisions = engine.schedule(6.0)
    assert evicted(decisions) == ["ns/low-r1"]
    assert admitted(decisions) == ["ns/gang"]
    assert placement(engine, "ns/gang") == hosts(("n1", 1), ("n2", 1))


def test_a_node_added_to_a_rack_admits_the_waiting_gang() -> None:
    # kuota's own: the "a node added changes the next decision".
    engine = tas_engine()
    engine.submit(gang("a", 2, at=1.0))  # type: ignore[arg-type]
    engine.submit(gang("b", 2, at=2.0))  # type: ignore[arg-type]
    assert admitted(engine.schedule(3.0)) == ["ns/a"]
    labels = {"pool": "gpu", RACK: "r2", HOSTNAME_LABEL: "n4"}
    engine.apply_node(TopologyNode("n4", labels, {GPU: 8, "pods": 110}))
    assert admitted(engine.schedule(4.0)) == ["ns/b"]
    assert placement(engine, "ns/b") == hosts(("n3", 1), ("n4", 1))


def test_implied_tas_places_a_workload_without_a_request_on_a_tas_only_queue() -> None:
    # "workload which does not specify TAS annotation uses the only TAS flavor" (TestScheduleForTAS)
    engine = tas_engine()
    engine.submit(gang("plain", 3, at=1.0, level=None))  # type: ignore[arg-type]
    assert admitted(engine.schedule(2.0)) == ["ns/plain"]
    assert placement(engine, "ns/plain") == hosts(("n1", 1), ("n2", 1), ("n3", 1))


CUSTOM = "cloud.com/custom-level"


def custom_level_engine() -> QuotaEngine:
    """Kueue's setup for the cases below: one node labelled for both topologies; the queue's first TAS flavor
    uses a hostname-only Topology, its second a Topology of one custom level."""
    engine = QuotaEngine()
    engine.apply(Topology("default", (HOSTNAME_LABEL,)))
    engine.apply(Topology("custom", (CUSTOM,)))
    for name, topology in (("tas-default", "default"), ("tas-custom", "custom")):
        tas_flavor = flavor(name, {"tas-node": "true"})
        tas_flavor["spec"]["topologyName"] = topology
        engine.apply(parse_object(tas_flavor))
    engine.apply(parse_object(cluster_queue("cq", {"tas-default": [quota("cpu", 50)]})))
    engine.apply(parse_object(local_queue("ns", "cq")))
    labels = {"tas-node": "true", HOSTNAME_LABEL: "x1", CUSTOM: "x1"}
    engine.apply_node(TopologyNode("x1", labels, {"cpu": 1, "pods": 10}))
    return engine


def one_pod_at(level: str) -> object:
    pod_set = PodSet("one", 1, {"cpu": 1}, topology_request=TopologyRequest(required=level))
    return workload("ns", "foo", at=1.0, pod_sets=(pod_set,))


def test_a_flavor_whose_topology_lacks_the_requested_level_is_skipped_with_kueues_message() -> None:
    # Kueue: "workload requests topology level which is not present in topology" (TestScheduleForTAS); the reason
    # is worded as kuota's flavor walk words every flavor it skips.
    engine = custom_level_engine()
    engine.submit(one_pod_at("cloud.com/non-existing"))  # type: ignore[arg-type]
    assert admitted(engine.schedule(2.0)) == []
    assert engine.status("ns/foo").reason == 'pod set one: Flavor "tas-default" does not contain the requested level'


def test_the_flavor_walk_goes_on_to_the_flavor_whose_topology_has_the_level() -> None:
    # Kueue: "workload requests topology level which is only present in second flavor" (TestScheduleForTAS).
    engine = custom_level_engine()
    engine.apply(
        parse_object(cluster_queue("cq", {"tas-default": [quota("cpu", 50)], "tas-custom": [quota("cpu", 50)]}))
    )
    engine.submit(one_pod_at(CUSTOM))  # type: ignore[arg-type]
    assert admitted(engine.schedule(2.0)) == ["ns/foo"]
    admission = engine.admission("ns/foo")
    assert admission is not None
    assert admission.assignment.pod_sets[0].flavors == {"cpu": "tas-custom"}
    assert placement(engine, "ns/foo") == TopologyAssignment((CUSTOM,), ((("x1",), 1),))
