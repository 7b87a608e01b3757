"""GPUs allocated to pods, as the kubelet's PodResources API reports them, parsed once into typed data.

Device ids are ``GPU-<uuid>`` (a whole GPU), ``MIG-<uuid>`` (a MIG instance) and ``GPU-<uuid>::<n>`` (the
n-th time-sliced replica of a GPU, several of which may belong to different pods).
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_RESOURCE_PREFIX = "nvidia.com/"


@dataclass(frozen=True, order=True)
class Holder:
    """A container that holds (or runs on) a device; all empty for an unallocated device."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class DeviceAllocation:
    holder: Holder
    resource: str  # e.g. nvidia.com/gpu, nvidia.com/mig-1g.10gb
    device_uuid: str  # GPU-... or MIG-..., without the replica suffix
    replica: int | None = None


def parse_device_id(device_id: str) -> tuple[str, int | None]:
    """``GPU-x::3`` -> (``GPU-x``, 3); ``GPU-x`` -> (``GPU-x``, None)."""
    uuid, sep, replica = device_id.partition("::")
    if sep and replica.isdigit():
        return uuid, int(replica)
    return device_id, None


def is_gpu_device_id(resource: str, device_id: str) -> bool:
    return resource.startswith(GPU_RESOURCE_PREFIX) and device_id.startswith(("GPU-", "MIG-"))
