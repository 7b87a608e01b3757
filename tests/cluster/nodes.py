"""Fake GPU nodes: a small spec of node pools, turned into Node objects that look like real GPU nodes.

The default is the guide's cluster: three 8xH100 on-demand nodes. A spec (YAML or JSON, a list of pools) can
add a spot pool or L4 nodes, e.g. ``[{"name": "h100-spot", "count": 2, "gpuType": "h100",
"capacityType": "spot"}, {"name": "l4", "count": 1, "gpuType": "l4", "gpus": 4, "cpu": "48",
"memory": "192Gi"}]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

GPU_RESOURCE = "nvidia.com/gpu"

# Pods carry these annotations to tell the pod-lifecycle driver how to behave on a fake node.
RUN_SECONDS_ANNOTATION = "kuota.test/run-seconds"
EXIT_CODE_ANNOTATION = "kuota.test/exit-code"


@dataclass(frozen=True)
class NodePool:
    name: str
    count: int = 1
    gpu_type: str = "h100"
    capacity_type: str = "on-demand"
    gpus: int = 8
    cpu: str = "192"
    memory: str = "2Ti"
    pods: int = 110
    gpu_taint: bool = True

    def node_names(self) -> list[str]:
        return [f"{self.name}-{index}" for index in range(self.count)]

    def node_manifest(self, node_name: str) -> dict[str, Any]:
        resources = {"cpu": self.cpu, "memory": self.memory, "pods": str(self.pods), GPU_RESOURCE: str(self.gpus)}
        taints = [{"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}] if self.gpu_taint else []
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node_name,
                "labels": {
                    "kubernetes.io/hostname": node_name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "gpu-type": self.gpu_type,
                    "capacity-type": self.capacity_type,
                    "kuota.test/fake-node": "true",
                },
            },
            "spec": {"taints": taints},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake node"},
                ],
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "v1.36.3",
                    "containerRuntimeVersion": "fake://0",
                    "kernelVersion": "",
                    "osImage": "fake",
                    "bootID": "",
                    "machineID": "",
                    "systemUUID": "",
                    "kubeProxyVersion": "",
                },
            },
        }


DEFAULT_POOLS = (NodePool(name="h100", count=3),)

_FIELD_NAMES = {
    "name": "name",
    "count": "count",
    "gpuType": "gpu_type",
    "capacityType": "capacity_type",
    "gpus": "gpus",
    "cpu": "cpu",
    "memory": "memory",
    "pods": "pods",
    "gpuTaint": "gpu_taint",
}


def parse_pools(text: str) -> tuple[NodePool, ...]:
    """Parse a node-pool spec; unknown keys are errors so a typo does not silently give default nodes."""
    document = yaml.safe_load(text)
    if not isinstance(document, list):
        raise ValueError("node spec: expected a list of pools")
    pools = []
    for index, entry in enumerate(document):
        if not isinstance(entry, dict) or "name" not in entry:
            raise ValueError(f"node spec [{index}]: expected a mapping with a name")
        unknown = set(entry) - set(_FIELD_NAMES)
        if unknown:
            raise ValueError(f"node spec [{index}]: unknown keys {sorted(unknown)}; known: {sorted(_FIELD_NAMES)}")
        pools.append(NodePool(**{_FIELD_NAMES[key]: value for key, value in entry.items()}))
    return tuple(pools)
