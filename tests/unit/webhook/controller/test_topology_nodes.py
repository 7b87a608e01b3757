"""A Node as topology-aware placement reads it (Kueue's TAS node cache)."""

from __future__ import annotations

from kuota.engine import Taint, TaintEffect, TopologyNode, topology_node
from kuota.webhook.controller.topology_nodes import node_essence

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
