"""A Node as topology-aware placement sees it: its labels, its allocatable resources in engine units, its taints,
whether it is Ready and schedulable (Kueue's TAS node cache). Pure: the Node's JSON in, a ``TopologyNode`` out.

What bound pods that are not TAS pods request is not subtracted yet: every allocatable unit counts as free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kuota.engine import Taint, TaintEffect, TopologyNode, parse_quantity


def topology_node(node: Mapping[str, Any]) -> TopologyNode:
    """``node`` (a v1 Node) for the engine; an allocatable quantity that does not parse counts as none of it."""
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    free: dict[str, int] = {}
    for resource, amount in (status.get("allocatable") or {}).items():
        try:
            free[str(resource)] = parse_quantity(str(resource), amount)
        except ValueError:
            continue
    taints = tuple(
        Taint(str(taint.get("key", "")), str(taint.get("value", "")), TaintEffect(taint["effect"]))
        for taint in spec.get("taints") or []
        if taint.get("effect") in TaintEffect.__members__.values()
    )
    ready = any(
        condition.get("type") == "Ready" and condition.get("status") == "True"
        for condition in status.get("conditions") or []
    )
    return TopologyNode(
        str(metadata.get("name", "")),
        dict(metadata.get("labels") or {}),
        free,
        taints,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
    )


def node_essence(node: Mapping[str, Any]) -> dict[str, Any]:
    """The copy the controller keeps of a Node: what :func:`topology_node` reads (a Node's status is mostly
    images and addresses)."""
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    return {
        "metadata": {
            "name": metadata.get("name"),
            "labels": metadata.get("labels") or {},
            "resourceVersion": metadata.get("resourceVersion"),
        },
        "spec": {
            "taints": (node.get("spec") or {}).get("taints") or [],
            "unschedulable": (node.get("spec") or {}).get("unschedulable", False),
        },
        "status": {
            "allocatable": status.get("allocatable") or {},
            "conditions": [c for c in status.get("conditions") or [] if c.get("type") == "Ready"],
        },
    }
