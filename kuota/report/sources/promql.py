"""The PromQL the report asks, built from the window and the GPU series found (pure string building).

Prometheus 2.x range selectors include both ends, so a bare ``[1h]`` sees the sample that closed the previous
hour too. Hourly and window sums therefore use ranges 1 ms short of the span (``[3599999ms:60s]``): with a
resolution-aligned end, each span then holds exactly ``span / resolution`` evaluation points and consecutive
hours never share one. Counters keep the full, inclusive range: ``increase`` is exact when samples sit on
both ends and only extrapolates (by at most one scrape interval) when they do not; a counter series first
scraped inside the window counts from zero. A window shorter than an hour is its own one "hour".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from kuota.report.figures.window import trend_day_s

GPU_RESOURCE = "nvidia.com/gpu"
MODEL_LABEL = "modelName"
KUOTA_UTIL = "kuota_pod_gpu_sm_utilization_percent"
KUOTA_ALLOCATED = "kuota_gpu_allocated"
KUOTA_UP = "kuota_gpu_up"
DCGM_UTIL = "DCGM_FI_DEV_GPU_UTIL"
KUOTA_MEMORY = "kuota_pod_gpu_memory_used_bytes"
DCGM_MEMORY = "DCGM_FI_DEV_FB_USED"  # MiB
WAIT_BUCKET = "kueue_admission_wait_time_seconds_bucket"
PENDING = "kueue_pending_workloads"
USAGE = "kueue_cluster_queue_resource_usage"
NOMINAL = "kueue_cluster_queue_nominal_quota"
PREEMPTED = "kueue_preempted_workloads_total"
EVICTED = "kueue_evicted_workloads_total"


class GpuFamily(StrEnum):
    KUOTA = "kuota"
    DCGM = "dcgm"


@dataclass(frozen=True)
class GpuSeries:
    """Which per-pod GPU series to read, and whether kube-prometheus moved the pod's labels to exported_*."""

    family: GpuFamily
    relabelled: bool
    has_util: bool
    has_inventory: bool
    has_memory: bool = False

    def _relabel(self, expr: str) -> str:
        if not self.relabelled:
            return expr
        renamed = f'label_replace({expr}, "namespace", "$1", "exported_namespace", "(.+)")'
        return f'label_replace({renamed}, "pod", "$1", "exported_pod", "(.+)")'

    def _selector(self, metric: str) -> str:
        return f'{metric}{{{"exported_namespace" if self.relabelled else "namespace"}!=""}}'

    def _pod_series(self, metric: str) -> str:
        return self._relabel(self._selector(metric))

    def _windowed(self, metric: str, range_: str, function: Callable[[str], str]) -> str:
        """``function`` of a per-pod series' raw samples over ``range_`` (before relabelling: label_replace
        gives no range vector)."""
        return self._relabel(function(f"{self._selector(metric)}[{range_}]"))

    @property
    def memory_metric(self) -> str:
        return KUOTA_MEMORY if self.family is GpuFamily.KUOTA else DCGM_MEMORY

    def memory_peak(self, range_: str) -> str:
        """The most GPU memory each pod used on one GPU over ``range_``, in bytes (dcgm-exporter's is MiB)."""
        peak = self._windowed(self.memory_metric, range_, lambda samples: f"max_over_time({samples})")
        scale = "" if self.family is GpuFamily.KUOTA else " * 1048576"
        return f"max by (namespace, pod) ({peak}){scale}"

    def util_p95(self, range_: str) -> str:
        """Each pod's p95 SM use over ``range_``: the 95th percentile of each of its GPUs' samples, the highest."""
        metric = KUOTA_UTIL if self.family is GpuFamily.KUOTA else DCGM_UTIL
        p95 = self._windowed(metric, range_, lambda samples: f"quantile_over_time(0.95, {samples})")
        return f"max by (namespace, pod) ({p95})"

    @property
    def util(self) -> str:
        """Percent busy, one series per (pod, GPU)."""
        return self._pod_series(KUOTA_UTIL if self.family is GpuFamily.KUOTA else DCGM_UTIL)

    @property
    def allocated(self) -> str:
        """1 per (pod, GPU) while the pod holds the GPU."""
        if self.family is GpuFamily.KUOTA:
            return self._pod_series(KUOTA_ALLOCATED)
        # dcgm-exporter labels a GPU with the pod it is allocated to, so a labelled series is an allocation
        return f"({self._pod_series(DCGM_UTIL)} * 0 + 1)"

    @property
    def inventory(self) -> str:
        """Number of GPUs present, whatever their state."""
        if self.family is GpuFamily.KUOTA:
            return f"count({KUOTA_UP})"
        return f"count(count by (UUID) ({DCGM_UTIL}))"

    @property
    def cluster_used(self) -> str:
        """Busy GPUs (fractional), counting each physical GPU once."""
        if self.family is GpuFamily.KUOTA:
            return f"sum({self.util}) / 100"
        return f"sum(max by (UUID) ({DCGM_UTIL})) / 100"

    def by_model(self, expr: str) -> str:
        """``expr`` (per pod and GPU) with the GPU's ``modelName``: dcgm-exporter's series carry it; kuota's pod
        series take it from the GPU's ``DCGM_FI_DEV_GPU_UTIL`` (which kuota's exporter also exports) by UUID,
        and keep no model where none is known (``or on (UUID)``), so no GPU-hour is lost to the join."""
        if self.family is GpuFamily.DCGM:
            return expr
        # one model per UUID even if two series disagreed: a join must never fail on a duplicate
        models = f"topk by (UUID) (1, group by (UUID, {MODEL_LABEL}) ({DCGM_UTIL}))"
        return f"(({expr}) * on (UUID) group_left ({MODEL_LABEL}) {models}) or on (UUID) ({expr})"

    @property
    def names(self) -> list[str]:
        if self.family is GpuFamily.KUOTA:
            return [KUOTA_ALLOCATED] + ([KUOTA_UTIL] if self.has_util else [])
        return [DCGM_UTIL]


