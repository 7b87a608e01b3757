"""The copies the manager keeps for topology-aware scheduling: of a Node, what ``kuota.engine.topology_node``
reads of it; of a pod bound to a node, what says whether it takes that node's capacity outside TAS and what
``kuota.engine.pod_requests`` reads of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kuota.webhook.jobs.topology import POD_SET_LABEL, TAS_POD_ANNOTATIONS, WORKLOAD_ANNOTATION

# A pod that kube-scheduler bound and that has not finished (Kueue's non-TAS pod cache skips the others).
BOUND_PODS_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
_TAS_MARKS = (*TAS_POD_ANNOTATIONS, WORKLOAD_ANNOTATION)


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


def bound_pod_essence(pod: Mapping[str, Any]) -> dict[str, Any]:
    """A bound pod's names, node, phase, TAS marks (its topology annotations, kuota's pod set label and Workload
    annotation) and containers' resources (a pod's spec is mostly images, commands and volumes)."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}

    def resources(containers: Any) -> list[dict[str, Any]]:
        return [{"resources": container.get("resources") or {}} for container in containers or []]

    return {
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "labels": {key: labels[key] for key in (POD_SET_LABEL,) if key in labels},
            "annotations": {key: annotations[key] for key in _TAS_MARKS if key in annotations},
        },
        "spec": {
            "nodeName": spec.get("nodeName") or "",
            "containers": resources(spec.get("containers")),
            "initContainers": resources(spec.get("initContainers")),
            **({"overhead": spec["overhead"]} if spec.get("overhead") else {}),
        },
        "status": {"phase": (pod.get("status") or {}).get("phase")},
    }


def takes_node_capacity(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` takes its node's capacity outside TAS, as Kueue counts it: bound, not finished, and not a
    TAS pod (no topology annotation; kuota's TAS pods, implied ones too, carry its pod set label and Workload
    annotation)."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    if any(key in annotations for key in TAS_POD_ANNOTATIONS):
        return False
    if POD_SET_LABEL in labels and WORKLOAD_ANNOTATION in annotations:
        return False
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in {"Succeeded", "Failed"}
