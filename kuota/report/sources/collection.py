"""The imperative shell that asks Prometheus: finds which series exist, runs every query, types the answers.

Queries run concurrently (a few at a time, so a large window does not swamp Prometheus) inside one
TaskGroup; one failed query fails the report with that query named, never a zero in its place.

PromQL answers NaN where a gauge it reads held NaN (an exporter that could not read a GPU, a 0/0), so what a
non-finite value means is decided per query, by what the query measures:

- ``Meaning.COUNT`` (presence, steps, histogram buckets, preemptions, evictions): counts of samples, steps or
  counter increases, always finite; NaN or an infinity is an error naming the query and the series.
- ``Meaning.GAUGE`` (GPU-hours, pending depth, quota): NaN is "no data" for that point, left out and counted in
  a note of the report; an infinity is an error (no GPU is held infinitely).
- ``Meaning.LABELS`` (cohorts): only the labels are read; the value is ignored whatever it is.

So no NaN or infinity reaches a figure, a verdict or report.json.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from enum import Enum
from typing import TypeVar

from kuota.report.errors import PrometheusError, PrometheusQueryError
from kuota.report.figures.measurements import (
    GpuMeasurements,
    Hourly,
    Measurements,
    MissingSeries,
    PodGpu,
    QueueMeasurements,
)
from kuota.report.figures.window import Window, trend_day_ends, trend_day_s
from kuota.report.sources import promql
from kuota.report.sources.prometheus_api import VALUE_RANGE, InstantSample, PrometheusClient, RangeSeries
from kuota.report.sources.promql import GpuFamily, GpuSeries, Queries
from kuota.report.sources.quoting import excerpt, quoted

T = TypeVar("T")
Progress = Callable[[str], None]
_CONCURRENT_QUERIES = 4


class Meaning(Enum):
    COUNT = "count"
    GAUGE = "gauge"
    LABELS = "labels"


class _Runner:
    def __init__(self, client: PrometheusClient, window: Window, queries: dict[str, str]) -> None:
        self._client = client
        self._window = window
        self._limit = asyncio.Semaphore(_CONCURRENT_QUERIES)
        self.queries = queries
        self.no_data: dict[str, int] = {}  # figure name -> NaN points left out

    @property
    def client_url(self) -> str:
        return self._client.url

    def _refuse(self, name: str, labels: Mapping[str, str], value: float, why: str) -> PrometheusQueryError:
        series = "{" + ", ".join(f"{excerpt(key, 40)}={quoted(text)}" for key, text in list(labels.items())[:6]) + "}"
        spelled = "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
        return PrometheusQueryError(
            f"Prometheus at {self.client_url} answered {spelled} for {name} (query {self.queries[name]!r}), "
            f"series {series}: {why}; check the exporter of the series it reads"
        )

    def _keep(self, name: str, meaning: Meaning, labels: Mapping[str, str], value: float) -> bool:
        """Whether a value is a figure (False: NaN in a gauge, counted); raises for a value it cannot be."""
        if meaning is Meaning.LABELS or math.isfinite(value):
            return True
        if math.isinf(value):
            raise self._refuse(name, labels, value, "a figure of the report cannot be infinite")
        if meaning is Meaning.COUNT:
            raise self._refuse(name, labels, value, "a count cannot be NaN")
        self.no_data[name] = self.no_data.get(name, 0) + 1
        return False

    async def instant(self, name: str, query: str, meaning: Meaning) -> list[InstantSample]:
        self.queries[name] = query
        async with self._limit:
            samples = await self._client.instant(query, self._window.end)
        return [s for s in samples if self._keep(name, meaning, s.labels, s.value)]

    async def hourly(self, name: str, query: str) -> list[RangeSeries]:
        """Range queries are all of gauges (hourly GPU-hours and averages)."""
        self.queries[name] = query
        bucket = self._window.bucket_s
        async with self._limit:
            series = await self._client.range(query, self._window.start + bucket, self._window.end, bucket)
        return [
            RangeSeries(s.labels, {t: v for t, v in s.points.items() if self._keep(name, Meaning.GAUGE, s.labels, v)})
            for s in series
        ]

    async def daily(self, name: str, query: str) -> list[RangeSeries]:
        """Range queries of counts (histogram buckets), one point per trend day: see ``trend_day_ends``."""
        self.queries[name] = query
        ends = trend_day_ends(self._window)
        async with self._limit:
            series = await self._client.range(query, ends[0], ends[-1], trend_day_s(self._window.length_s))
        return [
            RangeSeries(s.labels, {t: v for t, v in s.points.items() if self._keep(name, Meaning.COUNT, s.labels, v)})
            for s in series
        ]

    async def scalar(self, name: str, query: str, meaning: Meaning) -> float | None:
        samples = await self.instant(name, query, meaning)
        return samples[0].value if samples else None

    def notes(self) -> tuple[str, ...]:
        return tuple(
            f"Prometheus answered NaN for {count} point(s) of {name}: they count as no data."
            for name, count in sorted(self.no_data.items())
        )


K = TypeVar("K")


def _summed(pairs: Iterable[tuple[K, Hourly]]) -> dict[K, Hourly]:
    """Hourly series added up per key (two series may share a key once their labels are narrowed)."""
    totals: dict[K, Hourly] = {}
    for key, hourly in pairs:
        previous = totals.get(key)
        totals[key] = hourly if previous is None else tuple(a + b for a, b in zip(previous, hourly, strict=True))
    return totals


def _by_pair(series: list[RangeSeries], first: str, second: str, window: Window) -> dict[tuple[str, str], Hourly]:
    return _summed(((s.labels.get(first, ""), s.labels.get(second, "")), _hourly(s, window)) for s in series)


def _namespace_totals(by_model: Mapping[tuple[str, str], Hourly]) -> dict[str, Hourly]:
    return _summed((namespace, hourly) for (namespace, _), hourly in by_model.items())


def _hourly(series: RangeSeries, window: Window) -> Hourly:
    return tuple(series.points.get(t, 0.0) for t in window.hour_ends())


def _hourly_optional(series: RangeSeries, window: Window) -> tuple[float | None, ...]:
    return tuple(series.points.get(t) for t in window.hour_ends())


def _by_label(series: list[RangeSeries], label: str, window: Window) -> dict[str, Hourly]:
    return {s.labels.get(label, ""): _hourly(s, window) for s in series}


def _values(samples: list[InstantSample], label: str) -> dict[str, float]:
    return {s.labels.get(label, ""): s.value for s in samples}


def _single(series: list[RangeSeries], window: Window) -> Hourly | None:
    return _hourly(series[0], window) if series else None


async def _gather(**jobs: Awaitable[T]) -> dict[str, T]:
    async with asyncio.TaskGroup() as group:
        tasks = {name: group.create_task(_awaited(job)) for name, job in jobs.items()}
    return {name: task.result() for name, task in tasks.items()}


async def _awaited(job: Awaitable[T]) -> T:
    return await job


async def _detect_gpu_series(run: _Runner, window_s: int) -> GpuSeries | None:
    found = await _gather(
        kuota=run.scalar("presence.kuota_allocated", promql.presence(promql.KUOTA_ALLOCATED, window_s), Meaning.COUNT),
        kuota_exported=run.scalar(
            "presence.kuota_allocated_exported",
            promql.presence(promql.KUOTA_ALLOCATED, window_s, 'exported_namespace!=""'),
            Meaning.COUNT,
        ),
        kuota_util=run.scalar("presence.kuota_util", promql.presence(promql.KUOTA_UTIL, window_s), Meaning.COUNT),
        kuota_up=run.scalar("presence.kuota_up", promql.presence(promql.KUOTA_UP, window_s), Meaning.COUNT),
        dcgm=run.scalar("presence.dcgm", promql.presence(promql.DCGM_UTIL, window_s), Meaning.COUNT),
        dcgm_exported=run.scalar(
            "presence.dcgm_exported",
            promql.presence(promql.DCGM_UTIL, window_s, 'exported_namespace!=""'),
            Meaning.COUNT,
        ),
        kuota_memory=run.scalar("presence.kuota_memory", promql.presence(promql.KUOTA_MEMORY, window_s), Meaning.COUNT),
        dcgm_memory=run.scalar("presence.dcgm_memory", promql.presence(promql.DCGM_MEMORY, window_s), Meaning.COUNT),
    )
    if found["kuota"]:
        return GpuSeries(
            GpuFamily.KUOTA,
            bool(found["kuota_exported"]),
            bool(found["kuota_util"]),
            bool(found["kuota_up"]),
            bool(found["kuota_memory"]),
        )
    if found["dcgm"]:
        return GpuSeries(GpuFamily.DCGM, bool(found["dcgm_exported"]), True, True, bool(found["dcgm_memory"]))
    return None


async def _collect_gpu(run: _Runner, window: Window, queries: Queries, gpu: GpuSeries) -> GpuMeasurements:
    # the namespaces' GPU-hours are their pods' summed here: one query of the heaviest series, not two
    jobs: dict[str, Awaitable[list[RangeSeries]]] = {
        "pods": run.hourly("pod_allocated_hourly", queries.pod_allocated_hourly(gpu)),
    }
    if gpu.has_util:
        jobs["used"] = run.hourly("namespace_used_hourly", queries.namespace_used_hourly(gpu))
        jobs["idle"] = run.hourly("pod_idle_hourly", queries.pod_idle_hourly(gpu))
        jobs["cluster_used"] = run.hourly("cluster_used_hourly", queries.cluster_used_hourly(gpu))
    if gpu.has_inventory:
        jobs["inventory"] = run.hourly("inventory_hourly", queries.inventory_hourly(gpu))
    pod_jobs: dict[str, Awaitable[list[InstantSample]]] = {
        "models": run.instant("models_seen", queries.models_seen(), Meaning.LABELS),
    }
    if gpu.has_util:
        pod_jobs["p95"] = run.instant("pod_util_p95", queries.pod_util_p95(gpu), Meaning.GAUGE)
    if gpu.has_memory:
        pod_jobs["memory"] = run.instant("pod_memory_peak", queries.pod_memory_peak(gpu), Meaning.GAUGE)
    async with asyncio.TaskGroup() as group:
        hourly_task = group.create_task(_gather(**jobs))
        pod_task = group.create_task(_gather(**pod_jobs))
    got, per_pod = hourly_task.result(), pod_task.result()
    idle = (
        {(s.labels.get("namespace", ""), s.labels.get("pod", "")): _hourly(s, window) for s in got["idle"]}
        if "idle" in got
        else None
    )
    allocated = _by_pair(got["pods"], "namespace", promql.MODEL_LABEL, window)
    used = _by_pair(got["used"], "namespace", promql.MODEL_LABEL, window) if "used" in got else None
    return GpuMeasurements(
        source=" + ".join(gpu.names) + (" (exported_namespace relabelled)" if gpu.relabelled else ""),
        allocated=_namespace_totals(allocated),
        used=_namespace_totals(used) if used is not None else None,
        idle_held=idle,
        inventory=_single(got["inventory"], window) if "inventory" in got else None,
        cluster_used=_single(got["cluster_used"], window) if "cluster_used" in got else None,
        allocated_by_model=allocated,
        used_by_model=used,
        pods=_pods(got["pods"], per_pod, window),
        models_seen={
            s.labels[promql.MODEL_LABEL]: s.value for s in per_pod["models"] if s.labels.get(promql.MODEL_LABEL)
        },
        memory_source=gpu.memory_metric if gpu.has_memory else None,
    )


def _pods(
    held: list[RangeSeries], per_pod: Mapping[str, list[InstantSample]], window: Window
) -> dict[tuple[str, str], PodGpu]:
    """Each pod's GPU-hours per hour (over all its GPUs' models), the model it held most, peak memory, p95 use."""

    def by_pod(name: str) -> dict[tuple[str, str], float] | None:
        if name not in per_pod:
            return None
        return {(s.labels.get("namespace", ""), s.labels.get("pod", "")): s.value for s in per_pod[name]}

    by_model: dict[tuple[str, str], dict[str, Hourly]] = {}
    for s in held:
        key = (s.labels.get("namespace", ""), s.labels.get("pod", ""))
        by_model.setdefault(key, {})[s.labels.get(promql.MODEL_LABEL, "")] = _hourly(s, window)
    memory, p95 = by_pod("memory"), by_pod("p95")
    pods: dict[tuple[str, str], PodGpu] = {}
    for key, models in by_model.items():
        hourly = tuple(map(sum, zip(*models.values(), strict=True)))
        model = max(models, key=lambda m: (sum(models[m]), m))
        pods[key] = PodGpu(
            held=hourly,
            model=model,
            memory_peak_bytes=memory.get(key) if memory is not None else None,
            sm_p95_percent=p95.get(key) if p95 is not None else None,
        )
    return pods


def _bucket_bound(run: _Runner, labels: Mapping[str, str], name: str = "wait_buckets") -> float:
    """A bucket's ``le``: a number inside ``VALUE_RANGE``, or +Inf."""
    text = labels.get("le")
    try:
        bound = float(text) if text is not None else math.nan
    except ValueError:
        bound = math.nan
    if bound == math.inf or (math.isfinite(bound) and (bound == 0 or VALUE_RANGE[0] <= abs(bound) <= VALUE_RANGE[1])):
        return bound
    shown = "no 'le' label" if text is None else f"le={quoted(text)}, not a bucket bound"
    raise PrometheusQueryError(
        f"Prometheus at {run.client_url} answered a series with {shown} for {name} "
        f"(query {run.queries[name]!r}); check the series {promql.WAIT_BUCKET}"
    )


