"""Retained Kueue Workloads -> the window's job history: simulate workload records for the what-if and
GPU-hours burned by jobs that failed or were cancelled.

Pure, in two steps. :func:`read_workloads` reads each listed item (``kueue.x-k8s.io`` Workloads, as decoded
JSON, from the API server or a ``kubectl get -o json`` dump) once, before any query runs, into a
:class:`RetainedWorkload`: only the fields the history needs, each checked for the type and range Kubernetes
gives it and simulate accepts, so a dump of 100,000 Workloads costs their figures, not their JSON. An item
that is not a Workload, or whose fields cannot be read, is left out and counted with the first such item
named (a user's dump may hold objects kuota does not understand, and one bad item must not lose the week).
:func:`job_history` then places the Workloads in the window.

A serving Workload (the manager's ``kuota.dev/serving``: a Deployment's pod, a StatefulSet) never finishes its
work: its GPU-hours are counted as serving, never as failed, and it is replayed with a ``lifetime``.

The manager keeps finished Workloads for a configurable time (default 8 days). Only the last admission is
visible on a Workload: runs before a preemption count only where ``accumulatedPastExecutionTimeSeconds`` records
them (Kueue writes it; the what-if replays the last run alone); a Workload never admitted has no known
duration and is left out (and counted).

A Workload created before the window takes part in it too: one holding quota at the window's start (admitted
before it, not ended by then) is replayed from the start, running, for the time it had left inside the window;
one still pending at the start is submitted then, in creation order. The replay's first instant (0) holds only
the running ones, so the engine admits them before anything else whatever their priority, as the cluster had;
every other record arrives from :data:`AFTER_THE_HOLDERS_S` on. Their waits are not the replay's to count: a
running one waited before the window, and a pending one's wait runs from its creation (:class:`StartedBefore`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from kuota.engine import QuantityError, format_quantity, parse_quantity
from kuota.report.errors import UnreadableWorkloadError
from kuota.report.figures.workload_levers import Outcome, WorkloadRun
from kuota.report.sources.quoting import excerpt, quoted
from kuota.simulator.lines import SERVING_ANNOTATION

GPU = "nvidia.com/gpu"
KUEUE_GROUP = "kueue.x-k8s.io"
FAILED_REASONS = frozenset({"Failed", "OwnerNotFound", "Deactivated", "MaximumExecutionTimeExceeded"})
LARGEST_INT32 = 2**31 - 1  # pod set counts and maximumExecutionTimeSeconds are int32 in Kueue's API
PREEMPTED = "Preempted"  # the eviction reason (and condition) of a preemption
_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_TAINT_EFFECTS = frozenset({"", "NoSchedule", "PreferNoSchedule", "NoExecute"})
NOT_A_WORKLOAD = "not a kueue.x-k8s.io Workload"
AFTER_THE_HOLDERS_S = 0.001  # when the replay's other records arrive at the earliest: after the running ones


@dataclass(frozen=True, slots=True)
class PodSetDemand:
    name: str
    count: int
    requests: Mapping[str, str]  # one pod's requests, its containers' summed, in the shortest exact spelling
    gpus_per_pod: int
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, str | int], ...]

    def record(self) -> dict[str, Any]:
        """As a pod set of simulate's workload records."""
        return {
            "name": self.name,
            "count": self.count,
            "requests": dict(self.requests),
            "nodeSelector": dict(self.node_selector),
            "tolerations": [dict(t) for t in self.tolerations],
        }


@dataclass(frozen=True, slots=True)
class Ending:
    """The condition that ended a Workload: Finished, or an eviction that deactivated it."""

    at: float  # Unix seconds
    reason: str | None


