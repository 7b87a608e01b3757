"""The discrete-event replay: arrivals and completions in simulated time, decisions from the engine.

At each instant, in order: workloads arriving then are submitted (one whose Job Kueue would give no Workload, for
a missing WorkloadPriorityClass, is Inadmissible from the start), workloads whose work is done finish, and
the engine is asked for every decision due (admissions, preemptions, deadline evictions). An admitted
workload's work starts once its pods are ready (``pods_ready_after`` seconds after the admission) and it finishes
``remaining`` seconds later unless evicted first; an evicted one keeps the work it did and resumes the rest when
admitted again. Evicted workloads free their quota at the moment of eviction. With waitForPodsReady (on unless
the Configuration turns it off, as in Kueue v0.19+), an admission whose pods are not ready within the timeout is
evicted then (``PodsReadyTimeout``), and the engine backs it off or deactivates it; with its ``blockAdmission``,
the engine is told when each admission's pods are ready, and admits nothing new while some are not. A ClusterQueue's
AdmissionChecks answer each reservation as the workload declares (Ready at once by default): its pods start only
once every check is Ready; a Retry evicts it (``AdmissionCheck``, quota freed, requeued after the check's delay)
and a Rejected deactivates it, as Kueue's workload controller does. With ``until``, nothing after that instant
happens, and the state is the state at ``until``.
"""

from __future__ import annotations

import gc
import heapq
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from kuota.engine import (
    KUEUE_DEFAULTS,
    Admission,
    AdmissionCheck,
    ApiObject,
    ClusterQueue,
    Configuration,
    Eviction,
    EvictionReason,
    QuotaEngine,
    TopologyAssignment,
    TopologyNode,
)
from kuota.simulator.errors import WorkloadFileError
from kuota.simulator.limits import check_until
from kuota.simulator.workload_reading import CheckBehaviour, SimulatedWorkload

GPU = "nvidia.com/gpu"


class Outcome(StrEnum):
    PENDING = "Pending"
    ADMITTED = "Admitted"
    FINISHED = "Finished"
    DELETED = "Deleted"  # a serving workload at the end of its lifetime
    DEACTIVATED = "Deactivated"
    INADMISSIBLE = "Inadmissible"


class AdmissionRecord:
    """One admission of a workload; ``topology``: where each pod set placed on a TAS flavor put its pods. (This
    and the two below are plain classes, built per replayed decision: see ``setup.py``.)"""

    def __init__(  # noqa: PLR0917 (positional, as the others here)
        self,
        at: float,
        flavors: dict[str, dict[str, str]],
        borrowing: bool,
        gpus: int,
        waited: float,
        topology: dict[str, TopologyAssignment],
    ) -> None:
        self.at: Final = at
        self.flavors: Final = flavors
        self.borrowing: Final = borrowing
        self.gpus: Final = gpus
        self.waited: Final = waited
        self.topology: Final = topology

    def __repr__(self) -> str:
        return f"AdmissionRecord(at={self.at!r}, flavors={self.flavors!r}, gpus={self.gpus!r})"


class EvictionRecord:
    def __init__(self, at: float, reason: str, preempted_by: str | None, preemption_reason: str | None) -> None:
        self.at: Final = at
        self.reason: Final = reason
        self.preempted_by: Final = preempted_by
        self.preemption_reason: Final = preemption_reason

    def __repr__(self) -> str:
        return f"EvictionRecord(at={self.at!r}, reason={self.reason!r}, preempted_by={self.preempted_by!r})"


class CheckFailure:
    """The first AdmissionCheck answer of an admission that is not Ready: the eviction it brings, when due."""

    def __init__(self, checks: list[str], deactivate: bool, requeue_at: float | None) -> None:
        self.checks: Final = checks  # the checks answering Retry or Rejected at that instant
        self.deactivate: Final = deactivate
        self.requeue_at: Final = requeue_at