def _buckets(run: _Runner, samples: list[InstantSample]) -> dict[str, tuple[tuple[float, float], ...]]:
    grouped: dict[str, list[tuple[float, float]]] = {}
    for sample in samples:
        grouped.setdefault(sample.labels.get("cluster_queue", ""), []).append(
            (_bucket_bound(run, sample.labels), sample.value)
        )
    return {cq: tuple(sorted(points)) for cq, points in grouped.items()}


def _daily_buckets(
    run: _Runner, series: list[RangeSeries], day_ends: list[int]
) -> dict[str, tuple[tuple[tuple[float, float], ...], ...]]:
    grouped: dict[str, list[list[tuple[float, float]]]] = {}
    for s in series:
        bound = _bucket_bound(run, s.labels, "wait_buckets_daily")
        days = grouped.setdefault(s.labels.get("cluster_queue", ""), [[] for _ in day_ends])
        for index, end in enumerate(day_ends):
            if end in s.points:
                days[index].append((bound, s.points[end]))
    return {cq: tuple(tuple(sorted(day)) for day in days) for cq, days in grouped.items()}


def _evictions(samples: list[InstantSample]) -> dict[str, dict[str, float]]:
    grouped: dict[str, dict[str, float]] = {}
    for sample in samples:
        reasons = grouped.setdefault(sample.labels.get("cluster_queue", ""), {})
        reasons[sample.labels.get("reason", "")] = sample.value
    return grouped


