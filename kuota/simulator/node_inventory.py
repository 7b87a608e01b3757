"""``kuota simulate --nodes``: the nodes a topology-aware replay places pods on.

Either a ``kubectl get nodes -o json`` dump (a ``List`` or ``NodeList`` of v1 Nodes, read as the manager reads
the live ones: labels, allocatable, taints, Ready, unschedulable), or node pools, each ``count`` identical nodes
named ``<name>-<i>`` with the given ``labels`` (their level labels: ``kubernetes.io/hostname`` is each node's
name unless the pool sets it), ``allocatable`` and optional ``taints``, as YAML or JSON::

    - {name: rack-a, count: 4, labels: {example.com/rack: a}, allocatable: {nvidia.com/gpu: 8, pods: 110}}
    - {name: rack-b, count: 2, labels: {example.com/rack: b}, allocatable: {nvidia.com/gpu: 8, pods: 110}}
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kuota.engine import HOSTNAME_LABEL, QuantityError, TopologyNode, parse_quantity, topology_node
from kuota.simulator.config_reading import read_yaml_documents
from kuota.simulator.errors import ConfigFileError

_POOL_KEYS = frozenset({"name", "count", "labels", "allocatable", "taints"})
MAX_NODES = 100_000


def read_nodes(path: Path) -> list[TopologyNode]:
    """The nodes ``path`` describes; ConfigFileError names the first entry that cannot be one."""
    nodes: list[TopologyNode] = []
    for where, document in read_yaml_documents(path):
        if isinstance(document, Mapping) and document.get("kind") in ("List", "NodeList"):
            nodes += [_node(f"{where} item {i + 1}", item) for i, item in enumerate(document.get("items") or [])]
        elif isinstance(document, Mapping) and document.get("kind") == "Node":
            nodes.append(_node(where, document))
        elif isinstance(document, list):
            for index, pool in enumerate(document):
                nodes += _pool(f"{where} pool {index + 1}", pool)
        else:
            raise ConfigFileError(f"{where}: neither a list of node pools nor a kubectl get nodes -o json dump")
        if len(nodes) > MAX_NODES:
            raise ConfigFileError(f"{path}: more than {MAX_NODES:,} nodes")
    names = [node.name for node in nodes]
    if len(set(names)) != len(names):
        duplicate = next(name for name in names if names.count(name) > 1)
        raise ConfigFileError(f"{path}: node {duplicate!r} is given twice")
    return nodes


def _node(where: str, raw: object) -> TopologyNode:
    if not isinstance(raw, Mapping) or not (raw.get("metadata") or {}).get("name"):
        raise ConfigFileError(f"{where}: a Node needs metadata.name")
    return topology_node(raw)


def _pool(where: str, raw: object) -> list[TopologyNode]:
    if not isinstance(raw, Mapping):
        raise ConfigFileError(f"{where}: must be an object with name, count, labels and allocatable")
    unknown = sorted(str(key) for key in raw if key not in _POOL_KEYS)
    if unknown:
        raise ConfigFileError(
            f"{where}: unknown key(s) {', '.join(unknown)}; a pool has {', '.join(sorted(_POOL_KEYS))}"
        )
    name, count = raw.get("name"), raw.get("count", 1)
    if not isinstance(name, str) or not name:
        raise ConfigFileError(f"{where}: name must be a non-empty string")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_NODES:
        raise ConfigFileError(f"{where}: count must be a whole number from 1 to {MAX_NODES:,}")
    labels, allocatable = raw.get("labels") or {}, raw.get("allocatable") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise ConfigFileError(f"{where}: labels must be an object of strings")
    if not isinstance(allocatable, Mapping) or not allocatable:
        raise ConfigFileError(f"{where}: allocatable must name the resources of each node, e.g. {{nvidia.com/gpu: 8}}")
    for resource, amount in allocatable.items():
        try:
            parse_quantity(str(resource), amount)
        except QuantityError as error:
            raise ConfigFileError(f"{where}: allocatable {resource}: {error}") from error
    taints = raw.get("taints") or []
    nodes = []
    for index in range(count):
        node_name = f"{name}-{index}"
        node: dict[str, Any] = {
            "metadata": {"name": node_name, "labels": {HOSTNAME_LABEL: node_name, **labels}},
            "spec": {"taints": taints},
            "status": {"allocatable": dict(allocatable), "conditions": [{"type": "Ready", "status": "True"}]},
        }
        nodes.append(topology_node(node))
    return nodes
