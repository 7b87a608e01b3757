"""The functional core of the exporter: processes + cgroups + allocations -> per-pod figures per GPU.

No I/O, no clock. Inputs are the latest readings the sampler holds; the output is what the exposition
writes. Rules:

- Every (device, container) the kubelet allocated gets a figure, even with no process: a held GPU that
  runs nothing is the idle-but-allocated case the report looks for (0 % SM, 0 bytes).
- A process found on a device adds to its container's figure whether or not that container was allocated
  the device (a pod that sees every GPU still shows up where it computes), with ``allocated`` false.
- SM % is the sum over the container's processes of their windowed mean, capped at 100; it is None on a
  device without per-process utilization (MIG), never a fake 0.
- Memory is the sum of the processes' used bytes; None when NVML could not tell for any of them.
- A process whose pod cannot be resolved (a host process, a pod the watch has not seen yet) is counted in
  ``unattributed`` and attached to no pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kuota.exporter.allocation import DeviceAllocation, Holder
from kuota.exporter.cgroup_pod_uid import ContainerRef
from kuota.exporter.pod_directory import PodInfo
from kuota.exporter.readings import GpuProcess


@dataclass(frozen=True)
class PodGpuFigures:
    device_uuid: str
    holder: Holder
    allocated: bool
    sm_percent: float | None
    memory_bytes: int | None


@dataclass(frozen=True)
class Attribution:
    holders: Mapping[str, tuple[Holder, ...]]  # device UUID -> containers allocated it, sorted
    figures: tuple[PodGpuFigures, ...]
    unattributed: Mapping[str, int] = field(default_factory=dict)  # device UUID -> processes with no pod


@dataclass
class _Entry:
    allocated: bool = False
    pids: set[int] = field(default_factory=set)


def _holder_of(
    pid: int,
    device_uuid: str,
    containers: Mapping[int, ContainerRef],
    pods: Mapping[str, PodInfo],
    holders: Mapping[str, tuple[Holder, ...]],
) -> Holder | None:
    ref = containers.get(pid)
    if ref is None:
        return None
    info = pods.get(ref.pod_uid)
    if info is None:
        return None
    name = info.container_name(ref.container_id)
    if not name:
        # The watch may lag a container restart; if the pod holds this device through one container only,
        # that is the one.
        same_pod = [h for h in holders.get(device_uuid, ()) if (h.namespace, h.pod) == (info.namespace, info.name)]
        name = same_pod[0].container if len(same_pod) == 1 else ""
    return Holder(namespace=info.namespace, pod=info.name, container=name)


def attribute(
    *,
    allocations: Iterable[DeviceAllocation],
    processes: Iterable[GpuProcess],
    sm_means: Mapping[str, Mapping[int, float]],
    containers: Mapping[int, ContainerRef],
    pods: Mapping[str, PodInfo],
) -> Attribution:
    held: dict[str, set[Holder]] = {}
    for allocation in allocations:
        held.setdefault(allocation.device_uuid, set()).add(allocation.holder)
    holders = {uuid: tuple(sorted(found)) for uuid, found in held.items()}

    entries: dict[tuple[str, Holder], _Entry] = {}
    for uuid, device_holders in holders.items():
        for holder in device_holders:
            entries.setdefault((uuid, holder), _Entry()).allocated = True

    memory: dict[tuple[str, int], int | None] = {}
    seen: set[tuple[str, int]] = set()
    for process in processes:
        memory[(process.device_uuid, process.pid)] = process.used_bytes
        seen.add((process.device_uuid, process.pid))
    # Processes that ran within the utilization window but have exited still count towards their pod's SM.
    for uuid, per_pid in sm_means.items():
        seen.update((uuid, pid) for pid in per_pid)

    unattributed: dict[str, int] = {}
    for uuid, pid in sorted(seen):
        owner = _holder_of(pid, uuid, containers, pods, holders)
        if owner is None:
            unattributed[uuid] = unattributed.get(uuid, 0) + 1
            continue
        entries.setdefault((uuid, owner), _Entry()).pids.add(pid)

    figures = []
    for (uuid, holder), entry in sorted(entries.items()):
        sm: float | None = None
        if uuid in sm_means:
            sm = min(100.0, sum(sm_means[uuid].get(pid, 0.0) for pid in entry.pids))
        running = [memory[(uuid, pid)] for pid in entry.pids if (uuid, pid) in memory]
        known = [used for used in running if used is not None]
        memory_bytes: int | None = sum(known) if known or not running else None
        figures.append(
            PodGpuFigures(
                device_uuid=uuid, holder=holder, allocated=entry.allocated, sm_percent=sm, memory_bytes=memory_bytes
            )
        )
    return Attribution(holders=holders, figures=tuple(figures), unattributed=unattributed)
