"""Admission ETAs for pending Workloads: the engine replayed forward from the controller's state, in the
background, at most every ``interval`` seconds (:mod:`kuota.simulator.forecast`).

The replay runs in a worker thread on a snapshot (the parsed configuration objects, Workloads and admissions
the engine holds, shared, and each Workload's annotated runtime, which its kept copy holds undecoded), so the
event loop goes on deciding meanwhile; a recomputation never starts while the last one runs. Expected
runtimes, in order (:mod:`kuota.simulator.runtimes`): the Workload's ``maximumExecutionTimeSeconds``, its
``kuota.dev/expected-runtime`` annotation, the history of finished Workloads of the same LocalQueue and shape.

That history lives in memory and, so that it survives restarts, in one annotation per LocalQueue,
``kuota.dev/runtime-history`` (at most 22 shapes x 32 runtimes, about 20 KB), rather than a ConfigMap: the
history belongs to the queue and goes when the queue goes, the manager already watches every LocalQueue (so
it reads the history back at start-up for free), and it needs one verb (patch on localqueues), where a
ConfigMap would be an object of its own, to create, size and clean up, and another watch. The engine reads
no annotation, so these writes never re-route the queue.

Shown: :meth:`EtaBook.eta_of` (the visibility API), :meth:`EtaBook.phrase` (the pending condition message),
the ``kuota.dev/eta`` annotation on each Workload waiting for more than a minute (the ``ETA`` printer
column), and :meth:`EtaBook.head_etas` (the per-ClusterQueue gauge).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kuota.durations import DurationError
from kuota.engine import ApiObject, InvalidObjectError, QuotaEngine, Workload, WorkloadState, parse_workload
from kuota.simulator.errors import HistoryFormatError
from kuota.simulator.forecast import ARRIVAL_WINDOW_SECONDS, Eta, Pending, Running, forecast
from kuota.simulator.runtimes import (
    EXPECTED_RUNTIME_ANNOTATION,
    Runtime,
    RuntimeHistory,
    RuntimeSource,
    annotated_runtime,
    gpus_of,
    local_queue_of,
    queued_runtime,
    remaining_runtime,
)
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import LOCAL_QUEUES, WORKLOADS, ApiWriter
from kuota.webhook.controller.errors import ApiWriteError, StaleObjectError
from kuota.webhook.controller.state import ControllerState, gather_between_decisions

__all__ = ["ETA_ANNOTATION", "HISTORY_ANNOTATION", "Eta", "EtaBook", "phrase"]

log = logging.getLogger(__name__)

ETA_ANNOTATION = "kuota.dev/eta"
HISTORY_ANNOTATION = "kuota.dev/runtime-history"
DEFAULT_INTERVAL_SECONDS = 5.0
# Workloads about to start get no annotation write: a write bumps the resourceVersion their admission is
# decided from. One already shown is rewritten only when its ETA moved by a tenth of the wait, or a minute.
_ANNOTATE_AFTER_SECONDS = 60.0
_WRITES_PER_ROUND = 20
# The writes go a few at a time (the reporter's connections), each few in a gap between decision writes: an
# annotation written on a Workload being admitted makes its admission write stale, and a round of them in the
# middle of a burst of admissions took the API server's time from it (at 10,000 Workloads, the p95 from quota
# freed to Job running went from 0.63 s with ETAs off to 1.07 s with them on).
_WRITES_AT_ONCE = 4
_LONGEST_WAIT_FOR_DECISIONS = 2.0
_SWITCH_INTERVAL_WHILE_REPLAYING = 0.0005
# What the ETAs may take of one core on average: a recomputation that took c seconds of CPU (its snapshot on the
# event loop and its replay) is followed by the next no sooner than c / _CPU_SHARE seconds later, so under a
# large backlog they coarsen instead of taking the decisions' time (on two cores, a second of the manager's CPU
# is also one the API server it waits on loses). At 15,000 pending Workloads a recomputation takes about half a
# second: ETAs, shown in minutes, then refresh every 25 s or so.
_CPU_SHARE = 0.02


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a forward replay starts from: the configuration objects, the running and pending Workloads, and
    those submitted within the arrival window (whatever became of them), expected again."""

    objects: list[ApiObject]
    running: list[Running]
    pending: list[Pending]
    recent: list[Pending]


