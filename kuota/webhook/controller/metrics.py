"""The manager's metrics, with Kueue's names, types, labels and buckets (``pkg/metrics/metrics.go``) so existing
dashboards and the report work unchanged.

Counters and histograms are updated as decisions are applied. Gauges (pending, active, usage, quotas, shares,
cohorts) are built at scrape time from the engine's state by :class:`QueueStateCollector`, never kept as
thousands of mutable children. Units follow Kueue: cpu in cores, memory in bytes, devices as counts.

Every ``kueue_*`` series but ``kueue_build_info`` carries ``replica_role``, as Kueue's do: ``leader`` while this
replica holds the Lease, ``follower`` while it waits for it, ``standalone`` without leader election. Only the
replica that decides shows queue gauges (a follower's are empty), so sums across replicas count each queue once.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kuota import __version__

LEADER = "leader"
FOLLOWER = "follower"
STANDALONE = "standalone"


def kueue_exponential_buckets(count: int) -> tuple[float, ...]:
    """Kueue's ``generateExponentialBuckets(count)``: 1, then ``count - 1`` bounds doubling from 2.5."""
    return (1.0, *(2.5 * 2**exponent for exponent in range(count - 1)))


WAIT_BUCKETS = kueue_exponential_buckets(14)  # 1, 2.5, 5 … 10240 s
ADMISSION_WAIT_BUCKETS = kueue_exponential_buckets(16)  # 1, 2.5, 5 … 40960 s
# client_golang's DefBuckets, which Kueue's admission attempt histogram uses (it sets none of its own).
GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# kuota's own latencies: its API writes take milliseconds.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
CLUSTER_QUEUE_STATUSES = ("pending", "active", "terminating")
LOCAL_QUEUE_ACTIVE_VALUES = ("True", "False", "Unknown")


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
    weighted_share: float  # NaN for a zero-weight queue that borrows, as Kueue reports it
    quotas: Sequence[QuotaLine]
    cohort: str = ""
    finished: int = 0  # finished Workloads still kept in the API
    next_admission_eta: float | None = None  # seconds until the head is expected to be admitted (etas)


@dataclass(frozen=True)
class LocalQueueUsage:
    flavor: str
    resource: str
    amount: float


@dataclass(frozen=True)
class LocalQueueGauges:
    namespace: str
    name: str
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    active: str = "Unknown"  # the LocalQueue's Active condition: True | False | Unknown
    finished: int = 0
    usage: Sequence[LocalQueueUsage] = ()


@dataclass(frozen=True)
class CohortQuotaLine:
    flavor: str
    resource: str
    subtree_quota: float
    reservation: float


@dataclass(frozen=True)
class CohortGauges:
    name: str
    weighted_share: float
    admitted_active: int
    quotas: Sequence[CohortQuotaLine]


def _gauge(name: str, documentation: str, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=[*labels, "replica_role"])


