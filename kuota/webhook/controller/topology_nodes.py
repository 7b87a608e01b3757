"""The copy the manager keeps of a Node: what ``kuota.engine.topology_node`` reads of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def node_essence(node: Mapping[str, Any]) -> dict[str, Any]:
    """A Node without what topology-aware placement never reads (a Node's status is mostly images and
    addresses): its name, labels, taints, unschedulable flag, allocatable resources and Ready condition."""
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    return {
        "metadata": {
            "name": metadata.get("name"),
            "labels": metadata.get("labels") or {},
            "resourceVersion": metadata.get("resourceVersion"),
        },
        "spec": {"taints": spec.get("taints") or [], "unschedulable": spec.get("unschedulable", False)},
        "status": {
            "allocatable": status.get("allocatable") or {},
            "conditions": [c for c in status.get("conditions") or [] if c.get("type") == "Ready"],
        },
    }