class EtaBook:
    def __init__(
        self,
        state: ControllerState,
        reporter: ApiWriter,
        local_queues: Iterable[Mapping[str, Any]] | None = None,
        interval: float = DEFAULT_INTERVAL_SECONDS,
    ) -> None:
        self._state = state
        self._reporter = reporter
        self.interval = interval
        self.history = RuntimeHistory()
        self.recomputations = 0
        self.cpu_seconds = 0.0  # what the last recomputation took: its snapshot and its replay
        self._etas: dict[str, Eta] = {}
        self._beyond: dict[str, Eta] = {}  # not expected within the replay's horizon
        self._heads: dict[str, Eta] = {}
        # Per Workload, its kuota.dev/expected-runtime annotation's text and the runtime that text declares.
        self._annotations: dict[str, tuple[str, Runtime | None]] = {}
        self._queue_of: dict[str, str] = {}  # each pending Workload's ClusterQueue, as of the last snapshot
        self._recorded: set[str] = set()  # uids of finished Workloads already in the history
        # Finished Workloads submitted within the arrival window, by uid: parsed, with their declared runtime.
        self._recent_finished: dict[str, tuple[Workload, Runtime | None]] = {}
        self._dirty_queues: set[str] = set()
        self._shown: dict[str, float] = {}  # the ETA each Workload's annotation shows
        self._running: asyncio.Task[None] | None = None
        if local_queues is not None:
            self.load_history(local_queues)

    def eta_of(self, key: str) -> Eta | None:
        """The last computed ETA of a pending Workload (``namespace/name``), or None."""
        return self._etas.get(key)

    def head_etas(self) -> Mapping[str, Eta]:
        """Per ClusterQueue, the ETA of the first of its pending Workloads to be admitted."""
        return self._heads

    def phrase(self, key: str) -> str | None:
        eta = self._etas.get(key) or self._beyond.get(key)
        return None if eta is None else phrase(eta, self._state.clock())

    def load_history(self, local_queues: Iterable[Mapping[str, Any]]) -> None:
        """Read the history persisted on the LocalQueues (at start-up); an unreadable one starts afresh."""
        for obj in local_queues:
            metadata = obj.get("metadata") or {}
            text = (metadata.get("annotations") or {}).get(HISTORY_ANNOTATION)
            if not text:
                continue
            queue = f"{metadata.get('namespace')}/{metadata.get('name')}"
            try:
                self.history.load_json(queue, str(text))
            except HistoryFormatError as error:
                log.warning("%s; it starts afresh", error)

    async def run(self) -> None:
        """Recompute every ``interval`` seconds, or less often as ``wait_after`` says, until cancelled
        (``interval`` 0: never)."""
        if self.interval <= 0:
            return
        while True:
            await asyncio.sleep(wait_after(self.interval, self.cpu_seconds))
            try:
                await self.recompute()
                await self.publish()
            except Exception:  # a bug: the ETAs go stale, the decisions go on
                log.exception("admission ETAs not recomputed; trying again in %.0f s", self.interval)

    async def recompute(self) -> None:
        """One forward replay from the state as of now, in a worker thread; at most one at a time."""
        if self._running is not None and not self._running.done():
            return
        now = self._state.clock()
        started = time.thread_time()
        snapshot = self.snapshot(now)
        self._running = asyncio.ensure_future(self._replay(snapshot, now, time.thread_time() - started))
        await self._running

    async def _replay(self, snapshot: Snapshot, now: float, snapshot_cpu_seconds: float) -> None:
        # A thread waiting for the GIL asks for it only after the switch interval (5 ms by default), and the
        # event loop waits so at every wake-up while the replay holds it: a decision would take several such
        # waits. While the replay runs, the loop gets the GIL back within a tenth of that.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(_SWITCH_INTERVAL_WHILE_REPLAYING)
        try:
            etas, forecast_cpu_seconds = await asyncio.to_thread(_timed_forecast, snapshot, now)
        finally:
            sys.setswitchinterval(interval)
        self.cpu_seconds = snapshot_cpu_seconds + forecast_cpu_seconds
        self.recomputations += 1
        within: dict[str, Eta] = {}
        beyond: dict[str, Eta] = {}
        heads: dict[str, Eta] = {}
        for key, eta in etas.items():
            if eta.beyond_horizon:
                beyond[key] = eta
                continue
            within[key] = eta
            queue = self._queue_of.get(key)
            if queue is not None and (queue not in heads or eta.at < heads[queue].at):
                heads[queue] = eta
        self._etas, self._beyond, self._heads = within, beyond, heads

    def snapshot(self, now: float) -> Snapshot:
        """What the forward replay starts from (the Workloads and admissions as the engine holds them, shared,
        not copied); records newly finished Workloads into the history first. No Workload's kept copy is
        decoded but a newly finished one's."""
        state = self._state
        engine = state.engine
        window_start = now - ARRIVAL_WINDOW_SECONDS
        self._record_finished({name: wpc.value for name, wpc in engine.priority_classes.items()}, window_start)
        running: list[Running] = []
        pending: list[Pending] = []
        recent = [
            Pending(workload, queued_runtime(workload, annotation, self.history))
            for workload, annotation in self._recent_finished.values()
        ]
        annotations: dict[str, tuple[str, Runtime | None]] = {}
        queue_of: dict[str, str] = {}
        for key, engine_status in engine.statuses_without_reasons():
            workload = state.parsed.get(key)
            if workload is None:
                continue
            annotation = self._annotation(key, state.workloads.expected_runtime(key))
            if annotation is not None:
                annotations[key] = annotation
            declared = None if annotation is None else annotation[1]
            queued: Pending | None = None
            if workload.created > window_start:  # a submission, whatever became of it, as simulate counts them
                queued = Pending(workload, queued_runtime(workload, declared, self.history))
                recent.append(queued)
            if engine_status.state is WorkloadState.PENDING:
                if queued is None:
                    queued = Pending(workload, queued_runtime(workload, declared, self.history))
                pending.append(queued)
                if engine_status.cluster_queue is not None:
                    queue_of[key] = engine_status.cluster_queue
                continue
            admitted = engine.admission(key)
            if admitted is None:
                continue
            remaining = remaining_runtime(workload, declared, self.history, now - admitted.admitted_at)
            running.append(
                Running(workload, admitted.cluster_queue, admitted.assignment.pod_sets, admitted.admitted_at, remaining)
            )
        self._annotations, self._queue_of = annotations, queue_of
        return Snapshot(_configuration_objects(engine), running, pending, recent)

    def _annotation(self, key: str, text: str | None) -> tuple[str, Runtime | None] | None:
        """A ``kuota.dev/expected-runtime`` annotation's text and the runtime it declares, parsed once per
        Workload and text; one that is no duration is told once in the log and left to the history."""
        if text is None:
            return None
        previous = self._annotations.get(key)
        if previous is not None and previous[0] == text:
            return previous
        try:
            return (text, annotated_runtime(text))
        except DurationError:
            log.warning(
                "Workload %s: annotation %s=%r is not a duration (write e.g. 90m or 1h30m); its runtime is taken "
                "from the queue's history",
                key,
                EXPECTED_RUNTIME_ANNOTATION,
                text,
            )
            return (text, None)

    def _record_finished(self, priorities: Mapping[str, int], window_start: float) -> None:
        """Every Workload that finished after running, once: its runtime joins its queue's history; one
        submitted after ``window_start`` is kept, parsed, as a recent arrival until it is older."""
        live: set[str] = set()
        for obj in self._state.workloads.finished():
            uid = str(obj["metadata"].get("uid") or "")
            live.add(uid)
            if uid in self._recorded:
                continue
            self._recorded.add(uid)
            try:
                workload = parse_workload(obj, priorities)
            except InvalidObjectError:
                continue
            if workload.created > window_start:
                annotation = self._annotation(workload.key, self._state.workloads.expected_runtime(workload.key))
                self._recent_finished[uid] = (workload, None if annotation is None else annotation[1])
            runtime = _finished_runtime(obj)
            if runtime is None:
                continue
            queue = local_queue_of(workload)
            if self.history.record(queue, gpus_of(workload), *runtime):
                self._dirty_queues.add(queue)
        self._recorded &= live
        self._recent_finished = {
            uid: entry
            for uid, entry in self._recent_finished.items()
            if uid in live and entry[0].created > window_start
        }

    async def publish(self) -> None:
        """Persist the changed histories and refresh the ETA annotations, each bounded per round."""
        writes = [self._write_history(queue) for queue in sorted(self._dirty_queues)[:_WRITES_PER_ROUND]]
        now = self._state.clock()
        for key, eta in sorted(self._etas.items(), key=lambda item: item[1].at):
            if len(writes) >= 2 * _WRITES_PER_ROUND:
                break
            shown = self._shown.get(key)
            wait = eta.at - now
            if wait < _ANNOTATE_AFTER_SECONDS or key in self._state.writing:
                continue
            if shown is not None and abs(shown - eta.at) < max(_ANNOTATE_AFTER_SECONDS, 0.1 * wait):
                continue
            writes.append(self._write_annotation(key, status.rfc3339(eta.at), eta.at))
        for key in [key for key in self._shown if key not in self._etas][:_WRITES_PER_ROUND]:
            writes.append(self._write_annotation(key, None, None))
        await gather_between_decisions(self._state, writes, _WRITES_AT_ONCE, _LONGEST_WAIT_FOR_DECISIONS)

    async def _write_history(self, queue: str) -> None:
        namespace, _, name = queue.partition("/")
        patch = {"metadata": {"annotations": {HISTORY_ANNOTATION: self.history.to_json(queue)}}}
        self._dirty_queues.discard(queue)
        try:
            await self._reporter.merge_patch(LOCAL_QUEUES, namespace, name, patch)
        except StaleObjectError:
            self.history.forget(queue)  # the LocalQueue is gone, and its history with it
        except ApiWriteError as error:
            log.info("runtime history of LocalQueue %s not written: %s", queue, error)
            self._dirty_queues.add(queue)

    async def _write_annotation(self, key: str, value: str | None, at: float | None) -> None:
        if key in self._state.writing:  # decided since the round began: left to the next round
            return
        namespace, _, name = key.partition("/")
        obj = self._state.workloads.get(key)
        if obj is None:
            self._shown.pop(key, None)
            return
        if value is None and ETA_ANNOTATION not in (obj["metadata"].get("annotations") or {}):
            self._shown.pop(key, None)
            return
        try:
            written = await self._reporter.merge_patch(
                WORKLOADS, namespace, name, {"metadata": {"annotations": {ETA_ANNOTATION: value}}}
            )
        except ApiWriteError as error:
            log.info("ETA of %s not written: %s", key, error)
            self._shown.pop(key, None)
            return
        self._state.workloads.wrote(written)
        if at is None:
            self._shown.pop(key, None)
        else:
            self._shown[key] = at


