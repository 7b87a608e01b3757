"""A generated week of exporter and manager series whose every report figure is known by construction.

The week starts Monday 2026-09-28 00:00 UTC and ends Monday 2026-10-05 00:00 UTC; samples sit every 5
minutes on the clock (one more hour before the window gives counters their baseline). Hour k of the window
(0-based) is sampled at minutes 5..60 after its start, matching the report's (start, end] hour buckets.

Three teams on 24 H100s (3 nodes x 8), ClusterQueues in cohort "gpus", nominal 8 GPUs each:

- research: one 8-GPU trainer all week, 90% busy in working hours (Mon-Fri 9-19 UTC), 30% otherwise; a
  4-GPU sweep at 95% over the weekend (borrowing 4 GPUs); 3 workloads pending in working hours.
- inference: two 1-GPU servers at 60% all week and a notebook holding 1 GPU at 2% all week.
- applied-ml (namespace "applied", mapped by a LocalQueue): one 8-GPU fine-tune at 40% in hours 24-107.

Admission waits (histogram observations in the window): research 40 in (20,40], 40 in (40,80], 20 in
(2560,5120]; inference 30 in (5,10]; applied-ml 10 in (640,1280], 10 in (1280,2560]. The manager restarts
at hour 80 (every counter resets). applied-ml preempts 2 workloads, research is evicted twice.

The GPU series come in two variants (:class:`GpuExporters`), each with the same figures to find:

- kuota's exporter and dcgm-exporter side by side, dcgm-exporter's utilization deliberately wrong (100 minus
  the truth on held GPUs, 50 on free ones): every figure must come from kuota's series;
- dcgm-exporter alone, as kube-prometheus scrapes it: ``DCGM_FI_DEV_GPU_UTIL`` per GPU, its target labels
  (``namespace``/``pod``/``container`` of the dcgm-exporter pod itself) in place, the GPU's pod moved to
  ``exported_namespace``/``exported_pod``/``exported_container`` while a pod holds it, and free GPUs at 0%.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from tests.integration.report.openmetrics import OpenMetricsHistory, gpus_up, pod_gpu_labels

START = int(datetime(2026, 9, 28, tzinfo=UTC).timestamp())
HOURS = 168
END = START + HOURS * 3600
STEP_S = 300
RESET_HOUR = 80
BUCKETS = (1, 2.5, 5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480, 40960, float("inf"))
GPU = "nvidia.com/gpu"
NODES = ("node-a", "node-b", "node-c")
GPUS_PER_NODE = 8
MODEL = "NVIDIA H100 80GB HBM3"  # dcgm-exporter's modelName of every GPU
# a second report prices GPU-hours by their model, and a GPU nobody holds (model unknown) at the default
MODEL_PRICE = 5.0
FREE_GPU_PRICE = 3.0


class GpuExporters(StrEnum):
    KUOTA_AND_DCGM = "kuota-and-dcgm"
    DCGM_ONLY = "dcgm-only"


def is_workday_hour(hour: int) -> bool:
    day, clock = divmod(hour, 24)
    return day < 5 and 9 <= clock < 19


def is_weekend_hour(hour: int) -> bool:
    return hour // 24 >= 5


def applied_running(hour: int) -> bool:
    return 24 <= hour < 108


@dataclass(frozen=True)
class PodGpus:
    namespace: str
    pod: str
    node: str
    gpus: tuple[int, ...]
    present: Callable[[int], bool]
    util: Callable[[int], float]


PODS = (
    PodGpus(
        "research",
        "trainer-0",
        "node-a",
        tuple(range(8)),
        lambda h: True,
        lambda h: 90.0 if is_workday_hour(h) else 30.0,
    ),
    PodGpus("research", "sweep-weekend", "node-c", (4, 5, 6, 7), is_weekend_hour, lambda h: 95.0),
    PodGpus("inference", "server-0", "node-b", (0,), lambda h: True, lambda h: 60.0),
    PodGpus("inference", "server-1", "node-b", (1,), lambda h: True, lambda h: 60.0),
    PodGpus("inference", "notebook-alice", "node-b", (2,), lambda h: True, lambda h: 2.0),
    PodGpus("applied", "finetune-0", "node-c", (0, 1, 2, 3), applied_running, lambda h: 40.0),
    PodGpus("applied", "finetune-1", "node-b", (3, 4, 5, 6), applied_running, lambda h: 40.0),
)

# ClusterQueue -> list of (upper bound of the bucket holding the observation, count)
WAITS = {
    "research": ((40, 40), (80, 40), (5120, 20)),
    "inference": ((10, 30),),
    "applied-ml": ((1280, 10), (2560, 10)),
}
BEFORE_WINDOW_OBSERVATIONS = 7  # per queue, in its first bucket, during the hour before the window


def _samples() -> Iterator[tuple[int, int | None]]:
    """(time, hour of the window or None before it) for every sample time."""
    for t in range(START - 3600 + STEP_S, END + 1, STEP_S):
        yield t, (None if t <= START else (t - START - 1) // 3600)


def usage(cluster_queue: str, hour: int) -> int:
    if cluster_queue == "research":
        return 12 if is_weekend_hour(hour) else 8
    if cluster_queue == "inference":
        return 3
    return 8 if applied_running(hour) else 0


def pending(cluster_queue: str, hour: int) -> int:
    return 3 if cluster_queue == "research" and is_workday_hour(hour) else 0


def _observation_times(cluster_queue: str) -> list[tuple[int, float]]:
    """(sample time at which it is counted, bucket bound), spread evenly over the window."""
    bounds = [float(bound) for bound, count in WAITS[cluster_queue] for _ in range(count)]
    spacing = (HOURS * 3600) // (len(bounds) + 1)
    times: list[tuple[int, float]] = []
    for index, bound in enumerate(bounds):
        t = START + spacing * (index + 1)
        t += STEP_S - t % STEP_S if t % STEP_S else 0
        if t == START + RESET_HOUR * 3600:  # never on the restart sample itself
            t += STEP_S
        times.append((t, bound))
    return times


def history(exporters: GpuExporters = GpuExporters.KUOTA_AND_DCGM) -> OpenMetricsHistory:
    om = OpenMetricsHistory()
    if exporters is GpuExporters.KUOTA_AND_DCGM:
        _kuota_series(om)
        _dcgm_series(om, held_util=lambda pod, hour: 100.0 - pod.util(hour), free_util=50.0)
    else:
        _dcgm_series(om, held_util=lambda pod, hour: pod.util(hour), free_util=0.0)
    _queue_series(om)
    return om


def _kuota_series(om: OpenMetricsHistory) -> None:
    gpus_up(om, NODES, GPUS_PER_NODE, (t for t, _ in _samples()))
    for pod in PODS:
        for gpu in pod.gpus:
            labels = pod_gpu_labels(pod.node, gpu, pod.namespace, pod.pod)
            times = [(t, h) for t, h in _samples() if h is not None and pod.present(h)]
            om.gauge("kuota_gpu_allocated", labels, ((t, 1) for t, _ in times))
            om.gauge("kuota_pod_gpu_sm_utilization_percent", labels, ((t, pod.util(h)) for t, h in times))


def _holder(node: str, gpu: int, hour: int) -> PodGpus | None:
    return next((p for p in PODS if p.node == node and gpu in p.gpus and p.present(hour)), None)


def _dcgm_series(om: OpenMetricsHistory, held_util: Callable[[PodGpus, int], float], free_util: float) -> None:
    """One series per GPU and holder; a new series (new exported_* labels) whenever the holder changes."""
    for node in NODES:
        scraped = {
            "namespace": "gpu-operator",
            "pod": f"nvidia-dcgm-exporter-{node}",
            "container": "nvidia-dcgm-exporter",
            "job": "nvidia-dcgm-exporter",
            "instance": f"{node}:9400",
        }
        for gpu in range(GPUS_PER_NODE):
            device = {
                "Hostname": node,
                "gpu": str(gpu),
                "UUID": f"GPU-{node}-{gpu}",
                "device": f"nvidia{gpu}",
                "modelName": MODEL,
            }
            series: dict[str, tuple[dict[str, str], list[tuple[int, float]]]] = {}
            for t, hour in _samples():
                if hour is None or (pod := _holder(node, gpu, hour)) is None:
                    key, labels, value = "", device | scraped, free_util
                else:
                    exported = {
                        "exported_namespace": pod.namespace,
                        "exported_pod": pod.pod,
                        "exported_container": "main",
                    }
                    key, labels, value = pod.pod, device | scraped | exported, held_util(pod, hour)
                series.setdefault(key, (labels, []))[1].append((t, value))
            for labels, points in series.values():
                om.gauge("DCGM_FI_DEV_GPU_UTIL", labels, points)


def _queue_series(om: OpenMetricsHistory) -> None:
    for cq in WAITS:
        quota = {"cohort": "gpus", "cluster_queue": cq, "flavor": "h100-on-demand", "resource": GPU}
        om.gauge("kueue_cluster_queue_nominal_quota", quota, ((t, 8) for t, _ in _samples()))
        om.gauge(
            "kueue_cluster_queue_resource_usage", quota, ((t, usage(cq, 0 if h is None else h)) for t, h in _samples())
        )
        for status in ("active", "inadmissible"):
            om.gauge(
                "kueue_pending_workloads",
                {"cluster_queue": cq, "status": status},
                ((t, pending(cq, h) if status == "active" and h is not None else 0) for t, h in _samples()),
            )
    for cq in WAITS:
        observed = _observation_times(cq)
        first_bound = WAITS[cq][0][0]
        for bound in BUCKETS:
            om.add(
                "kueue_admission_wait_time_seconds",
                "histogram",
                "kueue_admission_wait_time_seconds_bucket",
                {"cluster_queue": cq, "priority_class": "", "le": "+Inf" if bound == float("inf") else f"{bound:g}"},
                _cumulative(observed, bound, first_bound),
            )
    om.counter(
        "kueue_preempted_workloads_total",
        {"preempting_cluster_queue": "applied-ml", "reason": "InCohortReclamation"},
        _counter_series([START + 30 * 3600, START + 31 * 3600]),
    )
    om.counter(
        "kueue_evicted_workloads_total",
        {"cluster_queue": "research", "reason": "Preempted", "underlying_cause": "", "priority_class": ""},
        _counter_series([START + 30 * 3600, START + 31 * 3600]),
    )


def _cumulative(observed: list[tuple[int, float]], bound: float, first_bound: float) -> Iterator[tuple[int, float]]:
    """A bucket counter through the restart: observations before the window count in the baseline only."""
    baseline = BEFORE_WINDOW_OBSERVATIONS if first_bound <= bound else 0
    restart = START + RESET_HOUR * 3600
    for t, hour in _samples():
        in_bucket = [o for o, b in observed if b <= bound and o <= t]
        if hour is not None and t >= restart:
            yield t, float(sum(1 for o in in_bucket if o > restart))
        else:
            yield t, float(baseline + len(in_bucket))


def _counter_series(increments: list[int]) -> Iterator[tuple[int, float]]:
    restart = START + RESET_HOUR * 3600
    for t, _ in _samples():
        if t >= restart:
            yield t, float(sum(1 for i in increments if restart < i <= t))
        else:
            yield t, float(sum(1 for i in increments if i <= t))


CONFIG_YAML = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: default, namespace: applied}
spec: {clusterQueue: applied-ml}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: default, namespace: research}
spec: {clusterQueue: research}
"""
