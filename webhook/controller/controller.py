"""The quota controller: keeps the engine in step with the cluster and applies its decisions to the API.

It holds no policy of its own. Watch events feed the engine; ``engine.schedule(now)`` decides; this module
writes the decisions and drives each Job to match its Workload (create, suspend, unsuspend with the flavor's
placement, restore after eviction, finish).

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
import dataclasses
import logging
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from kuota.kube_api import KubeApi
from webhook.controller import job_workloads as jobs
from webhook.controller import workload_status as status
from webhook.controller.api_writes import (
    CLUSTER_QUEUES,
    EVENTS,
    JOBS,
    LOCAL_QUEUES,
    WORKLOADS,
    ApiWriter,
    Resource,
)
from webhook.controller.errors import ApiWriteError, ConflictError, JobConflictError
from webhook.controller.metrics import (
    ClusterQueueGauges,
    ControllerMetrics,
    LocalQueueGauges,
    QueueStateCollector,
    QuotaLine,
)
from webhook.engine import quantities
from webhook.engine.engine import Admission, Eviction, EvictionReason, QuotaEngine, WorkloadState
from webhook.engine.errors import EngineError
from webhook.engine.model import Configuration
from webhook.engine.validation import parse_object, parse_workload
from webhook.reflector import Event, EventType, Reflector, ReflectorSet, ResourceType

log = logging.getLogger(__name__)

KUEUE = ("kueue.x-k8s.io", "v1beta2")
_CONFIG_RESOURCES = {
    "ResourceFlavor": ResourceType(*KUEUE, "resourceflavors", namespaced=False),
    "ClusterQueue": ResourceType(*KUEUE, "clusterqueues", namespaced=False),
    "LocalQueue": ResourceType(*KUEUE, "localqueues", namespaced=True),
    "Cohort": ResourceType(*KUEUE, "cohorts", namespaced=False),
    "WorkloadPriorityClass": ResourceType(*KUEUE, "workloadpriorityclasses", namespaced=False),
    "Namespace": ResourceType("", "v1", "namespaces", namespaced=False),
}
_WORKLOADS = ResourceType(*KUEUE, "workloads", namespaced=True)
_JOBS = ResourceType("batch", "v1", "jobs", namespaced=True)
_STATUS_INTERVAL = 1.0
_DECISIONS_IN_FLIGHT = 64  # twice the writer's connections: enough to keep them all busy
_REASON_REFRESH_SECONDS = 30.0
_REASON_WRITES_PER_ROUND = 20
_REASON_CHECKS_PER_ROUND = 1000
_REASON_GRACE_SECONDS = 3.0
_STATUS_WRITES_PER_ROUND = 10
_EVENT_BACKLOG = 1000
_EVENTS_PER_SECOND = 10.0
_EVENT_BURST = 200.0
_RETENTION_CHECK_SECONDS = 60.0


_SHARED_STRING_LENGTH = 256
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _trim(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The copy the controller keeps of an object: without what it never reads (managedFields, kubectl's
    last-applied copy), with keys and short strings shared. Every watch event is decoded on its own, so
    without sharing, ten thousand Workloads hold ten thousand copies of "metadata", "QuotaReserved"..."""
    metadata = {key: value for key, value in (obj.get("metadata") or {}).items() if key != "managedFields"}
    annotations = metadata.get("annotations")
    if annotations and _LAST_APPLIED in annotations:
        metadata["annotations"] = {key: value for key, value in annotations.items() if key != _LAST_APPLIED}
    shared: dict[str, Any] = _shared({**obj, "metadata": metadata})
    return shared


