"""Layers of slices (``podsetSliceRequiredTopologyConstraints``, Kueue's TASMultiLayerTopology, on by default since
v0.19): whole slices of each layer in one domain of its level, case by case from Kueue's
``TestFindTopologyAssignments`` (pkg/cache/scheduler/tas_cache_test.go); each test names the case it rewrites."""

from __future__ import annotations

import pytest

from kuota.engine.decoding import parse_topology_request
from kuota.engine.errors import InvalidObjectError
from kuota.engine.model import HOSTNAME_LABEL, PodSet, ResourceFlavor, Topology, TopologyNode, TopologyRequest
from kuota.engine.topology import TopologyAssignment, TopologySnapshot

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)


def hosts_of(*specs: tuple[str, str, int]) -> tuple[TopologyNode, ...]:
    """Nodes in block b1, each ``(rack, host, cpus)``."""
    return tuple(
        TopologyNode(host, {BLOCK: "b1", RACK: rack, HOSTNAME_LABEL: host}, {"cpu": cpus * 1000, "pods": 10})
        for rack, host, cpus in specs
    )


def place(nodes: tuple[TopologyNode, ...], count: int, *layers: tuple[str, int]) -> TopologyAssignment | str:
    snapshot = TopologySnapshot(Topology("default", LEVELS), ResourceFlavor("tas-flavor"), nodes)
    request = TopologyRequest(required=BLOCK, slice_layers=layers)
    placement = snapshot.place(PodSet("main", count, {"cpu": 1000}), count, request)
    return placement.reason if placement.assignment is None else placement.assignment


def hosts(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOSTNAME_LABEL,), tuple(((host,), count) for host, count in domains))


def test_rack_slices_of_four_made_of_host_slices_of_two() -> None:
    # "multi-layer topology: block required; rack slices of 4; host slices of 2; TASMultiLayerTopology"
    nodes = hosts_of(("r1", "x1", 1), ("r1", "x2", 4), ("r2", "x3", 3), ("r2", "x4", 4))
    assert place(nodes, 8, (RACK, 4), (HOSTNAME_LABEL, 2)) == hosts(("x2", 4), ("x3", 2), ("x4", 2))


def test_host_slices_rounded_down_leave_no_rack_slice() -> None:
    # "multi-layer topology: host slice rounding makes rack slice impossible"
    nodes = hosts_of(("r1", "x1", 3), ("r1", "x2", 3), ("r1", "x3", 0))
    assert place(nodes, 6, (RACK, 6), (HOSTNAME_LABEL, 2)) == (
        'topology "default" doesn\'t allow to fit; 0/1 slice(s) fit on level cloud.com/topology-rack; 2/3 slice(s) '
        'fit on level kubernetes.io/hostname. Total nodes: 3; excluded: resource "cpu": 1'
    )


def test_a_small_host_costs_its_rack_a_slice_despite_enough_capacity() -> None:
    # "multi-layer topology: small host kills rack slices despite enough total capacity"
    nodes = hosts_of(("r1", "x1", 7), ("r1", "x2", 4), ("r2", "x3", 7), ("r2", "x4", 3))
    assert place(nodes, 16, (RACK, 8), (HOSTNAME_LABEL, 4)) == (
        'topology "default" doesn\'t allow to fit; 1/2 slice(s) fit on level cloud.com/topology-rack; 3/4 slice(s) '
        "fit on level kubernetes.io/hostname"
    )


def test_enough_host_slices_but_too_few_rack_slices() -> None:
    # "multi-layer topology: enough hostname slices but not enough rack slices"
    nodes = hosts_of(("r1", "x1", 4), ("r2", "x2", 4), ("r3", "x3", 4))
    assert place(nodes, 12, (RACK, 6), (HOSTNAME_LABEL, 2)) == (
        'topology "default" doesn\'t allow to fit; 0/2 slice(s) fit on level cloud.com/topology-rack; 6/6 slice(s) '
        "fit on level kubernetes.io/hostname"
    )


@pytest.mark.parametrize(
    ("layers", "reason"),
    [
        (
            ((RACK, 4), ("example.com/zone", 2)),
            "no requested topology level for additional slice layer: example.com/zone",
        ),
        (
            ((RACK, 4), (BLOCK, 2)),
            "additional slice layer topology cloud.com/topology-block must be at a lower level than "
            "cloud.com/topology-rack",
        ),
        (((RACK, 4), (HOSTNAME_LABEL, 3)), "additional slice layer size 3 must evenly divide parent layer size 4"),
    ],
)
def test_inner_layers_that_do_not_fit_the_topology_are_named(layers: tuple[tuple[str, int], ...], reason: str) -> None:
    # Kueue's buildSliceSizeAtLevel reasons
    assert place(hosts_of(("r1", "x1", 4)), 4, *layers) == reason


def test_a_workloads_layers_are_read_from_its_topology_request() -> None:
    raw = {"required": BLOCK, "podsetSliceRequiredTopologyConstraints": [{"topology": RACK, "size": 4}]}
    assert parse_topology_request(raw, "topologyRequest") == TopologyRequest(required=BLOCK, slice_layers=((RACK, 4),))
    assert parse_topology_request({"podIndexLabel": "x"}, "topologyRequest") is None  # asks for nothing
    with pytest.raises(InvalidObjectError, match=r"podsetSliceRequiredTopologyConstraints\[0\]\.size"):
        parse_topology_request({"podsetSliceRequiredTopologyConstraints": [{"topology": RACK}]}, "topologyRequest")
