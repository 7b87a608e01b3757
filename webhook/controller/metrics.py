"""The manager's metrics, with Kueue's names and labels so existing dashboards and the report work unchanged.

Counters and histograms are updated as decisions are applied. Gauges (pending, active, usage, quotas,
shares) are built at scrape time from the engine's state by :class:`QueueStateCollector`, never kept as
thousands of mutable children. Units follow Kueue: cpu in cores, memory in bytes, devices as counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

WAIT_BUCKETS = (1.0, 2.5, 5.0, *(10.0 * 2**exponent for exponent in range(13)))  # 1 … 40960 s
ATTEMPT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class QuotaLine:
    cohort: str
    cluster_queue: str
    flavor: str
    resource: str
    usage: float
    nominal: float
    borrowing_limit: float | None
    lending_limit: float | None


@dataclass(frozen=True)
class ClusterQueueGauges:
    name: str
    status: str  # pending | active | terminating, as Kueue reports it
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    weighted_share: float
    quotas: Sequence[QuotaLine]


@dataclass(frozen=True)
class LocalQueueGauges:
    namespace: str
    name: str
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int


class QueueStateCollector(Collector):
    """Builds the queue gauges from a snapshot taken at scrape time."""

    def __init__(
        self,
        cluster_queues: Callable[[], Iterable[ClusterQueueGauges]],
        local_queues: Callable[[], Iterable[LocalQueueGauges]],
    ) -> None:
        self._cluster_queues = cluster_queues
        self._local_queues = local_queues

    def collect(self) -> Iterator[Metric]:
        pending = GaugeMetricFamily(
            "kueue_pending_workloads",
            "Pending workloads per ClusterQueue and status",
            labels=["cluster_queue", "status"],
        )
        reserving = GaugeMetricFamily(
            "kueue_reserving_active_workloads", "Workloads holding quota per ClusterQueue", labels=["cluster_queue"]
        )
        admitted = GaugeMetricFamily(
            "kueue_admitted_active_workloads",
            "Admitted, unfinished workloads per ClusterQueue",
            labels=["cluster_queue"],
        )
        status = GaugeMetricFamily(
            "kueue_cluster_queue_status", "1 for the ClusterQueue's current status", labels=["cluster_queue", "status"]
        )
        share = GaugeMetricFamily(
            "kueue_cluster_queue_weighted_share",
            "Dominant resource share above nominal quota divided by weight (0 when not borrowing)",
            labels=["cluster_queue"],
        )
        quota_labels = ["cohort", "cluster_queue", "flavor", "resource"]
        usage = GaugeMetricFamily(
            "kueue_cluster_queue_resource_usage", "Quota in use (cpu in cores)", labels=quota_labels
        )
        nominal = GaugeMetricFamily("kueue_cluster_queue_nominal_quota", "Nominal quota", labels=quota_labels)
        borrowing = GaugeMetricFamily("kueue_cluster_queue_borrowing_limit", "Borrowing limit", labels=quota_labels)
        lending = GaugeMetricFamily("kueue_cluster_queue_lending_limit", "Lending limit", labels=quota_labels)
        for queue in self._cluster_queues():
            pending.add_metric([queue.name, "active"], queue.pending_active)
            pending.add_metric([queue.name, "inadmissible"], queue.pending_inadmissible)
            reserving.add_metric([queue.name], queue.reserving)
            admitted.add_metric([queue.name], queue.admitted)
            for state in ("pending", "active", "terminating"):
                status.add_metric([queue.name, state], 1.0 if state == queue.status else 0.0)
            share.add_metric([queue.name], queue.weighted_share)
            for line in queue.quotas:
                labels = [line.cohort, line.cluster_queue, line.flavor, line.resource]
                usage.add_metric(labels, line.usage)
                nominal.add_metric(labels, line.nominal)
                if line.borrowing_limit is not None:
                    borrowing.add_metric(labels, line.borrowing_limit)
                if line.lending_limit is not None:
                    lending.add_metric(labels, line.lending_limit)
        yield from (pending, reserving, admitted, status, share, usage, nominal, borrowing, lending)

        local_labels = ["name", "namespace"]
        local_pending = GaugeMetricFamily(
            "kueue_local_queue_pending_workloads", "Pending workloads per LocalQueue", labels=[*local_labels, "status"]
        )
        local_reserving = GaugeMetricFamily(
            "kueue_local_queue_reserving_active_workloads",
            "Workloads holding quota per LocalQueue",
            labels=local_labels,
        )
        local_admitted = GaugeMetricFamily(
            "kueue_local_queue_admitted_active_workloads", "Admitted workloads per LocalQueue", labels=local_labels
        )
        for local in self._local_queues():
            local_pending.add_metric([local.name, local.namespace, "active"], local.pending_active)
            local_pending.add_metric([local.name, local.namespace, "inadmissible"], local.pending_inadmissible)
            local_reserving.add_metric([local.name, local.namespace], local.reserving)
            local_admitted.add_metric([local.name, local.namespace], local.admitted)
        yield from (local_pending, local_reserving, local_admitted)


class ControllerMetrics:
    """Every metric the manager serves, in one registry (no global state, so tests can run several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.admitted = Counter(
            "kueue_admitted_workloads", "Workloads admitted", ["cluster_queue", "priority_class"], registry=r
        )
        self.quota_reserved = Counter(
            "kueue_quota_reserved_workloads",
            "Workloads that got a quota reservation",
            ["cluster_queue", "priority_class"],
            registry=r,
        )
        self.evicted = Counter(
            "kueue_evicted_workloads",
            "Workloads evicted",
            ["cluster_queue", "reason", "underlying_cause", "priority_class"],
            registry=r,
        )
        self.preempted = Counter(
            "kueue_preempted_workloads", "Workloads preempted", ["preempting_cluster_queue", "reason"], registry=r
        )
        self.admission_wait = Histogram(
            "kueue_admission_wait_time_seconds",
            "Time from creation (or requeue) to admission",
            ["cluster_queue", "priority_class"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.local_admitted = Counter(
            "kueue_local_queue_admitted_workloads",
            "Workloads admitted per LocalQueue",
            ["name", "namespace"],
            registry=r,
        )
        self.attempts = Counter("kueue_admission_attempts", "Admission attempts by result", ["result"], registry=r)
        self.attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "Duration of one admission attempt",
            ["result"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.cycle_duration = Histogram(
            "kuota_scheduling_cycle_duration_seconds",
            "One scheduling cycle: engine decisions and the API writes they need",
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.decisions_per_cycle = Histogram(
            "kuota_decisions_per_cycle",
            "Admissions and evictions decided in one cycle",
            buckets=(0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
            registry=r,
        )
        self.api_write_duration = Histogram(
            "kuota_api_write_duration_seconds",
            "Latency of the manager's API requests",
            ["verb", "resource", "code"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )

        self.events_dropped = Counter(
            "kuota_events_dropped",
            "Events not recorded because too many were already waiting to be written",
            registry=r,
        )

    def observe_write(self, verb: str, resource: str, status: int, seconds: float) -> None:
        self.api_write_duration.labels(verb, resource, str(status)).observe(seconds)

    def watch_queues(self, collector: QueueStateCollector) -> None:
        self.registry.register(collector)
