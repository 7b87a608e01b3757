"""What Prometheus answered, typed: the input of the pure figure computations (no PromQL, no HTTP here).

Hourly tuples have one entry per hour of the window. For GPU-hours an hour without a series is a real zero
(nothing held); a metric absent for the whole window is *missing data*, recorded in ``missing`` and left
``None`` here, never turned into zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Hourly = tuple[float, ...]


@dataclass(frozen=True)
class MissingSeries:
    metric: str
    consequence: str  # which figures cannot be computed without it


@dataclass(frozen=True)
class PodGpu:
    """One pod's GPUs over the window, for the pod levers."""

    held: Hourly  # GPU-hours held per hour
    model: str  # the GPU model it held most ("" where not known)
    memory_peak_bytes: float | None  # the most GPU memory it used on one GPU; None without a memory series
    sm_p95_percent: float | None  # p95 of its SM use over the window, the highest of its GPUs'


@dataclass(frozen=True)
class GpuMeasurements:
    source: str  # the series read, e.g. "kuota_gpu_allocated + kuota_pod_gpu_sm_utilization_percent"
    allocated: Mapping[str, Hourly]  # namespace -> GPU-hours held per hour
    used: Mapping[str, Hourly] | None  # namespace -> busy GPU-hours per hour (utilization / 100)
    idle_held: Mapping[tuple[str, str], Hourly] | None  # (namespace, pod) -> GPU-hours held while idle
    inventory: Hourly | None  # GPU-hours of GPUs present per hour
    cluster_used: Hourly | None
    # (namespace, GPU model) -> the same figures by the model of the GPUs held ("" where none is known)
    allocated_by_model: Mapping[tuple[str, str], Hourly] = field(default_factory=dict)
    used_by_model: Mapping[tuple[str, str], Hourly] | None = None
    pods: Mapping[tuple[str, str], PodGpu] = field(default_factory=dict)  # (namespace, pod) -> its GPUs
    models_seen: Mapping[str, float] = field(default_factory=dict)  # GPU model -> GPUs of it seen in the window
    memory_source: str | None = None  # the memory series read; None where there is none


@dataclass(frozen=True)
class QueueMeasurements:
    wait_buckets: Mapping[str, tuple[tuple[float, float], ...]]  # cq -> (upper bound, cumulative count)
    pending_average: Mapping[str, float]
    pending_max: Mapping[str, float]
    pending_hourly: Mapping[str, tuple[float | None, ...]]
    cohorts: Mapping[str, str]
    nominal: Mapping[str, Hourly]  # cq -> GPU-hours of nominal quota per hour
    usage: Mapping[str, Hourly]
    borrowed: Mapping[str, Hourly]
    waiting_steps: Mapping[str, float]
    waiting_while_idle_steps: Mapping[str, float]
    cluster_waiting_steps: float | None
    cluster_waiting_while_idle_steps: float | None
    queue_steps: float | None
    cluster_unused_average: float | None
    preemptions: Mapping[str, float] | None  # preempting cq -> count
    evictions: Mapping[str, Mapping[str, float]] | None  # cq -> reason -> count
    usage_by_flavor: Mapping[tuple[str, str], Hourly] = field(default_factory=dict)  # (cq, flavor) -> GPU-hours
    # cq -> one histogram per trend day, oldest first: (upper bound, cumulative count of that day)
    wait_buckets_daily: Mapping[str, tuple[tuple[tuple[float, float], ...], ...]] = field(default_factory=dict)
    # the most workloads pending at once in all ClusterQueues together (not the sum of each queue's most)
    cluster_pending_max: float | None = None


@dataclass(frozen=True)
class Measurements:
    hours: int
    gpu: GpuMeasurements | None
    queues: QueueMeasurements | None
    missing: tuple[MissingSeries, ...] = ()
    queries: Mapping[str, str] = field(default_factory=dict)  # figure name -> PromQL, for the JSON
    notes: tuple[str, ...] = ()  # what the answers lacked (NaN points left out), said in the report