class QueueStateCollector(Collector):
    """Builds the queue gauges from a snapshot taken at scrape time; a follower's families are empty."""

    def __init__(
        self,
        cluster_queues: Callable[[], Iterable[ClusterQueueGauges]],
        local_queues: Callable[[], Iterable[LocalQueueGauges]],
        cohorts: Callable[[], Iterable[CohortGauges]],
        role: Callable[[], str],
    ) -> None:
        self._cluster_queues = cluster_queues
        self._local_queues = local_queues
        self._cohorts = cohorts
        self._role = role

    def collect(self) -> Iterator[Metric]:
        role = self._role()
        deciding = role != FOLLOWER
        yield from self._cluster_queue_families(self._cluster_queues() if deciding else (), role)
        yield from self._local_queue_families(self._local_queues() if deciding else (), role)
        yield from self._cohort_families(self._cohorts() if deciding else (), role)

    @staticmethod
    def _cluster_queue_families(queues: Iterable[ClusterQueueGauges], role: str) -> Iterator[Metric]:
        pending = _gauge(
            "kueue_pending_workloads", "Pending workloads per ClusterQueue and status", "cluster_queue", "status"
        )
        reserving = _gauge(
            "kueue_reserving_active_workloads", "Workloads holding quota per ClusterQueue", "cluster_queue"
        )
        admitted = _gauge(
            "kueue_admitted_active_workloads", "Admitted, unfinished workloads per ClusterQueue", "cluster_queue"
        )
        finished = _gauge("kueue_finished_workloads", "Finished workloads per ClusterQueue", "cluster_queue")
        status = _gauge(
            "kueue_cluster_queue_status", "1 for the ClusterQueue's current status", "cluster_queue", "status"
        )
        share = _gauge(
            "kueue_cluster_queue_weighted_share",
            "Dominant resource share above nominal quota divided by weight (0 when not borrowing)",
            "cluster_queue",
            "cohort",
        )
        quota_labels = ("cohort", "cluster_queue", "flavor", "resource")
        reservation = _gauge("kueue_cluster_queue_resource_reservation", "Quota reserved (cpu in cores)", *quota_labels)
        usage = _gauge("kueue_cluster_queue_resource_usage", "Quota in use (cpu in cores)", *quota_labels)
        nominal = _gauge("kueue_cluster_queue_nominal_quota", "Nominal quota", *quota_labels)
        borrowing = _gauge("kueue_cluster_queue_borrowing_limit", "Borrowing limit", *quota_labels)
        lending = _gauge("kueue_cluster_queue_lending_limit", "Lending limit", *quota_labels)
        head_eta = _gauge(
            "kuota_cluster_queue_head_eta_seconds",
            "Seconds until the first pending workload is expected to be admitted (forward replay of the engine)",
            "cluster_queue",
        )
        for queue in queues:
            pending.add_metric([queue.name, "active", role], queue.pending_active)
            pending.add_metric([queue.name, "inadmissible", role], queue.pending_inadmissible)
            reserving.add_metric([queue.name, role], queue.reserving)
            admitted.add_metric([queue.name, role], queue.admitted)
            finished.add_metric([queue.name, role], queue.finished)
            for state in CLUSTER_QUEUE_STATUSES:
                status.add_metric([queue.name, state, role], 1.0 if state == queue.status else 0.0)
            share.add_metric([queue.name, queue.cohort, role], queue.weighted_share)
            if queue.next_admission_eta is not None:
                head_eta.add_metric([queue.name, role], queue.next_admission_eta)
            for line in queue.quotas:
                labels = [line.cohort, line.cluster_queue, line.flavor, line.resource, role]
                reservation.add_metric(labels, line.usage)  # reserving is admitting: one step in kuota
                usage.add_metric(labels, line.usage)
                nominal.add_metric(labels, line.nominal)
                if line.borrowing_limit is not None:
                    borrowing.add_metric(labels, line.borrowing_limit)
                if line.lending_limit is not None:
                    lending.add_metric(labels, line.lending_limit)
        yield from (
            pending,
            reserving,
            admitted,
            finished,
            status,
            share,
            reservation,
            usage,
            nominal,
            borrowing,
            lending,
            head_eta,
        )

    @staticmethod
    def _local_queue_families(queues: Iterable[LocalQueueGauges], role: str) -> Iterator[Metric]:
        local = ("name", "namespace")
        pending = _gauge("kueue_local_queue_pending_workloads", "Pending workloads per LocalQueue", *local, "status")
        reserving = _gauge(
            "kueue_local_queue_reserving_active_workloads", "Workloads holding quota per LocalQueue", *local
        )
        admitted = _gauge("kueue_local_queue_admitted_active_workloads", "Admitted workloads per LocalQueue", *local)
        finished = _gauge("kueue_local_queue_finished_workloads", "Finished workloads per LocalQueue", *local)
        status = _gauge("kueue_local_queue_status", "1 for the LocalQueue's Active condition status", *local, "active")
        usage_labels = (*local, "flavor", "resource")
        reservation = _gauge("kueue_local_queue_resource_reservation", "Quota reserved per LocalQueue", *usage_labels)
        usage = _gauge("kueue_local_queue_resource_usage", "Quota in use per LocalQueue", *usage_labels)
        for queue in queues:
            names = [queue.name, queue.namespace]
            pending.add_metric([*names, "active", role], queue.pending_active)
            pending.add_metric([*names, "inadmissible", role], queue.pending_inadmissible)
            reserving.add_metric([*names, role], queue.reserving)
            admitted.add_metric([*names, role], queue.admitted)
            finished.add_metric([*names, role], queue.finished)
            for value in LOCAL_QUEUE_ACTIVE_VALUES:
                status.add_metric([*names, value, role], 1.0 if value == queue.active else 0.0)
            for line in queue.usage:
                reservation.add_metric([*names, line.flavor, line.resource, role], line.amount)
                usage.add_metric([*names, line.flavor, line.resource, role], line.amount)
        yield from (pending, reserving, admitted, finished, status, reservation, usage)

    @staticmethod
    def _cohort_families(cohorts: Iterable[CohortGauges], role: str) -> Iterator[Metric]:
        share = _gauge(
            "kueue_cohort_weighted_share",
            "Dominant resource share above the Cohort's subtree quota divided by weight (0 when not borrowing)",
            "cohort",
        )
        quota = _gauge(
            "kueue_cohort_subtree_quota",
            "Nominal quota summed over the Cohort's subtree",
            "cohort",
            "flavor",
            "resource",
        )
        reservations = _gauge(
            "kueue_cohort_subtree_resource_reservations",
            "Quota reserved within the Cohort's subtree",
            "cohort",
            "flavor",
            "resource",
        )
        admitted = _gauge(
            "kueue_cohort_subtree_admitted_active_workloads", "Admitted workloads in the Cohort's subtree", "cohort"
        )
        for cohort in cohorts:
            share.add_metric([cohort.name, role], cohort.weighted_share)
            admitted.add_metric([cohort.name, role], cohort.admitted_active)
            for line in cohort.quotas:
                quota.add_metric([cohort.name, line.flavor, line.resource, role], line.subtree_quota)
                reservations.add_metric([cohort.name, line.flavor, line.resource, role], line.reservation)
        yield from (share, quota, reservations, admitted)