@dataclass(frozen=True, slots=True)
class RetainedWorkload:
    """What the report reads of one retained Workload; the rest of the item is dropped when it is read."""

    namespace: str
    name: str
    created: float  # Unix seconds
    queue_name: str | None
    priority_class: str | None
    max_execution_s: int | None
    pod_sets: tuple[PodSetDemand, ...]
    admitted: float | None  # QuotaReserved, else Admitted
    ended: Ending | None
    priority: int | None = None
    gpu_flavor: str | None = None  # status.admission's flavor of nvidia.com/gpu
    preemptions: int = 0  # schedulingStats' Preempted evictions, else 1 where a Preempted condition is recorded
    past_execution_s: int = 0  # admitted before its last eviction (accumulatedPastExecutionTimeSeconds)
    serving: bool = False  # the manager's kuota.dev/serving annotation: it holds its quota until deleted


@dataclass(frozen=True)
class RetainedWorkloads:
    workloads: list[RetainedWorkload]
    skipped: dict[str, int] = field(default_factory=dict)  # why -> items left out when read
    first_skipped: dict[str, str] = field(default_factory=dict)  # why -> the first such item, and its fault
    items: int = 0  # items read, Workloads or not

    def warnings(self) -> list[str]:
        """One line per reason an item was left out, with how many and the first one."""
        return [
            f"left out {count} of {self.items} item(s): {why} (first: {self.first_skipped[why]})"
            for why, count in self.skipped.items()
        ]


@dataclass(frozen=True)
class StartedBefore:
    """The Workloads created before the window that its replay starts with, by (namespace, name)."""

    holding: frozenset[tuple[str, str]] = frozenset()  # running at the start: their wait was before the window
    pending_since: Mapping[tuple[str, str], float] = field(default_factory=dict)  # -> created, s from the start


@dataclass(frozen=True)
class JobHistory:
    records: list[dict[str, Any]]  # simulate's JSON Lines records, times relative to the window's start
    failed_gpu_hours: dict[str, float]  # namespace -> GPU-hours of jobs that failed or were cancelled (in the window)
    serving_gpu_hours: dict[str, float] = field(default_factory=dict)  # namespace -> GPU-hours held by serving
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many Workloads were left out
    # priority class -> how many records name it though the replayed config has no such WorkloadPriorityClass
    unknown_priority_classes: dict[str, int] = field(default_factory=dict)
    runs: list[WorkloadRun] = field(default_factory=list)  # each Workload of the records, as the levers read it
    started_before: StartedBefore = field(default_factory=StartedBefore)


def _unreadable(why: str, path: str, value: object) -> UnreadableWorkloadError:
    return UnreadableWorkloadError(why, f"{path} is {'missing' if value is None else quoted(value)}")


