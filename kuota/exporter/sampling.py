"""The imperative shell: samples NVML, /proc, the kubelet and the API server on their own intervals and
publishes a fresh :class:`~kuota.exporter.snapshot.Snapshot` after every change.

NVML calls and /proc reads run on one dedicated worker thread (NVML handles are not shared across
threads, and none of it may block the event loop). A scrape never waits on any of this: it reads the last
published snapshot.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kuota.exporter.allocation import DeviceAllocation
from kuota.exporter.attribution import attribute
from kuota.exporter.cgroup_pod_uid import ContainerRef, read_container
from kuota.exporter.errors import NvmlReinitRequiredError, NvmlUnavailableError, PodResourcesUnavailableError
from kuota.exporter.nvml_reader import NvmlReader
from kuota.exporter.pod_directory import PodInfo
from kuota.exporter.readings import DeviceSample, ProcessSample
from kuota.exporter.snapshot import NVML_DEVICES, NVML_PROCESSES, PODRESOURCES, PODS, PROC, Snapshot
from kuota.exporter.utilization_window import UtilizationWindow

log = logging.getLogger(__name__)
T = TypeVar("T")

# Allocations survive this many failed PodResources refreshes before the labels go empty.
STALE_ALLOCATION_INTERVALS = 3


@dataclass(frozen=True)
class SamplerSettings:
    node_name: str
    proc_root: Path = Path("/proc")
    pod_resources_socket: Path = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
    process_interval: float = 1.0
    device_interval: float = 5.0
    pod_resources_interval: float = 10.0
    utilization_window: float = 30.0
    pod_resources_timeout: float = 5.0
    nvml_retry_interval: float = 10.0


class NodeSampler:
    def __init__(self, settings: SamplerSettings, reader: NvmlReader | None = None) -> None:
        self.settings = settings
        self._reader = reader or NvmlReader(settings.process_interval)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nvml")
        self._window = UtilizationWindow(settings.utilization_window)
        self._containers: dict[int, ContainerRef | None] = {}
        self._pods: Mapping[str, PodInfo] = {}
        self._allocations: tuple[DeviceAllocation, ...] = ()
        self._devices: DeviceSample | None = None
        self._processes: ProcessSample | None = None
        self._errors: Counter[str] = Counter()
        self._last_success: dict[str, float] = {}
        self._nvml_open = False
        self._nvml_problem = "the first NVML reading has not been taken yet"
        # A PodResources socket that does not answer (often a socket mount at another kubelet path) makes the
        # exporter not ready: the GPUs' own series keep flowing, but per-pod attribution is silently lost.
        self._pod_resources_problem = ""
        self._logged_problems: set[str] = set()
        self.snapshot = Snapshot(node_name=settings.node_name)

    # ---- inputs from other shells ----

    def set_pods(self, pods: Mapping[str, PodInfo]) -> None:
        self._pods = pods
        self._last_success[PODS] = time.time()
        self._publish()

    def count_error(self, source: str) -> None:
        self._errors[source] += 1
        self._publish()

    # ---- running ----

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._nvml_loop(), name="nvml")
                group.create_task(self._pod_resources_loop(), name="podresources")
        finally:
            await self._in_thread(self._reader.close)
            self._thread.shutdown(wait=False)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    async def _nvml_loop(self) -> None:
        next_process = next_device = 0.0
        while True:
            if not self._nvml_open:
                if not await self._open_nvml():
                    await asyncio.sleep(self.settings.nvml_retry_interval)
                    continue
                next_process = next_device = 0.0  # a fresh NVML must prove itself on both reads
            now = time.monotonic()
            try:
                if now >= next_process:
                    next_process = now + self.settings.process_interval
                    await self._sample_processes()
                if now >= next_device:
                    next_device = now + self.settings.device_interval
                    await self._sample_devices()
            except NvmlReinitRequiredError as reason:
                log.info("NVML needs to be opened again (%s); re-initialising", reason)
                await self._close_nvml("NVML is being re-initialised after a driver reload")
                continue
            except NvmlUnavailableError as problem:
                self._errors[NVML_DEVICES] += 1
                self._log_once(str(problem))
                await self._close_nvml(str(problem))
                await asyncio.sleep(self.settings.nvml_retry_interval)
                continue
            if not self._nvml_problem:
                self._logged_problems.clear()  # healthy again: a recurrence deserves a new log line
            self._publish()
            await asyncio.sleep(max(0.0, min(next_process, next_device) - time.monotonic()))

    async def _open_nvml(self) -> bool:
        try:
            devices = await self._in_thread(self._reader.open)
        except NvmlUnavailableError as problem:
            self._errors[NVML_DEVICES] += 1
            self._nvml_problem = str(problem)
            self._log_once(str(problem))
            self._publish()
            return False
        self._nvml_open = True
        log.info(
            "NVML open: driver %s, %d devices on node %s",
            self._reader.driver_version,
            len(devices),
            self.settings.node_name,
        )
        return True

    async def _close_nvml(self, reason: str) -> None:
        await self._in_thread(self._reader.close)
        self._nvml_open = False
        self._nvml_problem = reason
        self._publish()

    def _log_once(self, problem: str) -> None:
        """One line per distinct problem, not one per retry."""
        if problem not in self._logged_problems:
            self._logged_problems.add(problem)
            log.error("NVML unavailable on node %s: %s", self.settings.node_name, problem)

    async def _sample_devices(self) -> None:
        sample: DeviceSample = await self._in_thread(self._reader.read_devices)
        self._devices = sample
        self._errors[NVML_DEVICES] += sample.failures
        self._last_success[NVML_DEVICES] = sample.at
        self._nvml_problem = ""

    async def _sample_processes(self) -> None:
        sample: ProcessSample = await self._in_thread(self._reader.read_processes)
        self._processes = sample
        self._errors[NVML_PROCESSES] += sample.failures
        for uuid, per_pid in sample.sm_percent.items():
            self._window.add(uuid, sample.at, sample.duration, per_pid)
        self._last_success[NVML_PROCESSES] = sample.at
        live = {process.pid for process in sample.processes} | self._window.pids()
        self._containers = {pid: ref for pid, ref in self._containers.items() if pid in live}
        unknown = sorted(live - self._containers.keys())
        if unknown:
            found, failures = await self._in_thread(self._read_cgroups, unknown)
            self._containers.update(found)
            self._errors[PROC] += failures

    def _read_cgroups(self, pids: list[int]) -> tuple[dict[int, ContainerRef | None], int]:
        found: dict[int, ContainerRef | None] = {}
        failures = 0
        for pid in pids:
            try:
                found[pid] = read_container(self.settings.proc_root, pid)
            except OSError as error:  # e.g. no permission: retried next tick, counted
                failures += 1
                log.debug("cannot read the cgroup of pid %d: %s", pid, error)
        return found, failures

    async def _pod_resources_loop(self) -> None:
        from kuota.exporter.podresources.client import PodResourcesClient

        interval = self.settings.pod_resources_interval
        socket, timeout = self.settings.pod_resources_socket, self.settings.pod_resources_timeout
        async with PodResourcesClient(socket, timeout) as kubelet:
            while True:
                try:
                    self._allocations = await kubelet.list_allocations()
                    self._last_success[PODRESOURCES] = time.time()
                    if self._pod_resources_problem:
                        log.info("node %s: the PodResources socket answers again; ready", self.settings.node_name)
                    self._pod_resources_problem = ""
                except PodResourcesUnavailableError as problem:
                    self._errors[PODRESOURCES] += 1
                    if not self._pod_resources_problem:
                        log.error("node %s: not ready: %s", self.settings.node_name, problem)
                    self._pod_resources_problem = str(problem)
                    age = time.time() - self._last_success.get(PODRESOURCES, 0.0)
                    if age > STALE_ALLOCATION_INTERVALS * interval:
                        self._allocations = ()
                self._publish()
                await asyncio.sleep(interval)

    # ---- publishing ----

    def _publish(self) -> None:
        now = time.time()
        processes = self._processes.processes if self._processes else ()
        attribution = attribute(
            allocations=self._allocations,
            processes=processes,
            sm_means=self._window.means(now),
            containers={pid: ref for pid, ref in self._containers.items() if ref is not None},
            pods=self._pods,
        )
        self.snapshot = Snapshot(
            node_name=self.settings.node_name,
            devices=self._devices if self._nvml_open else None,
            attribution=attribution,
            errors=dict(self._errors),
            last_success=dict(self._last_success),
            not_ready_reason="; ".join(p for p in (self._nvml_problem, self._pod_resources_problem) if p),
        )