def wait_after(interval: float, cpu_seconds: float) -> float:
    """How long to wait before the next recomputation, after one that took ``cpu_seconds`` of CPU."""
    return max(interval, cpu_seconds / _CPU_SHARE)


def _timed_forecast(snapshot: Snapshot, now: float) -> tuple[dict[str, Eta], float]:
    """The forecast from ``snapshot``, and the CPU seconds this thread spent on it."""
    started = time.thread_time()
    etas = forecast(snapshot.objects, snapshot.running, snapshot.pending, now, recent=snapshot.recent)
    return etas, time.thread_time() - started


def phrase(eta: Eta, now: float) -> str:
    """``expected to start in about 2 h, from 40 similar jobs``: the ETA as the pending message words it
    (``not expected to start within 30 days, ...`` beyond the replay's horizon)."""
    wait = max(0.0, eta.at - now)
    if eta.beyond_horizon:
        when = f"not expected to start within {round((eta.at - eta.computed_at) / 86400)} days"
    elif wait < 60:
        when = "expected to start within a minute"
    elif wait < 3600:
        minutes = round(wait / 60) if wait < 600 else 5 * round(wait / 300)
        when = f"expected to start in about {minutes} min"
    elif wait < 48 * 3600:
        when = f"expected to start in about {round(wait / 3600)} h"
    else:
        when = f"expected to start in about {round(wait / 86400)} days"
    declared = sum(count for source, count in eta.runtime_sources if source != RuntimeSource.HISTORY.value)
    basis = []
    if eta.similar_jobs:
        basis.append(f"{eta.similar_jobs} similar job{'s' if eta.similar_jobs != 1 else ''}")
    if declared:
        basis.append(f"{declared} declared runtime{'s' if declared != 1 else ''}")
    return f"{when}, from {' and '.join(basis)}" if basis else when


def _finished_runtime(obj: Mapping[str, Any]) -> tuple[float, float] | None:
    """(seconds it ran, when it finished): from its quota reservation to its Finished condition."""
    conditions = obj.get("status", {}).get("conditions") or []
    finished = status.condition(conditions, "Finished")
    reserved = status.condition(conditions, "QuotaReserved")
    if finished is None or reserved is None or reserved.get("status") != "True":
        return None
    end = status.parse_time(finished.get("lastTransitionTime"))
    start = status.parse_time(reserved.get("lastTransitionTime"))
    if end is None or start is None or end < start:
        return None
    return end - start, end


def _configuration_objects(engine: QuotaEngine) -> list[ApiObject]:
    return [
        engine.configuration,
        *engine.flavors.values(),
        *engine.cluster_queues.values(),
        *engine.cohorts.values(),
        *engine.local_queues.values(),
        *engine.priority_classes.values(),
        *engine.namespaces.values(),
        *engine.admission_checks.values(),
    ]
