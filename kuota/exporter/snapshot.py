"""The exporter's state as one immutable value: the sampler replaces it, a scrape only reads it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kuota.exporter.attribution import Attribution
from kuota.exporter.readings import DeviceSample

# Sources named in kuota_exporter_errors_total{source} and kuota_exporter_sample_age_seconds{source}.
NVML_DEVICES = "nvml_devices"
NVML_PROCESSES = "nvml_processes"
PODRESOURCES = "podresources"
PODS = "pods"
PROC = "proc"
SOURCES = (NVML_DEVICES, NVML_PROCESSES, PODRESOURCES, PODS, PROC)


@dataclass(frozen=True)
class Snapshot:
    node_name: str
    devices: DeviceSample | None = None
    attribution: Attribution = field(default_factory=lambda: Attribution(holders={}, figures=()))
    errors: Mapping[str, int] = field(default_factory=dict)
    last_success: Mapping[str, float] = field(default_factory=dict)  # source -> Unix time
    not_ready_reason: str = "the first NVML reading has not been taken yet"

    @property
    def ready(self) -> bool:
        return not self.not_ready_reason
