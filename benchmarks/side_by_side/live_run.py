"""Drive one controller through a planned load on a live control plane, and time what it does.

Three concurrent parts, all on one event loop:

- the creator sends each object (a standalone Workload, or a job the controller turns into one: a Job, a
  JobSet, a RayJob, or a pod group's pods) at its planned instant after the start; its timeline starts when
  the create request is sent;
- the watcher follows every Workload and records, per planned object, when it came to hold quota
  (``status.admission`` set), when it gave it back, and when it was Finished;
- the executor (Workload mode) plays the part of the workload's job, as Kueue's harness runner does: it
  writes ``Finished=True`` through the status subresource once the runtime has passed since the admission
  was seen, and completes an eviction (admission cleared, ``QuotaReserved=False``) when a controller only
  marks a workload Evicted. A job's Workload is the controller's: the pods run on the fake nodes (or, for
  the agreement scenario's kinds, never start) and the controller finishes and evicts it itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from benchmarks.side_by_side.errors import ApiError
from benchmarks.side_by_side.measures import WorkloadTimeline
from benchmarks.side_by_side.rest import KUEUE_GROUP_VERSION, KubeApi, resource_path

log = logging.getLogger("side_by_side")

_PARALLEL_CREATES = 48
_PARALLEL_WRITES = 32
_WRITE_ATTEMPTS = 20
_PROGRESS_SECONDS = 10.0
CHECK_FIELD_MANAGER = "kuota-test-by-hand"  # the hand-run check controller's field manager


@dataclass(frozen=True, slots=True)
class PlannedObject:
    """One object to create: a standalone Workload, or a job whose Workload the controller makes; a pod group is
    a v1 ``List`` of its pods, created one by one."""

    key: str  # namespace/name of the created object; a job's Workload is tracked under the job's key
    submit_at: float
    workload_class: str
    cpu: float
    runtime: float | None  # None: the executor never finishes it (the agreement scenario finishes by hand)
    manifest: dict[str, Any]

    @property
    def is_standalone(self) -> bool:
        """A Workload of its own, which the executor plays the job of."""
        return bool(self.manifest["kind"] == "Workload")

    @property
    def objects(self) -> list[dict[str, Any]]:
        items = self.manifest["items"] if self.manifest["kind"] == "List" else [self.manifest]
        return list(items)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def _is_true(obj: dict[str, Any], kind: str) -> bool:
    condition = _condition(obj, kind)
    return condition is not None and condition.get("status") == "True"


def origin_key(workload: dict[str, Any]) -> str:
    """The planned object a Workload stands for: the job that owns it (its controller owner), or itself (a
    standalone Workload, or a pod group's, named after the group and owned by its pods, none the controller)."""
    metadata = workload["metadata"]
    for owner in metadata.get("ownerReferences") or []:
        if owner.get("controller"):
            return f"{metadata['namespace']}/{owner['name']}"
    return f"{metadata['namespace']}/{metadata['name']}"


def _create_path(manifest: dict[str, Any]) -> str:
    """Where an object of the scenario's kinds is created (each kind's plural is its lower-cased name + s)."""
    plural = f"{str(manifest['kind']).lower()}s"
    return resource_path(manifest["apiVersion"], plural, manifest["metadata"]["namespace"])


def _now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_conditions(obj: dict[str, Any], updates: list[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    """The object's conditions with (type, status, reason, message) set; transition time moves on change."""
    conditions = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
    for kind, status, reason, message in updates:
        current = next((c for c in conditions if c.get("type") == kind), None)
        if current is None:
            current = {"type": kind}
            conditions.append(current)
        if current.get("status") != status:
            current["lastTransitionTime"] = _now_rfc3339()
        current.update(status=status, reason=reason, message=message)
        current["observedGeneration"] = obj["metadata"].get("generation", 1)
    return conditions


class LiveRun:
    def __init__(self, api: KubeApi, plan: list[PlannedObject], clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.plan = {planned.key: planned for planned in plan}
        self.order = sorted(plan, key=lambda planned: planned.submit_at)
        self.clock = clock
        self.timelines: dict[str, WorkloadTimeline] = {}
        self.latest: dict[str, dict[str, Any]] = {}  # newest Workload object per planned key
        self._epochs: dict[str, int] = {}
        self._evicting: set[str] = set()
        self._writes = asyncio.Semaphore(_PARALLEL_WRITES)
        self._tasks: set[asyncio.Task[None]] = set()
        self._all_finished = asyncio.Event()
        self.creation_lag: list[float] = []
        self.write_failures = 0
        self.last_event_at = 0.0
        self._writes_in_flight = 0
        self._watching: asyncio.Task[None] | None = None

    # ----- creating ---------------------------------------------------------------------------------------

    async def _create_all(self, started: float) -> None:
        slots = asyncio.Semaphore(_PARALLEL_CREATES)
        async with asyncio.TaskGroup() as group:
            for planned in self.order:
                delay = started + planned.submit_at - self.clock()
                if delay > 0:
                    await asyncio.sleep(delay)
                await slots.acquire()
                group.create_task(self._create(planned, started, slots))

    async def _create(self, planned: PlannedObject, started: float, slots: asyncio.Semaphore) -> None:
        try:
            sent = self.clock()
            self.creation_lag.append(sent - started - planned.submit_at)
            self.timelines[planned.key] = WorkloadTimeline(planned.key, planned.workload_class, planned.cpu, sent)
            for obj in planned.objects:
                await self._send(_create_path(obj), obj, planned.key)
            early = self.latest.get(planned.key)
            if early is not None:  # the watch was faster than the create's reply
                self._observe(early)
        finally:
            slots.release()

    async def _send(self, path: str, obj: dict[str, Any], key: str) -> None:
        """Create, retrying what an overloaded API server or webhook answers; AlreadyExists means an earlier
        attempt got through."""
        for attempt in range(_WRITE_ATTEMPTS):
            try:
                await self.api.create(path, obj)
                return
            except ApiError as error:
                if error.status == 409 and attempt > 0:
                    return
                if error.status not in (429, 500, 503, 504):
                    raise
            await asyncio.sleep(0.2 * (attempt + 1))
        name = f"{obj['kind']} {obj['metadata']['name']}"
        raise ApiError(f"{name} of {key}: not created after {_WRITE_ATTEMPTS} attempts")

    # ----- watching ---------------------------------------------------------------------------------------

    async def _watch(self, resource_version: str) -> None:
        path = resource_path(KUEUE_GROUP_VERSION, "workloads")
        while True:
            async for kind, obj in self.api.watch(path, resource_version):
                if kind == "ERROR":
                    if obj.get("code") != 410:
                        raise ApiError(f"workload watch failed: {obj.get('message')}", obj.get("code"))
                    resource_version = await self._relist()  # our resourceVersion was compacted away
                    break
                resource_version = obj["metadata"]["resourceVersion"]
                if kind in ("ADDED", "MODIFIED"):
                    self._seen(obj)

    async def _relist(self) -> str:
        listing = await self.api.get(resource_path(KUEUE_GROUP_VERSION, "workloads"))
        if listing is None:
            raise ApiError("Workloads cannot be listed any more: was the CRD deleted?")
        for obj in listing["items"]:
            self._seen(obj)
        return str(listing["metadata"]["resourceVersion"])

    def _seen(self, obj: dict[str, Any]) -> None:
        self.last_event_at = self.clock()
        key = origin_key(obj)
        if key in self.plan:
            self.latest[key] = obj
            if key in self.timelines:
                self._observe(obj)

    def _observe(self, obj: dict[str, Any]) -> None:
        key = origin_key(obj)
        timeline = self.timelines[key]
        if timeline.finished_at is not None:
            return
        now = self.clock()
        if _is_true(obj, "Finished"):
            timeline.finish(now)
            self._epochs[key] = self._epochs.get(key, 0) + 1
            if all(t.finished_at is not None for t in self.timelines.values()) and len(self.timelines) == len(
                self.plan
            ):
                self._all_finished.set()
            return
        holds = (obj.get("status") or {}).get("admission") is not None
        if holds and not timeline.holding:
            timeline.admit(now)
            epoch = self._epochs[key] = self._epochs.get(key, 0) + 1
            runtime = self.plan[key].runtime
            if self.plan[key].is_standalone and runtime is not None:
                self._spawn(self._finish_later(key, epoch, runtime))
        elif not holds and timeline.holding:
            timeline.release(now)
            self._epochs[key] = self._epochs.get(key, 0) + 1
        standalone = self.plan[key].is_standalone
        if standalone and holds and _is_true(obj, "Evicted") and key not in self._evicting:
            self._evicting.add(key)
            self._spawn(self._complete_eviction(key))

    # ----- executing --------------------------------------------------------------------------------------

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.write_failures += 1
            log.error("executor write failed: %s", task.exception())

    async def _finish_later(self, key: str, epoch: int, runtime: float) -> None:
        await asyncio.sleep(runtime)
        await self._write_status(
            key,
            lambda obj: self._epochs.get(key) == epoch and obj["status"].get("admission") is not None,
            lambda obj: {"conditions": with_conditions(obj, [("Finished", "True", "ByTest", "By test runner")])},
        )

    async def _complete_eviction(self, key: str) -> None:
        try:
            await self._write_status(
                key,
                lambda obj: _is_true(obj, "Evicted") and obj["status"].get("admission") is not None,
                lambda obj: {
                    "admission": None,
                    "conditions": with_conditions(
                        obj,
                        [
                            ("QuotaReserved", "False", "Pending", "Evicted by the test runner"),
                            ("Admitted", "False", "NoReservation", "The workload has no reservation"),
                        ],
                    ),
                },
            )
        finally:
            self._evicting.discard(key)

    async def _write_status(
        self,
        key: str,
        still_wanted: Callable[[dict[str, Any]], bool],
        status: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        """A merge patch of the status from the newest object, guarded by its resourceVersion; on a conflict,
        re-read and decide again."""
        obj = self.latest[key]
        path = resource_path(
            KUEUE_GROUP_VERSION, "workloads", obj["metadata"]["namespace"], obj["metadata"]["name"], "status"
        )
        self._writes_in_flight += 1
        try:
            await self._write_guarded(key, path, obj, still_wanted, status)
        finally:
            self._writes_in_flight -= 1

    async def _write_guarded(
        self,
        key: str,
        path: str,
        obj: dict[str, Any],
        still_wanted: Callable[[dict[str, Any]], bool],
        status: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        async with self._writes:
            for _ in range(_WRITE_ATTEMPTS):
                if not still_wanted(obj) or _is_true(obj, "Finished"):
                    return
                patch = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, "status": status(obj)}
                try:
                    await self.api.merge_patch(path, patch)
                    return
                except ApiError as error:
                    if error.status != 409:
                        raise
                fresh = await self.api.get(path.removesuffix("/status"))
                if fresh is None:
                    return
                obj = fresh
        raise ApiError(f"Workload {key}: status still conflicting after {_WRITE_ATTEMPTS} attempts", 409)

    # ----- the run ----------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Start following Workloads (before anything is created, so no event is missed)."""
        listing = await self.api.get(resource_path(KUEUE_GROUP_VERSION, "workloads"))
        if listing is None:
            raise ApiError("cannot list Workloads: are the CRDs installed?")
        self._watching = asyncio.create_task(self._watch(listing["metadata"]["resourceVersion"]))

    async def close(self) -> None:
        tasks = [task for task in (self._watching, *self._tasks) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def check_watch(self) -> None:
        """Raise whatever ended the watch early."""
        if self._watching is not None and self._watching.done():
            self._watching.result()
            raise ApiError("the Workload watch ended without an error")

    @property
    def busy(self) -> bool:
        """Executor writes in flight (an eviction being completed, a finish being written)."""
        return self._writes_in_flight > 0

    async def create_scheduled(self, planned: list[PlannedObject]) -> float:
        """Create ``planned`` at their ``submit_at`` offsets from now; return the start instant."""
        started = self.clock()
        self.order = sorted(planned, key=lambda p: p.submit_at)
        await self._create_all(started)
        return started

    async def finish(self, key: str) -> None:
        """Mark one holding workload Finished now, as its job would on completion."""
        await self._write_status(
            key,
            lambda obj: obj["status"].get("admission") is not None,
            lambda obj: {"conditions": with_conditions(obj, [("Finished", "True", "ByTest", "By test runner")])},
        )

    async def answer_check(self, key: str, check: str, state: str) -> None:
        """Write one AdmissionCheck's state on a holding Workload now, as that check's controller does: a
        server-side apply of its own entry of ``status.admissionChecks``. A merge patch of the list would race
        the controller's own apply of the entries it owns. A Workload holding no quota (the controller decided
        otherwise than the scenario expects) has no check to answer: nothing is written, and the phase's
        comparison shows the difference."""
        obj = self.latest[key]
        if (obj.get("status") or {}).get("admission") is None:
            log.warning("Workload of %s holds no quota: AdmissionCheck %s not answered", key, check)
            return
        entry: dict[str, Any] = {
            "name": check,
            "state": state,
            "message": "answered by the agreement scenario",
            "lastTransitionTime": _now_rfc3339(),
        }
        metadata = obj["metadata"]
        body = {
            "apiVersion": KUEUE_GROUP_VERSION,
            "kind": "Workload",
            "metadata": {"name": metadata["name"], "namespace": metadata["namespace"]},
            "status": {"admissionChecks": [entry]},
        }
        path = resource_path(KUEUE_GROUP_VERSION, "workloads", metadata["namespace"], metadata["name"], "status")
        await self.api.apply_status(path, body, CHECK_FIELD_MANAGER)

    def holding(self) -> set[str]:
        return {key for key, timeline in self.timelines.items() if timeline.holding}

    async def run(self, deadline_seconds: float) -> float:
        """Create everything on schedule, wait until every workload is Finished; return the start instant."""
        await self.open()
        progress = asyncio.create_task(self._progress())
        started = self.clock()
        try:
            await self._create_all(started)
            deadline = started + deadline_seconds
            while not self._all_finished.is_set():
                self.check_watch()
                if self.clock() > deadline:
                    finished = sum(t.finished_at is not None for t in self.timelines.values())
                    log.warning("deadline %.0fs passed, %d of %d finished", deadline_seconds, finished, len(self.plan))
                    break
                await asyncio.sleep(0.2)
        finally:
            progress.cancel()
            await asyncio.gather(progress, return_exceptions=True)
            await self.close()
        return started

    async def _progress(self) -> None:
        began = self.clock()
        while True:
            await asyncio.sleep(_PROGRESS_SECONDS)
            holding = sum(t.holding for t in self.timelines.values())
            finished = sum(t.finished_at is not None for t in self.timelines.values())
            print(
                f"  [{self.clock() - began:5.0f}s] created {len(self.timelines)}/{len(self.plan)}, "
                f"holding quota {holding}, finished {finished}",
                flush=True,
            )