async def _collect_queues(run: _Runner, window: Window, queries: Queries) -> QueueMeasurements:
    hourly = await _gather(
        nominal=run.hourly("nominal_hourly", queries.nominal_hourly()),
        usage=run.hourly("usage_hourly", queries.usage_hourly()),
        borrowed=run.hourly("borrowed_hourly", queries.borrowed_hourly()),
        pending=run.hourly("pending_hourly", queries.pending_hourly()),
        usage_by_flavor=run.hourly("usage_by_flavor_hourly", queries.usage_by_flavor_hourly()),
        buckets_daily=run.daily("wait_buckets_daily", queries.wait_buckets_daily()),
    )
    vectors = await _gather(
        buckets=run.instant("wait_buckets", queries.wait_buckets(), Meaning.COUNT),
        pending_average=run.instant("pending_average", queries.pending_average(), Meaning.GAUGE),
        pending_max=run.instant("pending_max", queries.pending_max(), Meaning.GAUGE),
        cohorts=run.instant("cohorts", queries.cohorts(), Meaning.LABELS),
        waiting=run.instant("waiting_steps", queries.waiting_steps(), Meaning.COUNT),
        waiting_idle=run.instant("waiting_while_idle_steps", queries.waiting_while_idle_steps(), Meaning.COUNT),
        preemptions=run.instant("preemptions", queries.preemptions(), Meaning.COUNT),
        evictions=run.instant("evictions", queries.evictions(), Meaning.COUNT),
    )
    scalars = await _gather(
        cluster_waiting=run.scalar("cluster_waiting_steps", queries.cluster_waiting_steps(), Meaning.COUNT),
        cluster_waiting_idle=run.scalar(
            "cluster_waiting_while_idle_steps", queries.cluster_waiting_while_idle_steps(), Meaning.COUNT
        ),
        steps=run.scalar("queue_steps", queries.queue_steps(), Meaning.COUNT),
        unused=run.scalar("cluster_unused_average", queries.cluster_unused_average(), Meaning.GAUGE),
        pending_max=run.scalar("cluster_pending_max", queries.cluster_pending_max(), Meaning.GAUGE),
    )
    return QueueMeasurements(
        wait_buckets=_buckets(run, vectors["buckets"]),
        pending_average=_values(vectors["pending_average"], "cluster_queue"),
        pending_max=_values(vectors["pending_max"], "cluster_queue"),
        pending_hourly={s.labels.get("cluster_queue", ""): _hourly_optional(s, window) for s in hourly["pending"]},
        cohorts={s.labels.get("cluster_queue", ""): s.labels.get("cohort", "") for s in vectors["cohorts"]},
        nominal=_by_label(hourly["nominal"], "cluster_queue", window),
        usage=_by_label(hourly["usage"], "cluster_queue", window),
        borrowed=_by_label(hourly["borrowed"], "cluster_queue", window),
        waiting_steps=_values(vectors["waiting"], "cluster_queue"),
        waiting_while_idle_steps=_values(vectors["waiting_idle"], "cluster_queue"),
        cluster_waiting_steps=scalars["cluster_waiting"],
        cluster_waiting_while_idle_steps=scalars["cluster_waiting_idle"],
        queue_steps=scalars["steps"],
        cluster_unused_average=scalars["unused"],
        preemptions=_values(vectors["preemptions"], "preempting_cluster_queue") if vectors["preemptions"] else None,
        evictions=_evictions(vectors["evictions"]) if vectors["evictions"] else None,
        usage_by_flavor=_by_pair(hourly["usage_by_flavor"], "cluster_queue", "flavor", window),
        wait_buckets_daily=_daily_buckets(run, hourly["buckets_daily"], trend_day_ends(window)),
        cluster_pending_max=scalars["pending_max"],
    )


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def collect(
    client: PrometheusClient,
    window: Window,
    idle_percent: float,
    idle_elsewhere_gpus: int,
    progress: Progress,
) -> Measurements:
    """Ask Prometheus everything the report needs for ``window``; name what is missing. Raises the
    :class:`~kuota.report.errors.PrometheusError` of the first query that failed."""
    try:
        return await _collect(client, window, idle_percent, idle_elsewhere_gpus, progress)
    except* PrometheusError as group:
        # concurrent queries fail together; the first one's message is the one to act on
        raise _first_leaf(group) from None


