"""Prometheus exposition: metric families built from the latest :class:`~kuota.exporter.snapshot.Snapshot` and
written as Prometheus text (format 0.0.4) directly.

Why not prometheus_client's registry: at 8 GPUs shared by 64 pods (~700 series, ten labels each) its
per-label validation and escaping took ~17 ms per scrape on a busy 2-core node, most of the 20 ms budget.
Here each set of label values is escaped and formatted once per snapshot (shared by every dcgm field of a
device: ~1,360 series at that density), the device and pod families are rendered once per snapshot and reused
by every scrape until the sampler publishes a new one; only the health families (sample ages, scrape
duration) are rendered per scrape. The metric contract is documented in
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
# dcgm-exporter spells the node label "Hostname" and its next release "hostname"; --hostname-label picks one.
HOSTNAME_LABELS = ("Hostname", "hostname")
DEFAULT_HOSTNAME_LABEL = "Hostname"
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
    kind: str = "gauge"


def dcgm_label_names(hostname: str) -> tuple[str, ...]:
    """dcgm-exporter's label set in its order (it adds the driver version as a label on every series)."""
    return (
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "GPU_I_PROFILE",
        "GPU_I_ID",
        hostname,
        "DCGM_FI_DRIVER_VERSION",
        "container",
        "namespace",
        "pod",
    )


def pod_label_names(hostname: str) -> tuple[str, ...]:
    return (hostname, "gpu", "UUID", "namespace", "pod", "container")


def gpu_label_names(hostname: str) -> tuple[str, ...]:
    return (hostname, "gpu", "UUID")


# dcgm-exporter's names, types, units and HELP texts (its default-counters.csv and dcp-metrics-included.csv),
# so its dashboards work unchanged. Its counters keep their bare names (no _total suffix), as it writes them.
DCGM_FIELDS = (
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda r: r.gpu_util_percent),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", lambda r: r.mem_copy_util_percent),
    DcgmField("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda r: r.fb_used_mib),
    DcgmField("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", lambda r: r.fb_free_mib),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda r: r.power_w),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda r: r.temp_c),
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", lambda r: r.sm_clock_mhz),
    DcgmField(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        lambda r: r.energy_mj,
        "counter",
    ),
    DcgmField("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", lambda r: r.mem_clock_mhz),
    DcgmField("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", lambda r: r.memory_temp_c),
    DcgmField("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", lambda r: r.pcie_replays, "counter"),
    DcgmField("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", lambda r: r.enc_util_percent),
    DcgmField("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", lambda r: r.dec_util_percent),
    DcgmField("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", lambda r: r.fb_reserved_mib),
    DcgmField(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "Total number of NVLink bandwidth counters for all lanes.",
        lambda r: r.nvlink_kib,
        "counter",
    ),
    DcgmField(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for uncorrectable errors",
        lambda r: r.remapped_rows_uncorrectable,
        "counter",
    ),
    DcgmField(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for correctable errors",
        lambda r: r.remapped_rows_correctable,
        "counter",
    ),
    DcgmField("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed", lambda r: r.row_remap_failure),
    DcgmField(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", lambda r: r.gr_engine_active
    ),
    DcgmField(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        lambda r: r.tensor_active,
    ),
    DcgmField(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        lambda r: r.dram_active,
    ),
)


def _dcgm_labels(gpu: Gpu, node: str, driver: str, holder: Holder) -> tuple[str, ...]:
    """dcgm-exporter labels a MIG instance with its parent's UUID and PCI address plus GPU_I_ID/GPU_I_PROFILE."""
    instance = "" if gpu.gpu_instance is None else str(gpu.gpu_instance)
    return (
        str(gpu.index),
        gpu.parent_uuid,
        gpu.pci_bus_id,
        gpu.device,
        gpu.model,
        gpu.mig_profile,
        instance,
        node,
        driver,
        holder.container,
        holder.namespace,
        holder.pod,
    )


