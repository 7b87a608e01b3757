"""Why each pending Workload waits, written into its QuotaReserved condition (and told once in a Warning event).

Kept apart from the decisions because it is the controller's heaviest optional work: at thousands of pending
Workloads, writing and wording every reason every round would take the API server and the controller's time
from the admissions themselves, so this module rations both.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from kuota.engine import WorkloadState
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import WORKLOADS, ApiWriter
from kuota.webhook.controller.errors import ApiWriteError, StaleObjectError
from kuota.webhook.controller.event_recorder import EventRecorder
from kuota.webhook.controller.state import ControllerState, gather, key_of

log = logging.getLogger(__name__)

PENDING = "Pending"
# Kueue's words when a topology cannot place a pod set (kuota.engine.topology).
TOPOLOGY_REFUSAL = re.compile(r'topology "[^"]*" (doesn\'t allow to fit any of|allows to fit only)')
# Kueue's QuotaReserved reason for the Workload its scheduler holds back under blockAdmission.
WAITING_FOR_PODS_READY = "WaitingForPodsReady"

_REASON_REFRESH_SECONDS = 30.0
_REASON_WRITES_PER_ROUND = 20
_REASON_CHECKS_PER_ROUND = 1000
_REASON_GRACE_SECONDS = 3.0


class PendingReasons:
    def __init__(
        self,
        state: ControllerState,
        reporter: ApiWriter,
        events: EventRecorder,
        eta_phrase: Callable[[str], str | None] = lambda key: None,
    ) -> None:
        self._state = state
        self._eta_phrase = eta_phrase  # "expected to start in about 2 h, from 40 similar jobs", or None
        self._reporter = reporter
        self._events = events
        self._reasons: dict[str, tuple[str, float]] = {}  # last pending reason written per workload, and when
        self._pending_since: dict[str, float] = {}  # when each pending workload was queued, read once per wait

    def forget(self, key: str) -> None:
        """The Workload no longer waits (admitted, finished or gone): its next wait starts afresh."""
        self._reasons.pop(key, None)
        self._pending_since.pop(key, None)

    async def write(self) -> None:
        """Tell each pending Workload why it waits, once it has waited ``_REASON_GRACE_SECONDS`` (most are
        admitted sooner and need no such write). A reason whose text changed (often just its numbers, "16 in
        use") is rewritten at most every ``_REASON_REFRESH_SECONDS`` and told in an event once; each round
        writes at most ``_REASON_WRITES_PER_ROUND``, never-told Workloads first, oldest first. At thousands of
        pending Workloads, one write per change per round would be most of the API server's load, taken from
        the admissions themselves; and only the reasons about to be written are put into words (at most
        ``_REASON_CHECKS_PER_ROUND``), since wording all of them every round was most of the controller's time."""
        state = self._state
        now = state.clock()
        due: list[tuple[bool, float, str]] = []
        for key, engine_status in state.engine.statuses_without_reasons():
            if engine_status.state is not WorkloadState.PENDING or key in state.writing:
                continue
            previous = self._reasons.get(key)
            if previous is not None:
                if now - previous[1] >= _REASON_REFRESH_SECONDS:
                    due.append((True, previous[1], key))
                continue
            since = self._pending_since.get(key)
            if since is None:
                obj = state.workloads.get(key)
                if obj is None:
                    continue
                since = self._pending_since[key] = status.queued_since(obj)
            if now - since >= _REASON_GRACE_SECONDS:
                due.append((False, since, key))
        due.sort()
        writes = []
        for told, _, key in due[:_REASON_CHECKS_PER_ROUND]:
            engine_status = state.engine.status(key)
            reason = engine_status.reason
            condition_reason = WAITING_FOR_PODS_READY if engine_status.waiting_for_pods_ready else PENDING
            obj = state.workloads.get(key)
            if reason is None or obj is None:
                continue
            eta = self._eta_phrase(key)
            if eta is not None:
                reason = f"{reason}; {eta}"
            previous = self._reasons.get(key)
            self._reasons[key] = (reason, now)  # looked at now: not again before another refresh period
            if previous is not None and previous[0] == reason:
                continue
            shown = status.condition(obj.get("status", {}).get("conditions") or [], "QuotaReserved")
            if (
                shown is not None
                and shown.get("status") == "False"
                and shown.get("reason") == condition_reason
                and shown.get("message") == reason
            ):
                continue  # already says so (e.g. written before a restart)
            writes.append(self._write_reason(obj, reason, condition_reason, now, first=not told))
            if len(writes) == _REASON_WRITES_PER_ROUND:
                break
        await gather(writes)

    async def write_invalid(self, obj: Mapping[str, Any], message: str) -> None:
        """Tell a Workload the engine cannot read why it will never be admitted (QuotaReserved=False,
        ``Inadmissible``, as Kueue says of a Workload it cannot queue)."""
        shown = status.condition(obj.get("status", {}).get("conditions") or [], "QuotaReserved")
        if shown is not None and shown.get("message") == message:
            return  # already says so (e.g. written before a restart)
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        patch = status.pending_patch(obj, message, self._state.clock(), reason="Inadmissible")
        try:
            written = await self._reporter.merge_patch(WORKLOADS, namespace, name, patch, "status")
        except ApiWriteError as error:  # changed meanwhile: the next sync of the new copy tells it again
            log.info("invalid-Workload condition of %s not written: %s", key_of(obj), error)
            return
        self._state.workloads.wrote(written)

    async def _write_reason(
        self, obj: Mapping[str, Any], reason: str, condition_reason: str, now: float, first: bool
    ) -> None:
        namespace, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        try:
            written = await self._reporter.merge_patch(
                WORKLOADS, namespace, name, status.pending_patch(obj, reason, now, condition_reason), "status"
            )
        except ApiWriteError as error:  # a stale copy included: written again from the fresh one next round
            self._reasons.pop(key_of(obj), None)
            if not isinstance(error, StaleObjectError):
                log.info("pending reason of %s not written: %s", key_of(obj), error)
            return
        self._state.workloads.wrote(written)
        if not first:
            return
        # Kueue's event: a Warning on the Workload, its message the pending reason; a TopologyPlacementFailed one
        # when the topology refused what quota allowed.
        self._events.record(written, "Warning", "Pending", reason)
        if TOPOLOGY_REFUSAL.search(reason):
            self._events.record(written, "Warning", "TopologyPlacementFailed", reason)
