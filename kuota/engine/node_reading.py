"""A v1 Node as topology-aware placement sees it: its labels, its allocatable resources in engine units, its
taints, whether it is Ready and schedulable (Kueue's TAS node cache). Read by the manager from the API and by
``kuota simulate`` from a ``kubectl get nodes -o json`` dump. Pure: the Node's JSON in, a ``TopologyNode`` out;
and a bound pod's JSON in, what it takes of its node out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kuota.engine.errors import QuantityError
from kuota.engine.field_reader import FieldReader, finish
from kuota.engine.kubernetes_fields import read_pod_requests
from kuota.engine.model import Taint, TaintEffect, TopologyNode
from kuota.engine.quantities import parse_quantity


def topology_node(node: Mapping[str, Any]) -> TopologyNode:
    """``node`` (a v1 Node) for the engine; an allocatable quantity that does not parse counts as none of it."""
    metadata = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    free: dict[str, int] = {}
    for resource, amount in (status.get("allocatable") or {}).items():
        try:
            free[str(resource)] = parse_quantity(str(resource), amount)
        except QuantityError:
            continue
    effects = {effect.value for effect in TaintEffect}
    taints = tuple(
        Taint(str(taint.get("key", "")), str(taint.get("value", "")), TaintEffect(taint["effect"]))
        for taint in spec.get("taints") or []
        if taint.get("effect") in effects
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


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """What ``pod`` (a v1 Pod) takes of its node, in engine units: its effective requests (one pod more is the
    placement's to add). Raise InvalidObjectError naming each request that does not parse."""
    metadata = pod.get("metadata") or {}
    reader = FieldReader()
    requests = read_pod_requests(reader, pod.get("spec") or {}, "spec")
    return finish(reader, "Pod", f"{metadata.get('namespace')}/{metadata.get('name')}", requests)
