"""A generated week whose pod levers are known by construction: one team per lever, and one with nothing to tune.

The week of synthetic_week (Monday 2026-09-28 00:00 UTC to Monday 2026-10-05 00:00 UTC, samples every 5
minutes), 16 H100s (2 nodes x 8), no queues: each namespace is a team of its own.

- notebooks: ``notebook-bob`` holds 1 GPU all week, 60% busy in working hours (Mon-Fri 9-19 UTC) and 1% (idle)
  otherwise, 30 GiB of memory. Its idle runs: Monday 0-9 (9 h), four nights of 14 h, Friday 19:00 to the
  window's end (53 h): 118 idle GPU-hours (70 night, 48 weekend).
- serving: ``server-0``..``server-2`` hold 1 GPU each all week at 20% SM and 12 GiB: inference-like, each fits
  MIG 2g.20gb (12 GiB + 10% = 14.2 GB; 1g.20gb has only 1/7 of the compute), three of which pack into 1 GPU.
- training: ``small-train`` holds 1 GPU from Tuesday 00:00 to Friday 00:00 (72 h) at 25% SM and 16 GiB: fits
  an L4 (24 GB), which the cluster has none of.
- steady: ``trainer-big`` holds 8 GPUs all week at 90% SM and 70 GiB: nothing to tune.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from tests.integration.report.openmetrics import OpenMetricsHistory, gpu_labels, gpus_up, pod_gpu_labels
from tests.integration.report.synthetic_week import END, START, STEP_S, is_workday_hour

MODEL = "NVIDIA H100 80GB HBM3"
GIB = 2**30
NODES = ("node-a", "node-b")


class GpuExporters(StrEnum):
    KUOTA = "kuota"  # kuota's exporter, with dcgm-exporter beside it for the model
    DCGM_ONLY = "dcgm-only"  # dcgm-exporter alone, relabelled by kube-prometheus


@dataclass(frozen=True)
class PodGpus:
    namespace: str
    pod: str
    node: str
    gpus: tuple[int, ...]
    present: Callable[[int], bool]
    util: Callable[[int], float]
    memory_gib: float


def _always(hour: int) -> bool:
    return True


PODS = (
    PodGpus("notebooks", "notebook-bob", "node-b", (0,), _always, lambda h: 60.0 if is_workday_hour(h) else 1.0, 30),
    *(PodGpus("serving", f"server-{i}", "node-b", (1 + i,), _always, lambda h: 20.0, 12) for i in range(3)),
    PodGpus("training", "small-train", "node-b", (4,), lambda h: 24 <= h < 96, lambda h: 25.0, 16),
    PodGpus("steady", "trainer-big", "node-a", tuple(range(8)), _always, lambda h: 90.0, 70),
)


def _samples() -> Iterator[tuple[int, int]]:
    """(time, hour of the window) for every sample time inside the window."""
    for t in range(START + STEP_S, END + 1, STEP_S):
        yield t, (t - START - 1) // 3600


def _holder(node: str, gpu: int, hour: int) -> PodGpus | None:
    return next((p for p in PODS if p.node == node and gpu in p.gpus and p.present(hour)), None)


def history(exporters: GpuExporters) -> OpenMetricsHistory:
    om = OpenMetricsHistory()
    if exporters is GpuExporters.KUOTA:
        _kuota_series(om)
    _dcgm_series(om, relabelled=exporters is GpuExporters.DCGM_ONLY)
    return om


def _kuota_series(om: OpenMetricsHistory) -> None:
    gpus_up(om, NODES, 8, (t for t, _ in _samples()))
    for pod in PODS:
        for gpu in pod.gpus:
            labels = pod_gpu_labels(pod.node, gpu, pod.namespace, pod.pod)
            times = [(t, h) for t, h in _samples() if pod.present(h)]
            om.gauge("kuota_gpu_allocated", labels, ((t, 1) for t, _ in times))
            om.gauge("kuota_pod_gpu_sm_utilization_percent", labels, ((t, pod.util(h)) for t, h in times))
            om.gauge("kuota_pod_gpu_memory_used_bytes", labels, ((t, pod.memory_gib * GIB) for t, _ in times))


def _dcgm_series(om: OpenMetricsHistory, *, relabelled: bool) -> None:
    """Per GPU: utilization and framebuffer used (MiB); with ``relabelled``, the holder in exported_* labels
    (else no pod labels: kuota's exporter attributes the GPU, dcgm-exporter gives its model)."""
    for node in NODES:
        for gpu in range(8):
            device = {**gpu_labels(node, gpu), "modelName": MODEL}
            util: dict[str, tuple[dict[str, str], list[tuple[int, float]]]] = {}
            memory: dict[str, tuple[dict[str, str], list[tuple[int, float]]]] = {}
            for t, hour in _samples():
                pod = _holder(node, gpu, hour)
                labels, key = dict(device), ""
                if pod is not None and relabelled:
                    labels |= {"exported_namespace": pod.namespace, "exported_pod": pod.pod}
                    key = pod.pod
                util.setdefault(key, (labels, []))[1].append((t, pod.util(hour) if pod else 0.0))
                memory.setdefault(key, (labels, []))[1].append((t, pod.memory_gib * 1024 if pod else 0.0))
            for labels, points in util.values():
                om.gauge("DCGM_FI_DEV_GPU_UTIL", labels, points)
            if relabelled:
                for labels, points in memory.values():
                    om.gauge("DCGM_FI_DEV_FB_USED", labels, points)
