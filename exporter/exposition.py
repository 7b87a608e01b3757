"""Prometheus exposition: metric families built from the latest :class:`~kuota.exporter.snapshot.Snapshot` and
written as Prometheus text (format 0.0.4) directly.

Why not prometheus_client's registry: at 8 GPUs shared by 64 pods (~700 series, ten labels each) its
per-label validation and escaping took ~17 ms per scrape on a busy 2-core node, most of the 20 ms budget.
Here label values are escaped once per snapshot and the device and pod families are rendered once per
snapshot and reused by every scrape until the sampler publishes a new one; only the health families
(sample ages, scrape duration) are rendered per scrape. The metric contract is documented in
``exporter/README.md`` and tested.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from kuota.exporter.allocation import Holder
from kuota.exporter.readings import DeviceReading, Gpu
from kuota.exporter.snapshot import SOURCES, Snapshot

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DCGM_LABELS = (
    "gpu",
    "UUID",
    "device",
    "modelName",
    "GPU_I_PROFILE",
    "GPU_I_ID",
    "Hostname",
    "container",
    "namespace",
    "pod",
)
POD_LABELS = ("Hostname", "gpu", "UUID", "namespace", "pod", "container")
GPU_LABELS = ("Hostname", "gpu", "UUID")
NOBODY = Holder(namespace="", pod="", container="")


@dataclass
class Family:
    name: str
    help: str
    labels: Sequence[str]
    kind: str = "gauge"
    samples: list[tuple[Sequence[str], float]] = field(default_factory=list)

    def add(self, values: Sequence[str], value: float) -> None:
        self.samples.append((values, value))


@dataclass(frozen=True)
class DcgmField:
    name: str
    help: str
    value: Callable[[DeviceReading], float | None]


# dcgm-exporter's names, units and HELP texts, so its dashboards work unchanged. The energy counter is typed
# gauge as dcgm-exporter's text shows it would be renamed ..._total by counter conventions.
DCGM_FIELDS = (
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda r: r.gpu_util_percent),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", lambda r: r.mem_copy_util_percent),
    DcgmField("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda r: r.fb_used_mib),
    DcgmField("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", lambda r: r.fb_free_mib),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda r: r.power_w),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda r: r.temp_c),
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", lambda r: r.sm_clock_mhz),
    DcgmField(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).", lambda r: r.energy_mj
    ),
)


def _dcgm_labels(gpu: Gpu, node: str, holder: Holder) -> tuple[str, ...]:
    """dcgm-exporter labels a MIG instance with its parent's UUID plus GPU_I_ID/GPU_I_PROFILE."""
    instance = "" if gpu.gpu_instance is None else str(gpu.gpu_instance)
    return (
        str(gpu.index),
        gpu.parent_uuid,
        gpu.device,
        gpu.model,
        gpu.mig_profile,
        instance,
        node,
        holder.container,
        holder.namespace,
        holder.pod,
    )


def device_families(snapshot: Snapshot) -> Iterator[Family]:
    node = snapshot.node_name
    readings = snapshot.devices.readings if snapshot.devices else ()
    holders = snapshot.attribution.holders
    for spec in DCGM_FIELDS:
        family = Family(spec.name, spec.help, DCGM_LABELS)
        for reading in readings:
            value = spec.value(reading)
            if value is None:
                continue
            for holder in holders.get(reading.gpu.uuid, (NOBODY,)):
                family.add(_dcgm_labels(reading.gpu, node, holder), value)
        yield family
    xid = Family("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", DCGM_LABELS)
    gpus = {reading.gpu.uuid: reading.gpu for reading in readings}
    for status in snapshot.devices.statuses if snapshot.devices else ():
        gpu = gpus.get(status.uuid)
        if status.last_xid is None or gpu is None:
            continue
        for holder in holders.get(gpu.uuid, (NOBODY,)):
            xid.add(_dcgm_labels(gpu, node, holder), status.last_xid)
    yield xid
    up = Family("kuota_gpu_up", "1 while the GPU answers NVML, 0 once it is lost.", GPU_LABELS)
    for status in snapshot.devices.statuses if snapshot.devices else ():
        up.add((node, str(status.index), status.uuid), 1 if status.up else 0)
    yield up


def pod_families(snapshot: Snapshot) -> Iterator[Family]:
    node = snapshot.node_name
    gpus = {r.gpu.uuid: r.gpu for r in (snapshot.devices.readings if snapshot.devices else ())}
    sm = Family(
        "kuota_pod_gpu_sm_utilization_percent",
        "SM utilization of the pod's own processes on this GPU (0-100 %), averaged over the exporter's "
        "utilization window; absent where NVML has no per-process utilization (MIG).",
        POD_LABELS,
    )
    memory = Family(
        "kuota_pod_gpu_memory_used_bytes", "GPU memory used by the pod's own processes on this GPU (bytes).", POD_LABELS
    )
    allocated = Family(
        "kuota_gpu_allocated",
        "1 while the pod's container holds this GPU (whole, a MIG instance or a time-sliced replica).",
        POD_LABELS,
    )
    for figure in snapshot.attribution.figures:
        gpu = gpus.get(figure.device_uuid)
        index = str(gpu.index) if gpu else ""
        holder = figure.holder
        labels = (node, index, figure.device_uuid, holder.namespace, holder.pod, holder.container)
        if figure.sm_percent is not None:
            sm.add(labels, figure.sm_percent)
        if figure.memory_bytes is not None:
            memory.add(labels, figure.memory_bytes)
        if figure.allocated:
            allocated.add(labels, 1)
    yield from (sm, memory, allocated)


def health_families(snapshot: Snapshot, now: float, last_scrape_seconds: float | None) -> Iterator[Family]:
    errors = Family("kuota_exporter_errors_total", "Failed reads by the exporter, by source.", ("source",), "counter")
    for source in SOURCES:
        errors.add((source,), snapshot.errors.get(source, 0))
    yield errors
    age = Family(
        "kuota_exporter_sample_age_seconds",
        "Seconds since the last successful read from each source; absent until the first one.",
        ("source",),
    )
    for source, at in sorted(snapshot.last_success.items()):
        age.add((source,), max(0.0, now - at))
    yield age
    duration = Family(
        "kuota_exporter_scrape_duration_seconds", "Seconds the previous /metrics scrape took to render.", ()
    )
    if last_scrape_seconds is not None:
        duration.add((), last_scrape_seconds)
    yield duration


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def render(families: Iterable[Family]) -> str:
    out: list[str] = []
    for family in families:
        out.append(f"# HELP {family.name} {family.help}\n# TYPE {family.name} {family.kind}\n")
        names = family.labels
        for values, value in family.samples:
            if names:
                pairs = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True))
                out.append(f"{family.name}{{{pairs}}} {_number(value)}\n")
            else:
                out.append(f"{family.name} {_number(value)}\n")
    return "".join(out)


class ScrapeRenderer:
    """Renders /metrics; device and pod families are rendered once per snapshot and reused."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot
        self._cached: tuple[Snapshot, str] | None = None
        self.last_scrape_seconds: float | None = None

    def render(self) -> bytes:
        started = time.perf_counter()
        snapshot = self._snapshot()
        if self._cached is None or self._cached[0] is not snapshot:
            self._cached = (snapshot, render([*device_families(snapshot), *pod_families(snapshot)]))
        body = self._cached[1] + render(health_families(snapshot, time.time(), self.last_scrape_seconds))
        self.last_scrape_seconds = time.perf_counter() - started
        return body.encode()