class WorkloadHistory:
    """What happened to one workload during the replay."""

    def __init__(
        self,
        name: str,
        namespace: str,
        submit_at: float,
        duration: float,
        remaining: float,
        *,
        cluster_queue: str | None = None,
        waiting_since: float = 0.0,
        pods_ready_after: float | None = 0.0,
        admission_checks: dict[str, CheckBehaviour] | None = None,
    ) -> None:
        self.name: Final = name
        self.namespace: Final = namespace
        self.submit_at: Final = submit_at
        self.duration: Final = duration
        self.remaining = remaining
        self.cluster_queue = cluster_queue
        self.outcome = Outcome.PENDING
        self.reason: str | None = None
        self.admissions: list[AdmissionRecord] = []
        self.evictions: list[EvictionRecord] = []
        self.finished_at: float | None = None
        self.epoch = 0
        self.waiting_since = waiting_since
        self.pods_ready_after: Final = pods_ready_after
        self.admission_checks: Final[dict[str, CheckBehaviour]] = admission_checks or {}
        self.check_retries: dict[str, int] = {}  # Retry answers each check has given so far
        self.check_failure: CheckFailure | None = None  # the current admission's, while it is due
        self.started_at = 0.0  # when the current admission's checks were all Ready: its pods' clock starts then

    def __repr__(self) -> str:
        return f"WorkloadHistory({self.key!r}, outcome={self.outcome.value}, admissions={len(self.admissions)})"

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class QueueTotals:
    """Per-ClusterQueue figures accumulated as the replay runs (so a million workloads need no history)."""

    nominal_gpus: int
    waits: list[float] = field(default_factory=list)
    admitted: int = 0
    admissions: int = 0
    evicted: int = 0
    gpu_seconds: float = 0.0
    gpus_in_use: int = 0
    peak_gpus: int = 0
    peak_at: float = 0.0


@dataclass
class ReplayResult:
    workloads: dict[str, WorkloadHistory]
    queues: dict[str, QueueTotals]
    end: float
    decisions: int
    notable: list[str] = field(default_factory=list)


_YOUNG_COLLECTION_EVERY = 100_000


def replay(
    objects: Iterable[ApiObject],
    arrivals: Iterable[SimulatedWorkload],
    until: float | None = None,
    *,
    keep_history: bool = True,
    nodes: Iterable[TopologyNode] = (),
) -> ReplayResult:
    """Run ``arrivals`` (in submission order) through a fresh engine holding ``objects``; ``until`` is None or a
    number of seconds from 0 to ``MAX_SECONDS`` (NaN would never stop the clock and infinity never end it).
    ``nodes``: what topology-aware placement places pods on (ResourceFlavors with a ``topologyName``)."""
    check_until(until)
    # A replay allocates a few objects per decision, nearly all short-lived and none in cycles, while the
    # queued and running workloads keep the heap large, and a young collection walks every object made since the
    # last one that is still alive (most of that heap): with the default 700-allocation trigger, collections
    # take about a sixth of a long replay, at 20,000 a fifteenth, at 100,000 a fiftieth (more costs more: fewer
    # collections, each slower). The memory it costs is small; the caller's setting returns.
    thresholds = gc.get_threshold()
    gc.set_threshold(_YOUNG_COLLECTION_EVERY, *thresholds[1:])
    try:
        return _replay(list(objects), arrivals, until, keep_history, list(nodes))
    finally:
        gc.set_threshold(*thresholds)


# A replay's timers: (at, tie-break, workload key, the admission's epoch); an evicted admission's are stale.
_Timers = list[tuple[float, int, str, int]]