def _shared(value: Any) -> Any:
    if isinstance(value, dict):
        return {sys.intern(key): _shared(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shared(item) for item in value]
    if isinstance(value, str) and len(value) <= _SHARED_STRING_LENGTH:
        return sys.intern(value)
    return value


def _version(obj: Mapping[str, Any] | None) -> int:
    if obj is None:
        return -1
    return int(obj.get("metadata", {}).get("resourceVersion") or 0)


def _key(obj: Mapping[str, Any]) -> str:
    metadata = obj["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else str(metadata["name"])


class _View:
    """The newest known copy of each object: watch events and our own write results, whichever is newer."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def observe(self, key: str, obj: dict[str, Any] | None) -> bool:
        """Take a watch event; True when it is news (not an echo of our own, already applied, write)."""
        current = self.objects.get(key)
        if obj is None:
            return self.objects.pop(key, None) is not None
        if current is not None and _version(obj) <= _version(current):
            if _version(obj) == _version(current):
                self.objects[key] = obj  # the same content: keep the cache's copy, drop ours
            return False
        self.objects[key] = obj
        return True

    def wrote(self, obj: dict[str, Any]) -> None:
        key = _key(obj)
        if _version(obj) > _version(self.objects.get(key)):
            self.objects[key] = _trim(obj)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)


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
    ) -> None:
        self.configuration = configuration
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
        self.engine = QuotaEngine(configuration)
        self.config_reflectors = {kind: Reflector(api, resource, _trim) for kind, resource in _CONFIG_RESOURCES.items()}
        self.workload_reflector: Reflector[dict[str, Any]] = Reflector(api, _WORKLOADS, _trim)
        self.job_reflector: Reflector[dict[str, Any]] = Reflector(api, _JOBS, _trim)
        self.reflectors = ReflectorSet([*self.config_reflectors.values(), self.workload_reflector, self.job_reflector])
        self.workloads = _View()
        self.jobs = _View()
        self._dirty_workloads: set[str] = set()
        # Decision writes run while the next decisions are made (the engine already counts them, as Kueue's
        # cache "assumes" a workload). Watch news of a Workload whose write is in flight is held back until
        # the write is done, so an echo from before the decision is never mistaken for the API's truth.
        self._writing: dict[str, int] = {}
        self._held_back: set[str] = set()
        self._decision_writes: set[asyncio.Task[bool]] = set()
        self._eviction_barrier: asyncio.Task[bool] | None = None
        self._dirty_jobs: set[str] = set()
        self._deleted_jobs: dict[str, dict[str, Any]] = {}  # last copies, until their Workloads are deleted
        self._needs_rebuild = False
        self._wake = asyncio.Event()
        self._invalid: dict[str, str] = {}  # configuration objects the engine refused, with why
        self._applied: dict[str, dict[str, Any]] = {}  # what the engine was last given, per configuration object
        self._reasons: dict[str, tuple[str, float]] = {}  # last pending reason written per workload, and when
        self._pending_since: dict[str, float] = {}  # when each pending workload was queued, read once per wait
        self._active_since: dict[str, tuple[bool, float]] = {}  # ClusterQueue Active condition and its transition
        self._tasks: set[asyncio.Task[Any]] = set()  # fire-and-forget writes, referenced until done
        self._events_waiting = 0
        self._event_tokens = _EVENT_BURST
        self._event_tokens_at = time.monotonic()
        self._last_status: dict[str, Any] = {}
        self._status_written_at: dict[str, float] = {}  # monotonic time of each queue's last status write
        self.cycles = 0
        self.ready = asyncio.Event()
        for kind, reflector in self.config_reflectors.items():
            reflector.subscribe(self._config_handler(kind))
        self.workload_reflector.subscribe(self._on_workload)
        self.job_reflector.subscribe(self._on_job)
        metrics.watch_queues(QueueStateCollector(self.cluster_queue_gauges, self.local_queue_gauges))

    # ----- watch events -------------------------------------------------------------------------------

    def _config_handler(self, kind: str) -> Callable[[Event[dict[str, Any]]], None]:
        def handle(event: Event[dict[str, Any]]) -> None:
            if not self.ready.is_set():
                return  # the initial build reads every store at once
            value = None if event.type is EventType.DELETED else event.value
            if value is not None and self._applied.get(f"{kind} {event.key}") == _what_the_engine_reads(value):
                return  # a status write (often our own): re-applying would re-route every pending workload
            self._apply_config(kind, event.key, value)
            self._wake.set()

        return handle

    def _apply_config(self, kind: str, key: str, obj: Mapping[str, Any] | None) -> None:
        namespace, _, name = key.rpartition("/")
        if obj is None:
            self._applied.pop(f"{kind} {key}", None)
            with contextlib.suppress(EngineError):
                self.engine.delete_object(kind, name, namespace)
            self._invalid.pop(f"{kind} {key}", None)
            return
        document = dict(obj)
        if kind == "Namespace":
            document = {"metadata": {"name": name, "labels": obj.get("metadata", {}).get("labels") or {}}}
        api_version = "v1" if kind == "Namespace" else "kueue.x-k8s.io/v1beta2"
        self._applied[f"{kind} {key}"] = _what_the_engine_reads(obj)
        try:
            self.engine.apply(parse_object({**document, "apiVersion": api_version, "kind": kind}))
            self._invalid.pop(f"{kind} {key}", None)
        except EngineError as error:
            self._invalid[f"{kind} {key}"] = str(error)
            log.error("%s %s is not usable: %s", kind, key, error)

    def _on_workload(self, event: Event[dict[str, Any]]) -> None:
        value = None if event.type is EventType.DELETED else event.value
        if self.workloads.observe(event.key, value):
            self._dirty_workloads.add(event.key)
            owner = self._owner_job(value) if value is not None else None
            if owner is not None:
                self._dirty_jobs.add(owner)
            self._wake.set()

    def _on_job(self, event: Event[dict[str, Any]]) -> None:
        value = None if event.type is EventType.DELETED else event.value
        if self.jobs.observe(event.key, value):
            if value is None:
                self._deleted_jobs[event.key] = event.value
            self._dirty_jobs.add(event.key)
            self._wake.set()

    @staticmethod
    def _owner_job(workload: Mapping[str, Any]) -> str | None:
        for owner in workload.get("metadata", {}).get("ownerReferences") or []:
            if owner.get("kind") == "Job" and owner.get("controller"):
                return f"{workload['metadata']['namespace']}/{owner['name']}"
        return None

    # ----- the loop -----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch, rebuild the engine from the API's truth, then decide and write until cancelled."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self.reflectors.run(), name="reflectors")
            await asyncio.gather(*(reflector.synced.wait() for reflector in self.reflectors.reflectors))
            self._rebuild()
            self.ready.set()
            log.info("controller synced: %d workloads, %d jobs", len(self.workloads.objects), len(self.jobs.objects))
            group.create_task(self._status_loop(), name="queue status")
            try:
                while True:
                    await self._cycle()
                    if self._dirty_workloads or self._dirty_jobs or self._needs_rebuild:
                        continue
                    wakeup = self.engine.next_wakeup()
                    timeout = None if wakeup is None else max(0.0, wakeup - self.clock())
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout)
                    self._wake.clear()
            finally:
                for task in self._decision_writes:  # a replica that stops deciding stops writing decisions
                    task.cancel()

    async def close(self) -> None:
        """Close the writers' connections (after :meth:`run` has ended)."""
        for pool in self._pools:
            await pool.close()

    def _rebuild(self) -> None:
        """A fresh engine from the views: at start-up, and after a write showed the engine was wrong."""
        self.engine = QuotaEngine(self.configuration)
        self._invalid.clear()
        self._applied.clear()
        for kind, reflector in self.config_reflectors.items():
            for obj in list(reflector.values()):
                self._apply_config(kind, _key(obj), obj)
        for key in sorted(self.workloads.objects):
            self._sync_workload(key)
        self._dirty_workloads.clear()
        self._dirty_jobs.update(self.jobs.objects)
        self._needs_rebuild = False

    async def _cycle(self) -> None:
        started = time.perf_counter()
        self.cycles += 1
        if self._needs_rebuild:
            # The views hold only what was written: every decision still being written must land first.
            await asyncio.gather(*self._decision_writes, return_exceptions=True)
            self._rebuild()
        dirty_workloads, self._dirty_workloads = self._dirty_workloads, set()
        for key in sorted(dirty_workloads):
            if key in self._writing:
                self._held_back.add(key)
            else:
                self._sync_workload(key)
        dirty_jobs, self._dirty_jobs = self._dirty_jobs, set()
        await self._gather(self._reconcile_job(key) for key in sorted(dirty_jobs))
        now = self.clock()
        # Decisions wait while the API server is behind: each one made now, not queued behind writes, is made
        # knowing of every workload that finished meanwhile (fewer preemptions of work that just ended).
        room = _DECISIONS_IN_FLIGHT - len(self._writing)
        decisions = self.engine.schedule(now, limit=room) if room > 0 else []
        if decisions:
            self._write_decisions(decisions, now)
        self.metrics.decisions_per_cycle.observe(len(decisions))
        self.metrics.cycle_duration.observe(time.perf_counter() - started)

    async def _gather(self, coroutines: Iterable[Coroutine[Any, Any, None]]) -> None:
        tasks = [asyncio.ensure_future(c) for c in coroutines]
        if tasks:
            await asyncio.gather(*tasks)

    # ----- workloads into the engine --------------------------------------------------------------------

    def _priorities(self) -> dict[str, int]:
        return {name: wpc.value for name, wpc in self.engine.priority_classes.items()}

    def _engine_state(self, key: str) -> WorkloadState | None:
        try:
            return self.engine.status(key).state
        except EngineError:
            return None

    def _sync_workload(self, key: str) -> None:
        """Make the engine agree with the API about one Workload."""
        obj = self.workloads.get(key)
        state = self._engine_state(key)
        if obj is None or obj["metadata"].get("deletionTimestamp") or status.is_true(obj, "Finished"):
            if state is not None:
                log.debug("workload %s finished or deleted; engine forgets it (%s)", key, state)
                self.engine.finish(key)
            self._reasons.pop(key, None)
            self._pending_since.pop(key, None)
            if obj is not None and obj["metadata"].get("deletionTimestamp"):
                self._spawn(self._release_finalizer(obj))
            return
        try:
            parsed = parse_workload(obj, self._priorities())
        except EngineError as error:
            log.error("Workload %s is not usable: %s", key, error)
            self._event(obj, "Warning", "InvalidWorkload", str(error))
            return
        pod_sets = status.admitted_pod_sets(obj)
        cluster_queue = status.admitted_cluster_queue(obj)
        if pod_sets is not None and cluster_queue is not None:
            if state is WorkloadState.ADMITTED:
                if not parsed.active:
                    eviction = self.engine.evict(key, EvictionReason.DEACTIVATED, self.clock())
                    self.engine.submit(parsed)
                    self._spawn(self._write_eviction(dataclasses.replace(eviction, deactivated=True)))
                return
            if state is not None:
                self.engine.finish(key)
            log.info("restoring the admission of %s to %s (engine had %s)", key, cluster_queue, state)
            try:
                at = status.quota_reserved_at(obj) or parsed.created
                self.engine.restore_admitted(parsed, cluster_queue, pod_sets, at)
            except EngineError as error:
                log.error("Workload %s holds an admission the engine cannot restore: %s", key, error)
            return
        if state is WorkloadState.ADMITTED:
            log.info("workload %s lost its admission outside kuota; its quota is free", key)
            self.engine.finish(key)  # someone else removed the admission: its quota is free
        self.engine.submit(parsed)

    # ----- decisions to the API ------------------------------------------------------------------------

    def _write_decisions(self, decisions: list[Admission | Eviction], now: float) -> None:
        """Start writing one cycle's decisions and return: the next cycle decides while they are written.

        Admissions only raise usage, so admission writes of different cycles may land in any order. A cycle
        with evictions first waits for every earlier write (it may evict what an earlier cycle admitted), and
        later admissions wait for it (they may need the quota it frees): the API never shows more quota held
        than the engine's limits allow.
        """
        keys = [decision.workload for decision in decisions]
        for key in keys:
            self._writing[key] = self._writing.get(key, 0) + 1
        evicts = any(isinstance(decision, Eviction) for decision in decisions)
        if evicts:
            earlier = list(self._decision_writes)
        else:
            earlier = [self._eviction_barrier] if self._eviction_barrier is not None else []
        task = asyncio.ensure_future(self._apply(decisions, now, earlier))
        self._decision_writes.add(task)
        if evicts:
            self._eviction_barrier = task
        task.add_done_callback(lambda done: self._decisions_written(done, keys))

    def _decisions_written(self, task: asyncio.Task[bool], keys: list[str]) -> None:
        self._decision_writes.discard(task)
        if self._eviction_barrier is task:
            self._eviction_barrier = None
        if task.cancelled() or task.exception() is not None or not task.result():
            if not task.cancelled() and task.exception() is not None:
                log.error("writing decisions failed", exc_info=task.exception())
            self._needs_rebuild = True
        for key in keys:
            remaining = self._writing[key] - 1
            if remaining:
                self._writing[key] = remaining
                continue
            del self._writing[key]
            if key in self._held_back:
                self._held_back.discard(key)
                self._dirty_workloads.add(key)
        self._wake.set()

    async def _apply(
        self, decisions: list[Admission | Eviction], now: float, earlier: list[asyncio.Task[bool]]
    ) -> bool:
        """Write decisions in their order, as waves of consecutive evictions or admissions written at once;
        True when all were written.

        Within a wave, usage only falls (evictions) or only rises (admissions) and the wave's end state is one
        the engine reached, so any order of its writes stays within quota; across waves the order is kept (a
        workload can be admitted, then evicted for another, in one cycle). A failed write ends the writing:
        the later waves may depend on it, so the engine is rebuilt from the API instead. So does a failure
        of an earlier cycle's writes these decisions wait for.
        """
        if earlier:
            results = await asyncio.gather(*earlier, return_exceptions=True)
            if not all(result is True for result in results):  # a failure, an exception or a cancellation
                return False
        for wave in _waves(decisions):
            if isinstance(wave[0], Eviction):
                results = await asyncio.gather(*(self._write_eviction(e) for e in wave if isinstance(e, Eviction)))
            else:
                results = await asyncio.gather(
                    *(self._write_admission(a, now) for a in wave if isinstance(a, Admission))
                )
            if not all(results):
                log.warning("a decision was not written; rebuilding before deciding again")
                return False
        return True

    async def _write_decided(
        self, key: str, obj: dict[str, Any], patch_for: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> dict[str, Any] | None:
        """Write a decision's status patch; on a conflict, write it once more only if what changed meanwhile
        cannot change the decision (our own condition updates): same spec generation, same admission, not
        finishing. Anything else returns None and the engine is rebuilt from the fresh object."""
        namespace, name = key.split("/", 1)
        try:
            written = await self.writer.merge_patch(WORKLOADS, namespace, name, patch_for(obj), "status")
        except ConflictError:
            fresh = await self.writer.get(WORKLOADS, namespace, name)
            if fresh is None or not _same_decision_inputs(obj, fresh):
                log.warning("%s changed under a decision; deciding again", key)
                self._take_fresh(key, fresh)
                return None
            try:
                written = await self.writer.merge_patch(WORKLOADS, namespace, name, patch_for(fresh), "status")
            except ApiWriteError as error:
                log.warning("decision for %s not written: %s", key, error)
                await self._refresh_workload(key)
                return None
        except ApiWriteError as error:
            log.warning("decision for %s not written: %s", key, error)
            await self._refresh_workload(key)
            return None
        self.workloads.wrote(written)
        return written

    async def _write_admission(self, admission: Admission, now: float) -> bool:
        obj = self.workloads.get(admission.workload)
        attempt_started = time.perf_counter()
        if obj is None:
            self._needs_rebuild = True
            return False
        written = await self._write_decided(
            admission.workload, obj, lambda fresh: status.admission_patch(fresh, admission)
        )
        if written is None:
            self.metrics.attempts.labels("inadmissible").inc()
            return False
        log.info(
            "admitted %s to %s%s",
            admission.workload,
            admission.cluster_queue,
            " borrowing" if admission.borrowing else "",
        )
        self._reasons.pop(admission.workload, None)
        self._pending_since.pop(admission.workload, None)
        priority_class = written.get("spec", {}).get("priorityClassRef", {}).get("name", "")
        queued_since = self._queued_since(written)
        self.metrics.admission_wait.labels(admission.cluster_queue, priority_class).observe(
            max(0.0, now - queued_since)
        )
        self.metrics.quota_reserved.labels(admission.cluster_queue, priority_class).inc()
        self.metrics.admitted.labels(admission.cluster_queue, priority_class).inc()
        self.metrics.local_admitted.labels(written["spec"].get("queueName", ""), written["metadata"]["namespace"]).inc()
        self.metrics.attempts.labels("success").inc()
        self.metrics.attempt_duration.labels("success").observe(time.perf_counter() - attempt_started)
        borrowing = " (borrowing from the cohort)" if admission.borrowing else ""
        self._event(
            written, "Normal", "QuotaReserved", f"Quota reserved in ClusterQueue {admission.cluster_queue}{borrowing}"
        )
        owner = self._owner_job(written)
        if owner is not None:
            self._dirty_jobs.add(owner)
            self._wake.set()
        return True

    @staticmethod
    def _queued_since(workload: Mapping[str, Any]) -> float:
        requeued = status.condition(workload.get("status", {}).get("conditions") or [], "Requeued")
        if requeued is not None and requeued.get("status") == "True":
            return status.parse_time(requeued.get("lastTransitionTime")) or 0.0
        return status.parse_time(workload["metadata"].get("creationTimestamp")) or 0.0

    async def _write_eviction(self, eviction: Eviction) -> bool:
        obj = self.workloads.get(eviction.workload)
        if obj is None:
            return False
        namespace, name = eviction.workload.split("/", 1)
        preemptor = self.workloads.get(eviction.preempted_by) if eviction.preempted_by else None
        preemptor_uid = preemptor["metadata"].get("uid") if preemptor else None
        written = await self._write_decided(
            eviction.workload, obj, lambda fresh: status.eviction_patch(fresh, eviction, preemptor_uid)
        )
        if written is None:
            # A victim that finished, or is being deleted, gave its quota back by itself: the decisions that
            # needed that quota stand, and the engine hears of the change as of any other.
            now_seen = self.workloads.get(eviction.workload)
            return (
                now_seen is None
                or bool(now_seen["metadata"].get("deletionTimestamp"))
                or status.is_true(now_seen, "Finished")
            )
        try:
            if eviction.deactivated and written.get("spec", {}).get("active", True):
                written = await self.writer.merge_patch(
                    WORKLOADS,
                    namespace,
                    name,
                    {
                        "metadata": {"resourceVersion": written["metadata"]["resourceVersion"]},
                        "spec": {"active": False},
                    },
                )
        except ApiWriteError as error:
            log.warning("eviction of %s not written: %s", eviction.workload, error)
            await self._refresh_workload(eviction.workload)
            return False
        self.workloads.wrote(written)
        log.info(
            "evicted %s from %s: %s by %s",
            eviction.workload,
            eviction.cluster_queue,
            eviction.reason.value,
            eviction.preempted_by,
        )
        priority_class = written.get("spec", {}).get("priorityClassRef", {}).get("name", "")
        cause = eviction.preemption_reason.value if eviction.preemption_reason else ""
        self.metrics.evicted.labels(eviction.cluster_queue, eviction.reason.value, cause, priority_class).inc()
        if eviction.preemption_reason is not None and eviction.preempted_by is not None:
            preempting_queue = self._engine_cluster_queue(eviction.preempted_by)
            self.metrics.preempted.labels(preempting_queue, eviction.preemption_reason.value).inc()
        message = status.condition(written["status"]["conditions"], "Evicted")
        self._event(written, "Normal", eviction.reason.value, str((message or {}).get("message", "")))
        owner = self._owner_job(written)
        if owner is not None:
            self._dirty_jobs.add(owner)
            self._wake.set()
        return True

    def _engine_cluster_queue(self, key: str) -> str:
        try:
            return self.engine.status(key).cluster_queue or ""
        except EngineError:
            return ""

    async def _refresh_workload(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        try:
            fresh = await self.writer.get(WORKLOADS, namespace, name)
        except ApiWriteError as error:
            log.warning("could not re-read Workload %s: %s", key, error)
            return
        self._take_fresh(key, fresh)

    def _take_fresh(self, key: str, fresh: dict[str, Any] | None) -> None:
        """A copy read from the API (None: gone) becomes the view, and the engine hears of it next cycle: its
        watch event, arriving later, will look like an echo."""
        if fresh is None:
            self.workloads.observe(key, None)
        else:
            self.workloads.wrote(fresh)
        self._dirty_workloads.add(key)
        self._wake.set()

    async def _release_finalizer(self, obj: Mapping[str, Any]) -> None:
        finalizers = obj["metadata"].get("finalizers") or []
        if jobs.RESOURCE_IN_USE_FINALIZER not in finalizers:
            return
        remaining = [f for f in finalizers if f != jobs.RESOURCE_IN_USE_FINALIZER]
        patch = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"], "finalizers": remaining or None}}
        try:
            written = await self.writer.merge_patch(
                WORKLOADS, obj["metadata"]["namespace"], obj["metadata"]["name"], patch
            )
            self.workloads.wrote(written)
        except ConflictError:
            await self._refresh_workload(_key(obj))
        except ApiWriteError as error:
            log.warning("finalizer of %s not removed: %s", _key(obj), error)

    # ----- jobs ------------------------------------------------------------------------------------------

    def _managed(self, job: Mapping[str, Any]) -> bool:
        if jobs.queue_name(job) is not None:
            return True
        if not self.configuration.manage_jobs_without_queue_name:
            return False
        namespace = job["metadata"]["namespace"]
        labels = dict(self.engine.namespaces[namespace].labels) if namespace in self.engine.namespaces else {}
        labels.setdefault("kubernetes.io/metadata.name", namespace)
        selector = self.configuration.managed_jobs_namespace_selector
        return selector is None or selector.matches(labels)

    async def _reconcile_job(self, key: str) -> None:
        job = self.jobs.get(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            gone = job or self._deleted_jobs.pop(key, None)
            if gone is not None and self._managed(gone):
                await self._delete_workload_of(key, gone)
            return
        if not self._managed(job):
            return
        metadata = job["metadata"]
        workload_key = f"{metadata['namespace']}/{jobs.workload_name(metadata['name'], metadata['uid'])}"
        workload = self.workloads.get(workload_key)
        finished = jobs.finished_condition(job)
        try:
            if workload is None:
                if finished is None:
                    await self._create_workload(job)
                    if not jobs.is_suspended(job):
                        await self._suspend(job, "it has no admitted Workload yet")
                return
            if finished is not None:
                if not status.is_true(workload, "Finished"):
                    await self._finish_workload(workload, finished)
                return
            if status.admitted_pod_sets(workload) is not None:
                if jobs.is_suspended(job):
                    await self._start_job(job, workload)
            elif not jobs.is_suspended(job):
                await self._suspend(job, "its Workload holds no admission")
            elif not jobs.has_active_pods(job):
                original = workload["spec"]["podSets"][0]["template"]
                if not jobs.template_matches(job, original):
                    await self._patch_job(job, jobs.restore_template_patch(original))
        except ConflictError:
            self._dirty_jobs.add(key)  # re-read by the watch; decided again next cycle
        except ApiWriteError as error:
            log.warning("Job %s: %s", key, error)
            self._dirty_jobs.add(key)

    async def _delete_workload_of(self, key: str, job: dict[str, Any]) -> None:
        """A deleted Job gives its quota back at once: its Workload is deleted now, not when the garbage
        collector gets to it (never, when the Job was deleted with ``--cascade=orphan``)."""
        metadata = job["metadata"]
        workload_key = f"{metadata['namespace']}/{jobs.workload_name(metadata['name'], metadata['uid'])}"
        workload = self.workloads.get(workload_key)
        if workload is None or workload["metadata"].get("deletionTimestamp"):
            return
        try:
            answer = await self.writer.delete(
                WORKLOADS, metadata["namespace"], workload["metadata"]["name"], workload["metadata"]["resourceVersion"]
            )
            log.info("Job %s was deleted; deleting its Workload %s", key, workload_key)
            self._take_fresh(workload_key, answer if answer.get("kind") == "Workload" else None)
        except ApiWriteError as error:  # changed meanwhile (a conflict) or unreachable: again from a fresh copy
            log.info("Workload %s of deleted Job %s not deleted yet: %s", workload_key, key, error)
            await self._refresh_workload(workload_key)
            if self.jobs.get(key) is None:
                self._deleted_jobs[key] = job
            self._dirty_jobs.add(key)

    async def _patch_job(self, job: Mapping[str, Any], patch: dict[str, Any]) -> None:
        patch = {**patch, "metadata": {"resourceVersion": job["metadata"]["resourceVersion"]}}
        written = await self.writer.merge_patch(JOBS, job["metadata"]["namespace"], job["metadata"]["name"], patch)
        self.jobs.wrote(written)

    async def _create_workload(self, job: Mapping[str, Any]) -> None:
        manifest = jobs.workload_manifest(job)
        priority_class = manifest["spec"].get("priorityClassRef", {}).get("name")
        if priority_class is not None and priority_class in self.engine.priority_classes:
            manifest["spec"]["priority"] = self.engine.priority_classes[priority_class].value
        namespace = job["metadata"]["namespace"]
        try:
            created = await self.writer.create(WORKLOADS, namespace, manifest)
        except ConflictError:
            await self._refresh_workload(f"{namespace}/{manifest['metadata']['name']}")
            return
        self.workloads.wrote(created)
        self._sync_workload(_key(created))
        self._event(job, "Normal", "CreatedWorkload", f"Created Workload {_key(created)}")

    async def _finish_workload(self, workload: Mapping[str, Any], finished: tuple[str, str]) -> None:
        kind, message = finished
        patch = status.finished_patch(workload, kind == "Complete", message, self.clock())
        try:
            written = await self.writer.merge_patch(
                WORKLOADS, workload["metadata"]["namespace"], workload["metadata"]["name"], patch, "status"
            )
        except ConflictError:
            await self._refresh_workload(_key(workload))
            self._dirty_jobs.add(self._owner_job(workload) or "")
            return
        self.workloads.wrote(written)
        self._sync_workload(_key(written))
        await self._release_finalizer(self.workloads.get(_key(written)) or written)

    async def _suspend(self, job: Mapping[str, Any], why: str) -> None:
        await self._patch_job(job, {"spec": {"suspend": True}})
        self._event(job, "Normal", "Suspended", f"kuota suspended the Job: {why}")

    async def _start_job(self, job: Mapping[str, Any], workload: Mapping[str, Any]) -> None:
        admission = workload["status"]["admission"]
        flavor_names: list[str] = []
        for assignment in admission.get("podSetAssignments") or []:
            for flavor in (assignment.get("flavors") or {}).values():
                if flavor not in flavor_names:
                    flavor_names.append(flavor)
        # The flavor's own JSON, so tolerations reach the pods exactly as written (tolerationSeconds too).
        flavors = [self.config_reflectors["ResourceFlavor"].get(name) for name in flavor_names]
        placements = [
            jobs.FlavorPlacement(
                node_labels=flavor.get("spec", {}).get("nodeLabels") or {},
                tolerations=flavor.get("spec", {}).get("tolerations") or [],
            )
            for flavor in flavors
            if flavor is not None
        ]
        original = workload["spec"]["podSets"][0]["template"]
        try:
            patch = jobs.admitted_template_patch(job, placements, original)
        except JobConflictError as error:
            self._event(job, "Warning", "FlavorConflict", str(error))
            self._event(workload, "Warning", "FlavorConflict", str(error))
            await self._deactivate(workload, str(error))
            return
        await self._patch_job(job, patch)
        selector = ",".join(f"{k}={v}" for placement in placements for k, v in placement.node_labels.items())
        self._event(
            job,
            "Normal",
            "Started",
            f"Admitted by ClusterQueue {admission.get('clusterQueue')} on flavor {', '.join(flavor_names)}; "
            f"its pods get nodeSelector {selector or '(none)'}",
        )

    async def _deactivate(self, workload: Mapping[str, Any], why: str) -> None:
        """A permanent conflict: turn the Workload off (its quota returns) and say why."""
        written = await self.writer.merge_patch(
            WORKLOADS,
            workload["metadata"]["namespace"],
            workload["metadata"]["name"],
            {"metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]}, "spec": {"active": False}},
        )
        self.workloads.wrote(written)
        self._dirty_workloads.add(_key(written))
        log.warning("Workload %s deactivated: %s", _key(written), why)

    # ----- what people read: reasons, events, queue status ------------------------------------------------

    def _event(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        """Record an Event without waiting for it. Events share the API server with decisions, so they get a
        budget (a burst of ``_EVENT_BURST``, then ``_EVENTS_PER_SECOND``) and a backlog; beyond it an Event is
        dropped and counted in ``kuota_events_dropped_total``, as Kubernetes' own event recorders do under
        load. The Workload's conditions still say everything an Event would."""
        clock = time.monotonic()
        refill = (clock - self._event_tokens_at) * _EVENTS_PER_SECOND
        self._event_tokens = min(_EVENT_BURST, self._event_tokens + refill)
        self._event_tokens_at = clock
        if self._event_tokens < 1 or self._events_waiting >= _EVENT_BACKLOG:
            self.metrics.events_dropped.inc()
            log.debug("event %s on %s dropped: over budget, %d waiting", reason, _key(obj), self._events_waiting)
            return
        self._event_tokens -= 1
        metadata = obj["metadata"]
        now = status.rfc3339(self.clock())
        involved = obj.get("kind") or ("Workload" if "podSets" in obj.get("spec", {}) else "Job")
        api_version = obj.get("apiVersion") or ("kueue.x-k8s.io/v1beta2" if involved == "Workload" else "batch/v1")
        event = {
            "metadata": {"generateName": f"{metadata['name']}.", "namespace": metadata["namespace"]},
            "involvedObject": {
                "kind": involved,
                "apiVersion": api_version,
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata.get("uid"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": "kuota-manager"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._events_waiting += 1
        self._spawn(self._write_event(metadata["namespace"], event))

    async def _write_event(self, namespace: str, event: dict[str, Any]) -> None:
        try:
            await self.reporter.create(EVENTS, namespace, event)
        except ApiWriteError as error:
            log.info("event not recorded: %s", error)
        finally:
            self._events_waiting -= 1

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _status_loop(self) -> None:
        rounds = 0
        while True:
            await asyncio.sleep(_STATUS_INTERVAL)
            rounds += 1
            try:
                await self._write_reasons()
                await self._write_queue_status()
                if rounds % self._retention_rounds == 0:
                    await self._expire_finished()
            except ApiWriteError as error:
                log.warning("status not written: %s", error)

    async def _expire_finished(self) -> None:
        """Delete Workloads finished longer ago than the retention (the report reads the rest as history)."""
        horizon = self.clock() - self.workload_retention
        expired = []
        for obj in list(self.workloads.objects.values()):
            finished = status.condition(obj.get("status", {}).get("conditions") or [], "Finished")
            at = status.parse_time(finished.get("lastTransitionTime")) if finished else None
            if finished is not None and finished.get("status") == "True" and at is not None and at < horizon:
                expired.append(obj)
        for obj in expired:
            metadata = obj["metadata"]
            try:
                await self.reporter.delete(
                    WORKLOADS, metadata["namespace"], metadata["name"], metadata["resourceVersion"]
                )
                log.info("deleted %s, finished over %.0fh ago", _key(obj), self.workload_retention / 3600)
            except ConflictError:
                continue  # changed or gone meanwhile: judged again next round

    async def _write_reasons(self) -> None:
        """Tell each pending Workload why it waits, once it has waited ``_REASON_GRACE_SECONDS`` (most are
        admitted sooner and need no such write). A reason whose text changed (often just its numbers, "16 in
        use") is rewritten at most every ``_REASON_REFRESH_SECONDS`` and the Job hears of it once; each round
        writes at most ``_REASON_WRITES_PER_ROUND``, never-told Workloads first, oldest first. At thousands of
        pending Workloads, one write per change per round would be most of the API server's load, taken from
        the admissions themselves; and only the reasons about to be written are put into words (at most
        ``_REASON_CHECKS_PER_ROUND``), since wording all of them every round was most of the controller's time."""
        now = self.clock()
        due: list[tuple[bool, float, str]] = []
        for key, engine_status in self.engine.statuses_without_reasons():
            if engine_status.state is not WorkloadState.PENDING or key in self._writing:
                continue
            previous = self._reasons.get(key)
            if previous is not None:
                if now - previous[1] >= _REASON_REFRESH_SECONDS:
                    due.append((True, previous[1], key))
                continue
            since = self._pending_since.get(key)
            if since is None:
                obj = self.workloads.get(key)
                if obj is None:
                    continue
                since = self._pending_since[key] = self._queued_since(obj)
            if now - since >= _REASON_GRACE_SECONDS:
                due.append((False, since, key))
        due.sort()
        writes = []
        for told, _, key in due[:_REASON_CHECKS_PER_ROUND]:
            reason = self.engine.status(key).reason
            obj = self.workloads.get(key)
            if reason is None or obj is None:
                continue
            previous = self._reasons.get(key)
            self._reasons[key] = (reason, now)  # looked at now: not again before another refresh period
            if previous is not None and previous[0] == reason:
                continue
            shown = status.condition(obj.get("status", {}).get("conditions") or [], "QuotaReserved")
            if shown is not None and shown.get("status") == "False" and shown.get("message") == reason:
                continue  # already says so (e.g. written before a restart)
            writes.append(self._write_reason(obj, reason, now, first=not told))
            if len(writes) == _REASON_WRITES_PER_ROUND:
                break
        await self._gather(writes)

    async def _write_reason(self, obj: Mapping[str, Any], reason: str, now: float, first: bool) -> None:
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        try:
            written = await self.reporter.merge_patch(
                WORKLOADS, namespace, name, status.pending_patch(obj, reason, now), "status"
            )
        except ApiWriteError as error:  # a conflict included: written again from the fresh copy next round
            self._reasons.pop(_key(obj), None)
            if not isinstance(error, ConflictError):
                log.info("pending reason of %s not written: %s", _key(obj), error)
            return
        self.workloads.wrote(written)
        if not first:
            return
        # One event where people look: on the Job when there is one (the Workload's condition says it too).
        owner = self._owner_job(written)
        job = self.jobs.get(owner) if owner else None
        if job is not None:
            self._event(job, "Normal", "Pending", f"waiting for quota: {reason}")
        else:
            self._event(written, "Normal", "Pending", reason)

    async def _write_queue_status(self) -> None:
        """Write each queue's status when it differs from what this replica last wrote: at most
        ``_STATUS_WRITES_PER_ROUND`` a round, the longest unwritten first. A few changing queues are current
        within a round; under a storm of admissions every queue's counts change every round, and hundreds of
        queues would otherwise cost the API server a write each per second."""
        changed: list[tuple[float, str, Resource, str | None, str, dict[str, Any]]] = []

        def consider(resource: Resource, namespace: str | None, name: str, body: dict[str, Any]) -> None:
            slot = f"{resource.plural}/{namespace}/{name}"
            if self._last_status.get(slot) != body:
                changed.append((self._status_written_at.get(slot, 0.0), slot, resource, namespace, name, body))

        for gauges in self.cluster_queue_gauges():
            consider(CLUSTER_QUEUES, None, gauges.name, self._cluster_queue_status(gauges))
        for local in self.local_queue_gauges():
            body = {
                "pendingWorkloads": local.pending_active + local.pending_inadmissible,
                "reservingWorkloads": local.reserving,
                "admittedWorkloads": local.admitted,
            }
            consider(LOCAL_QUEUES, local.namespace, local.name, body)
        changed.sort(key=lambda entry: entry[:2])
        now = time.monotonic()
        writes = []
        for _, slot, resource, namespace, name, body in changed[:_STATUS_WRITES_PER_ROUND]:
            self._last_status[slot] = body
            self._status_written_at[slot] = now
            writes.append(self._write_status(slot, resource, namespace, name, body))
        await self._gather(writes)

    async def _write_status(
        self, slot: str, resource: Resource, namespace: str | None, name: str, body: dict[str, Any]
    ) -> None:
        try:
            await self.reporter.merge_patch(resource, namespace, name, {"status": body}, "status")
        except ConflictError:
            self._last_status.pop(slot, None)  # written again next round

    def _cluster_queue_status(self, gauges: ClusterQueueGauges) -> dict[str, Any]:
        invalid = self._invalid.get(f"ClusterQueue {gauges.name}")
        engine_status = self.engine.cluster_queue_status(gauges.name)
        active = engine_status.active and invalid is None
        message = invalid or engine_status.inactive_reason or "Can admit new workloads"
        flavors: dict[str, list[dict[str, Any]]] = {}
        for usage in engine_status.usage:
            flavors.setdefault(usage.flavor, []).append(
                {
                    "name": usage.resource,
                    "total": quantities.format_quantity(usage.resource, usage.total),
                    "borrowed": quantities.format_quantity(usage.resource, usage.borrowed),
                }
            )
        usage_list = [{"name": flavor, "resources": resources} for flavor, resources in flavors.items()]
        return {
            "pendingWorkloads": gauges.pending_active + gauges.pending_inadmissible,
            "reservingWorkloads": gauges.reserving,
            "admittedWorkloads": gauges.admitted,
            "flavorsReservation": usage_list,
            "flavorsUsage": usage_list,
            "fairSharing": {"weightedShare": engine_status.weighted_share},
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if active else "False",
                    "reason": "Ready" if active else "Inactive",
                    "message": message,
                    "lastTransitionTime": status.rfc3339(self._active_transition(gauges.name, active)),
                }
            ],
        }

    def _active_transition(self, name: str, active: bool) -> float:
        """When the ClusterQueue's Active condition last flipped: fixed between flips, so an idle queue's status
        is not rewritten every round."""
        known = self._active_since.get(name)
        if known is None or known[0] != active:
            known = (active, self.clock())
            self._active_since[name] = known
        return known[1]

    # ----- gauges -----------------------------------------------------------------------------------------

    def cluster_queue_gauges(self) -> list[ClusterQueueGauges]:
        if not self.ready.is_set():
            return []
        inadmissible: dict[str, int] = {}
        for _, workload_status in self.engine.statuses_without_reasons():
            queue_name = workload_status.cluster_queue
            if workload_status.state is WorkloadState.PENDING and workload_status.inadmissible and queue_name:
                inadmissible[queue_name] = inadmissible.get(queue_name, 0) + 1
        result = []
        for name, queue in sorted(self.engine.cluster_queues.items()):
            try:
                queue_status = self.engine.cluster_queue_status(name)
            except EngineError:
                continue
            quotas = []
            limits = {
                (flavor.name, resource.name): resource
                for group in queue.resource_groups
                for flavor in group.flavors
                for resource in flavor.resources
            }
            for usage in queue_status.usage:
                limit = limits.get((usage.flavor, usage.resource))
                quotas.append(
                    QuotaLine(
                        cohort=queue.cohort or "",
                        cluster_queue=name,
                        flavor=usage.flavor,
                        resource=usage.resource,
                        usage=_metric_units(usage.resource, usage.total),
                        nominal=_metric_units(usage.resource, usage.nominal),
                        borrowing_limit=_optional_units(usage.resource, limit.borrowing_limit if limit else None),
                        lending_limit=_optional_units(usage.resource, limit.lending_limit if limit else None),
                    )
                )
            stuck = inadmissible.get(name, 0)
            result.append(
                ClusterQueueGauges(
                    name=name,
                    status="active" if queue_status.active else "pending",
                    pending_active=queue_status.pending - stuck,
                    pending_inadmissible=stuck,
                    reserving=queue_status.admitted,
                    admitted=queue_status.admitted,
                    weighted_share=float(queue_status.weighted_share),
                    quotas=quotas,
                )
            )
        return result

    def local_queue_gauges(self) -> list[LocalQueueGauges]:
        if not self.ready.is_set():
            return []
        counts: dict[tuple[str, str], list[int]] = {key: [0, 0, 0] for key in self.engine.local_queues}
        for key, engine_status in self.engine.statuses_without_reasons():
            obj = self.workloads.get(key)
            if obj is None:
                continue
            slot = counts.get((obj["metadata"]["namespace"], obj["spec"].get("queueName", "")))
            if slot is None:
                continue
            if engine_status.state is WorkloadState.ADMITTED:
                slot[2] += 1
            elif engine_status.inadmissible:
                slot[1] += 1
            else:
                slot[0] += 1
        return [
            LocalQueueGauges(namespace, name, active, inadmissible, admitted, admitted)
            for (namespace, name), (active, inadmissible, admitted) in sorted(counts.items())
        ]


def _what_the_engine_reads(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A configuration object without its status and bookkeeping metadata: its spec (a priority class's value),
    labels (a namespace's), and whether it is being deleted."""
    metadata = obj.get("metadata") or {}
    essence = {key: value for key, value in obj.items() if key not in ("status", "metadata")}
    essence["labels"] = metadata.get("labels")
    essence["deleting"] = bool(metadata.get("deletionTimestamp"))
    return essence


def _same_decision_inputs(decided: Mapping[str, Any], fresh: Mapping[str, Any]) -> bool:
    """Whether a Workload changed only in ways no quota decision reads (e.g. a pending reason was written)."""
    return (
        decided["metadata"].get("generation") == fresh["metadata"].get("generation")
        and decided["metadata"].get("uid") == fresh["metadata"].get("uid")
        and not fresh["metadata"].get("deletionTimestamp")
        and status.admitted_pod_sets(decided) == status.admitted_pod_sets(fresh)
        and status.admitted_cluster_queue(decided) == status.admitted_cluster_queue(fresh)
        and status.is_true(decided, "Finished") == status.is_true(fresh, "Finished")
    )


def _waves(decisions: list[Admission | Eviction]) -> list[list[Admission | Eviction]]:
    """Split decisions into runs of the same kind, keeping their order."""
    waves: list[list[Admission | Eviction]] = []
    for decision in decisions:
        if waves and type(waves[-1][0]) is type(decision):
            waves[-1].append(decision)
        else:
            waves.append([decision])
    return waves


def _metric_units(resource: str, units: int) -> float:
    return units / 1000 if resource == "cpu" else float(units)


def _optional_units(resource: str, units: int | None) -> float | None:
    return None if units is None else _metric_units(resource, units)
