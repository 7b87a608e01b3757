"""What the NVML reader hands to the rest of the exporter: plain frozen data, no NVML types.

A ``None`` figure means the device does not support it (``NOT_SUPPORTED``) or it could not be read; the
exposition leaves such series out instead of writing a made-up 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Gpu:
    """One device NVML exposes: a whole GPU, or a MIG instance of one (``mig_profile`` set)."""

    index: int  # NVML index of the physical GPU
    uuid: str  # GPU-... for a whole GPU, MIG-... for an instance
    parent_uuid: str  # the physical GPU's UUID (== uuid for a whole GPU)
    minor: int  # /dev/nvidia<minor>
    model: str
    pci_bus_id: str = ""  # the physical GPU's, e.g. "00000000:18:00.0"
    mig_profile: str = ""  # e.g. "1g.10gb"
    gpu_instance: int | None = None
    compute_instance: int | None = None

    @property
    def is_mig(self) -> bool:
        return self.uuid != self.parent_uuid

    @property
    def device(self) -> str:
        return f"nvidia{self.minor}"


@dataclass(frozen=True)
class DeviceReading:
    gpu: Gpu
    gpu_util_percent: float | None = None
    mem_copy_util_percent: float | None = None
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    energy_mj: float | None = None
    mem_clock_mhz: float | None = None
    memory_temp_c: float | None = None
    pcie_replays: float | None = None
    enc_util_percent: float | None = None
    dec_util_percent: float | None = None
    fb_reserved_mib: float | None = None
    nvlink_kib: float | None = None  # data sent plus received over all links since boot (KiB)
    remapped_rows_correctable: float | None = None
    remapped_rows_uncorrectable: float | None = None
    row_remap_failure: float | None = None  # 1 once a row remap has failed
    # GPM ratios (0-1) over the last device interval; None without GPM (pre-Hopper, MIG) or on the first read.
    gr_engine_active: float | None = None
    tensor_active: float | None = None
    dram_active: float | None = None


@dataclass(frozen=True)
class GpuStatus:
    """Whether a physical GPU answers; ``uuid`` is empty when it was lost before it could be named."""

    index: int
    uuid: str
    up: bool
    last_xid: int | None = None


@dataclass(frozen=True)
class DeviceSample:
    at: float  # Unix time of the reading
    readings: tuple[DeviceReading, ...]
    statuses: tuple[GpuStatus, ...]
    failures: int = 0  # calls that failed for a reason other than NOT_SUPPORTED
    driver_version: str = ""


@dataclass(frozen=True)
class GpuProcess:
    device_uuid: str
    pid: int
    used_bytes: int | None


@dataclass(frozen=True)
class ProcessSample:
    """One sampling tick: running processes per device, and per-pid SM % over the tick where supported.

    ``sm_percent`` maps device UUID to {pid: SM %}; a device that is missing there does not support
    per-process utilization (MIG) or failed this tick; an empty mapping means it was idle all tick.
    """

    at: float
    duration: float
    processes: tuple[GpuProcess, ...]
    sm_percent: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    failures: int = 0
