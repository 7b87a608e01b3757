"""The engine's decisions written to the API: admissions and evictions as Workload status, in an order that never
shows more quota held than the limits allow, while the next decisions are being made.

This is where "never double-admit, never overrun quota" is kept against a live API server: every write carries
the resourceVersion it was decided from; a write refused as stale is re-read, and written again only when what
changed cannot change the decision; any other failure has the engine rebuilt from the API's truth.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kuota.engine import Admission, EngineError, Eviction, EvictionReason
from kuota.webhook.controller import admission_checks as checks
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import WORKLOADS, ApiWriter
from kuota.webhook.controller.errors import ApiWriteError, StaleObjectError
from kuota.webhook.controller.event_recorder import EventRecorder
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.controller.pending_reasons import PendingReasons
from kuota.webhook.controller.pods_ready import PodsReadyClock, backing_off_until, backoff_finished_patch
from kuota.webhook.controller.state import ControllerState, key_of, owner_job
from kuota.webhook.jobs.adapter import RESOURCE_IN_USE_FINALIZER

log = logging.getLogger(__name__)

_DECISIONS_IN_FLIGHT = 64  # twice the writer's connections: enough to keep them all busy


class DecisionWriter:
    def __init__(
        self,
        state: ControllerState,
        writer: ApiWriter,
        metrics: ControllerMetrics,
        reasons: PendingReasons,
        events: EventRecorder,
        *,
        pods_ready: PodsReadyClock | None = None,
    ) -> None:
        self._state = state
        self._pods_ready = pods_ready  # None: waitForPodsReady is off
        self._writer = writer
        self._metrics = metrics
        self._reasons = reasons
        self._events = events
        # Decision writes run while the next decisions are made (the engine already counts them, as Kueue's
        # cache "assumes" a workload). Watch news of a Workload whose write is in flight is held back until
        # the write is done, so an echo from before the decision is never mistaken for the API's truth.
        self._held_back: set[str] = set()
        self._decision_writes: set[asyncio.Task[bool]] = set()
        self._eviction_barrier: asyncio.Task[bool] | None = None

    def _track_pods_ready(self, written: Mapping[str, Any]) -> None:
        """The PodsReady clocks follow each admission and eviction written: a Workload of no job has nothing else
        that looks at it again (its own watch event is older news than this write)."""
        if self._pods_ready is not None:
            self._pods_ready.track(key_of(written), written)

    def room(self) -> int:
        """How many more decisions may be written now: decisions wait while the API server is behind."""
        return _DECISIONS_IN_FLIGHT - len(self._state.writing)

    def hold_back(self, key: str) -> bool:
        """True when a decision about ``key`` is being written: the Workload is synced once the write is done."""
        if key in self._state.writing:
            self._held_back.add(key)
            return True
        return False

    async def settle(self) -> None:
        """Wait for every decision being written, whatever its outcome."""
        await asyncio.gather(*self._decision_writes, return_exceptions=True)

    def cancel(self) -> None:
        """Stop writing decisions (a replica that stops deciding)."""
        for task in self._decision_writes:
            task.cancel()

    def write(self, decisions: list[Admission | Eviction], now: float) -> None:
        """Start writing one cycle's decisions and return: the next cycle decides while they are written.

        Admissions only raise usage, so admission writes of different cycles may land in any order. A cycle
        with evictions first waits for every earlier write (it may evict what an earlier cycle admitted), and
        later admissions wait for it (they may need the quota it frees): the API never shows more quota held
        than the engine's limits allow.
        """
        keys = [decision.workload for decision in decisions]
        self._state.writing_started(keys)
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
        state = self._state
        self._decision_writes.discard(task)
        if self._eviction_barrier is task:
            self._eviction_barrier = None
        if task.cancelled() or task.exception() is not None or not task.result():
            if not task.cancelled() and task.exception() is not None:
                log.error("writing decisions failed", exc_info=task.exception())
            state.needs_rebuild = True
        for key in keys:
            if state.writing_done(key) and key in self._held_back:
                self._held_back.discard(key)
                state.dirty_workloads.add(key)
        state.wake.set()

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
                results = await asyncio.gather(*(self.write_eviction(e) for e in wave if isinstance(e, Eviction)))
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
        """Write a decision's status patch; when it is refused as stale, write it once more only if what changed
        meanwhile cannot change the decision (our own condition updates): same spec generation, same admission,
        not finishing. Anything else returns None and the engine is rebuilt from the fresh object."""
        namespace, name = key.split("/", 1)
        try:
            written = await self._writer.merge_patch(WORKLOADS, namespace, name, patch_for(obj), "status")
        except StaleObjectError:
            fresh = await self._writer.get(WORKLOADS, namespace, name)
            if fresh is None or not _same_decision_inputs(obj, fresh):
                log.warning("%s changed under a decision; deciding again", key)
                self._state.take_fresh(key, fresh)
                return None
            try:
                written = await self._writer.merge_patch(WORKLOADS, namespace, name, patch_for(fresh), "status")
            except ApiWriteError as error:
                log.warning("decision for %s not written: %s", key, error)
                await self.refresh_workload(key)
                return None
        except ApiWriteError as error:
            log.warning("decision for %s not written: %s", key, error)
            await self.refresh_workload(key)
            return None
        self._state.workloads.wrote(written)
        return written

    async def _write_admission(self, admission: Admission, now: float) -> bool:
        state, metrics = self._state, self._metrics
        obj = state.workloads.get(admission.workload)
        attempt_started = time.perf_counter()
        if obj is None:
            state.needs_rebuild = True
            return False
        cluster_queue = state.engine.cluster_queues.get(admission.cluster_queue)
        flavors = {flavor for pod_set in admission.pod_sets for flavor in pod_set.flavors.values()}
        wanted = cluster_queue.checks_for(flavors) if cluster_queue is not None else []
        written = await self._write_decided(
            admission.workload,
            obj,
            lambda fresh: status.admission_patch(
                fresh, admission, checks.synced_checks(checks.workload_checks(fresh), wanted, admission.at)
            ),
        )
        if written is None:
            metrics.record_attempt("inadmissible", time.perf_counter() - attempt_started)
            return False
        self._track_pods_ready(written)
        log.info(
            "admitted %s to %s%s",
            admission.workload,
            admission.cluster_queue,
            " borrowing" if admission.borrowing else "",
        )
        self._reasons.forget(admission.workload)
        waited = max(0.0, now - status.queued_since(written))
        metrics.record_admission(written, admission.cluster_queue, self._cohorts_above(admission.cluster_queue), waited)
        metrics.record_attempt("success", time.perf_counter() - attempt_started)
        # Kueue's two events: quota reserved (with the wait since queued), then admitted: at once without
        # AdmissionChecks, else once they are all Ready (admission_checks.AdmissionCheckGate).
        self._events.record(
            written,
            "Normal",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {admission.cluster_queue}, wait time since queued was {waited:.0f}s",
        )
        if status.is_true(written, "Admitted"):
            self._events.record(
                written,
                "Normal",
                "Admitted",
                f"Admitted by ClusterQueue {admission.cluster_queue}, wait time since reservation was 0s",
            )
        owner = owner_job(written)
        if owner is not None:
            state.dirty_jobs.add(owner)
            state.wake.set()
        return True

    async def write_eviction(self, eviction: Eviction) -> bool:
        """Write one eviction (and, for a deactivation, ``spec.active: false``); True when the victim's quota is
        free in the API."""
        state = self._state
        obj = state.workloads.get(eviction.workload)
        if obj is None:
            return False
        namespace, name = eviction.workload.split("/", 1)
        preempted_message = None
        if eviction.preempted_by is not None and eviction.preemption_reason is not None:
            preempted_message = status.preemption_message(
                state.workloads.get(eviction.preempted_by),
                eviction.preemption_reason.value,
                self._queue_path(self._engine_cluster_queue(eviction.preempted_by)),
                self._queue_path(eviction.cluster_queue),
            )
        written = await self._write_decided(
            eviction.workload, obj, lambda fresh: _eviction_patch(fresh, eviction, preempted_message)
        )
        if written is None:
            # A victim that finished, or is being deleted, gave its quota back by itself: the decisions that
            # needed that quota stand, and the engine hears of the change as of any other.
            now_seen = state.workloads.get(eviction.workload)
            return (
                now_seen is None
                or bool(now_seen["metadata"].get("deletionTimestamp"))
                or status.is_true(now_seen, "Finished")
            )
        try:
            if eviction.deactivated and written.get("spec", {}).get("active", True):
                written = await self._writer.merge_patch(
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
            await self.refresh_workload(eviction.workload)
            return False
        state.workloads.wrote(written)
        self._track_pods_ready(written)
        log.info(
            "evicted %s from %s: %s by %s",
            eviction.workload,
            eviction.cluster_queue,
            eviction.reason.value,
            eviction.preempted_by,
        )
        if eviction.preemption_reason is not None and eviction.preempted_by is not None:
            preempting_queue = self._engine_cluster_queue(eviction.preempted_by)
            self._metrics.record_preemption(preempting_queue, eviction.preemption_reason.value)
        evicted = status.condition(written["status"]["conditions"], "Evicted") or {}
        self._record_eviction(obj, written, eviction, str(evicted.get("reason", eviction.reason.value)))
        message = str(evicted.get("message", ""))
        # Kueue's event reasons: EvictedDueTo<the Evicted condition's reason>; Preempted on a victim and
        # PreemptedWorkload on its preemptor.
        self._events.record(written, "Normal", f"EvictedDueTo{evicted.get('reason', eviction.reason.value)}", message)
        if preempted_message is not None:
            preemptor = state.workloads.get(eviction.preempted_by or "") or {}
            priorities = (
                f"; preemptor effective priority: {_priority(preemptor)} (base: {_priority(preemptor)}, boost: 0)"
                f"; preemptee effective priority: {_priority(written)} (base: {_priority(written)}, boost: 0)"
            )
            self._events.record(written, "Normal", "Preempted", preempted_message + priorities)
            if preemptor:
                self._events.record(
                    preemptor,
                    "Normal",
                    "PreemptedWorkload",
                    f"Preempted workload {eviction.workload} (UID: {written['metadata'].get('uid')}) in ClusterQueue "
                    f"{eviction.cluster_queue}{priorities}",
                )
        if evicted.get("reason") == "DeactivatedDueToAdmissionCheck":
            self._events.record(
                written,
                "Warning",
                "AdmissionCheckRejected",
                f"Deactivated due to {checks.rejection(obj)}",
            )
        if evicted.get("reason") == "DeactivatedDueToMaximumExecutionTimeExceeded":
            limit = written.get("spec", {}).get("maximumExecutionTimeSeconds")
            self._events.record(
                written, "Warning", "MaximumExecutionTimeExceeded", f"The maximum execution time ({limit}s) exceeded"
            )
        owner = owner_job(written)
        if owner is not None:
            state.dirty_jobs.add(owner)
            state.wake.set()
        return True

    def _record_eviction(
        self, before: Mapping[str, Any], written: Mapping[str, Any], eviction: Eviction, evicted_reason: str
    ) -> None:
        """The eviction's metrics, labelled as the Workload's ``schedulingStats.evictions`` counts it."""
        reason, cause = status.counted_as(before, evicted_reason)
        counts = (written.get("status", {}).get("schedulingStats") or {}).get("evictions") or []
        first = any(
            entry.get("reason") == reason and entry.get("underlyingCause", "") == cause and entry.get("count") == 1
            for entry in counts
        )
        ready = status.condition(before.get("status", {}).get("conditions") or [], "PodsReady") or {}
        ready_since = status.parse_time(ready.get("lastTransitionTime")) if ready.get("status") == "True" else None
        since_pods_ready = None if ready_since is None else max(0.0, eviction.at - ready_since)
        self._metrics.record_eviction(
            written, eviction.cluster_queue, reason, cause, first=first, since_pods_ready=since_pods_ready
        )

    def _queue_path(self, cluster_queue: str) -> str:
        """A ClusterQueue's place in its cohort tree as Kueue writes it: ``/root-cohort/.../queue``."""
        engine = self._state.engine
        found = engine.cluster_queues.get(cluster_queue)
        if found is None:
            return ""
        parts = [cluster_queue]
        cohort = found.cohort
        seen: set[str] = set()
        while cohort is not None and cohort not in seen:  # a parentName cycle ends the walk
            seen.add(cohort)
            parts.append(cohort)
            parent = engine.cohorts.get(cohort)
            cohort = parent.parent if parent is not None else None
        return "/" + "/".join(reversed(parts))

    def _cohorts_above(self, cluster_queue: str) -> list[str]:
        node = self._state.engine.tree.cluster_queues.get(cluster_queue)
        return [cohort.name for cohort in node.upward[1:]] if node is not None else []

    def _engine_cluster_queue(self, key: str) -> str:
        try:
            return self._state.engine.status(key).cluster_queue or ""
        except EngineError:
            return ""

    async def refresh_workload(self, key: str) -> None:
        """Read a Workload afresh after a refused write; the engine hears of it next cycle."""
        namespace, name = key.split("/", 1)
        try:
            fresh = await self._writer.get(WORKLOADS, namespace, name)
        except ApiWriteError as error:
            log.warning("could not re-read Workload %s: %s", key, error)
            return
        self._state.take_fresh(key, fresh)

    async def write_backoff_finished(self, key: str) -> None:
        """Say that a Workload's PodsReady backoff ended (``Requeued`` True, ``BackoffFinished``)."""
        workload = self._state.workloads.get(key)
        if workload is None or backing_off_until(workload) is None:
            return
        namespace, name = workload["metadata"]["namespace"], workload["metadata"]["name"]
        patch = backoff_finished_patch(workload, self._state.clock())
        try:
            written = await self._writer.merge_patch(WORKLOADS, namespace, name, patch, "status")
        except StaleObjectError:
            await self.refresh_workload(key)
            return
        except ApiWriteError as error:
            log.warning("end of the backoff of %s not written: %s", key, error)
            return
        self._state.workloads.wrote(written)

    async def write_reactivated(self, obj: Mapping[str, Any]) -> None:
        """Say that a deactivated Workload made active again is back in its queue (``Requeued`` True)."""
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        patch = status.reactivated_patch(obj, self._state.clock())
        try:
            written = await self._writer.merge_patch(WORKLOADS, namespace, name, patch, "status")
        except StaleObjectError:
            await self.refresh_workload(key_of(obj))  # synced again from the fresh copy, and told then
            return
        except ApiWriteError as error:
            log.warning("reactivation of %s not written: %s", key_of(obj), error)
            return
        self._state.workloads.wrote(written)

    async def release_finalizer(self, obj: Mapping[str, Any]) -> None:
        """Let a finished or deleted Workload go: its quota is no longer in use."""
        finalizers = obj["metadata"].get("finalizers") or []
        if RESOURCE_IN_USE_FINALIZER not in finalizers:
            return
        remaining = [f for f in finalizers if f != RESOURCE_IN_USE_FINALIZER]
        patch = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"], "finalizers": remaining or None}}
        try:
            written = await self._writer.merge_patch(
                WORKLOADS, obj["metadata"]["namespace"], obj["metadata"]["name"], patch
            )
            self._state.workloads.wrote(written)
        except StaleObjectError:
            await self.refresh_workload(key_of(obj))
        except ApiWriteError as error:
            log.warning("finalizer of %s not removed: %s", key_of(obj), error)


