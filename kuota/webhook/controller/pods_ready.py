"""Kueue's waitForPodsReady, live: the ``PodsReady`` condition of each admitted Workload, written from its job's
readiness, and the two clocks on it (docs/architecture.md, "waitForPodsReady").

- The condition follows Kueue's ``generatePodsReadyCondition``: ``WaitForStart`` until every pod is ready (or
  succeeded), then ``Started``; ``WaitForRecovery`` once a ready workload loses a pod, then ``Recovered``. It is
  written only when its status or reason changes.
- The start clock runs from the ``Admitted`` condition's transition, the recovery clock from ``PodsReady``'s
  (Kueue's ``admittedNotReadyWorkload``). On expiry the engine evicts the workload (``PodsReadyTimeout``): it
  backs off ``base * 2^(n-1)`` seconds, capped, or is deactivated past ``backoffLimitCount``; the decision
  writer writes that as any eviction. When a backoff ends, ``Requeued`` turns True (``BackoffFinished``).

:class:`PodsReadyClock` keeps both kinds of deadline (fed by every Workload change the controller sees, by the
decision writer's admissions and evictions and by the job and pod reconcilers' ``PodsReady`` writes) and tells the
controller's loop when to wake. As in Kueue, every admitted Workload is timed: one with no job never gets
``PodsReady``, so it times out; under
``blockAdmission`` it tells the engine whether each admitted Workload's pods are ready (the engine holds the next
admission, ``WaitingForPodsReady``, while one's are not).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kuota.engine import EngineError, Eviction, EvictionReason, WaitForPodsReady, WorkloadState
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import WORKLOADS, ApiWriter
from kuota.webhook.controller.errors import StaleObjectError
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.controller.state import ControllerState, key_of

log = logging.getLogger(__name__)

PODS_READY = "PodsReady"
WAIT_FOR_START = "WaitForStart"
STARTED = "Started"
WAIT_FOR_RECOVERY = "WaitForRecovery"
RECOVERED = "Recovered"
NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
RECOVERY_MESSAGE = "At least one pod has failed, waiting for recovery"
READY_MESSAGE = "All pods reached readiness and the workload is running"
BACKOFF_FINISHED = "BackoffFinished"
BACKOFF_FINISHED_MESSAGE = "The workload backoff was finished"
_RETRY_SECONDS = 1.0  # a deadline met while the Workload's decision is still being written is looked at again


def _conditions(workload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(workload.get("status", {}).get("conditions") or [])


def pods_ready_condition(workload: Mapping[str, Any], ready: bool) -> tuple[bool, str, str]:
    """The ``PodsReady`` condition (status, reason, message) a Workload should have, its job's pods being
    ``ready`` or not (Kueue's ``generatePodsReadyCondition``)."""
    if not status.is_true(workload, "Admitted"):
        return False, WAIT_FOR_START, NOT_READY_MESSAGE
    current = status.condition(_conditions(workload), PODS_READY)
    if ready:
        recovering = current is not None and current.get("reason") in (WAIT_FOR_RECOVERY, RECOVERED)
        return True, RECOVERED if recovering else STARTED, READY_MESSAGE
    if current is not None and (current.get("status") == "True" or current.get("reason") == WAIT_FOR_RECOVERY):
        return False, WAIT_FOR_RECOVERY, RECOVERY_MESSAGE
    return False, WAIT_FOR_START, NOT_READY_MESSAGE


def pods_ready_patch(workload: Mapping[str, Any], ready: bool, at: float) -> dict[str, Any] | None:
    """The status patch that sets ``PodsReady``, or None when its status and reason are already so (no write).
    A Workload never admitted gets none: the condition starts with its first admission."""
    current = status.condition(_conditions(workload), PODS_READY)
    if current is None and not status.is_true(workload, "Admitted"):
        return None
    wanted, reason, message = pods_ready_condition(workload, ready)
    if (
        current is not None
        and current.get("status") == ("True" if wanted else "False")
        and current.get("reason") == reason
    ):
        return None
    conditions = status.set_conditions(_conditions(workload), [(PODS_READY, wanted, reason, message)], at)
    metadata = {"resourceVersion": workload["metadata"]["resourceVersion"]}
    return {"metadata": metadata, "status": {"conditions": conditions}}


def timeout_deadline(workload: Mapping[str, Any], wait: WaitForPodsReady) -> float | None:
    """When an admitted Workload whose pods are not ready times out (Kueue's ``admittedNotReadyWorkload``):
    ``timeout`` after its admission while it waits to start, ``recoveryTimeout`` after it lost readiness while it
    waits to recover; None when no clock runs (not admitted, ready, inactive, evicted, recovery untimed)."""
    if not status.is_true(workload, "Admitted") or status.is_true(workload, "Evicted"):
        return None
    if workload.get("spec", {}).get("active", True) is False:
        return None
    conditions = _conditions(workload)
    current = status.condition(conditions, PODS_READY)
    if current is not None and current.get("status") == "True":
        return None
    if current is None or current.get("reason") in (WAIT_FOR_START, "PodsReady"):
        admitted = status.condition(conditions, "Admitted") or {}
        since = status.parse_time(admitted.get("lastTransitionTime"))
        return None if since is None else since + wait.timeout_seconds
    if current.get("reason") == WAIT_FOR_RECOVERY and wait.recovery_timeout_seconds is not None:
        since = status.parse_time(current.get("lastTransitionTime"))
        return None if since is None else since + wait.recovery_timeout_seconds
    return None


def backing_off_until(workload: Mapping[str, Any]) -> float | None:
    """When the backoff of a Workload evicted for a PodsReady timeout, or by an AdmissionCheck in Retry with a
    delay, ends; None when it is not backing off."""
    requeued = status.condition(_conditions(workload), "Requeued")
    if (
        requeued is None
        or requeued.get("status") != "False"
        or requeued.get("reason") not in ("PodsReadyTimeout", "AdmissionCheck")
    ):
        return None
    return status.requeue_state(workload)[1]


def backoff_finished_patch(workload: Mapping[str, Any], at: float) -> dict[str, Any]:
    """``Requeued`` True (``BackoffFinished``) and ``requeueAt`` cleared; the count stays (Kueue's words)."""
    conditions = status.set_conditions(
        _conditions(workload), [("Requeued", True, BACKOFF_FINISHED, BACKOFF_FINISHED_MESSAGE)], at
    )
    return {
        "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
        "status": {"conditions": conditions, "requeueState": {"requeueAt": None}},
    }


class PodsReadyClock:
    """The PodsReady deadlines and backoff ends of the Workloads the controller has seen, earliest first."""

    def __init__(self, state: ControllerState, wait: WaitForPodsReady) -> None:
        self.wait = wait
        self.state = state
        self._timeouts = _Deadlines()
        self._backoffs = _Deadlines()

    def track(self, key: str, workload: Mapping[str, Any] | None) -> None:
        """Take the newest copy of a Workload (None: gone) and keep its deadlines, if it has any; and tell the
        engine whether its pods are ready."""
        changed = self._timeouts.set(key, None if workload is None else timeout_deadline(workload, self.wait))
        changed |= self._backoffs.set(key, None if workload is None else backing_off_until(workload))
        if changed:
            self.state.wake.set()
        if workload is not None:
            self.report(key, status.is_true(workload, PODS_READY))

    def report(self, key: str, ready: bool) -> None:
        """For ``blockAdmission``: whether an admitted Workload's pods are ready (the engine admits nothing new while
        one's are not)."""
        engine = self.state.engine
        if self.wait.block_admission and engine.admission(key) is not None:
            engine.pods_ready(key, ready)

    def next_wakeup(self) -> float | None:
        times = [at for at in (self._timeouts.first(), self._backoffs.first()) if at is not None]
        return min(times, default=None)

    def timed_out(self, now: float) -> list[Eviction]:
        """The evictions (made by the engine now) of the Workloads whose pods did not get ready in time."""
        evictions: list[Eviction] = []
        state = self.state
        for key in self._timeouts.due(now):
            workload = state.workloads.get(key)
            deadline = None if workload is None else timeout_deadline(workload, self.wait)
            if deadline is None:
                continue
            if deadline > now or key in state.writing:  # a decision about it is being written: look again later
                self._timeouts.set(key, max(deadline, now + _RETRY_SECONDS) if deadline <= now else deadline)
                continue
            if state.engine.admission(key) is None:
                continue
            try:
                evictions.append(state.engine.evict(key, EvictionReason.PODS_READY_TIMEOUT, now))
            except EngineError as error:
                log.warning("PodsReady timeout of %s not acted on: %s", key, error)
                continue
            log.info("Workload %s: its pods were not ready in time; it is evicted (PodsReadyTimeout)", key)
        return evictions

    def backoffs_ended(self, now: float) -> list[str]:
        """The Workloads whose backoff ended (their ``requeueAt`` passed): their ``Requeued`` is to be written
        before the engine admits them again (call before ``schedule(now)``, which queues them again)."""
        ended: list[str] = []
        state = self.state
        for key in self._backoffs.due(now):
            workload = state.workloads.get(key)
            if workload is None or backing_off_until(workload) is None:
                continue
            if key in state.writing:  # a decision about it is being written: look again once it is
                self._backoffs.set(key, now + _RETRY_SECONDS)
                continue
            try:
                engine_state = state.engine.status(key).state
            except EngineError:
                continue
            if engine_state in (WorkloadState.BACKOFF, WorkloadState.PENDING):
                ended.append(key)
        return ended


class _Deadlines:
    """One deadline per key, earliest first; a replaced deadline's heap entry is skipped when it comes up."""

    def __init__(self) -> None:
        self._at: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def set(self, key: str, when: float | None) -> bool:
        """Set (None: clear) ``key``'s deadline; True when it is a new one."""
        if when is None:
            self._at.pop(key, None)
            return False
        if self._at.get(key) == when:
            return False
        self._at[key] = when
        heapq.heappush(self._heap, (when, key))
        return True

    def __contains__(self, key: str) -> bool:
        return key in self._at

    def __len__(self) -> int:
        return len(self._at)

    def first(self) -> float | None:
        while self._heap and self._at.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> list[str]:
        """Take out every key whose deadline is at or before ``now``."""
        keys: list[str] = []
        while (first := self.first()) is not None and first <= now:
            _, key = heapq.heappop(self._heap)
            del self._at[key]
            keys.append(key)
        return keys


def ready_waits(workload: Mapping[str, Any]) -> tuple[float, float] | None:
    """The seconds from queued and from admitted to the pods' readiness, for a Workload whose ``PodsReady`` just
    turned True ``Started`` (Kueue observes its ready-wait histograms then, not on ``Recovered``); else None."""
    conditions = _conditions(workload)
    ready = status.condition(conditions, PODS_READY)
    if ready is None or ready.get("status") != "True" or ready.get("reason") != STARTED:
        return None
    ready_at = status.parse_time(ready.get("lastTransitionTime"))
    admitted_at = status.parse_time((status.condition(conditions, "Admitted") or {}).get("lastTransitionTime"))
    if ready_at is None or admitted_at is None:
        return None
    return max(0.0, ready_at - status.queued_since(workload)), max(0.0, ready_at - admitted_at)


async def write_pods_ready(
    writer: ApiWriter, state: ControllerState, metrics: ControllerMetrics, workload: Mapping[str, Any], ready: bool
) -> Mapping[str, Any]:
    """Write the Workload's ``PodsReady`` condition if it changed (and, when it turned ``Started``, observe the
    ready-wait histograms); the newest copy of the Workload. Raises StaleObjectError (the caller re-reads) and
    ApiWriteError."""
    patch = pods_ready_patch(workload, ready, state.clock())
    if patch is None:
        return workload
    metadata = workload["metadata"]
    written = await writer.merge_patch(WORKLOADS, metadata["namespace"], metadata["name"], patch, "status")
    state.workloads.wrote(written)
    waits = ready_waits(written)
    cluster_queue = (written.get("status", {}).get("admission") or {}).get("clusterQueue")
    if waits is not None and cluster_queue:
        metrics.record_pods_ready(written, str(cluster_queue), *waits)
    return written


async def follow_pods_ready(
    clock: PodsReadyClock,
    writer: ApiWriter,
    metrics: ControllerMetrics,
    workload: Mapping[str, Any],
    ready: bool,
    *,
    refresh: Callable[[str], Awaitable[None]],
) -> None:
    """waitForPodsReady for one admitted Workload of a job or of pods: its ``PodsReady`` condition from whether its
    pods are ``ready``, and its clocks. A stale copy is re-read (``refresh``) and StaleObjectError raised."""
    try:
        workload = await write_pods_ready(writer, clock.state, metrics, workload, ready)
    except StaleObjectError:
        await refresh(key_of(workload))
        raise
    clock.track(key_of(workload), workload)
