"""The sampler end to end in one process: fake NVML (real pynvml), a fake /proc, a real gRPC kubelet."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from kuota.exporter.allocation import Holder
from kuota.exporter.attribution import PodGpuFigures
from kuota.exporter.pod_directory import PodInfo
from kuota.exporter.sampling import NodeSampler, SamplerSettings
from kuota.exporter.snapshot import PODRESOURCES, Snapshot
from tests.fakes import proc_tree
from tests.fakes.nvml.scenario import Busy, Process, Scenario, h100s
from tests.fakes.podresources_server import Assigned, FakeKubelet
from tests.waiting import async_wait_until

GPUS = h100s(2)
SHARED = GPUS[0].uuid
NOTEBOOK = PodInfo(
    uid="11111111-1111-1111-1111-111111111111", namespace="team-a", name="notebook", containers={"a" * 64: "main"}
)
TRAINER = PodInfo(
    uid="22222222-2222-2222-2222-222222222222", namespace="team-b", name="trainer", containers={"b" * 64: "worker"}
)


def two_time_sliced_pods() -> Scenario:
    return Scenario(
        gpus=GPUS,
        processes=(Process(0, 1001), Process(0, 2001), Process(0, 2002)),
        busy=(Busy(0, 1001, sm=10), Busy(0, 2001, sm=40), Busy(0, 2002, sm=20)),
        epoch=time.time(),
    )


def write_proc(root: Path) -> None:
    proc_tree.write_process(root, 1001, proc_tree.systemd_v2(NOTEBOOK.uid, "a" * 64))
    proc_tree.write_process(root, 2001, proc_tree.cgroupfs_v1(TRAINER.uid, "b" * 64))
    proc_tree.write_process(root, 2002, proc_tree.cgroupfs_v1(TRAINER.uid, "b" * 64))


@asynccontextmanager
async def running(sampler: NodeSampler) -> AsyncIterator[NodeSampler]:
    task = asyncio.create_task(sampler.run())
    try:
        yield sampler
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def settings(tmp_path: Path, **changes: object) -> SamplerSettings:
    base: dict[str, object] = dict(
        node_name="gpu-node-1",
        proc_root=tmp_path / "proc",
        pod_resources_socket=tmp_path / "kubelet.sock",
        process_interval=0.2,
        device_interval=0.2,
        pod_resources_interval=0.2,
        utilization_window=1.0,
        nvml_retry_interval=0.2,
    )
    base.update(changes)
    return SamplerSettings(**base)  # type: ignore[arg-type]


def figures_of(snapshot: Snapshot) -> dict[Holder, PodGpuFigures]:
    return {f.holder: f for f in snapshot.attribution.figures if f.device_uuid == SHARED}


def settled(sampler: NodeSampler, check: Callable[[dict[Holder, PodGpuFigures]], bool]) -> Callable[..., object]:
    async def probe() -> dict[Holder, PodGpuFigures] | None:
        found = figures_of(sampler.snapshot)
        return found if check(found) else None

    return probe


async def test_two_time_sliced_pods_on_one_gpu_get_their_own_sm_and_memory(tmp_path: Path, scenario_path: Path) -> None:
    two_time_sliced_pods().write(scenario_path)
    write_proc(tmp_path / "proc")
    a, b = Holder("team-a", "notebook", "main"), Holder("team-b", "trainer", "worker")
    async with FakeKubelet(tmp_path / "kubelet.sock") as kubelet:
        kubelet.assign(
            [
                Assigned("team-a", "notebook", "main", (f"{SHARED}::0",)),
                Assigned("team-b", "trainer", "worker", (f"{SHARED}::1",)),
            ]
        )
        sampler = NodeSampler(settings(tmp_path))
        sampler.set_pods({p.uid: p for p in (NOTEBOOK, TRAINER)})
        async with running(sampler):
            found = await async_wait_until(
                settled(sampler, lambda f: {a, b} <= f.keys() and f[a].sm_percent == 10 and f[b].sm_percent == 60),
                "per-pod SM of 10 % and 60 % on the shared GPU",
                timeout=15,
            )
    assert found[a].allocated and found[b].allocated
    assert found[a].memory_bytes == 1 << 30 and found[b].memory_bytes == 2 << 30
    assert sampler.snapshot.attribution.holders[SHARED] == (a, b)
    assert sampler.snapshot.ready


async def test_a_missing_kubelet_socket_keeps_gpu_series_but_is_not_ready_until_the_socket_appears(
    tmp_path: Path, scenario_path: Path
) -> None:
    two_time_sliced_pods().write(scenario_path)
    write_proc(tmp_path / "proc")
    sampler = NodeSampler(settings(tmp_path, pod_resources_timeout=0.2))
    sampler.set_pods({p.uid: p for p in (NOTEBOOK, TRAINER)})
    async with running(sampler):
        await async_wait_until(
            lambda: _async(sampler.snapshot.errors.get(PODRESOURCES, 0) >= 2 and sampler.snapshot.devices is not None),
            "two failed PodResources reads while NVML keeps reporting",
            timeout=15,
        )
        missing = sampler.snapshot
        async with FakeKubelet(tmp_path / "kubelet.sock"):
            await async_wait_until(
                lambda: _async(sampler.snapshot.ready), "readiness once the socket answers", timeout=15
            )
    assert not missing.ready
    assert "kubelet.sock" in missing.not_ready_reason and "--pod-resources-socket" in missing.not_ready_reason
    assert missing.devices is not None and len(missing.devices.readings) == 2
    assert missing.attribution.holders == {}
    assert all(not f.allocated for f in missing.attribution.figures)
    assert {f.holder.pod for f in missing.attribution.figures} == {"notebook", "trainer"}


async def test_nvml_unavailable_reports_not_ready_and_recovers_when_the_driver_appears(
    tmp_path: Path, scenario_path: Path
) -> None:
    Scenario(gpus=GPUS, init_error=9).write(scenario_path)
    (tmp_path / "proc").mkdir()
    sampler = NodeSampler(settings(tmp_path))
    async with FakeKubelet(tmp_path / "kubelet.sock"), running(sampler):
        await async_wait_until(
            lambda: _async("driver is loaded" in sampler.snapshot.not_ready_reason),
            "a not-ready reason naming the driver",
            timeout=10,
        )
        assert sampler.snapshot.devices is None
        two_time_sliced_pods().write(scenario_path)
        await async_wait_until(lambda: _async(sampler.snapshot.ready), "readiness after the driver loads", timeout=10)
    assert sampler.snapshot.devices is not None
    assert len(sampler.snapshot.devices.readings) == 2


async def _async(value: bool) -> bool:
    return value