def device_families(snapshot: Snapshot, hostname: str = DEFAULT_HOSTNAME_LABEL) -> Iterator[Family]:
    node = snapshot.node_name
    readings = snapshot.devices.readings if snapshot.devices else ()
    driver = snapshot.devices.driver_version if snapshot.devices else ""
    holders = snapshot.attribution.holders
    dcgm_labels = dcgm_label_names(hostname)
    # One label tuple per (device, holder), shared by every field, so render() formats each only once.
    labelled = [
        (
            reading,
            [_dcgm_labels(reading.gpu, node, driver, holder) for holder in holders.get(reading.gpu.uuid, (NOBODY,))],
        )
        for reading in readings
    ]
    for spec in DCGM_FIELDS:
        family = Family(spec.name, spec.help, dcgm_labels, spec.kind)
        for reading, label_sets in labelled:
            value = spec.value(reading)
            if value is None:
                continue
            for labels in label_sets:
                family.add(labels, value)
        yield family
    xid = Family("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", dcgm_labels)
    gpus = {reading.gpu.uuid: reading.gpu for reading in readings}
    for status in snapshot.devices.statuses if snapshot.devices else ():
        gpu = gpus.get(status.uuid)
        if status.last_xid is None or gpu is None:
            continue
        for holder in holders.get(gpu.uuid, (NOBODY,)):
            xid.add(_dcgm_labels(gpu, node, driver, holder), status.last_xid)
    yield xid
    up = Family("kuota_gpu_up", "1 while the GPU answers NVML, 0 once it is lost.", gpu_label_names(hostname))
    for status in snapshot.devices.statuses if snapshot.devices else ():
        up.add((node, str(status.index), status.uuid), 1 if status.up else 0)
    yield up


def pod_families(snapshot: Snapshot, hostname: str = DEFAULT_HOSTNAME_LABEL) -> Iterator[Family]:
    node = snapshot.node_name
    pod_labels = pod_label_names(hostname)
    gpus = {r.gpu.uuid: r.gpu for r in (snapshot.devices.readings if snapshot.devices else ())}
    sm = Family(
        "kuota_pod_gpu_sm_utilization_percent",
        "SM utilization of the pod's own processes on this GPU (0-100 %), averaged over the exporter's "
        "utilization window; absent where NVML has no per-process utilization (MIG).",
        pod_labels,
    )
    memory = Family(
        "kuota_pod_gpu_memory_used_bytes", "GPU memory used by the pod's own processes on this GPU (bytes).", pod_labels
    )
    allocated = Family(
        "kuota_gpu_allocated",
        "1 while the pod's container holds this GPU (whole, a MIG instance or a time-sliced replica).",
        pod_labels,
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


def render(families: Iterable[Family]) -> bytearray:
    """The text format, appended into one buffer (not copied out): no object per line and no second copy, so
    rendering and scraping leave no fragmented heap behind."""
    out = bytearray()
    formatted: dict[Sequence[str], dict[Sequence[str], bytes]] = {}  # label names -> label values -> {...}
    for family in families:
        name = family.name.encode()
        out += b"# HELP %s %s\n# TYPE %s %s\n" % (name, family.help.encode(), name, family.kind.encode())
        names = family.labels
        texts = formatted.setdefault(names, {})
        for values, value in family.samples:
            out += name
            if names:
                pairs = texts.get(values)
                if pairs is None:
                    joined = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True))
                    pairs = texts[values] = b"{%s}" % joined.encode()
                out += pairs
            out += b" %s\n" % _number(value).encode()
    return out


class ScrapeRenderer:
    """Renders /metrics; device and pod families are rendered once per snapshot and reused."""

    def __init__(self, snapshot: Callable[[], Snapshot], hostname_label: str = DEFAULT_HOSTNAME_LABEL) -> None:
        self._snapshot = snapshot
        self._hostname = hostname_label
        self._cached: tuple[Snapshot, bytearray] | None = None
        self.last_scrape_seconds: float | None = None

    def chunks(self) -> tuple[bytes | bytearray, bytes | bytearray]:
        """The scrape in two parts, written one after the other: the cached device and pod text (~440 KiB at
        8 GPUs shared by 64 pods) is never copied into a joined body."""
        started = time.perf_counter()
        snapshot = self._snapshot()
        if self._cached is None or self._cached[0] is not snapshot:
            families = [*device_families(snapshot, self._hostname), *pod_families(snapshot, self._hostname)]
            self._cached = (snapshot, render(families))
        health = render(health_families(snapshot, time.time(), self.last_scrape_seconds))
        self.last_scrape_seconds = time.perf_counter() - started
        return self._cached[1], health

    def render(self) -> bytes:
        """The whole scrape as one value (for tests and tools; the HTTP server writes :meth:`chunks`)."""
        return b"".join(self.chunks())
