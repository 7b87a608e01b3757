"""The only module that talks to NVML (through ``pynvml`` from nvidia-ml-py).

Every call blocks, so a reader belongs to one worker thread: the sampler runs all of its methods on a
single-thread executor, never on the event loop. Failures are contained per call:

- ``NOT_SUPPORTED`` -> the figure is None (the series is left out), not counted as a failure;
- no GPM (GPUs older than Hopper, MIG instances) -> the profiling figures are None, said once per GPU in the log;
- ``GPU_IS_LOST`` (or XID 79) -> that GPU is down, the others keep reporting;
- ``UNINITIALIZED`` -> :class:`NvmlReinitRequiredError` (the driver was reloaded: the sampler opens NVML again);
- a library older than the bindings (``NVMLLibraryMismatchError``, not an ``NVMLError``) or no library at
  all -> :class:`NvmlUnavailableError`, which the sampler reports through readiness and one log line.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from kuota.exporter.errors import NvmlReinitRequiredError, NvmlUnavailableError
from kuota.exporter.readings import DeviceReading, DeviceSample, Gpu, GpuProcess, GpuStatus, ProcessSample

log = logging.getLogger(__name__)
T = TypeVar("T")
XID_GPU_FALLEN_OFF_BUS = 79
MIB = 1024 * 1024
ALL_LINKS = 0xFFFFFFFF  # a field value's scopeId asking for the sum over every NVLink
PROFILING_SERIES = "DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, DCGM_FI_PROF_DRAM_ACTIVE"


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _mig_profile(name: str) -> str:
    """``NVIDIA H100 80GB HBM3 MIG 1g.10gb`` -> ``1g.10gb`` (the name is how NVML spells the profile)."""
    _, sep, profile = name.rpartition(" MIG ")
    return profile.strip() if sep else ""


@dataclass
class _Gpm:
    """Two GPM sample buffers per GPU, used in turn: each device reading takes one sample and compares it
    with the previous one, so the profiling ratios cover one device interval for one sample and one query."""

    samples: tuple[Any, Any]
    newest: int = 0  # index of the last sample taken
    primed: bool = False  # whether samples[newest] holds a valid sample to compare against


@dataclass
class _PhysicalGpu:
    index: int
    handle: Any
    gpu: Gpu | None  # None when it was lost before it could be named
    migs: list[tuple[Gpu, Any]] = field(default_factory=list)
    lost: bool = False
    last_xid: int | None = None
    gpm: _Gpm | None = None


class NvmlReader:
    def __init__(self, process_interval: float = 1.0) -> None:
        self._nvml: ModuleType | None = None
        self._gpus: list[_PhysicalGpu] = []
        self._events: Any = None
        self._process_interval = process_interval
        self._last_seen_us: dict[str, int] = {}
        self._last_read: dict[str, float] = {}
        self._gpm_request: Any = None  # one nvmlGpmMetricsGet_t (19 KB) for every GPU: reads are sequential
        self.driver_version = ""

    # ---- lifecycle ----

    def open(self) -> tuple[Gpu, ...]:
        """Initialise NVML and discover GPUs and MIG instances; raises :class:`NvmlUnavailableError`."""
        try:
            import pynvml
        except ImportError as error:  # the exporter extra is not installed
            raise NvmlUnavailableError(
                "the nvidia-ml-py package is missing: install kuota[exporter] (pip install 'kuota[exporter]')"
            ) from error
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as error:
            raise NvmlUnavailableError(
                f"NVML did not initialise ({error}): check that the NVIDIA driver is loaded on this node and "
                "that libnvidia-ml.so.1 is visible to the exporter (the NVIDIA container toolkit mounts it)"
            ) from error
        self._nvml = pynvml
        self.driver_version = _text(pynvml.nvmlSystemGetDriverVersion())
        self._gpus = [self._discover(index) for index in range(pynvml.nvmlDeviceGetCount())]
        for physical in self._gpus:
            physical.gpm = self._open_gpm(physical)
        self._events = self._register_xid_events()
        self._last_seen_us.clear()
        self._last_read.clear()
        return self.devices()

    def close(self) -> None:
        nvml, self._nvml = self._nvml, None
        if nvml is None:
            return
        try:
            for physical in self._gpus:
                for sample in physical.gpm.samples if physical.gpm else ():
                    with contextlib.suppress(nvml.NVMLError):  # a lost GPU's buffers: nothing more to release
                        nvml.nvmlGpmSampleFree(sample)
            if self._events is not None:
                nvml.nvmlEventSetFree(self._events)
            nvml.nvmlShutdown()
        except nvml.NVMLError_Uninitialized:
            pass  # the driver went away under us; there is nothing left to shut down
        finally:
            self._events = None
            self._gpus = []

    def devices(self) -> tuple[Gpu, ...]:
        found: list[Gpu] = []
        for physical in self._gpus:
            if physical.gpu is not None:
                found.append(physical.gpu)
            found.extend(gpu for gpu, _ in physical.migs)
        return tuple(found)

    def _module(self) -> ModuleType:
        if self._nvml is None:
            raise NvmlReinitRequiredError("NVML is not open")
        return self._nvml

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run one NVML call, turning the driver-level conditions into the exporter's exceptions."""
        nvml = self._module()
        try:
            return fn(*args)
        except nvml.NVMLError_Uninitialized as error:
            raise NvmlReinitRequiredError(f"NVML answered 'uninitialized' to {fn.__name__}") from error
        except nvml.NVMLLibraryMismatchError as error:
            raise NvmlUnavailableError(
                f"the driver's libnvidia-ml.so.1 ({self.driver_version}) is older than nvidia-ml-py: {error}; "
                "pin nvidia-ml-py to the driver's major version or upgrade the driver"
            ) from error

    def _discover(self, index: int) -> _PhysicalGpu:
        nvml = self._module()
        try:
            handle = self._call(nvml.nvmlDeviceGetHandleByIndex, index)
            uuid = _text(self._call(nvml.nvmlDeviceGetUUID, handle))
            model = _text(self._call(nvml.nvmlDeviceGetName, handle))
            minor = self._call(nvml.nvmlDeviceGetMinorNumber, handle)
            bus_id = self._pci_bus_id(handle)
        except nvml.NVMLError_GpuIsLost:
            return _PhysicalGpu(index=index, handle=None, gpu=None, lost=True)
        physical = _PhysicalGpu(
            index=index,
            handle=handle,
            gpu=Gpu(index=index, uuid=uuid, parent_uuid=uuid, minor=minor, model=model, pci_bus_id=bus_id),
        )
        try:
            mig_on = self._call(nvml.nvmlDeviceGetMigMode, handle)[0] == nvml.NVML_DEVICE_MIG_ENABLE
        except nvml.NVMLError_NotSupported:
            mig_on = False
        if mig_on:
            for slot in range(self._call(nvml.nvmlDeviceGetMaxMigDeviceCount, handle)):
                try:
                    mig = self._call(nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot)
                except nvml.NVMLError_NotFound:
                    continue  # an empty slot
                name = _text(self._call(nvml.nvmlDeviceGetName, mig))
                gpu = Gpu(
                    index=index,
                    uuid=_text(self._call(nvml.nvmlDeviceGetUUID, mig)),
                    parent_uuid=uuid,
                    minor=minor,
                    model=model,
                    pci_bus_id=bus_id,
                    mig_profile=_mig_profile(name),
                    gpu_instance=self._call(nvml.nvmlDeviceGetGpuInstanceId, mig),
                    compute_instance=self._call(nvml.nvmlDeviceGetComputeInstanceId, mig),
                )
                physical.migs.append((gpu, mig))
        return physical

    def _pci_bus_id(self, handle: Any) -> str:
        nvml = self._module()
        try:
            return _text(self._call(nvml.nvmlDeviceGetPciInfo, handle).busId)
        except nvml.NVMLError_NotSupported:
            return ""

    def _open_gpm(self, physical: _PhysicalGpu) -> _Gpm | None:
        """GPM buffers for a GPU that supports it; one log line for one that does not."""
        nvml = self._module()
        if physical.gpu is None or physical.lost:
            return None
        try:
            supported = bool(self._call(nvml.nvmlGpmQueryDeviceSupport, physical.handle).isSupportedDevice)
        except nvml.NVMLError_GpuIsLost:
            return None
        except nvml.NVMLError:  # NOT_SUPPORTED, or a driver too old to know GPM
            supported = False
        if not supported:
            log.info(
                "GPU %d (%s) does not support GPM (Hopper or newer needed): %s are left out for it",
                physical.index,
                physical.gpu.model,
                PROFILING_SERIES,
            )
            return None
        if self._gpm_request is None:
            request = nvml.c_nvmlGpmMetricsGet_t()
            request.version = nvml.NVML_GPM_METRICS_GET_VERSION
            metric_ids = (
                nvml.NVML_GPM_METRIC_GRAPHICS_UTIL,
                nvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
                nvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
            )
            request.numMetrics = len(metric_ids)
            for slot, metric_id in enumerate(metric_ids):
                request.metrics[slot].metricId = metric_id
            self._gpm_request = request
        return _Gpm(samples=(self._call(nvml.nvmlGpmSampleAlloc), self._call(nvml.nvmlGpmSampleAlloc)))

    def _register_xid_events(self) -> Any:
        nvml = self._module()
        try:
            events = self._call(nvml.nvmlEventSetCreate)
        except nvml.NVMLError_NotSupported:
            return None
        for physical in self._gpus:
            if physical.handle is None:
                continue
            try:
                self._call(nvml.nvmlDeviceRegisterEvents, physical.handle, nvml.nvmlEventTypeXidCriticalError, events)
            except (nvml.NVMLError_NotSupported, nvml.NVMLError_GpuIsLost):
                continue
        return events

    # ---- device readings ----

    def read_devices(self) -> DeviceSample:
        nvml = self._module()
        failures = self._drain_xids()
        readings: list[DeviceReading] = []
        for physical in self._gpus:
            if physical.gpu is None or physical.lost:
                continue
            try:
                reading, failed = self._read_gpu(physical.gpu, physical.handle, whole=True, gpm=physical.gpm)
                readings.append(reading)
                failures += failed
                for gpu, handle in physical.migs:
                    reading, failed = self._read_gpu(gpu, handle, whole=False)
                    readings.append(reading)
                    failures += failed
            except nvml.NVMLError_GpuIsLost:
                physical.lost = True
        statuses = tuple(
            GpuStatus(index=p.index, uuid=p.gpu.uuid if p.gpu else "", up=not p.lost, last_xid=p.last_xid)
            for p in self._gpus
        )
        return DeviceSample(
            at=time.time(),
            readings=tuple(readings),
            statuses=statuses,
            failures=failures,
            driver_version=self.driver_version,
        )

    def _read_gpu(self, gpu: Gpu, handle: Any, *, whole: bool, gpm: _Gpm | None = None) -> tuple[DeviceReading, int]:
        nvml = self._module()
        failures = 0

        def optional(fn: Callable[..., Any], *args: Any) -> Any:
            nonlocal failures
            try:
                return self._call(fn, handle, *args)
            except nvml.NVMLError_NotSupported:
                return None
            except nvml.NVMLError_GpuIsLost:
                raise
            except nvml.NVMLError:
                failures += 1
                return None

        def number(value: Any) -> float | None:
            return None if value is None else float(value)

        # v2 counts the driver's reservation apart from used, as dcgm-exporter's FB_USED / FB_RESERVED do.
        memory = optional(nvml.nvmlDeviceGetMemoryInfo, nvml.nvmlMemory_v2)
        fb_used = memory.used / MIB if memory is not None else None
        fb_free = memory.free / MIB if memory is not None else None
        fb_reserved = memory.reserved / MIB if memory is not None else None
        if not whole:
            return DeviceReading(
                gpu=gpu, fb_used_mib=fb_used, fb_free_mib=fb_free, fb_reserved_mib=fb_reserved
            ), failures
        rates = optional(nvml.nvmlDeviceGetUtilizationRates)
        power_mw = optional(nvml.nvmlDeviceGetPowerUsage)
        energy = optional(nvml.nvmlDeviceGetTotalEnergyConsumption)
        temp = optional(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU)
        clock = optional(nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_SM)
        mem_clock = optional(nvml.nvmlDeviceGetClockInfo, nvml.NVML_CLOCK_MEM)
        encoder = optional(nvml.nvmlDeviceGetEncoderUtilization)
        decoder = optional(nvml.nvmlDeviceGetDecoderUtilization)
        replays = optional(nvml.nvmlDeviceGetPcieReplayCounter)
        rows = optional(nvml.nvmlDeviceGetRemappedRows)
        fields = optional(
            nvml.nvmlDeviceGetFieldValues,
            [
                nvml.NVML_FI_DEV_MEMORY_TEMP,
                (nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS),
                (nvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ALL_LINKS),
            ],
        )
        memory_temp = sent = received = None
        if fields is not None:
            memory_temp, sent, received = (self._field_number(value) for value in fields)
            failures += sum(
                1 for value in fields if value.nvmlReturn not in (nvml.NVML_SUCCESS, nvml.NVML_ERROR_NOT_SUPPORTED)
            )
        profiling, failed = self._gpm_ratios(handle, gpm)
        failures += failed
        reading = DeviceReading(
            gpu=gpu,
            gpu_util_percent=float(rates.gpu) if rates is not None else None,
            mem_copy_util_percent=float(rates.memory) if rates is not None else None,
            fb_used_mib=fb_used,
            fb_free_mib=fb_free,
            power_w=power_mw / 1000.0 if power_mw is not None else None,
            temp_c=float(temp) if temp is not None else None,
            sm_clock_mhz=float(clock) if clock is not None else None,
            energy_mj=float(energy) if energy is not None else None,
            mem_clock_mhz=number(mem_clock),
            memory_temp_c=memory_temp,
            pcie_replays=number(replays),
            enc_util_percent=number(encoder[0]) if encoder is not None else None,
            dec_util_percent=number(decoder[0]) if decoder is not None else None,
            fb_reserved_mib=fb_reserved,
            nvlink_kib=sent + received if sent is not None and received is not None else None,
            remapped_rows_correctable=number(rows[0]) if rows is not None else None,
            remapped_rows_uncorrectable=number(rows[1]) if rows is not None else None,
            row_remap_failure=number(rows[3]) if rows is not None else None,
            gr_engine_active=profiling[0],
            tensor_active=profiling[1],
            dram_active=profiling[2],
        )
        return reading, failures

    def _field_number(self, value: Any) -> float | None:
        """A field value's number by its declared type; None when NVML answered it with an error."""
        nvml = self._module()
        if value.nvmlReturn != nvml.NVML_SUCCESS:
            return None
        member = {
            nvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
            nvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
            nvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
            nvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
            nvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
            nvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
            nvml.NVML_VALUE_TYPE_UNSIGNED_SHORT: "usVal",
        }.get(value.valueType)
        return None if member is None else float(getattr(value.value, member))

    def _gpm_ratios(self, handle: Any, gpm: _Gpm | None) -> tuple[tuple[float | None, ...], int]:
        """(graphics, tensor, DRAM) activity as 0-1 ratios since the previous reading, and failed calls."""
        nvml = self._module()
        unknown: tuple[float | None, ...] = (None, None, None)
        if gpm is None:
            return unknown, 0
        previous, current = gpm.samples[gpm.newest], gpm.samples[1 - gpm.newest]
        try:
            self._call(nvml.nvmlGpmSampleGet, handle, current)
        except nvml.NVMLError_GpuIsLost:
            raise
        except nvml.NVMLError as error:
            gpm.primed = False  # the next reading starts a fresh pair
            return unknown, 0 if isinstance(error, nvml.NVMLError_NotSupported) else 1
        primed, gpm.primed, gpm.newest = gpm.primed, True, 1 - gpm.newest
        if not primed:
            return unknown, 0
        request = self._gpm_request
        request.sample1, request.sample2 = previous, current
        try:
            self._call(nvml.nvmlGpmMetricsGet, request)
        except nvml.NVMLError_GpuIsLost:
            raise
        except nvml.NVMLError as error:
            return unknown, 0 if isinstance(error, nvml.NVMLError_NotSupported) else 1
        metrics = request.metrics
        ratios = tuple(
            metrics[slot].value / 100.0 if metrics[slot].nvmlReturn == nvml.NVML_SUCCESS else None for slot in range(3)
        )
        return ratios, 0

    def _drain_xids(self) -> int:
        """Collect XID events that arrived since the last reading, without waiting."""
        nvml = self._module()
        if self._events is None:
            return 0
        by_uuid = {p.gpu.uuid: p for p in self._gpus if p.gpu is not None}
        while True:
            try:
                event = self._call(nvml.nvmlEventSetWait_v2, self._events, 0)
            except nvml.NVMLError_Timeout:
                return 0
            except nvml.NVMLError_GpuIsLost:
                return 0  # the lost GPU shows up as down when it is read
            except nvml.NVMLError:
                return 1
            try:
                uuid = _text(self._call(nvml.nvmlDeviceGetUUID, event.device))
            except nvml.NVMLError_GpuIsLost:
                continue
            physical = by_uuid.get(uuid)
            if physical is None:
                continue
            physical.last_xid = int(event.eventData)
            if physical.last_xid == XID_GPU_FALLEN_OFF_BUS:
                physical.lost = True

    # ---- processes ----

    def read_processes(self) -> ProcessSample:
        nvml = self._module()
        now = time.time()
        now_us = int(now * 1_000_000)
        processes: list[GpuProcess] = []
        sm_percent: dict[str, dict[int, float]] = {}
        failures = 0
        for physical in self._gpus:
            if physical.gpu is None or physical.lost:
                continue
            targets = physical.migs or [(physical.gpu, physical.handle)]
            try:
                for gpu, handle in targets:
                    for info in self._call(nvml.nvmlDeviceGetComputeRunningProcesses, handle):
                        used = info.usedGpuMemory
                        processes.append(GpuProcess(device_uuid=gpu.uuid, pid=int(info.pid), used_bytes=used))
                if not physical.migs:
                    sampled = self._process_utilization(physical.gpu.uuid, physical.handle, now_us)
                    if sampled is not None:
                        sm_percent[physical.gpu.uuid] = sampled
            except nvml.NVMLError_GpuIsLost:
                physical.lost = True
            except nvml.NVMLError_NotSupported:
                continue
            except nvml.NVMLError:
                failures += 1
        previous = [self._last_read.get(uuid) for uuid in sm_percent]
        duration = max((now - p for p in previous if p is not None), default=self._process_interval)
        for uuid in sm_percent:
            self._last_read[uuid] = now
        return ProcessSample(
            at=now, duration=duration, processes=tuple(processes), sm_percent=sm_percent, failures=failures
        )

    def _process_utilization(self, uuid: str, handle: Any, now_us: int) -> dict[int, float] | None:
        """{pid: mean SM %} since the last call; {} when idle (NOT_FOUND); None when not supported."""
        nvml = self._module()
        last_seen = self._last_seen_us.get(uuid, now_us - int(self._process_interval * 1_000_000))
        try:
            samples = self._call(nvml.nvmlDeviceGetProcessUtilization, handle, last_seen)
        except nvml.NVMLError_NotFound:
            self._last_seen_us[uuid] = now_us  # idle until now: the next call starts here
            return {}
        except nvml.NVMLError_NotSupported:
            return None
        totals: dict[int, list[float]] = {}
        newest = last_seen
        for sample in samples:
            totals.setdefault(int(sample.pid), []).append(float(sample.smUtil))
            newest = max(newest, int(sample.timeStamp))
        self._last_seen_us[uuid] = newest
        return {pid: sum(values) / len(values) for pid, values in totals.items()}
