"""Admission ETAs: the engine replayed forward from a given state, in simulated time.

A fresh engine gets the same configuration objects, the running workloads (restored as admitted, as a
restarting controller restores them) and the pending ones; then, as in ``replay``, each running workload
finishes at its expected end and the engine admits what its freed quota allows, until every pending
workload has been admitted (or ``horizon`` seconds have passed). The instant a pending workload is admitted
there is its ETA. A workload whose runtime is unknown never finishes here: ETAs behind it are not given.

New work keeps arriving while the queue drains: the workloads submitted in the last ``window`` seconds
(``recent``) are expected again every ``window`` seconds, each as its own copy submitted at its original
time plus one, two, ... windows. Without them a workload that fits only once its queue runs dry (a large job
under BestEffortFIFO, which smaller later ones overtake) would be promised the first lull of a replay in
which nothing else arrives. One still waiting at the horizon gets an ETA marked ``beyond_horizon``: not
expected within ``horizon`` seconds.

``replay`` starts from an empty engine and cannot be seeded with running workloads, hence this loop of its
own: the same order at each instant (submissions, then finishes, then the engine's decisions).

Each ETA says where the runtimes it rests on came from: how many of the workloads of its cohort tree that
finished before it in the replay had each source, and how many finished jobs the histories behind them hold.
"""

from __future__ import annotations

import dataclasses
import datetime
import heapq
import itertools
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kuota.engine import (
    Admission,
    ApiObject,
    ClusterQueue,
    Cohort,
    Configuration,
    EngineError,
    Eviction,
    LocalQueue,
    Namespace,
    PodSetAssignment,
    QuotaEngine,
    Workload,
)
from kuota.simulator.runtimes import Runtime, RuntimeSource

DEFAULT_HORIZON_SECONDS = 30 * 24 * 3600.0
ARRIVAL_WINDOW_SECONDS = 24 * 3600.0
# Joins a repeated workload's name and its repetition: no Kubernetes name holds it, so no key can collide.
_REPEAT_MARK = "~"


@dataclass(frozen=True, slots=True)
class Running:
    """An admitted workload as the forecast starts: ``remaining`` None when its runtime is unknown."""

    workload: Workload
    cluster_queue: str
    pod_sets: tuple[PodSetAssignment, ...]
    admitted_at: float
    remaining: Runtime | None


@dataclass(frozen=True, slots=True)
class Pending:
    workload: Workload
    runtime: Runtime | None