def _priority_class(workload: Mapping[str, Any]) -> str:
    return str((workload.get("spec", {}).get("priorityClassRef") or {}).get("name", ""))


def _local_queue(workload: Mapping[str, Any]) -> tuple[str, str]:
    return str(workload.get("spec", {}).get("queueName", "")), str(workload["metadata"]["namespace"])


def build_info() -> tuple[str, str, str, str, str, str]:
    """Kueue's build_info labels filled for kuota: no commit or date is stamped into a build, and the runtime
    is Python's (go_version keeps Kueue's label name)."""
    machine = platform.machine().lower()
    architecture = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    runtime = f"python{platform.python_version()}"
    return f"v{__version__}", "", "", runtime, sys.implementation.name, f"{sys.platform}/{architecture}"


class ControllerMetrics:
    """Every metric the manager serves, in one registry (no global state, so tests can run several)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.replica_role = STANDALONE
        r = self.registry
        info = Gauge(
            "kueue_build_info",
            "Build information: 1, labelled by version, commit, build date, runtime, implementation and platform",
            ["git_version", "git_commit", "build_date", "go_version", "compiler", "platform"],
            registry=r,
        )
        info.labels(*build_info()).set(1)
        per_queue = ["cluster_queue", "priority_class", "replica_role"]
        per_local_queue = ["name", "namespace", "priority_class", "replica_role"]
        self.admitted_total = Counter("kueue_admitted_workloads", "Workloads admitted", per_queue, registry=r)
        self.quota_reserved_total = Counter(
            "kueue_quota_reserved_workloads", "Workloads that got a quota reservation", per_queue, registry=r
        )
        self.finished_total = Counter("kueue_finished_workloads", "Workloads finished", per_queue, registry=r)
        eviction_labels = ["reason", "underlying_cause", "priority_class", "replica_role"]
        self.evicted_total = Counter(
            "kueue_evicted_workloads", "Workloads evicted", ["cluster_queue", *eviction_labels], registry=r
        )
        self.evicted_once_total = Counter(
            "kueue_evicted_workloads_once",
            "Workloads evicted for the first time for this reason and underlying cause",
            ["cluster_queue", *eviction_labels],
            registry=r,
        )
        self.pods_ready_to_evicted = Histogram(
            "kueue_pods_ready_to_evicted_time_seconds",
            "Time from a Workload's pods being ready to its eviction",
            ["cluster_queue", "reason", "underlying_cause", "replica_role"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.ready_wait = Histogram(
            "kueue_ready_wait_time_seconds",
            "Time from creation (or requeue) to the pods being ready",
            per_queue,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.admitted_until_ready_wait = Histogram(
            "kueue_admitted_until_ready_wait_time_seconds",
            "Time from admission to the pods being ready",
            per_queue,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.local_ready_wait = Histogram(
            "kueue_local_queue_ready_wait_time_seconds",
            "Time from creation (or requeue) to the pods being ready, per LocalQueue",
            per_local_queue,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.local_admitted_until_ready_wait = Histogram(
            "kueue_local_queue_admitted_until_ready_wait_time_seconds",
            "Time from admission to the pods being ready, per LocalQueue",
            per_local_queue,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.preempted_total = Counter(
            "kueue_preempted_workloads",
            "Workloads preempted",
            ["preempting_cluster_queue", "reason", "replica_role"],
            registry=r,
        )
        self.admission_wait = Histogram(
            "kueue_admission_wait_time_seconds",
            "Time from creation (or requeue) to admission",
            per_queue,
            buckets=ADMISSION_WAIT_BUCKETS,
            registry=r,
        )
        self.quota_reserved_wait = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "Time from creation (or requeue) to quota reservation",
            per_queue,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.local_admitted_total = Counter(
            "kueue_local_queue_admitted_workloads", "Workloads admitted per LocalQueue", per_local_queue, registry=r
        )
        self.local_quota_reserved_total = Counter(
            "kueue_local_queue_quota_reserved_workloads",
            "Workloads that got a quota reservation per LocalQueue",
            per_local_queue,
            registry=r,
        )
        self.local_finished_total = Counter(
            "kueue_local_queue_finished_workloads", "Workloads finished per LocalQueue", per_local_queue, registry=r
        )
        self.local_evicted_total = Counter(
            "kueue_local_queue_evicted_workloads",
            "Workloads evicted per LocalQueue",
            ["name", "namespace", *eviction_labels],
            registry=r,
        )
        self.local_admission_wait = Histogram(
            "kueue_local_queue_admission_wait_time_seconds",
            "Time from creation (or requeue) to admission, per LocalQueue",
            per_local_queue,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.local_quota_reserved_wait = Histogram(
            "kueue_local_queue_quota_reserved_wait_time_seconds",
            "Time from creation (or requeue) to quota reservation, per LocalQueue",
            per_local_queue,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.cohort_admitted_total = Counter(
            "kueue_cohort_subtree_admitted_workloads",
            "Workloads admitted in the Cohort's subtree",
            ["cohort", "priority_class", "replica_role"],
            registry=r,
        )
        self.attempts_total = Counter(
            "kueue_admission_attempts", "Admission attempts by result", ["result", "replica_role"], registry=r
        )
        self.attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "Duration of one admission attempt",
            ["result", "replica_role"],
            buckets=GO_DEFAULT_BUCKETS,
            registry=r,
        )
        self.cycle_duration = Histogram(
            "kuota_scheduling_cycle_duration_seconds",
            "One scheduling cycle: engine decisions and the API writes they need",
            buckets=LATENCY_BUCKETS,
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
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

        self.events_dropped = Counter(
            "kuota_events_dropped",
            "Events not recorded because too many were already waiting to be written",
            registry=r,
        )

    def observe_write(self, verb: str, resource: str, status: int, seconds: float) -> None:
        self.api_write_duration.labels(verb, resource, str(status)).observe(seconds)

    def record_attempt(self, result: str, seconds: float) -> None:
        """One admission written (``success``) or decided but not written (``inadmissible``)."""
        self.attempts_total.labels(result, self.replica_role).inc()
        self.attempt_duration.labels(result, self.replica_role).observe(seconds)

    def record_admission(
        self, workload: Mapping[str, Any], cluster_queue: str, cohorts: Sequence[str], waited: float
    ) -> None:
        """An admission written: quota reserved and admitted at once, ``waited`` seconds after it was queued;
        ``cohorts`` are the Cohorts above ``cluster_queue``, nearest first."""
        role, priority_class = self.replica_role, _priority_class(workload)
        name, namespace = _local_queue(workload)
        for total, wait in (
            (self.quota_reserved_total, self.quota_reserved_wait),
            (self.admitted_total, self.admission_wait),
        ):
            total.labels(cluster_queue, priority_class, role).inc()
            wait.labels(cluster_queue, priority_class, role).observe(waited)
        for total, wait in (
            (self.local_quota_reserved_total, self.local_quota_reserved_wait),
            (self.local_admitted_total, self.local_admission_wait),
        ):
            total.labels(name, namespace, priority_class, role).inc()
            wait.labels(name, namespace, priority_class, role).observe(waited)
        for cohort in cohorts:
            self.cohort_admitted_total.labels(cohort, priority_class, role).inc()

    def record_eviction(
        self,
        workload: Mapping[str, Any],
        cluster_queue: str,
        reason: str,
        cause: str,
        *,
        first: bool,
        since_pods_ready: float | None,
    ) -> None:
        """An eviction written, counted by reason and underlying cause as ``status.schedulingStats.evictions``
        counts it; ``first``: the first of that reason and cause for this Workload; ``since_pods_ready``: seconds
        from its pods being ready to the eviction (None: they were not ready)."""
        role, priority_class = self.replica_role, _priority_class(workload)
        name, namespace = _local_queue(workload)
        self.evicted_total.labels(cluster_queue, reason, cause, priority_class, role).inc()
        self.local_evicted_total.labels(name, namespace, reason, cause, priority_class, role).inc()
        if first:
            self.evicted_once_total.labels(cluster_queue, reason, cause, priority_class, role).inc()
        if since_pods_ready is not None:
            self.pods_ready_to_evicted.labels(cluster_queue, reason, cause, role).observe(since_pods_ready)

    def record_pods_ready(
        self, workload: Mapping[str, Any], cluster_queue: str, since_queued: float, since_admitted: float
    ) -> None:
        """A Workload's pods ready for the first time since its admission (``Started``, not ``Recovered``)."""
        role, priority_class = self.replica_role, _priority_class(workload)
        name, namespace = _local_queue(workload)
        self.ready_wait.labels(cluster_queue, priority_class, role).observe(since_queued)
        self.admitted_until_ready_wait.labels(cluster_queue, priority_class, role).observe(since_admitted)
        self.local_ready_wait.labels(name, namespace, priority_class, role).observe(since_queued)
        self.local_admitted_until_ready_wait.labels(name, namespace, priority_class, role).observe(since_admitted)

    def record_preemption(self, preempting_cluster_queue: str, reason: str) -> None:
        self.preempted_total.labels(preempting_cluster_queue, reason, self.replica_role).inc()

    def record_finish(self, workload: Mapping[str, Any], cluster_queue: str) -> None:
        role, priority_class = self.replica_role, _priority_class(workload)
        name, namespace = _local_queue(workload)
        self.finished_total.labels(cluster_queue, priority_class, role).inc()
        self.local_finished_total.labels(name, namespace, priority_class, role).inc()

    def watch_queues(
        self,
        cluster_queues: Callable[[], Iterable[ClusterQueueGauges]],
        local_queues: Callable[[], Iterable[LocalQueueGauges]],
        cohorts: Callable[[], Iterable[CohortGauges]],
    ) -> None:
        """Serve the queue gauges built by these at each scrape, labelled with this replica's role."""
        self.registry.register(QueueStateCollector(cluster_queues, local_queues, cohorts, lambda: self.replica_role))
