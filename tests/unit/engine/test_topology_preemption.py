"""Topology-aware scheduling in every preemption path: classic, hierarchical (nested cohorts) and fair sharing
take victims until the preemptor's placement fits, not only its quota, as Kueue's ``workloadFits`` and
``workloadFitsForFairSharing`` do (pkg/scheduler/preemption/preemption.go: both place the workload with the
candidates removed). Kueue's own TAS preemption case is "low priority workload is preempted even though there
is enough capacity, but fragmented" (TestScheduleForTASPreemption, pkg/scheduler/scheduler_tas_test.go); its
hierarchical and fair-sharing tests have no TAS case, so here that case is played through each path."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.engine.decoding import parse_object
from kuota.engine.model import (
    HOSTNAME_LABEL,
    Configuration,
    FairSharing,
    PodSet,
    Topology,
    TopologyNode,
    TopologyRequest,
)
from kuota.engine.quota_engine import QuotaEngine
from kuota.engine.topology import TopologyAssignment
from tests.unit.engine.builders import API, admitted, cluster_queue, evicted, flavor, local_queue, quota, workload

RACK = "cloud.com/topology-rack"
GPU = "nvidia.com/gpu"
RECLAIM_ANY = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}


def _cohort(name: str, parent: str | None = None) -> dict[str, Any]:
    spec = {} if parent is None else {"parentName": parent}
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def _engine(path: str) -> QuotaEngine:
    """Rack r1 of three 8-GPU nodes (n1, n2, n4) and rack r2 of one (n3); ClusterQueue ``lender`` owns more GPUs
    than the nodes have and ``borrower`` none, in one cohort (``classic``, ``fair``) or with ``lender`` in a
    sub-cohort ``c`` of ``r`` (``hierarchical``)."""
    engine = QuotaEngine(Configuration(fair_sharing=FairSharing()) if path == "fair" else None)
    engine.apply(Topology("default", (RACK, HOSTNAME_LABEL)))
    tas_flavor = flavor("tas", {"pool": "gpu"})
    tas_flavor["spec"]["topologyName"] = "default"
    engine.apply(parse_object(tas_flavor))
    lender_cohort, borrower_cohort = ("c", "r") if path == "hierarchical" else ("pool", "pool")
    if path == "hierarchical":
        engine.apply(parse_object(_cohort("r")))
        engine.apply(parse_object(_cohort("c", "r")))
    for name, nominal, cohort in (("lender", 40, lender_cohort), ("borrower", 0, borrower_cohort)):
        queue = cluster_queue(name, {"tas": [quota(GPU, nominal)]}, cohort=cohort, preemption=RECLAIM_ANY)
        engine.apply(parse_object(queue))
        engine.apply(parse_object(local_queue(name, name)))
    for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2"), ("n4", "r1")):
        labels = {"pool": "gpu", RACK: rack, HOSTNAME_LABEL: name}
        engine.apply_node(TopologyNode(name, labels, {GPU: 8, "pods": 110}))
    return engine


def _gang(namespace: str, name: str, count: int, *, at: float, priority: int = 0) -> Any:
    pod_set = PodSet("main", count, {GPU: 8}, topology_request=TopologyRequest(required=RACK))
    return workload(namespace, name, at=at, priority=priority, pod_sets=(pod_set,))


def _hosts(engine: QuotaEngine, key: str) -> tuple[str, ...]:
    admission = engine.admission(key)
    assert admission is not None
    topology = admission.assignment.pod_sets[0].topology
    assert isinstance(topology, TopologyAssignment)
    return tuple(values[0] for values, _ in topology.domains)


@pytest.mark.parametrize("path", ["classic", "hierarchical", "fair"])
def test_every_preemption_path_takes_victims_until_the_gang_fits_its_rack(path: str) -> None:
    engine = _engine(path)
    # The borrower's one-pod workloads: the first fills rack r2 (BestFit: the fullest rack that holds it), the
    # next two take n1 and n2 of rack r1.
    for index, (name, priority) in enumerate((("on-r2", 5), ("low", 0), ("mid", 1))):
        engine.submit(_gang("borrower", name, 1, at=float(index), priority=priority))
        assert admitted(engine.schedule(float(index))) == [f"borrower/{name}"]
    assert [_hosts(engine, f"borrower/{name}") for name in ("on-r2", "low", "mid")] == [("n3",), ("n1",), ("n2",)]
    # The lender's gang needs all of rack r1. Its quota is short of 8 GPUs, which evicting "low" (first in
    # victim order) frees; but only with "mid" gone too does r1 hold three pods, and "on-r2" frees no rack.
    engine.submit(_gang("lender", "gang", 3, at=10.0, priority=10))
    decisions = engine.schedule(10.0)
    assert evicted(decisions) == ["borrower/low", "borrower/mid"]
    assert admitted(decisions) == ["lender/gang"]
    assert _hosts(engine, "lender/gang") == ("n1", "n2", "n4")


def test_a_flavor_walk_probing_preemption_on_a_tas_queue_asks_about_quota_alone() -> None:
    # kuota's own: the probe that tells the walk whether preempting in the first flavor would help has no pod
    # sets to place (it raised ValueError from the placement); the walk goes on to the second flavor.
    engine = QuotaEngine()
    engine.apply(Topology("default", (RACK, HOSTNAME_LABEL)))
    for name in ("tas-a", "tas-b"):
        tas_flavor = flavor(name, {"pool": name})
        tas_flavor["spec"]["topologyName"] = "default"
        engine.apply(parse_object(tas_flavor))
        engine.apply_node(TopologyNode(name, {"pool": name, RACK: "r1", HOSTNAME_LABEL: name}, {GPU: 8, "pods": 110}))
    flavors = {"tas-a": [quota(GPU, 8)], "tas-b": [quota(GPU, 8)]}
    engine.apply(parse_object(cluster_queue("cq", flavors, preemption={"withinClusterQueue": "LowerPriority"})))
    engine.apply(parse_object(local_queue("ns", "cq")))
    engine.submit(_gang("ns", "low", 1, at=1.0))
    assert admitted(engine.schedule(1.0)) == ["ns/low"]
    engine.submit(_gang("ns", "high", 1, at=2.0, priority=5))
    decisions = engine.schedule(2.0)
    assert (admitted(decisions), evicted(decisions)) == (["ns/high"], [])
    assert _hosts(engine, "ns/high") == ("tas-b",)
