"""When a head topology-aware scheduling set aside is tried again: the topology refused it, so capacity freed on
its flavors' nodes wakes it, from any tree (the nodes are shared across cohorts); short of quota, it waits for its
quota as any head does. Each case would leave a workload pending forever if its wake were missing."""

from __future__ import annotations

from typing import Any

from kuota.engine.decoding import parse_object
from kuota.engine.model import HOSTNAME_LABEL, PodSet, Topology, TopologyNode, TopologyRequest
from kuota.engine.quota_engine import QuotaEngine
from tests.unit.engine.builders import admitted, cluster_queue, flavor, local_queue, quota, workload

RACK = "cloud.com/topology-rack"
GPU = "nvidia.com/gpu"


def _engine(**nominal: int) -> QuotaEngine:
    """Rack r1 of two 8-GPU nodes and rack r2 of one, one TAS flavor, and a ClusterQueue of its own (no cohort:
    a tree of its own) per keyword with that nominal quota."""
    engine = QuotaEngine()
    engine.apply(Topology("default", (RACK, HOSTNAME_LABEL)))
    tas_flavor = flavor("tas", {"pool": "gpu"})
    tas_flavor["spec"]["topologyName"] = "default"
    engine.apply(parse_object(tas_flavor))
    for name, gpus in nominal.items():
        engine.apply(parse_object(cluster_queue(name, {"tas": [quota(GPU, gpus)]})))
        engine.apply(parse_object(local_queue(name, name)))
    for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2")):
        labels = {"pool": "gpu", RACK: rack, HOSTNAME_LABEL: name}
        engine.apply_node(TopologyNode(name, labels, {GPU: 8, "pods": 110}))
    return engine


def _gang(namespace: str, name: str, count: int, *, at: float) -> Any:
    pod_set = PodSet("main", count, {GPU: 8}, topology_request=TopologyRequest(required=RACK))
    return workload(namespace, name, at=at, pod_sets=(pod_set,))


def test_a_rack_freed_by_another_tree_admits_the_gang_the_topology_refused() -> None:
    engine = _engine(left=48, right=48)
    engine.submit(_gang("right", "holder", 2, at=1.0))
    assert admitted(engine.schedule(1.0)) == ["right/holder"]
    engine.submit(_gang("left", "waiting", 2, at=2.0))
    assert admitted(engine.schedule(2.0)) == []
    reason = engine.status("left/waiting").reason
    assert reason is not None and "allows to fit only 1 out of 2 pod(s)" in reason
    # Its own tree frees no quota: only the capacity of the nodes, shared with "right", can wake it.
    engine.finish("right/holder")
    assert admitted(engine.schedule(3.0)) == ["left/waiting"]


def test_a_non_tas_pod_leaving_wakes_a_gang_that_fits_no_rack_even_with_every_tas_workload_gone() -> None:
    engine = _engine(solo=48)
    engine.apply_pod_usage("other/pod", "n1", {GPU: 1})
    engine.submit(_gang("solo", "gang", 2, at=1.0))
    assert admitted(engine.schedule(1.0)) == []
    engine.delete_pod_usage("other/pod")
    assert admitted(engine.schedule(2.0)) == ["solo/gang"]


def test_a_gang_short_of_quota_waits_for_its_quota_as_any_head_does() -> None:
    # 24 GPUs of quota: the second gang is short of quota, not of a rack, while the first runs; the one-pod
    # workload behind it fits both and goes (to n3, the fullest rack that holds it).
    engine = _engine(solo=24)
    engine.submit(_gang("solo", "first", 2, at=1.0))
    engine.submit(_gang("solo", "second", 2, at=2.0))
    engine.submit(_gang("solo", "one", 1, at=3.0))
    assert admitted(engine.schedule(3.0)) == ["solo/first", "solo/one"]
    reason = engine.status("solo/second").reason
    assert reason is not None and "topology" not in reason
    engine.finish("solo/first")
    assert admitted(engine.schedule(4.0)) == ["solo/second"]


def test_a_gang_asking_for_another_topology_is_not_held_behind_a_head_the_topology_refused() -> None:
    # Kueue tries each workload of a BestEffortFIFO queue on its own; two gangs of one size and requests but
    # different topology requests place differently, so one refused says nothing of the other.
    engine = _engine(solo=48)
    engine.apply_pod_usage("other/pod", "n1", {GPU: 8})
    engine.submit(_gang("solo", "one-rack", 2, at=1.0))
    preferred = PodSet("main", 2, {GPU: 8}, topology_request=TopologyRequest(preferred=RACK))
    engine.submit(workload("solo", "any-rack", at=2.0, pod_sets=(preferred,)))
    assert admitted(engine.schedule(2.0)) == ["solo/any-rack"]