async def _collect(
    client: PrometheusClient,
    window: Window,
    idle_percent: float,
    idle_elsewhere_gpus: int,
    progress: Progress,
) -> Measurements:
    queries = Queries(window.length_s, window.resolution_s, idle_percent, idle_elsewhere_gpus)
    run = _Runner(client, window, {})
    missing: list[MissingSeries] = []

    progress(f"looking for GPU and queue series in {window.describe()}")
    async with asyncio.TaskGroup() as group:
        gpu_task = group.create_task(_detect_gpu_series(run, window.length_s))
        presence_task = group.create_task(_queue_presence(run, window.length_s))
    gpu_found = gpu_task.result()
    present = presence_task.result()

    gpu: GpuMeasurements | None = None
    if gpu_found is None:
        missing.append(
            MissingSeries(
                f"{promql.KUOTA_ALLOCATED} / {promql.DCGM_UTIL}",
                "GPU utilization, allocated and used GPU-hours, idle holders and idle cost",
            )
        )
    else:
        if not gpu_found.has_util:
            missing.append(MissingSeries(promql.KUOTA_UTIL, "measured utilization, used GPU-hours, idle holders"))
        if not gpu_found.has_memory:
            missing.append(
                MissingSeries(
                    gpu_found.memory_metric,
                    "peak GPU memory per pod: the right-sizing and MIG levers cannot tell what would fit",
                )
            )
        if not gpu_found.has_inventory:
            missing.append(
                MissingSeries(promql.KUOTA_UP, "the GPU inventory (capacity falls back to the sum of nominal quotas)")
            )
        progress(f"querying GPU allocation and utilization per namespace and hour ({' + '.join(gpu_found.names)})")
        gpu = await _collect_gpu(run, window, queries, gpu_found)

    for metric, consequence in (
        (promql.WAIT_BUCKET, "admission wait p50/p95"),
        (promql.PENDING, "pending depth and waiting time shares"),
        (promql.NOMINAL, "nominal quota, borrowing and idle quota elsewhere"),
        (promql.PREEMPTED, "preemption counts"),
        (promql.EVICTED, "eviction counts"),
    ):
        if not present.get(metric):
            missing.append(MissingSeries(metric, consequence))

    queues: QueueMeasurements | None = None
    if any(present.values()):
        progress("querying admission waits, pending depth, quota and borrowing per ClusterQueue")
        queues = await _collect_queues(run, window, queries)
    return Measurements(window.hours, gpu, queues, tuple(missing), dict(run.queries), run.notes())


async def _queue_presence(run: _Runner, window_s: int) -> dict[str, bool]:
    metrics = (promql.WAIT_BUCKET, promql.PENDING, promql.NOMINAL, promql.PREEMPTED, promql.EVICTED)
    found = await _gather(
        **{
            metric: run.scalar(f"presence.{metric}", promql.presence(metric, window_s), Meaning.COUNT)
            for metric in metrics
        }
    )
    return {metric: bool(value) for metric, value in found.items()}