@dataclass(frozen=True, slots=True)
class Eta:
    """A predicted admission: ``at`` (on the caller's clock), computed at ``computed_at``, and where the
    runtimes of the workloads that finish before it came from. ``beyond_horizon``: still waiting at the
    replay's horizon, ``at``; the admission is expected no earlier than that."""

    at: float
    computed_at: float
    runtime_sources: tuple[tuple[str, int], ...]
    similar_jobs: int
    beyond_horizon: bool = False

    @property
    def seconds(self) -> float:
        return max(0.0, self.at - self.computed_at)

    def as_json(self) -> dict[str, Any]:
        return {
            "expectedStart": datetime.datetime.fromtimestamp(self.at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "inSeconds": round(self.seconds),
            "similarJobs": self.similar_jobs,
            "runtimeSources": dict(self.runtime_sources),
        }


@dataclass(slots=True)
class _InFlight:
    runtime: Runtime | None
    remaining: float | None
    admitted_at: float = 0.0
    epoch: int = 0

    @classmethod
    def waiting(cls, runtime: Runtime | None) -> _InFlight:
        """A pending workload's: all of its runtime (if known) still to run."""
        return cls(runtime, None if runtime is None else runtime.seconds)


def forecast(
    objects: Iterable[ApiObject],
    running: Iterable[Running],
    pending: Iterable[Pending],
    now: float,
    *,
    horizon: float = DEFAULT_HORIZON_SECONDS,
    wanted: Collection[str] | None = None,
    recent: Iterable[Pending] = (),
    window: float = ARRIVAL_WINDOW_SECONDS,
) -> dict[str, Eta]:
    """The ETA of every pending workload (with ``wanted``, the replay stops once those are admitted): when
    the replay admits it, or ``beyond_horizon`` when it is still waiting ``horizon`` seconds after ``now``
    while every runtime it waits on is known. ``recent``: the workloads submitted (``created``) within
    ``window`` seconds before ``now``, whatever became of them, expected again every ``window`` (one whose
    runtime is unknown is not: a copy that never finishes would hold its quota to the horizon). Running
    workloads the engine cannot restore (their queue is gone) are left out, as the controller leaves them out.

    Each cohort tree (and each ClusterQueue outside any cohort) is replayed on an engine of its own: they
    share no quota, so the decisions are the same, and an engine's cost per decision grows with the queues it
    holds (1,000 queues in one engine cost about twice as much per decision as 100). A workload whose
    LocalQueue is unknown is left out: no queue would admit it."""
    listed = list(objects)
    parts = _Partition(listed)
    groups: dict[str, tuple[list[Running], list[Pending]]] = {}
    for entry in running:
        part = parts.of_cluster_queue(entry.cluster_queue)
        if part is not None:
            groups.setdefault(part, ([], []))[0].append(entry)
    repeated = _Recent(recent, parts, now, window)
    wanted_parts: set[str] = set()
    for item in pending:
        part = parts.of_workload(item.workload)
        if part is not None:
            groups.setdefault(part, ([], []))[1].append(item)
            if wanted is not None and item.workload.key in wanted:
                wanted_parts.add(part)
    etas: dict[str, Eta] = {}
    for part, (part_running, part_pending) in groups.items():
        if part_pending and (wanted is None or part in wanted_parts):
            arrivals = _Arrivals(repeated, part, window)
            etas.update(
                _forecast_part(
                    parts.objects(part), part_running, part_pending, arrivals, now, horizon=horizon, wanted=wanted
                )
            )
    return etas


def _forecast_part(
    listed: list[ApiObject],
    running: list[Running],
    pending: list[Pending],
    arrivals: _Arrivals,
    now: float,
    *,
    horizon: float,
    wanted: Collection[str] | None,
) -> dict[str, Eta]:
    listed = [_pods_ready_at_admission(obj) if isinstance(obj, Configuration) else obj for obj in listed]
    engine = QuotaEngine(next((o for o in listed if isinstance(o, Configuration)), None))
    for obj in listed:
        engine.apply(obj)
    flights: dict[str, _InFlight] = {}
    finishes: list[tuple[float, int, str, int]] = []
    order = itertools.count()
    # Admitted workloads whose runtime is unknown: they never finish here, so what still waits at the horizon
    # may be waiting on them, and gets no ETA.
    endless: set[str] = set()
    for entry in running:
        try:
            engine.restore_admitted(entry.workload, entry.cluster_queue, entry.pod_sets, entry.admitted_at)
        except EngineError:
            continue
        remaining = None if entry.remaining is None else entry.remaining.seconds
        flights[entry.workload.key] = _InFlight(entry.remaining, remaining, now)  # remaining counts from now
        if remaining is None:
            endless.add(entry.workload.key)
        else:
            heapq.heappush(finishes, (now + remaining, next(order), entry.workload.key, 0))
    waiting: set[str] = set()
    for item in pending:
        engine.submit(item.workload)
        key = item.workload.key
        waiting.add(key)
        flights[key] = _InFlight.waiting(item.runtime)
    etas: dict[str, Eta] = {}
    sources: dict[str, int] = {}
    bases: set[str] = set()
    similar = 0
    end = now + horizon
    at = now
    targets = waiting if wanted is None else waiting & set(wanted)
    while targets:
        for item in arrivals.due(at):
            engine.submit(item.workload)
            flights[item.workload.key] = _InFlight.waiting(item.runtime)
        for decision in engine.schedule(at):
            flight = flights.get(decision.workload)
            if flight is None:
                continue
            flight.epoch += 1
            if isinstance(decision, Admission):
                flight.admitted_at = at
                if decision.workload in waiting:
                    waiting.discard(decision.workload)
                    targets.discard(decision.workload)
                    etas[decision.workload] = Eta(at, now, tuple(sorted(sources.items())), similar)
                if flight.remaining is None:
                    endless.add(decision.workload)
                else:
                    heapq.heappush(finishes, (at + flight.remaining, next(order), decision.workload, flight.epoch))
            elif isinstance(decision, Eviction):
                endless.discard(decision.workload)
                if flight.remaining is not None:
                    flight.remaining = max(0.0, flight.remaining - (at - flight.admitted_at))
        following = finishes[0][0] if finishes else None
        for candidate in (engine.next_wakeup(), arrivals.next_at()):
            if candidate is not None and candidate > at and (following is None or candidate < following):
                following = candidate
        if following is None:
            break  # nothing more happens: what waits, waits on a runtime nobody knows
        if following > end:
            if not endless:
                sources_then = tuple(sorted(sources.items()))
                for key in targets:
                    etas[key] = Eta(end, now, sources_then, similar, beyond_horizon=True)
            break
        at = max(at, following)
        while finishes and finishes[0][0] <= at:
            _, _, key, epoch = heapq.heappop(finishes)
            flight = flights[key]
            if flight.epoch != epoch:
                continue
            engine.finish(key)
            runtime = flight.runtime
            if runtime is not None:
                sources[runtime.source.value] = sources.get(runtime.source.value, 0) + 1
                if runtime.source is RuntimeSource.HISTORY and runtime.basis not in bases:
                    bases.add(runtime.basis)
                    similar += runtime.samples
    return etas


def _pods_ready_at_admission(configuration: Configuration) -> Configuration:
    """The forecast starts each admission's work at once, its pods ready: blockAdmission, which holds the next
    admission only while some admitted workload's pods are not ready, never holds one here."""
    wait = configuration.wait_for_pods_ready
    if wait is None or not wait.block_admission:
        return configuration
    return dataclasses.replace(configuration, wait_for_pods_ready=dataclasses.replace(wait, block_admission=False))


class _Recent:
    """The recent submissions that will come again (known runtime, within the window), split by part only when
    a part's replay first reaches the earliest copy's arrival: most replays end before any copy arrives."""

    def __init__(self, recent: Iterable[Pending], parts: _Partition, now: float, window: float) -> None:
        self._items = [
            item for item in recent if item.runtime is not None and now - window < item.workload.created <= now
        ]
        self._parts = parts
        self._by_part: dict[str, list[Pending]] | None = None
        self.first_copy_at = min((item.workload.created for item in self._items), default=None)
        if self.first_copy_at is not None:
            self.first_copy_at += window

    def of_part(self, part: str) -> list[Pending]:
        if self._by_part is None:
            self._by_part = {}
            for item in self._items:
                owner = self._parts.of_workload(item.workload)
                if owner is not None:
                    self._by_part.setdefault(owner, []).append(item)
        return self._by_part.get(part, [])


class _Arrivals:
    """One part's recent submissions expected again: each ``window`` seconds after it was submitted, and every
    ``window`` after that, as a copy of its own (``name~1``, ``name~2``...), in time order."""

    def __init__(self, recent: _Recent, part: str, window: float) -> None:
        self._source = recent
        self._part = part
        self._recent: list[Pending] | None = None  # the part's, in submission order, once a copy may be due
        self._window = window
        self._round = 1
        self._index = 0

    def next_at(self) -> float | None:
        """When the next copy arrives; before the part's submissions are read, the earliest any part's can."""
        if self._recent is None:
            return self._source.first_copy_at
        if not self._recent:
            return None
        return self._recent[self._index].workload.created + self._round * self._window

    def due(self, at: float) -> Iterator[Pending]:
        """The copies submitted by ``at`` and not yet handed out."""
        if self._recent is None:
            first = self._source.first_copy_at
            if first is None or at < first:
                return
            own = self._source.of_part(self._part)
            self._recent = sorted(own, key=lambda item: (item.workload.created, item.workload.key))
        while self._recent:
            item = self._recent[self._index]
            submitted = item.workload.created + self._round * self._window
            if submitted > at:
                return
            yield Pending(_repeat(item.workload, self._round, submitted), item.runtime)
            self._index += 1
            if self._index == len(self._recent):
                self._index = 0
                self._round += 1


def _repeat(workload: Workload, round_: int, submitted: float) -> Workload:
    return Workload(
        workload.namespace,
        f"{workload.name}{_REPEAT_MARK}{round_}",
        workload.queue_name,
        workload.pod_sets,
        created=submitted,
        uid=f"{workload.uid}{_REPEAT_MARK}{round_}" if workload.uid else "",
        priority=workload.priority,
        priority_class=workload.priority_class,
        max_execution_seconds=workload.max_execution_seconds,
    )


class _Partition:
    """The configuration split into independent parts: a cohort tree with its ClusterQueues, or one
    ClusterQueue without a cohort; each part's LocalQueues and their Namespaces, and what every part needs
    (flavors, priority classes, the Configuration)."""

    def __init__(self, objects: list[ApiObject]) -> None:
        cohorts = {obj.name: obj for obj in objects if isinstance(obj, Cohort)}
        self._shared: list[ApiObject] = []
        self._parts: dict[str, list[ApiObject]] = {}
        self._cluster_queues: dict[str, str] = {}
        self._local_queues: dict[tuple[str, str], str] = {}
        self._namespaces: dict[str, dict[str, Namespace]] = {}
        namespaces: dict[str, Namespace] = {}
        for obj in objects:
            if isinstance(obj, ClusterQueue):
                part = "cohort " + _root(obj.cohort, cohorts) if obj.cohort else "queue " + obj.name
                self._cluster_queues[obj.name] = part
                self._parts.setdefault(part, []).append(obj)
            elif isinstance(obj, Namespace):
                namespaces[obj.name] = obj
            elif not isinstance(obj, Cohort | LocalQueue):
                self._shared.append(obj)
        for cohort in cohorts.values():
            self._parts.setdefault("cohort " + _root(cohort.name, cohorts), []).append(cohort)
        for obj in objects:
            owner = self._cluster_queues.get(obj.cluster_queue) if isinstance(obj, LocalQueue) else None
            if isinstance(obj, LocalQueue) and owner is not None:
                self._local_queues[(obj.namespace, obj.name)] = owner
                self._parts[owner].append(obj)
                if obj.namespace in namespaces:
                    self._namespaces.setdefault(owner, {})[obj.namespace] = namespaces[obj.namespace]

    def of_cluster_queue(self, name: str) -> str | None:
        return self._cluster_queues.get(name)

    def of_workload(self, workload: Workload) -> str | None:
        return self._local_queues.get((workload.namespace, workload.queue_name))

    def objects(self, part: str) -> list[ApiObject]:
        return [*self._shared, *self._parts[part], *self._namespaces.get(part, {}).values()]


def _root(name: str, cohorts: dict[str, Cohort]) -> str:
    """The root of a cohort's tree (a cycle, which the API server cannot refuse, stops at the repeat)."""
    seen = {name}
    parent = cohorts[name].parent if name in cohorts else None
    while parent is not None and parent not in seen:
        name = parent
        seen.add(name)
        parent = cohorts[name].parent if name in cohorts else None
    return name