def _replay(
    objects: list[ApiObject],
    arrivals: Iterable[SimulatedWorkload],
    until: float | None,
    keep_history: bool,
    nodes: list[TopologyNode],
) -> ReplayResult:
    configuration = next((o for o in objects if isinstance(o, Configuration)), KUEUE_DEFAULTS)
    wait = configuration.wait_for_pods_ready
    pods_ready_timeout = wait.timeout_seconds if wait is not None else None
    blocks_admission = wait is not None and wait.block_admission
    engine = QuotaEngine(configuration)
    for obj in objects:
        engine.apply(obj)
    for node in nodes:
        engine.apply_node(node)
    queues = {obj.name: QueueTotals(_nominal_gpus(obj)) for obj in objects if isinstance(obj, ClusterQueue)}
    checked_queues = {obj.name: obj for obj in objects if isinstance(obj, ClusterQueue) and obj.admission_checks}
    check_names = {obj.name for obj in objects if isinstance(obj, AdmissionCheck)}
    histories: dict[str, WorkloadHistory] = {}
    finishes: _Timers = []
    timeouts: _Timers = []  # PodsReady timeouts of admissions whose pods are not ready in time
    check_answers: _Timers = []  # AdmissionCheck answers that evict (Retry) or deactivate (Rejected)
    readies: _Timers = []  # under blockAdmission: when an admission's pods get ready, told to the engine
    deletions: _Timers = []  # serving workloads' ends of life (epoch 0: a deletion is never stale)
    serving: set[str] = set()  # the keys of serving workloads: admitted, they hold their quota until deleted
    order = itertools.count()
    incoming: Iterator[SimulatedWorkload] = iter(arrivals)
    upcoming = next(incoming, None)
    now = 0.0
    decisions = 0
    last = 0.0
    while True:
        # The next instant: the earliest arrival, completion, PodsReady timeout or readiness, failing check answer
        # or time-driven engine decision.
        next_at = upcoming.submit_at if upcoming is not None else None
        for timers in (finishes, timeouts, check_answers, readies, deletions):
            if timers and (next_at is None or timers[0][0] < next_at):
                next_at = timers[0][0]
        wakeup = engine.next_wakeup()
        if wakeup is not None and (next_at is None or wakeup < next_at):
            next_at = wakeup
        if next_at is None:
            break
        now = next_at
        if until is not None and now > until:
            break
        while upcoming is not None and upcoming.submit_at <= now:
            if upcoming.submit_at < last:
                raise WorkloadFileError(
                    f"workload {upcoming.workload.key} arrives at {upcoming.submit_at}, before "
                    f"the one before it ({last}): give arrivals in submission order"
                )
            last = upcoming.submit_at
            history = WorkloadHistory(
                upcoming.workload.name,
                upcoming.workload.namespace,
                upcoming.submit_at,
                upcoming.duration,
                upcoming.duration,
                waiting_since=upcoming.submit_at,
                pods_ready_after=upcoming.pods_ready_after,
                admission_checks=upcoming.admission_checks,
            )
            for name in upcoming.admission_checks:
                if name not in check_names:
                    raise WorkloadFileError(
                        f"workload {upcoming.workload.key}: admissionChecks names {name}, which is no AdmissionCheck "
                        "of the CONFIG; add the AdmissionCheck or fix the name"
                    )
            histories[upcoming.workload.key] = history
            if upcoming.lifetime is not None:
                serving.add(upcoming.workload.key)
                heapq.heappush(
                    deletions, (upcoming.submit_at + upcoming.lifetime, next(order), upcoming.workload.key, 0)
                )
            if upcoming.not_created is None:
                engine.submit(upcoming.workload)
            else:
                history.outcome = Outcome.INADMISSIBLE
                history.reason = upcoming.not_created
            upcoming = next(incoming, None)
        while readies and readies[0][0] <= now:  # before the finishes: a finished history may be dropped
            _, _, key, epoch = heapq.heappop(readies)
            if histories[key].epoch == epoch:
                engine.pods_ready(key, True)
        while finishes and finishes[0][0] <= now:
            _, _, key, epoch = heapq.heappop(finishes)
            history = histories[key]
            if history.epoch != epoch:
                continue
            _close_admission(history, queues, now)
            history.outcome = Outcome.FINISHED
            history.finished_at = now
            history.remaining = 0.0
            engine.finish(key)
            if not keep_history:
                del histories[key]
        while deletions and deletions[0][0] <= now:
            _, _, key, _ = heapq.heappop(deletions)
            history = histories[key]
            serving.discard(key)
            if history.outcome is Outcome.ADMITTED:
                _close_admission(history, queues, now)
            if history.outcome is not Outcome.INADMISSIBLE or history.admissions:
                engine.finish(key)
            history.outcome = Outcome.DELETED
            history.reason = None
            history.epoch += 1  # its admission's timers are stale
            if not keep_history:
                del histories[key]
        while timeouts and timeouts[0][0] <= now:
            _, _, key, epoch = heapq.heappop(timeouts)
            if histories[key].epoch == epoch:
                decisions += 1
                _evicted(histories[key], engine.evict(key, EvictionReason.PODS_READY_TIMEOUT, now), queues, now)
        while check_answers and check_answers[0][0] <= now:
            _, _, key, epoch = heapq.heappop(check_answers)
            history = histories[key]
            failure = history.check_failure
            if history.epoch != epoch or failure is None:
                continue
            if not failure.deactivate:
                for name in failure.checks:
                    history.check_retries[name] = history.check_retries.get(name, 0) + 1
            eviction = engine.evict(
                key, EvictionReason.ADMISSION_CHECK, now, requeue_at=failure.requeue_at, deactivate=failure.deactivate
            )
            decisions += 1
            _evicted(history, eviction, queues, now)
        for decision in engine.schedule(now):
            decisions += 1
            history = histories[decision.workload]
            if isinstance(decision, Admission):
                totals = queues[decision.cluster_queue]
                gpus = sum(p.usage.get(GPU, 0) for p in decision.pod_sets)
                waited = now - history.waiting_since
                history.admissions.append(
                    AdmissionRecord(
                        now,
                        {p.name: dict(p.flavors) for p in decision.pod_sets},
                        decision.borrowing,
                        gpus,
                        waited,
                        {p.name: p.topology for p in decision.pod_sets if p.topology is not None},
                    )
                )
                history.cluster_queue = decision.cluster_queue
                history.outcome = Outcome.ADMITTED
                history.reason = None
                history.epoch += 1
                totals.waits.append(waited)
                totals.admissions += 1
                totals.admitted += len(history.admissions) == 1
                totals.gpus_in_use += gpus
                if totals.gpus_in_use > totals.peak_gpus:
                    totals.peak_gpus, totals.peak_at = totals.gpus_in_use, now
                timer = (decision.workload, history.epoch)
                history.started_at = now
                history.check_failure = None
                cluster_queue = checked_queues.get(decision.cluster_queue)
                if cluster_queue is not None:
                    flavors = {flavor for pod_set in decision.pod_sets for flavor in pod_set.flavors.values()}
                    failure_at = _answer_checks(history, cluster_queue.checks_for(flavors), now)
                    if failure_at is not None:
                        heapq.heappush(check_answers, (failure_at, next(order), *timer))
                        continue
                started = history.started_at
                ready_after = history.pods_ready_after
                if pods_ready_timeout is not None and (ready_after is None or ready_after > pods_ready_timeout):
                    heapq.heappush(timeouts, (started + pods_ready_timeout, next(order), *timer))
                elif ready_after is not None:
                    if decision.workload not in serving:  # serving does no work that ends: it lives until deleted
                        heapq.heappush(finishes, (started + ready_after + history.remaining, next(order), *timer))
                    if blocks_admission:
                        heapq.heappush(readies, (started + ready_after, next(order), *timer))
            elif isinstance(decision, Eviction):
                _evicted(history, decision, queues, now)
    end = now if until is None else until
    for history in histories.values():
        if history.outcome is Outcome.ADMITTED:
            admission = history.admissions[-1]
            queues[history.cluster_queue or ""].gpu_seconds += admission.gpus * (end - admission.at)
        elif history.outcome in (Outcome.PENDING, Outcome.DEACTIVATED):
            status = engine.status(history.key)
            history.reason = status.reason
            history.cluster_queue = history.cluster_queue or status.cluster_queue
            if status.inadmissible and history.outcome is Outcome.PENDING and not history.admissions:
                history.outcome = Outcome.INADMISSIBLE
    return ReplayResult(histories, queues, end, decisions)