def span(seconds: int) -> str:
    """A range that excludes its left end (see the module docstring)."""
    return f"{seconds * 1000 - 1}ms"


def presence(metric: str, window_s: int, matcher: str = "") -> str:
    return f"count(count_over_time({metric}{{{matcher}}}[{window_s}s]))"


def _increase(counter: str, range_s: int) -> str:
    """``increase`` over ``range_s``, counting a series first scraped inside it from zero: a counter child is
    created at its first increment, so Prometheus 2.x first sees it at, say, 4 and ``increase`` alone would count
    0 (a ClusterQueue's first admissions or preemptions, every series of a new leader)."""
    window = f"[{range_s}s]"
    born = f"min_over_time({counter}{window}) unless {counter} offset {range_s}s"
    return f"(increase({counter}{window}) + ({born})) or increase({counter}{window})"


@dataclass(frozen=True)
class Queries:
    """Every query of one report, given the window length and resolution."""

    window_s: int
    resolution_s: int
    idle_percent: float
    idle_elsewhere_gpus: int

    def _span(self, seconds: int) -> str:
        """``span``, never reaching before the window: an "hour" of a window shorter than an hour is the window."""
        return span(min(seconds, self.window_s))

    def _gpu_hours(self, expr: str, seconds: int) -> str:
        return f"sum_over_time(({expr})[{self._span(seconds)}:{self.resolution_s}s]) * {self.resolution_s} / 3600"

    def _avg(self, expr: str, seconds: int) -> str:
        return f"avg_over_time(({expr})[{self._span(seconds)}:{self.resolution_s}s])"

    def _max(self, expr: str, seconds: int) -> str:
        return f"max_over_time(({expr})[{self._span(seconds)}:{self.resolution_s}s])"

    def _steps(self, indicator: str) -> str:
        return f"sum_over_time(({indicator})[{span(self.window_s)}:{self.resolution_s}s])"

    # GPU series, hourly (range queries, step 1h)
    def namespace_used_hourly(self, gpu: GpuSeries) -> str:
        return self._gpu_hours(f"sum by (namespace, {MODEL_LABEL}) ({gpu.by_model(gpu.util)}) / 100", 3600)

    def pod_allocated_hourly(self, gpu: GpuSeries) -> str:
        return self._gpu_hours(f"sum by (namespace, pod, {MODEL_LABEL}) ({gpu.by_model(gpu.allocated)})", 3600)

    def pod_memory_peak(self, gpu: GpuSeries) -> str:
        return gpu.memory_peak(span(self.window_s))

    def pod_util_p95(self, gpu: GpuSeries) -> str:
        return gpu.util_p95(span(self.window_s))

    def models_seen(self) -> str:
        """GPUs per model in the window, each GPU (UUID) once, from dcgm-exporter's ``modelName``."""
        latest = f"last_over_time({DCGM_UTIL}[{span(self.window_s)}])"
        return f"count by ({MODEL_LABEL}) (group by (UUID, {MODEL_LABEL}) ({latest}))"

    def pod_idle_hourly(self, gpu: GpuSeries) -> str:
        """GPU-hours each pod held GPUs whose hourly mean was under the idle threshold."""
        sub = f"[{self._span(3600)}:{self.resolution_s}s]"
        idle = f"(avg_over_time(({gpu.util}){sub}) < bool {self.idle_percent:g})"
        held = f"count_over_time(({gpu.util}){sub})"
        return f"sum by (namespace, pod) ({idle} * {held}) * {self.resolution_s} / 3600"

    def inventory_hourly(self, gpu: GpuSeries) -> str:
        return self._gpu_hours(gpu.inventory, 3600)

    def cluster_used_hourly(self, gpu: GpuSeries) -> str:
        return self._gpu_hours(gpu.cluster_used, 3600)

    # queue series, hourly
    @staticmethod
    def _gpu_quota(metric: str) -> str:
        return f'sum by (cluster_queue) ({metric}{{resource="{GPU_RESOURCE}"}})'

    @staticmethod
    def _borrowed() -> str:
        gpu = f'{{resource="{GPU_RESOURCE}"}}'
        return f"sum by (cluster_queue) (clamp_min({USAGE}{gpu} - {NOMINAL}{gpu}, 0))"

    @staticmethod
    def _unused() -> str:
        gpu = f'{{resource="{GPU_RESOURCE}"}}'
        return f"clamp_min({NOMINAL}{gpu} - {USAGE}{gpu}, 0)"

    def usage_by_flavor_hourly(self) -> str:
        gpu = f'{{resource="{GPU_RESOURCE}"}}'
        return self._gpu_hours(f"sum by (cluster_queue, flavor) ({USAGE}{gpu})", 3600)

    def nominal_hourly(self) -> str:
        return self._gpu_hours(self._gpu_quota(NOMINAL), 3600)

    def usage_hourly(self) -> str:
        return self._gpu_hours(self._gpu_quota(USAGE), 3600)

    def borrowed_hourly(self) -> str:
        return self._gpu_hours(self._borrowed(), 3600)

    def pending_hourly(self) -> str:
        return self._avg(f"sum by (cluster_queue) ({PENDING})", 3600)

    # queue series, whole window (instant queries at the window's end)
    def wait_buckets(self) -> str:
        return f"sum by (cluster_queue, le) ({_increase(WAIT_BUCKET, self.window_s)})"

    def wait_buckets_daily(self) -> str:
        """Range query, one step per trend day: each point counts the admissions of the day that ends at it."""
        return f"sum by (cluster_queue, le) ({_increase(WAIT_BUCKET, trend_day_s(self.window_s))})"

    def pending_average(self) -> str:
        return self._avg(f"sum by (cluster_queue) ({PENDING})", self.window_s)

    def pending_max(self) -> str:
        return self._max(f"sum by (cluster_queue) ({PENDING})", self.window_s)

    def cluster_pending_max(self) -> str:
        """The most workloads pending at once in all ClusterQueues together: the maximum of the sum, which the
        per-queue maxima cannot give (their sum counts peaks at different times as one)."""
        return self._max(f"sum({PENDING})", self.window_s)

    def cohorts(self) -> str:
        nominal = f'{NOMINAL}{{resource="{GPU_RESOURCE}"}}'
        return f"max by (cluster_queue, cohort) (last_over_time({nominal}[{self.window_s}s]))"

    def _waiting(self) -> str:
        return f"(sum by (cluster_queue) ({PENDING}) > bool 0)"

    def _waiting_while_idle_elsewhere(self) -> str:
        # Idle is quota nobody uses: what a queue lends is in the borrower's usage, so the cluster's idle quota is
        # all nominal less all usage, not the sum of every lender's unused nominal (that counted lent GPUs twice,
        # and told a queue borrowing every spare GPU that idle quota sat elsewhere).
        gpu = f'{{resource="{GPU_RESOURCE}"}}'
        idle = f"scalar(sum({NOMINAL}{gpu}) - sum({USAGE}{gpu}))"
        elsewhere = f"({idle} - sum by (cluster_queue) ({self._unused()}))"
        return f"({self._waiting()} * ({elsewhere} >= bool {self.idle_elsewhere_gpus}))"

    def waiting_steps(self) -> str:
        return self._steps(self._waiting())

    def waiting_while_idle_steps(self) -> str:
        return self._steps(self._waiting_while_idle_elsewhere())

    def cluster_waiting_steps(self) -> str:
        return self._steps(f"max({self._waiting()})")

    def cluster_waiting_while_idle_steps(self) -> str:
        return self._steps(f"max({self._waiting_while_idle_elsewhere()})")

    def queue_steps(self) -> str:
        nominal = f'{NOMINAL}{{resource="{GPU_RESOURCE}"}}'
        return f"count_over_time(sum({nominal})[{span(self.window_s)}:{self.resolution_s}s])"

    def cluster_unused_average(self) -> str:
        return self._avg(f"sum({self._unused()})", self.window_s)

    def preemptions(self) -> str:
        return f"sum by (preempting_cluster_queue) ({_increase(PREEMPTED, self.window_s)})"

    def evictions(self) -> str:
        return f"sum by (cluster_queue, reason) ({_increase(EVICTED, self.window_s)})"
