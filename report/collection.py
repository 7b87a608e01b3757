"""The imperative shell that asks Prometheus: finds which series exist, runs every query, types the answers.

Queries run concurrently (a few at a time, so a large window does not swamp Prometheus) inside one
TaskGroup; one failed query fails the report with that query named, never a zero in its place.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kuota.report import promql
from kuota.report.measurements import (
    GpuMeasurements,
    Hourly,
    Measurements,
    MissingSeries,
    QueueMeasurements,
)
from kuota.report.prometheus_api import InstantSample, PrometheusClient, RangeSeries
from kuota.report.promql import GpuFamily, GpuSeries, Queries
from kuota.report.window import Window

T = TypeVar("T")
Progress = Callable[[str], None]
_CONCURRENT_QUERIES = 4


class _Runner:
    def __init__(self, client: PrometheusClient, window: Window, queries: dict[str, str]) -> None:
        self._client = client
        self._window = window
        self._limit = asyncio.Semaphore(_CONCURRENT_QUERIES)
        self.queries = queries

    async def instant(self, name: str, query: str) -> list[InstantSample]:
        self.queries[name] = query
        async with self._limit:
            return await self._client.instant(query, self._window.end)

    async def hourly(self, name: str, query: str) -> list[RangeSeries]:
        self.queries[name] = query
        first = self._window.start + 3600
        async with self._limit:
            return await self._client.range(query, first, self._window.end, 3600)

    async def scalar(self, name: str, query: str) -> float | None:
        samples = await self.instant(name, query)
        values = [s.value for s in samples if not math.isnan(s.value)]
        return values[0] if values else None


def _hourly(series: RangeSeries, window: Window) -> Hourly:
    return tuple(value if not math.isnan(value := series.points.get(t, 0.0)) else 0.0 for t in window.hour_ends())


def _hourly_optional(series: RangeSeries, window: Window) -> tuple[float | None, ...]:
    return tuple(series.points.get(t) for t in window.hour_ends())


def _by_label(series: list[RangeSeries], label: str, window: Window) -> dict[str, Hourly]:
    return {s.labels.get(label, ""): _hourly(s, window) for s in series}


def _values(samples: list[InstantSample], label: str) -> dict[str, float]:
    return {s.labels.get(label, ""): s.value for s in samples if not math.isnan(s.value)}


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
        kuota=run.scalar("presence.kuota_allocated", promql.presence(promql.KUOTA_ALLOCATED, window_s)),
        kuota_exported=run.scalar(
            "presence.kuota_allocated_exported",
            promql.presence(promql.KUOTA_ALLOCATED, window_s, 'exported_namespace!=""'),
        ),
        kuota_util=run.scalar("presence.kuota_util", promql.presence(promql.KUOTA_UTIL, window_s)),
        kuota_up=run.scalar("presence.kuota_up", promql.presence(promql.KUOTA_UP, window_s)),
        dcgm=run.scalar("presence.dcgm", promql.presence(promql.DCGM_UTIL, window_s)),
        dcgm_exported=run.scalar(
            "presence.dcgm_exported", promql.presence(promql.DCGM_UTIL, window_s, 'exported_namespace!=""')
        ),
    )
    if found["kuota"]:
        return GpuSeries(
            GpuFamily.KUOTA, bool(found["kuota_exported"]), bool(found["kuota_util"]), bool(found["kuota_up"])
        )
    if found["dcgm"]:
        return GpuSeries(GpuFamily.DCGM, bool(found["dcgm_exported"]), True, True)
    return None


async def _collect_gpu(run: _Runner, window: Window, queries: Queries, gpu: GpuSeries) -> GpuMeasurements:
    jobs: dict[str, Awaitable[list[RangeSeries]]] = {
        "allocated": run.hourly("namespace_allocated_hourly", queries.namespace_allocated_hourly(gpu)),
    }
    if gpu.has_util:
        jobs["used"] = run.hourly("namespace_used_hourly", queries.namespace_used_hourly(gpu))
        jobs["idle"] = run.hourly("pod_idle_hourly", queries.pod_idle_hourly(gpu))
        jobs["cluster_used"] = run.hourly("cluster_used_hourly", queries.cluster_used_hourly(gpu))
    if gpu.has_inventory:
        jobs["inventory"] = run.hourly("inventory_hourly", queries.inventory_hourly(gpu))
    got = await _gather(**jobs)
    idle = (
        {(s.labels.get("namespace", ""), s.labels.get("pod", "")): _hourly(s, window) for s in got["idle"]}
        if "idle" in got
        else None
    )
    return GpuMeasurements(
        source=" + ".join(gpu.names) + (" (exported_namespace relabelled)" if gpu.relabelled else ""),
        allocated=_by_label(got["allocated"], "namespace", window),
        used=_by_label(got["used"], "namespace", window) if "used" in got else None,
        idle_held=idle,
        inventory=_single(got["inventory"], window) if "inventory" in got else None,
        cluster_used=_single(got["cluster_used"], window) if "cluster_used" in got else None,
    )


def _buckets(samples: list[InstantSample]) -> dict[str, tuple[tuple[float, float], ...]]:
    grouped: dict[str, list[tuple[float, float]]] = {}
    for sample in samples:
        if math.isnan(sample.value):
            continue
        grouped.setdefault(sample.labels.get("cluster_queue", ""), []).append(
            (float(sample.labels["le"]), sample.value)
        )
    return {cq: tuple(sorted(points)) for cq, points in grouped.items()}


def _evictions(samples: list[InstantSample]) -> dict[str, dict[str, float]]:
    grouped: dict[str, dict[str, float]] = {}
    for sample in samples:
        if not math.isnan(sample.value):
            reasons = grouped.setdefault(sample.labels.get("cluster_queue", ""), {})
            reasons[sample.labels.get("reason", "")] = sample.value
    return grouped


async def _collect_queues(run: _Runner, window: Window, queries: Queries) -> QueueMeasurements:
    hourly = await _gather(
        nominal=run.hourly("nominal_hourly", queries.nominal_hourly()),
        usage=run.hourly("usage_hourly", queries.usage_hourly()),
        borrowed=run.hourly("borrowed_hourly", queries.borrowed_hourly()),
        pending=run.hourly("pending_hourly", queries.pending_hourly()),
    )
    vectors = await _gather(
        buckets=run.instant("wait_buckets", queries.wait_buckets()),
        pending_average=run.instant("pending_average", queries.pending_average()),
        pending_max=run.instant("pending_max", queries.pending_max()),
        cohorts=run.instant("cohorts", queries.cohorts()),
        waiting=run.instant("waiting_steps", queries.waiting_steps()),
        waiting_idle=run.instant("waiting_while_idle_steps", queries.waiting_while_idle_steps()),
        preemptions=run.instant("preemptions", queries.preemptions()),
        evictions=run.instant("evictions", queries.evictions()),
    )
    scalars = await _gather(
        cluster_waiting=run.scalar("cluster_waiting_steps", queries.cluster_waiting_steps()),
        cluster_waiting_idle=run.scalar("cluster_waiting_while_idle_steps", queries.cluster_waiting_while_idle_steps()),
        steps=run.scalar("queue_steps", queries.queue_steps()),
        unused=run.scalar("cluster_unused_average", queries.cluster_unused_average()),
    )
    return QueueMeasurements(
        wait_buckets=_buckets(vectors["buckets"]),
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
    )


async def collect(
    client: PrometheusClient,
    window: Window,
    idle_percent: float,
    idle_elsewhere_gpus: int,
    progress: Progress,
) -> Measurements:
    """Ask Prometheus everything the report needs for ``window``; name what is missing."""
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
    return Measurements(window.hours, gpu, queues, tuple(missing), dict(run.queries))


async def _queue_presence(run: _Runner, window_s: int) -> dict[str, bool]:
    metrics = (promql.WAIT_BUCKET, promql.PENDING, promql.NOMINAL, promql.PREEMPTED, promql.EVICTED)
    found = await _gather(
        **{metric: run.scalar(f"presence.{metric}", promql.presence(metric, window_s)) for metric in metrics}
    )
    return {metric: bool(value) for metric, value in found.items()}