def _answer_checks(history: WorkloadHistory, checks: list[str], now: float) -> float | None:
    """Answer an admission's checks: when the first answer that is not Ready comes (its eviction is
    ``history.check_failure``), or None when every check is Ready (at ``history.started_at``). A Rejected answer
    outranks a Retry at the same instant, and a Retry requeues at the latest of its checks' delays, as in Kueue."""
    failures: list[tuple[float, str, CheckBehaviour]] = []
    for name in checks:
        behaviour = history.admission_checks.get(name) or CheckBehaviour()
        at = now + behaviour.after
        if history.check_retries.get(name, 0) < behaviour.retries or behaviour.reject:
            failures.append((at, name, behaviour))
        elif at > history.started_at:
            history.started_at = at
    if not failures:
        return None
    first = min(at for at, _, _ in failures)
    answering = [(name, behaviour) for at, name, behaviour in failures if at == first]
    rejected = [name for name, b in answering if history.check_retries.get(name, 0) >= b.retries]
    if rejected:
        history.check_failure = CheckFailure(rejected, True, None)
    else:
        delay = max(behaviour.requeue_after for _, behaviour in answering)
        history.check_failure = CheckFailure([name for name, _ in answering], False, first + delay if delay else None)
    return first


def _evicted(history: WorkloadHistory, decision: Eviction, queues: dict[str, QueueTotals], now: float) -> None:
    _close_admission(history, queues, now)
    history.epoch += 1
    queues[decision.cluster_queue].evicted += 1
    history.evictions.append(
        EvictionRecord(
            now,
            decision.reason.value,
            decision.preempted_by,
            decision.preemption_reason.value if decision.preemption_reason else None,
        )
    )
    history.outcome = Outcome.DEACTIVATED if decision.deactivated else Outcome.PENDING
    history.waiting_since = decision.requeue_at if decision.requeue_at is not None else now


def _close_admission(history: WorkloadHistory, queues: dict[str, QueueTotals], now: float) -> None:
    admission = history.admissions[-1]
    totals = queues[history.cluster_queue or ""]
    totals.gpu_seconds += admission.gpus * (now - admission.at)
    totals.gpus_in_use -= admission.gpus
    if history.pods_ready_after is not None and history.check_failure is None:  # pods never started did no work
        worked = now - history.started_at - history.pods_ready_after
        history.remaining = max(0.0, history.remaining - max(0.0, worked))


def _nominal_gpus(cq: ClusterQueue) -> int:
    return sum(
        quota.nominal
        for group in cq.resource_groups
        for flavor in group.flavors
        for quota in flavor.resources
        if quota.name == GPU
    )
