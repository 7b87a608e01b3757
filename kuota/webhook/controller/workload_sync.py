"""Making the engine agree with the API about one Workload: submitted, restored as admitted (after a restart or
a rebuild), evicted when deactivated, queued again when reactivated, or forgotten once finished or deleted.

The API is the truth the engine is rebuilt from; this is the one place that reads a Workload's status back into
the engine, so a restarted controller resumes exactly the admissions the API shows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kuota.engine import EngineError, InvalidObjectError, WorkloadState, parse_workload
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.decision_writer import DecisionWriter
from kuota.webhook.controller.event_recorder import EventRecorder
from kuota.webhook.controller.pending_reasons import PendingReasons
from kuota.webhook.controller.pods_ready import backing_off_until
from kuota.webhook.controller.state import ControllerState
from kuota.webhook.controller.workload_status import requeue_state

log = logging.getLogger(__name__)


class WorkloadSync:
    def __init__(
        self, state: ControllerState, decisions: DecisionWriter, reasons: PendingReasons, events: EventRecorder
    ) -> None:
        self._state = state
        self._decisions = decisions
        self._reasons = reasons
        self._events = events
        self._refused: dict[str, str] = {}  # the last problem told per invalid Workload

    def _refuse(self, key: str, obj: Mapping[str, Any], known: WorkloadState | None, error: InvalidObjectError) -> None:
        """A Workload the engine cannot read (its template is free-form, so anyone who may write Workloads can
        write nonsense there): it leaves the queue, says why in its QuotaReserved condition and a Warning event,
        once per distinct problem, and every other Workload goes on being served."""
        message = f"the Workload is invalid: {'; '.join(str(field) for field in error.errors)}"
        if known is WorkloadState.PENDING:
            self._state.engine.finish(key)
        self._state.parsed.pop(key, None)
        self._reasons.forget(key)
        if self._refused.get(key) == message:
            return
        self._refused[key] = message
        log.warning("Workload %s is not usable: %s", key, message)
        self._events.record(obj, "Warning", "InvalidWorkload", message)
        self._state.spawn(self._reasons.write_invalid(obj, message))

    def _priorities(self) -> dict[str, int]:
        return {name: wpc.value for name, wpc in self._state.engine.priority_classes.items()}

    def _engine_state(self, key: str) -> WorkloadState | None:
        try:
            return self._state.engine.status(key).state
        except EngineError:
            return None

    def sync(self, key: str) -> None:
        """Make the engine agree with the API about one Workload."""
        state = self._state
        engine = state.engine
        obj = state.workloads.get(key)
        known = self._engine_state(key)
        if obj is None or obj["metadata"].get("deletionTimestamp") or status.is_true(obj, "Finished"):
            if known is not None:
                log.debug("workload %s finished or deleted; engine forgets it (%s)", key, known)
                engine.finish(key)
            self._reasons.forget(key)
            self._refused.pop(key, None)
            state.parsed.pop(key, None)
            if obj is not None and obj["metadata"].get("deletionTimestamp"):
                state.spawn(self._decisions.release_finalizer(obj))
            return
        try:
            parsed = parse_workload(obj, self._priorities())
            pod_sets = status.admitted_pod_sets(obj)
        except InvalidObjectError as error:
            self._refuse(key, obj, known, error)
            return
        self._refused.pop(key, None)
        state.parsed[key] = parsed
        cluster_queue = status.admitted_cluster_queue(obj)
        if pod_sets is not None and cluster_queue is not None:
            if known is WorkloadState.ADMITTED:
                if not parsed.active:
                    # The engine decides deactivation (and makes the Eviction); this only writes it.
                    eviction = engine.submit(parsed, state.clock())
                    if eviction is not None:
                        state.spawn(self._decisions.write_eviction(eviction))
                return
            if known is not None:
                engine.finish(key)
            log.info("restoring the admission of %s to %s (engine had %s)", key, cluster_queue, known)
            try:
                at = status.quota_reserved_at(obj) or parsed.created
                engine.restore_admitted(parsed, cluster_queue, pod_sets, at)
                engine.restore_requeue_state(key, requeue_state(obj)[0], None)
            except EngineError as error:
                log.error("Workload %s holds an admission the engine cannot restore: %s", key, error)
            return
        if known is WorkloadState.ADMITTED:
            log.info("workload %s lost its admission outside kuota; its quota is free", key)
            engine.finish(key)  # someone else removed the admission: its quota is free
        if parsed.active and known is WorkloadState.DEACTIVATED:
            log.info("workload %s was reactivated; it is queued again", key)
            engine.finish(key)  # the engine keeps a deactivated workload out of every queue until it forgets it
        engine.submit(parsed, evicted=status.requeuing_eviction(obj))
        count, _ = requeue_state(obj)
        backoff = backing_off_until(obj)
        if count or backoff is not None:  # the PodsReady backoff survives a restart (as the engine's count)
            engine.restore_requeue_state(key, count, backoff)
        if parsed.active and status.was_deactivated(obj):
            state.spawn(self._decisions.write_reactivated(obj))