def _eviction_patch(workload: Mapping[str, Any], eviction: Eviction, preempted_message: str | None) -> dict[str, Any]:
    """The eviction's status patch; every eviction resets the AdmissionChecks to Pending, as Kueue's does, and
    one an AdmissionCheck asked for says which."""
    current = checks.workload_checks(workload)
    cause = (
        checks.eviction_cause(workload, eviction.deactivated)
        if eviction.reason is EvictionReason.ADMISSION_CHECK
        else None
    )
    reset = checks.reset_on_eviction(current, eviction.at) if current else None
    return status.eviction_patch(workload, eviction, preempted_message, cause=cause, checks=reset)


def _priority(workload: Mapping[str, Any]) -> int:
    return int(workload.get("spec", {}).get("priority") or 0)


def _same_decision_inputs(decided: Mapping[str, Any], fresh: Mapping[str, Any]) -> bool:
    """Whether a Workload changed only in ways no quota decision reads (e.g. a pending reason was written)."""
    return (
        decided["metadata"].get("generation") == fresh["metadata"].get("generation")
        and decided["metadata"].get("uid") == fresh["metadata"].get("uid")
        and not fresh["metadata"].get("deletionTimestamp")
        and decided.get("status", {}).get("admission") == fresh.get("status", {}).get("admission")
        and status.is_true(decided, "QuotaReserved") == status.is_true(fresh, "QuotaReserved")
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
