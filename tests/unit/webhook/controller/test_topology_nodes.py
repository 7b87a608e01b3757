"""A Node as topology-aware placement reads it (Kueue's TAS node cache), and the bound pods that take its capacity
outside TAS (Kueue's non-TAS pod cache)."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.engine import InvalidObjectError, Taint, TaintEffect, TopologyNode, pod_requests, topology_node
from kuota.webhook.controller.topology_nodes import bound_pod_essence, node_essence, takes_node_capacity

NODE = {
    "metadata": {"name": "n1", "labels": {"rack": "r1"}, "resourceVersion": "7", "managedFields": [{}]},
    "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
    "status": {
        "allocatable": {"cpu": "500m", "nvidia.com/gpu": "8", "pods": "110"},
        "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
        "images": [{"names": ["big"]}],
    },
}


def test_a_ready_node_gives_its_labels_allocatable_in_engine_units_and_taints() -> None:
    taint = Taint("nvidia.com/gpu", "present", TaintEffect.NO_SCHEDULE)
    wanted = TopologyNode("n1", {"rack": "r1"}, {"cpu": 500, "nvidia.com/gpu": 8, "pods": 110}, (taint,))
    assert topology_node(NODE) == wanted
    assert topology_node(node_essence(NODE)) == wanted


def test_a_cordoned_or_not_ready_node_says_so() -> None:
    cordoned = {**NODE, "spec": {"unschedulable": True}}
    assert topology_node(cordoned).unschedulable
    not_ready = {**NODE, "status": {**NODE["status"], "conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert not topology_node(not_ready).ready


POD: dict[str, Any] = {
    "metadata": {
        "name": "holder",
        "namespace": "other",
        "labels": {"app": "x"},
        "annotations": {"note": "big"},
        "resourceVersion": "9",
    },
    "spec": {
        "nodeName": "n1",
        "containers": [
            {"name": "a", "image": "i", "resources": {"requests": {"cpu": "500m"}, "limits": {"nvidia.com/gpu": "4"}}},
            {"name": "b", "image": "i", "resources": {"requests": {"cpu": "250m"}}},
        ],
        "initContainers": [{"name": "init", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
        "overhead": {"cpu": "100m"},
        "volumes": [{"name": "v"}],
    },
    "status": {"phase": "Running", "podIP": "10.0.0.1"},
}


def test_a_bound_running_pod_outside_tas_takes_its_effective_requests_from_its_node() -> None:
    # Kueue's belongsToNonTASCache; the larger of containers' sum and an init container, plus overhead.
    essence = bound_pod_essence(POD)
    assert takes_node_capacity(POD)
    assert takes_node_capacity(essence)
    assert pod_requests(essence) == pod_requests(POD) == {"cpu": 1100, "nvidia.com/gpu": 4}


@pytest.mark.parametrize(
    "annotation",
    [
        "kueue.x-k8s.io/podset-required-topology",
        "kueue.x-k8s.io/podset-preferred-topology",
        "kueue.x-k8s.io/podset-unconstrained-topology",
        "kueue.x-k8s.io/podset-slice-required-topology",
        "kueue.x-k8s.io/podset-slice-required-topology-constraints",
    ],
)
def test_a_pod_with_a_topology_annotation_is_a_tas_pod(annotation: str) -> None:
    tas = {**POD, "metadata": {**POD["metadata"], "annotations": {annotation: "rack"}}}
    assert not takes_node_capacity(tas)
    assert not takes_node_capacity(bound_pod_essence(tas))


def test_kuotas_implied_tas_pod_is_a_tas_pod_by_its_pod_set_label_and_workload_annotation() -> None:
    metadata = {
        **POD["metadata"],
        "labels": {"kueue.x-k8s.io/podset": "main"},
        "annotations": {"kueue.x-k8s.io/workload": "job-w"},
    }
    implied = {**POD, "metadata": metadata}
    assert not takes_node_capacity(implied)
    assert not takes_node_capacity(bound_pod_essence(implied))
    label_only = {**POD, "metadata": {**metadata, "annotations": {}}}
    assert takes_node_capacity(label_only)


@pytest.mark.parametrize(("node", "phase"), [("", "Pending"), ("n1", "Succeeded"), ("n1", "Failed")])
def test_an_unbound_or_finished_pod_takes_nothing(node: str, phase: str) -> None:
    pod = {**POD, "spec": {**POD["spec"], "nodeName": node}, "status": {"phase": phase}}
    assert not takes_node_capacity(pod)


def test_a_request_that_does_not_parse_is_one_error_naming_the_pod_and_field() -> None:
    broken = {**POD, "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "lots"}}}]}}
    with pytest.raises(InvalidObjectError, match=r"other/holder.*spec\.containers\[0\]\.resources\.requests"):
        pod_requests(bound_pod_essence(broken))
