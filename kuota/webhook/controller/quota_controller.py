"""The quota controller: keeps the engine in step with the cluster and applies its decisions to the API.

It holds no policy of its own. Watch events feed the engine; ``engine.schedule(now)`` decides; the decisions are
written, and each Job is driven to match its Workload (create, suspend, unsuspend with the flavor's placement,
restore after eviction, finish: docs/architecture.md, "A job's life"). This module is the coordinator: it hears
the watches' events and owns the loops, and hands each piece of work to the part that does it:

- :mod:`watches`: the reflectors, one a watched kind;
- :mod:`workload_sync`: a Workload's news into the engine;
- :mod:`decision_writer`: admissions and evictions to the API, and the re-reads after refused writes;
- :mod:`job_reconciler`: each managed Job to match its Workload;
- :mod:`admission_checks`: the AdmissionChecks' states acted on; :mod:`provisioning_controller`: Kueue's
  ProvisioningRequest check controller;
- :mod:`pending_reasons`, :mod:`queue_status`, :mod:`event_recorder`: what people read;
- :mod:`queue_gauges`: the queue metrics; :mod:`workload_retention`: old finished Workloads deleted.

Consistency rules, all of them needed for "never double-admit, never overrun quota":

- The controller's view of each Workload and Job is the newest of what the watch delivered and what its own
  writes returned (resourceVersions are etcd revisions, compared as integers), so a slow watch never makes it
  forget its own decision. Events older than that view are echoes and ignored.
- Every Workload status write carries the resourceVersion it was decided from (optimistic concurrency).
- Evictions are written before the admissions that need their quota; if any eviction fails, no admission
  of that cycle is written, and the engine is rebuilt from the API's truth before the next decision. A failed
  admission write rebuilds it too (the quota it assumed is returned).
- A managed Job runs only while its Workload holds an admission written to the API; one found running
  without it is suspended at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kuota.engine import (
    Configuration,
    Decision,
    EngineError,
    QuotaEngine,
    parse_object,
    pod_requests,
    topology_node,
)
from kuota.kube.client import KubeApi
from kuota.kube.reflector import Event, EventType, Reflector, ResourceType
from kuota.webhook.controller.admission_checks import AdmissionCheckGate
from kuota.webhook.controller.api_writes import ApiWriter
from kuota.webhook.controller.decision_writer import DecisionWriter
from kuota.webhook.controller.errors import ApiWriteError
from kuota.webhook.controller.etas import DEFAULT_INTERVAL_SECONDS, EtaBook
from kuota.webhook.controller.event_recorder import EventRecorder
from kuota.webhook.controller.job_reconciler import JobReconciler
from kuota.webhook.controller.leaderworkerset_reconciler import LeaderWorkerSetReconciler
from kuota.webhook.controller.metrics import ClusterQueueGauges, CohortGauges, ControllerMetrics, LocalQueueGauges
from kuota.webhook.controller.node_failures import NodeFailures
from kuota.webhook.controller.pending_reasons import PendingReasons
from kuota.webhook.controller.pod_reconciler import LEADERWORKERSET, POD, STATEFULSET, PodReconciler
from kuota.webhook.controller.pods_ready import PodsReadyClock
from kuota.webhook.controller.provisioning_controller import ProvisioningController
from kuota.webhook.controller.queue_gauges import (
    cluster_queue_gauges,
    cohort_gauges,
    finished_workloads,
    local_queue_details,
    local_queue_gauges,
    queue_conditions,
    with_finished,
    with_head_etas,
)
from kuota.webhook.controller.queue_status import QueueStatusWriter
from kuota.webhook.controller.state import (
    POD_GROUP,
    CompactCopy,
    ControllerState,
    JobKey,
    NewestCopies,
    gather,
    key_of,
    owner_job,
)
from kuota.webhook.controller.statefulset_reconciler import StatefulSetReconciler
from kuota.webhook.controller.topology_nodes import takes_node_capacity
from kuota.webhook.controller.topology_ungater import TopologyUngater
from kuota.webhook.controller.watches import PROVISIONING_REQUESTS_CRD, Watches, job_kind
from kuota.webhook.controller.workload_retention import expire_finished
from kuota.webhook.controller.workload_sync import WorkloadSync
from kuota.webhook.jobs import pod_parents
from kuota.webhook.jobs.adapter import ReferencingAdapter
from kuota.webhook.jobs.registry import DEFAULT_REGISTRY, Registry

log = logging.getLogger(__name__)

_STATUS_INTERVAL = 1.0
_RETENTION_CHECK_SECONDS = 60.0


class QuotaController:
    def __init__(
        self,
        api: KubeApi,
        configuration: Configuration,
        metrics: ControllerMetrics,
        *,
        clock: Callable[[], float] = time.time,
        write_concurrency: int = 32,
        workload_retention: float = 8 * 24 * 3600,
        eta_interval: float = DEFAULT_INTERVAL_SECONDS,
        registry: Registry = DEFAULT_REGISTRY,
    ) -> None:
        self.configuration = configuration
        self.registry = registry
        self.workload_retention = workload_retention
        # Expired Workloads are looked for once a minute, or twice per retention when it is shorter.
        self._retention_rounds = max(1, int(min(_RETENTION_CHECK_SECONDS, workload_retention / 2) / _STATUS_INTERVAL))
        self.metrics = metrics
        self.clock = clock
        # Decisions and what people read (reasons, Events, queue status) have connections of their own: the
        # reporter's steady trickle never queues ahead of a decision, and a burst of decisions' connections
        # close once it is over (each TLS connection holds a 256 KiB buffer). The reporter gives up sooner.
        self._pools = (api.with_own_pool(write_concurrency), api.with_own_pool(4))
        self.writer = ApiWriter(self._pools[0], metrics, concurrency=write_concurrency)
        self.reporter = ApiWriter(self._pools[1], metrics, concurrency=4, attempts=2, request_timeout=10.0)
        self.state = ControllerState(configuration, clock)
        self.watches = Watches(api, registry, self.state.workloads)
        self.workloads = self.state.workloads
        self._started_late: asyncio.Queue[Reflector[Any]] = asyncio.Queue()
        self._applied: dict[str, dict[str, Any]] = {}  # what the engine was last given, per configuration object
        self._events = EventRecorder(self.reporter, metrics, clock, self.state.spawn)
        self.etas = EtaBook(self.state, self.reporter, interval=eta_interval)
        self._reasons = PendingReasons(self.state, self.reporter, self._events, self.etas.phrase)
        wait = configuration.wait_for_pods_ready
        self._pods_ready = PodsReadyClock(self.state, wait) if wait is not None else None
        self._decisions = DecisionWriter(
            self.state, self.writer, metrics, self._reasons, self._events, pods_ready=self._pods_ready
        )
        self._sync = WorkloadSync(self.state, self._decisions, self._reasons, self._events)
        self._checks = AdmissionCheckGate(self.state, self.writer, self._events, pods_ready=self._pods_ready)
        self._provisioning = ProvisioningController(
            self.state,
            self.writer,
            self._events,
            checks=self.watches.config["AdmissionCheck"],
            configs=self.watches.provisioning_configs,
            flavors=self.watches.config["ResourceFlavor"],
        )
        self._job_reconcilers: dict[str, JobReconciler | StatefulSetReconciler | LeaderWorkerSetReconciler] = {
            job_kind(adapter): JobReconciler(
                adapter,
                registry,
                self.state,
                self.writer,
                sync=self._sync,
                decisions=self._decisions,
                events=self._events,
                flavors=self.watches.config["ResourceFlavor"],
                metrics=metrics,
                pods_ready=self._pods_ready,
            )
            for adapter in registry.adapters
        }
        self._pod_reconciler = PodReconciler(
            self.state,
            self.writer,
            sync=self._sync,
            decisions=self._decisions,
            events=self._events,
            flavors=self.watches.config["ResourceFlavor"],
            metrics=metrics,
            pods_ready=self._pods_ready,
        )
        if STATEFULSET in self.watches.jobs:
            self._job_reconcilers[STATEFULSET] = StatefulSetReconciler(self.state, self._pod_reconciler)
        if pod_parents.LEADERWORKERSET in registry.pod_parents:  # its reflector starts once its CRD is installed
            self._job_reconcilers[LEADERWORKERSET] = LeaderWorkerSetReconciler(self.state, self._pod_reconciler)
        self._queue_status = QueueStatusWriter(self.state, self.reporter)
        self._ungater = TopologyUngater(self.state, self.writer, self.watches.tas_pods)
        self._node_failures = NodeFailures(
            self.state, self.writer, self._decisions, self.watches.nodes, self.watches.tas_pods
        )
        self.cycles = 0
        self.ready = asyncio.Event()
        self._subscribe()
        metrics.watch_queues(self.cluster_queue_gauges, self.local_queue_gauges, self.cohort_gauges)

    def _subscribe(self) -> None:
        """Each watch's events to the handler of its kind."""
        watches = self.watches
        for kind, reflector in watches.config.items():
            reflector.subscribe(self._config_handler(kind))
        watches.workloads.subscribe(self._on_workload)
        watches.workloads.subscribe(self._provisioning.on_workload)
        for kind, jobs in watches.jobs.items():
            jobs.subscribe(self._on_pod if kind == POD else self._job_handler(kind))
        watches.crds.subscribe(self._on_crd)
        watches.nodes.subscribe(self._on_node)
        watches.bound_pods.subscribe(self._on_bound_pod)
        watches.tas_pods.subscribe(self._ungater.on_pod)
        watches.tas_pods.subscribe(self._node_failures.on_pod)

    @property
    def engine(self) -> QuotaEngine:
        """The engine as of now: a rebuild replaces it."""
        return self.state.engine

    def _config_handler(self, kind: str) -> Callable[[Event[dict[str, Any]]], None]:
        def handle(event: Event[dict[str, Any]]) -> None:
            if not self.ready.is_set():
                return  # the initial build reads every store at once
            value = None if event.type is EventType.DELETED else event.value
            if value is None and kind in ("ClusterQueue", "LocalQueue"):
                self._queue_status.forget(kind, event.key)
            if value is not None and self._applied.get(f"{kind} {event.key}") == _what_the_engine_reads(kind, value):
                return  # a status write (often our own): re-applying would re-route every pending workload
            self._apply_config(kind, event.key, value)
            if kind == "WorkloadPriorityClass" and value is not None:
                for job_kind, view in self.state.jobs.items():  # jobs that waited for it get their Workload
                    self.state.dirty_jobs.update((job_kind, job) for job in view)
            self.state.wake.set()

        return handle

    def _apply_config(self, kind: str, key: str, obj: Mapping[str, Any] | None) -> None:
        namespace, _, name = key.rpartition("/")
        invalid = self.state.invalid
        if obj is None:
            self._applied.pop(f"{kind} {key}", None)
            with contextlib.suppress(EngineError):
                self.state.engine.delete_object(kind, name, namespace)
            invalid.pop(f"{kind} {key}", None)
            return
        document = dict(obj)
        if kind == "Namespace":
            document = {"metadata": {"name": name, "labels": obj.get("metadata", {}).get("labels") or {}}}
        api_version = "v1" if kind == "Namespace" else "kueue.x-k8s.io/v1beta2"
        self._applied[f"{kind} {key}"] = _what_the_engine_reads(kind, obj)
        try:
            self.state.engine.apply(parse_object({**document, "apiVersion": api_version, "kind": kind}))
            invalid.pop(f"{kind} {key}", None)
        except EngineError as error:
            invalid[f"{kind} {key}"] = str(error)
            log.error("%s %s is not usable: %s", kind, key, error)
        except Exception as error:  # a bug, as in _sync_contained: the object is set aside, the rest served
            invalid[f"{kind} {key}"] = f"kuota failed to read it ({type(error).__name__}); see the manager log"
            log.exception("%s %s could not be applied; it is set aside, every other object is served", kind, key)

    def _on_node(self, event: Event[dict[str, Any]]) -> None:
        if not self.ready.is_set():
            return  # the initial build reads every node at once
        self._apply_node(event.key, None if event.type is EventType.DELETED else event.value)
        self._node_failures.on_node(event)
        self.state.wake.set()

    def _apply_node(self, key: str, node: Mapping[str, Any] | None) -> None:
        if node is None:
            with contextlib.suppress(EngineError):
                self.state.engine.delete_node(key)
            return
        placed = topology_node(node)
        if self._applied.get(f"Node {key}") != {"node": placed}:  # a heartbeat changes nothing placement reads
            self._applied[f"Node {key}"] = {"node": placed}
            self.state.engine.apply_node(placed)

    def _on_bound_pod(self, event: Event[dict[str, Any]]) -> None:
        if not self.ready.is_set():
            return  # the initial build reads every bound pod at once
        if self._apply_bound_pod(event.key, None if event.type is EventType.DELETED else event.value):
            self.state.wake.set()

    def _apply_bound_pod(self, key: str, pod: Mapping[str, Any] | None) -> bool:
        """A bound pod's hold on its node's capacity for TAS, as the engine counts it; whether that changed (a
        status write to a running pod changes nothing)."""
        applied = f"Pod {key}"
        if pod is None or not takes_node_capacity(pod):
            if self._applied.pop(applied, None) is None:
                return False
            with contextlib.suppress(EngineError):
                self.state.engine.delete_pod_usage(key)
            return True
        try:
            counted = {"node": pod["spec"]["nodeName"], "requests": pod_requests(pod)}
        except EngineError as error:
            log.error("Pod %s is not counted against its node for topology-aware scheduling: %s", key, error)
            return False
        if self._applied.get(applied) == counted:
            return False
        self._applied[applied] = counted
        self.state.engine.apply_pod_usage(key, counted["node"], counted["requests"])
        return True

    def _on_workload(self, event: Event[CompactCopy]) -> None:
        value = None if event.type is EventType.DELETED else event.value
        if value is not None:
            self._ungater.on_workload(event.key)
        if self.workloads.observe(event.key, value):
            self.state.dirty_workloads.add(event.key)
            if value is None:
                self.state.workload_gone(event.value.load())
            else:
                owner = owner_job(value.load())
                if owner is not None:
                    self.state.dirty_jobs.add(owner)
            self.state.wake.set()

    def _job_handler(self, kind: str) -> Callable[[Event[CompactCopy]], None]:
        def handle(event: Event[CompactCopy]) -> None:
            value = None if event.type is EventType.DELETED else event.value
            if self.state.jobs[kind].observe(event.key, value):
                if value is None:
                    self._job_reconcilers[kind].job_deleted(event.key, event.value.load())
                key: JobKey = (kind, event.key)
                self.state.dirty_jobs.add(key)
                self.state.wake.set()

        return handle

    def _on_pod(self, event: Event[CompactCopy]) -> None:
        value = None if event.type is EventType.DELETED else event.value
        view: NewestCopies = self.state.jobs[POD]
        if view.observe(event.key, value):
            last_copy = event.value.load()
            self.state.dirty_jobs.add(
                self._pod_reconciler.observed(event.key, last_copy if value is not None else None, last_copy)
            )
            self.state.wake.set()

    def _on_crd(self, event: Event[dict[str, Any]]) -> None:
        """A managed kind's CRD, or the ProvisioningRequests', appeared: watch that kind from now on."""
        requests = None if event.type is EventType.DELETED else self.watches.provisioning_requests_installed(event.key)
        if requests is not None:
            self._provisioning.watch_requests(requests)
            log.info("CRD %s is installed: running the ProvisioningRequest admission check controller", event.key)
            self._started_late.put_nowait(requests)
            return
        referenced = None if event.type is EventType.DELETED else self.watches.referenced_installed(event.key)
        if referenced is not None:
            naming, named = referenced
            named.subscribe(self._referenced_handler(naming, named.resource))
            log.info("CRD %s is installed: watching it for the %s jobs that name its objects", event.key, naming.kind)
            self._started_late.put_nowait(named)
            return
        installed = None if event.type is EventType.DELETED else self.watches.crd_installed(event.key)
        if installed is None:
            return
        adapter, reflector = installed
        reflector.subscribe(self._job_handler(job_kind(adapter)))
        log.info("CRD %s is installed: managing %s", event.key, adapter.kind)
        self._started_late.put_nowait(reflector)

    def _referenced_handler(
        self, adapter: ReferencingAdapter, resource: ResourceType
    ) -> Callable[[Event[dict[str, Any]]], None]:
        """A runtime created or changed: the jobs naming it are reconciled (one that had no Workload for want of it
        gets one now). Before the controller is ready the rebuild reconciles every job anyway."""
        kind = job_kind(adapter)

        def handle(event: Event[dict[str, Any]]) -> None:
            if event.type is EventType.DELETED or not self.ready.is_set():
                return
            metadata = event.value["metadata"]
            named = (resource.plural, metadata.get("namespace"), metadata["name"])
            view = self.state.jobs[kind]
            for key in list(view):
                job = view.get(key)
                reference = adapter.reference(job) if job is not None else None
                if reference is not None and (reference.plural, reference.namespace, reference.name) == named:
                    self.state.dirty_jobs.add((kind, key))
                    self.state.wake.set()

        return handle

    async def _start_late_reflectors(self) -> None:
        async with asyncio.TaskGroup() as group:
            while True:
                reflector = await self._started_late.get()
                group.create_task(reflector.run(), name=f"reflector {reflector.resource}")

    async def run(self) -> None:
        """Watch, rebuild the engine from the API's truth, then decide and write until cancelled."""
        state = self.state
        async with asyncio.TaskGroup() as group:
            group.create_task(self.watches.all.run(), name="reflectors")
            group.create_task(self._start_late_reflectors(), name="reflectors of CRDs installed later")
            await asyncio.gather(*(reflector.synced.wait() for reflector in self.watches.all.reflectors))
            for name, adapter in sorted(self.watches.waiting_for_crds.items()):
                log.info("CRD %s is not installed: %s is not managed until it is", name, adapter.kind)
            if self.watches.provisioning_requests is None:
                log.info(
                    "CRD %s is not installed: AdmissionChecks of kueue.x-k8s.io/provisioning-request stay inactive "
                    "until it is",
                    PROVISIONING_REQUESTS_CRD,
                )
            self._rebuild()
            self.ready.set()
            jobs = sum(len(view) for view in state.jobs.values())
            log.info("controller synced: %d workloads, %d jobs", len(self.workloads), jobs)
            group.create_task(self._status_loop(), name="queue status")
            self.etas.load_history(self.watches.config["LocalQueue"].values())
            group.create_task(self.etas.run(), name="admission ETAs")
            group.create_task(self._provisioning.run(), name="ProvisioningRequest checks")
            try:
                while True:
                    await self._cycle()
                    if state.dirty_workloads or state.dirty_jobs or state.needs_rebuild:
                        continue
                    wakeup = state.engine.next_wakeup()
                    if self._pods_ready is not None:  # a PodsReady deadline or backoff end, if sooner
                        ready_wakeup = self._pods_ready.next_wakeup()
                        if ready_wakeup is not None and (wakeup is None or ready_wakeup < wakeup):
                            wakeup = ready_wakeup
                    timeout = None if wakeup is None else max(0.0, wakeup - self.clock())
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(state.wake.wait(), timeout)
                    state.wake.clear()
            finally:
                self._decisions.cancel()  # a replica that stops deciding stops writing decisions

    async def close(self) -> None:
        """Close the writers' connections (after :meth:`run` has ended)."""
        for pool in self._pools:
            await pool.close()

    def _rebuild(self) -> None:
        """A fresh engine from the views: at start-up, and after a write showed the engine was wrong."""
        state = self.state
        state.engine = QuotaEngine(self.configuration)
        state.invalid.clear()
        self._applied.clear()
        for kind, reflector in self.watches.config.items():
            for obj in list(reflector.values()):
                self._apply_config(kind, key_of(obj), obj)
        for node in list(self.watches.nodes.values()):
            self._apply_node(key_of(node), node)
            self._node_failures.dirty.add(key_of(node))  # a node that failed while no replica watched
        for bound in list(self.watches.bound_pods.values()):
            self._apply_bound_pod(key_of(bound), bound)
        for key in sorted(self.workloads):
            self._sync_contained(key)
            self._track_pods_ready(key)
        state.dirty_workloads.clear()
        for kind, view in state.jobs.items():
            if kind == POD:
                for key in list(view):
                    pod = view.get(key)
                    if pod is not None:
                        state.dirty_jobs.add(self._pod_reconciler.observed(key, pod, pod))
            else:
                state.dirty_jobs.update((kind, key) for key in view)
        state.needs_rebuild = False

    def _sync_contained(self, key: str) -> None:
        """Sync one Workload; a fault there (a bug: bad objects are refused by the parser) costs that Workload,
        never the controller, which would otherwise crash-loop on the same object at every start."""
        try:
            self._sync.sync(key)
        except Exception:
            log.exception("syncing Workload %s failed; it waits for its next change, every other object is served", key)

    def _track_pods_ready(self, key: str) -> None:
        """A Workload's PodsReady clocks and readiness. As Kueue's workload controller, every admitted Workload is
        timed, whoever owns it: one created directly (or of a kind kuota does not manage) never gets ``PodsReady``,
        so it times out ``timeout`` after its admission and, under blockAdmission, holds admissions until then."""
        if self._pods_ready is not None:
            self._pods_ready.track(key, self.workloads.get(key))

    async def _cycle(self) -> None:
        state = self.state
        started = time.perf_counter()
        self.cycles += 1
        if state.needs_rebuild:
            # The views hold only what was written: every decision still being written must land first.
            await self._decisions.settle()
            self._rebuild()
        dirty_workloads, state.dirty_workloads = state.dirty_workloads, set()
        synced = []
        for key in sorted(dirty_workloads):
            if not self._decisions.hold_back(key):
                self._sync_contained(key)
                self._track_pods_ready(key)
                synced.append(key)
        dirty_jobs, state.dirty_jobs = state.dirty_jobs, set()
        await gather(self._reconcile(job_key) for job_key in sorted(dirty_jobs))
        # Failed nodes first: pods made again for a failed node's go where its replacement says.
        await self._node_failures.replace(self.clock())
        await self._ungater.ungate()
        now = self.clock()
        # Decisions wait while the API server is behind: each one made now, not queued behind writes, is made
        # knowing of every workload that finished meanwhile (fewer preemptions of work that just ended).
        room = self._decisions.room()
        # What the AdmissionChecks of the Workloads that changed ask for: evictions before any admission.
        timed_out: list[Decision] = list(self._checks.evictions(synced, now))
        if self._pods_ready is not None and room > 0:
            # Ended PodsReady backoffs are said (Requeued, BackoffFinished) before the engine admits them again,
            # and PodsReady timeouts are evicted before anything is admitted.
            ended = self._pods_ready.backoffs_ended(now)
            await gather(self._decisions.write_backoff_finished(key) for key in ended)
            timed_out += self._pods_ready.timed_out(now)
        decisions = timed_out + (state.engine.schedule(now, limit=room) if room > 0 else [])
        if decisions:
            self._decisions.write(decisions, now)
        self.metrics.decisions_per_cycle.observe(len(decisions))
        self.metrics.cycle_duration.observe(time.perf_counter() - started)

    async def _reconcile(self, job_key: JobKey) -> None:
        kind, key = job_key
        if kind in (POD, POD_GROUP):
            if POD in self.watches.jobs:
                await self._pod_reconciler.reconcile(job_key)
        elif kind in self._job_reconcilers:
            await self._job_reconcilers[kind].reconcile(key)

    async def _status_loop(self) -> None:
        rounds = 0
        while True:
            await asyncio.sleep(_STATUS_INTERVAL)
            rounds += 1
            try:
                await self._reasons.write()
                await self._queue_status.write()
                if rounds % self._retention_rounds == 0:
                    await expire_finished(self.reporter, self.workloads, self.clock(), self.workload_retention)
            except ApiWriteError as error:
                log.warning("status not written: %s", error)

    def cluster_queue_gauges(self) -> list[ClusterQueueGauges]:
        if not self.ready.is_set():
            return []
        conditions = queue_conditions(self.state.engine, self.state.invalid)
        gauges = with_finished(cluster_queue_gauges(self.state.engine, conditions), finished_workloads(self.workloads))
        return with_head_etas(gauges, self.etas.head_etas(), self.clock())

    def local_queue_gauges(self) -> list[LocalQueueGauges]:
        if not self.ready.is_set():
            return []
        engine = self.state.engine
        gauges = local_queue_gauges(engine, self.state.parsed)
        conditions = queue_conditions(engine, self.state.invalid)
        return local_queue_details(engine, self.workloads, gauges, finished_workloads(self.workloads), conditions)

    def cohort_gauges(self) -> list[CohortGauges]:
        if not self.ready.is_set():
            return []
        return cohort_gauges(self.state.engine)


def _what_the_engine_reads(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration object without its status and bookkeeping metadata: its spec (a priority class's value),
    labels (a namespace's), and whether it is being deleted; an AdmissionCheck's status too (its Active
    condition, set by its controller, decides whether its ClusterQueues admit)."""
    metadata = obj.get("metadata") or {}
    kept = ("metadata",) if kind == "AdmissionCheck" else ("status", "metadata")
    essence = {key: value for key, value in obj.items() if key not in kept}
    essence["labels"] = metadata.get("labels")
    essence["deleting"] = bool(metadata.get("deletionTimestamp"))
    return essence