def _object(value: object, path: str, *, optional: bool = True) -> Mapping[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise _unreadable(f"{_generic(path)} is not an object", path, value)
    return value


def _list(value: object, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _unreadable(f"{_generic(path)} is not a list", path, value)
    return value


def _text(value: object, path: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _unreadable(f"{_generic(path)} is not a string", path, value)
    return value


def _name(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise _unreadable(f"{path} is not a non-empty string", path, value)
    return value


def _key(name: str) -> str:
    """A key of the item (a resource or label name) in a path: on one line, however it is spelled."""
    return excerpt(name, 60)


def _whole(value: object, path: str, smallest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not smallest <= value <= LARGEST_INT32:
        raise _unreadable(f"{_generic(path)} is not a whole number from {smallest} to {LARGEST_INT32}", path, value)
    return value


def _generic(path: str) -> str:
    """``spec.podSets[2].count`` -> ``spec.podSets[].count``: a reason, the same for every item with it."""
    parts = path.split("[")
    return "[".join(parts[:1] + ["]" + p.split("]", 1)[1] if "]" in p else p for p in parts[1:]])


def _time(value: object, path: str) -> float:
    """An RFC 3339 time with its zone, as Kubernetes writes them (``2026-10-05T07:30:00Z``)."""
    moment = None
    if isinstance(value, str) and len(value) <= 64:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            moment = None
    if moment is None or moment.tzinfo is None:
        raise _unreadable(f"{_generic(path)} is not an RFC 3339 time with a zone", path, value)
    return moment.timestamp()


def _condition(conditions: Sequence[object], kind: str) -> tuple[str, Mapping[str, Any]] | None:
    """(its path, the condition) of the first ``kind`` condition whose status is True."""
    for index, condition in enumerate(conditions):
        path = f"status.conditions[{index}]"
        body = _object(condition, path, optional=False)
        if body.get("type") == kind and body.get("status") == "True":
            return path, body
    return None


def _condition_time(conditions: Sequence[object], kind: str) -> tuple[float, str | None] | None:
    found = _condition(conditions, kind)
    if found is None:
        return None
    path, body = found
    at = _time(body.get("lastTransitionTime"), f"{path}.lastTransitionTime")
    return at, _text(body.get("reason"), f"{path}.reason")


def _pod_requests(template: Mapping[str, Any], path: str) -> dict[str, int]:
    """A pod's requests, its containers' summed exactly through the engine's quantities."""
    totals: dict[str, int] = {}
    spec = _object(template.get("spec"), f"{path}.spec")
    for index, raw in enumerate(_list(spec.get("containers"), f"{path}.spec.containers")):
        where = f"{path}.spec.containers[{index}]"
        container = _object(raw, where, optional=False)
        resources = _object(container.get("resources"), f"{where}.resources")
        for name, value in _object(resources.get("requests"), f"{where}.resources.requests").items():
            at = f"{where}.resources.requests.{_key(name)}"
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise _unreadable("a request is not a Kubernetes quantity", at, value)
            try:
                amount = parse_quantity(name, value)
            except QuantityError as error:
                raise UnreadableWorkloadError("a request is not a Kubernetes quantity", f"{at}: {error}") from error
            if amount < 0:
                raise _unreadable("a request is negative", at, value)
            totals[name] = totals.get(name, 0) + amount
    for name, units in totals.items():
        try:  # simulate reads the sum back: it must be a quantity too
            parse_quantity(name, format_quantity(name, units))
        except QuantityError as error:
            raise UnreadableWorkloadError(
                "a pod's requests sum past a quantity", f"{path}: {_key(name)}: {error}"
            ) from error
    return totals


def _tolerations(raw: object, path: str) -> tuple[Mapping[str, str | int], ...]:
    tolerations = []
    for index, item in enumerate(_list(raw, path)):
        where = f"{path}[{index}]"
        toleration = _object(item, where, optional=False)
        kept: dict[str, str | int] = {}
        for key, value in toleration.items():
            if key not in _TOLERATION_KEYS:
                raise _unreadable(f"{_generic(path)}[] has a key tolerations lack", f"{where}.{_key(key)}", value)
            if value is None:
                continue
            if key == "tolerationSeconds":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise _unreadable(
                        f"{_generic(path)}[].tolerationSeconds is not a whole number", f"{where}.{key}", value
                    )
            elif not isinstance(value, str):
                raise _unreadable(f"{_generic(path)}[].{key} is not a string", f"{where}.{key}", value)
            kept[key] = value
        if kept.get("operator", "Equal") not in ("Equal", "Exists"):
            raise _unreadable(
                f"{_generic(path)}[].operator is not Equal or Exists", f"{where}.operator", kept["operator"]
            )
        if kept.get("effect", "") not in _TAINT_EFFECTS:
            raise _unreadable(f"{_generic(path)}[].effect is not a taint effect", f"{where}.effect", kept["effect"])
        tolerations.append(kept)
    return tuple(tolerations)


def _pod_set(raw: object, path: str) -> PodSetDemand:
    pod_set = _object(raw, path, optional=False)
    template = _object(pod_set.get("template"), f"{path}.template")
    spec = _object(template.get("spec"), f"{path}.template.spec")
    selector = _object(spec.get("nodeSelector"), f"{path}.template.spec.nodeSelector")
    for key, value in selector.items():
        if not isinstance(value, str):
            raise _unreadable(
                f"{_generic(path)}.template.spec.nodeSelector is not of strings",
                f"{path}.template.spec.nodeSelector.{_key(key)}",
                value,
            )
    requests = _pod_requests(template, f"{path}.template")
    return PodSetDemand(
        name=_text(pod_set.get("name"), f"{path}.name") or "main",
        count=_whole(pod_set.get("count", 1), f"{path}.count", 1),
        requests={name: format_quantity(name, units) for name, units in requests.items()},
        gpus_per_pod=requests.get(GPU, 0),
        node_selector=dict(selector),
        tolerations=_tolerations(spec.get("tolerations"), f"{path}.template.spec.tolerations"),
    )


def _priority_class(spec: Mapping[str, Any]) -> str | None:
    reference = spec.get("priorityClassRef")
    if isinstance(reference, dict):
        return _text(reference.get("name"), "spec.priorityClassRef.name")
    return _text(reference, "spec.priorityClassRef")


def _preemptions(status: Mapping[str, Any], conditions: Sequence[object]) -> int:
    """Kueue and kuota's manager count evictions by reason in ``schedulingStats``; without it (older Kueue and
    kuota) a ``Preempted`` condition, True or since cleared by a new admission, proves one."""
    stats = _object(status.get("schedulingStats"), "status.schedulingStats")
    counted = 0
    for index, raw in enumerate(_list(stats.get("evictions"), "status.schedulingStats.evictions")):
        path = f"status.schedulingStats.evictions[{index}]"
        eviction = _object(raw, path, optional=False)
        if eviction.get("reason") == PREEMPTED:
            counted += _whole(eviction.get("count"), f"{path}.count", 0)
    if counted:
        return counted
    recorded = any(isinstance(c, dict) and c.get("type") == PREEMPTED for c in conditions)
    return 1 if recorded else 0


def _gpu_flavor(status: Mapping[str, Any]) -> str | None:
    admission = _object(status.get("admission"), "status.admission")
    assignments = _list(admission.get("podSetAssignments"), "status.admission.podSetAssignments")
    for index, raw in enumerate(assignments):
        path = f"status.admission.podSetAssignments[{index}]"
        flavors = _object(_object(raw, path, optional=False).get("flavors"), f"{path}.flavors")
        if GPU in flavors:
            return _name(flavors[GPU], f"{path}.flavors.{GPU}")
    return None


def _priority(spec: Mapping[str, Any]) -> int | None:
    value = spec.get("priority")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not -LARGEST_INT32 - 1 <= value <= LARGEST_INT32:
        raise _unreadable("spec.priority is not a 32-bit whole number", "spec.priority", value)
    return value


def retained_workload(item: object) -> RetainedWorkload:
    """One listed item as the history reads it; raises :class:`UnreadableWorkloadError` naming the field."""
    if not isinstance(item, dict):
        raise UnreadableWorkloadError(NOT_A_WORKLOAD, f"a {type(item).__name__}, not an object")
    body: Mapping[str, Any] = item
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind not in (None, "Workload") or (
        api_version is not None and not str(api_version).startswith(f"{KUEUE_GROUP}/")
    ):
        raise UnreadableWorkloadError(NOT_A_WORKLOAD, f"apiVersion {quoted(api_version)}, kind {quoted(kind)}")
    metadata = _object(body.get("metadata"), "metadata", optional=False)
    annotations = _object(metadata.get("annotations"), "metadata.annotations")
    spec = _object(body.get("spec"), "spec")
    status = _object(body.get("status"), "status")
    conditions = _list(status.get("conditions"), "status.conditions")
    admitted = _condition_time(conditions, "QuotaReserved") or _condition_time(conditions, "Admitted")
    finished = _condition_time(conditions, "Finished")
    if finished is None:
        evicted = _condition_time(conditions, "Evicted")
        # Kueue's (and kuota's) deactivating evictions: Deactivated, or DeactivatedDueTo<cause>.
        finished = evicted if evicted is not None and str(evicted[1]).startswith("Deactivated") else None
    max_execution = spec.get("maximumExecutionTimeSeconds")
    # v1beta1 spells it accumulatedPastExexcutionTimeSeconds
    past_key = next((k for k in status if k.startswith("accumulatedPastExe") and k.endswith("TimeSeconds")), None)
    return RetainedWorkload(
        namespace=_name(metadata.get("namespace"), "metadata.namespace"),
        name=_name(metadata.get("name"), "metadata.name"),
        created=_time(metadata.get("creationTimestamp"), "metadata.creationTimestamp"),
        queue_name=_text(spec.get("queueName"), "spec.queueName") or None,
        priority_class=_priority_class(spec),
        max_execution_s=None if max_execution is None else _whole(max_execution, "spec.maximumExecutionTimeSeconds", 1),
        pod_sets=tuple(
            _pod_set(p, f"spec.podSets[{i}]") for i, p in enumerate(_list(spec.get("podSets"), "spec.podSets"))
        ),
        admitted=admitted[0] if admitted else None,
        ended=Ending(*finished) if finished else None,
        priority=_priority(spec),
        gpu_flavor=_gpu_flavor(status),
        preemptions=_preemptions(status, conditions),
        past_execution_s=0 if past_key is None else _whole(status[past_key], f"status.{past_key}", 0),
        serving=annotations.get(SERVING_ANNOTATION) == "true",
    )


def _item_name(index: int, item: object) -> str:
    metadata = item.get("metadata") if isinstance(item, dict) else None
    if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
        return f"items[{index}] {quoted(metadata.get('namespace'))}/{quoted(metadata['name'])}"
    return f"items[{index}]"


class WorkloadReader:
    """Reads items one at a time (``add``), so a caller streaming a large list keeps only what is read."""

    def __init__(self) -> None:
        self._workloads: list[RetainedWorkload] = []
        self._seen: set[tuple[str, str]] = set()
        self._skipped: dict[str, int] = {}
        self._first: dict[str, str] = {}
        self._items = 0

    def add(self, item: object) -> None:
        index = self._items
        self._items += 1
        try:
            workload = retained_workload(item)
            if (workload.namespace, workload.name) in self._seen:
                raise UnreadableWorkloadError("repeats an earlier item's namespace and name", "a duplicate")
        except UnreadableWorkloadError as error:
            self._skipped[error.why] = self._skipped.get(error.why, 0) + 1
            self._first.setdefault(error.why, f"{_item_name(index, item)}: {error.detail}")
            return
        self._seen.add((workload.namespace, workload.name))
        self._workloads.append(workload)

    @property
    def workloads_seen(self) -> int:
        """Items that were Workloads, readable or not."""
        return self._items - self._skipped.get(NOT_A_WORKLOAD, 0)

    def result(self) -> RetainedWorkloads:
        return RetainedWorkloads(self._workloads, dict(self._skipped), dict(self._first), self._items)


def read_workloads(items: Iterable[object]) -> RetainedWorkloads:
    reader = WorkloadReader()
    for item in items:
        reader.add(item)
    return reader.result()


def job_history(retained: RetainedWorkloads, window_start: float, window_end: float) -> JobHistory:
    placed: list[tuple[float, float, dict[str, Any]]] = []  # (submitAt, created, record)
    failed: dict[str, float] = {}
    serving: dict[str, float] = {}
    runs: list[WorkloadRun] = []
    skipped: dict[str, int] = dict(retained.skipped)
    holding: set[tuple[str, str]] = set()
    pending_since: dict[tuple[str, str], float] = {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for workload in retained.workloads:
        if workload.created >= window_end:
            skip("created after the window")
            continue
        if workload.created < window_start and workload.ended is not None and workload.ended.at <= window_start:
            skip("created and ended before the window")
            continue
        if workload.queue_name is None:
            skip("no spec.queueName (not submitted to a queue)")
            continue
        if not workload.pod_sets:
            skip("no spec.podSets")
            continue
        if workload.admitted is None:
            skip("never admitted (no known duration)")
            continue
        key = (workload.namespace, workload.name)
        ended = min(workload.ended.at if workload.ended is not None else window_end, window_end)
        max_execution = workload.max_execution_s
        if workload.created >= window_start:
            submit_at = max(AFTER_THE_HOLDERS_S, workload.created - window_start)
        elif workload.admitted < window_start:
            holding.add(key)
            submit_at = 0.0
            if max_execution is not None:  # Kueue counts the time admitted before the window against it
                max_execution = max(1, max_execution - int(window_start - workload.admitted))
        else:
            pending_since[key] = workload.created - window_start
            submit_at = AFTER_THE_HOLDERS_S
        ran = max(0.0, ended - max(workload.admitted, window_start))
        # A serving Workload is replayed as long-lived as it was (to its deletion, or the window's end), however
        # long it waited: it does no work that ends.
        how_long = (
            {"lifetime": max(1.0, ended - window_start - submit_at)}
            if workload.serving
            else {"duration": max(1.0, ran)}
        )
        record = {
            "name": workload.name,
            "namespace": workload.namespace,
            "queue": workload.queue_name,
            "priorityClass": workload.priority_class,
            "submitAt": submit_at,
            **how_long,
            "maxExecutionSeconds": max_execution,
            "podSets": [pod_set.record() for pod_set in workload.pod_sets],
        }
        placed.append((submit_at, workload.created, record))
        run = _run(workload, workload.admitted, ran, window_start=window_start, window_end=window_end)
        runs.append(run)
        if run.outcome is Outcome.FAILED:
            failed[workload.namespace] = failed.get(workload.namespace, 0.0) + run.gpu_hours
        elif run.outcome is Outcome.SERVING:
            serving[workload.namespace] = serving.get(workload.namespace, 0.0) + run.gpu_hours
    placed.sort(key=lambda entry: (entry[0], entry[1]))  # ties at an instant keep creation order
    return JobHistory(
        [record for _, _, record in placed],
        failed,
        serving,
        skipped,
        started_before=StartedBefore(frozenset(holding), pending_since),
        runs=runs,
    )


def _run(
    workload: RetainedWorkload, admitted: float, ran: float, *, window_start: float, window_end: float
) -> WorkloadRun:
    """The Workload's GPU-hours in the window: its last admission's, and the earlier ones' where recorded (they
    lie between its creation and its last admission; only what of that span is inside the window counts)."""
    inside = max(0.0, min(admitted, window_end) - max(workload.created, window_start))
    earlier = min(float(workload.past_execution_s), inside)
    gpus = sum(p.count * p.gpus_per_pod for p in workload.pod_sets)
    outcome = Outcome.UNFINISHED
    if workload.serving:
        outcome = Outcome.SERVING
    elif workload.ended is not None:
        failed = workload.ended.reason in FAILED_REASONS or str(workload.ended.reason).startswith("Deactivated")
        outcome = Outcome.FAILED if failed else Outcome.SUCCEEDED
    return WorkloadRun(
        namespace=workload.namespace,
        name=workload.name,
        gpu_hours=gpus * (ran + earlier) / 3600,
        flavor=workload.gpu_flavor,
        priority=workload.priority,
        preemptions=workload.preemptions,
        outcome=outcome,
        reason=workload.ended.reason if workload.ended is not None else None,
    )


def with_known_priority_classes(history: JobHistory, known: Collection[str]) -> JobHistory:
    """Records naming a class the replayed config lacks (deleted since, or a scheduling.k8s.io PriorityClass)
    replay at the default priority: simulate refuses unknown names, and the demand matters more than its order."""
    unknown: dict[str, int] = {}
    records = []
    for record in history.records:
        name = record.get("priorityClass")
        if name is not None and name not in known:
            unknown[name] = unknown.get(name, 0) + 1
            records.append({**record, "priorityClass": None})
        else:
            records.append(record)
    return replace(history, records=records, unknown_priority_classes=unknown)
