"""ETAs in ``kuota simulate``: at every submission of a replay, the admission ETA the controller would have
shown then, from only what was known at that moment, beside the admission that followed.

After the replay, its histories are swept in time order. At each submission instant the state is what the
replay held just before it (running workloads with their admissions, pending ones, the finished ones'
runtimes in a :class:`~kuota.simulator.runtimes.RuntimeHistory`); :func:`~kuota.simulator.forecast.forecast`
replays the engine forward from there. A workload's runtime is known only if it declares one
(``maxExecutionSeconds``); every other runtime comes from the history of the stream's finished workloads of
the same LocalQueue and shape, so the accuracy of history-based ETAs can be measured offline.

Beside each ETA, the naive baseline: the workload's position in its LocalQueue times the queue's mean runtime.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kuota.engine import ApiObject, EvictionReason, PodSetAssignment, Workload
from kuota.simulator.forecast import ARRIVAL_WINDOW_SECONDS, DEFAULT_HORIZON_SECONDS, Eta, Pending, Running, forecast
from kuota.simulator.replay import ReplayResult, WorkloadHistory
from kuota.simulator.runtimes import (
    RuntimeHistory,
    gpus_of,
    local_queue_of,
    queued_runtime,
    remaining_runtime,
)
from kuota.simulator.summary import duration, percentile
from kuota.simulator.workload_reading import SimulatedWorkload


@dataclass(frozen=True, slots=True)
class Prediction:
    """One workload's ETA as predicted at its submission, the baseline's, and the admission that followed."""

    key: str
    submit_at: float
    gpus: int
    eta: Eta | None
    baseline_wait: float | None
    actual_start: float | None

    @property
    def predicted_wait(self) -> float | None:
        return None if self.eta is None else self.eta.at - self.submit_at

    @property
    def actual_wait(self) -> float | None:
        return None if self.actual_start is None else self.actual_start - self.submit_at

    @property
    def error(self) -> float | None:
        """How far the ETA was off the admission, in seconds: an ETA beyond the horizon said "not before
        then", so it was off only by how much sooner the admission came. None without both."""
        predicted, actual = self.predicted_wait, self.actual_wait
        if predicted is None or actual is None:
            return None
        if self.eta is not None and self.eta.beyond_horizon:
            return max(0.0, predicted - actual)
        return abs(predicted - actual)


@dataclass(slots=True)
class _Span:
    """One admission of one workload in the replay: from ``start`` to ``end`` (eviction or finish)."""

    key: str
    cluster_queue: str
    start: float
    end: float
    flavors: dict[str, dict[str, str]]


def predictions(
    objects: Sequence[ApiObject], arrivals: Sequence[SimulatedWorkload], result: ReplayResult, every: int = 1
) -> Iterator[Prediction]:
    """The prediction at every ``every``-th submission of ``arrivals`` (``result`` is their replay, with
    its histories kept), in submission order."""
    workloads = {arrival.workload.key: arrival.workload for arrival in arrivals}
    histories = result.workloads
    spans = sorted((span for h in histories.values() for span in _spans(h)), key=lambda s: s.start)
    ends = sorted(((h.finished_at, h.key) for h in histories.values() if h.finished_at is not None), key=lambda e: e[0])
    gone = sorted(((at, key) for key, at in _deactivations(histories)), key=lambda e: e[0])
    history = RuntimeHistory()
    recent: deque[SimulatedWorkload] = deque()
    running: dict[str, _Span] = {}
    pending: dict[str, Workload] = {}
    next_span = next_end = next_gone = 0
    for index, arrival in enumerate(arrivals):
        now = arrival.submit_at
        # Everything that happened before this instant; what happens at it comes after the submission.
        while next_end < len(ends) and ends[next_end][0] < now:
            finished_at, key = ends[next_end]
            next_end += 1
            done = workloads[key]
            history.record(local_queue_of(done), gpus_of(done), histories[key].duration, finished_at)
            running.pop(key, None)
            pending.pop(key, None)
        while next_span < len(spans) and spans[next_span].start < now:
            span = spans[next_span]
            next_span += 1
            if span.end >= now:
                running[span.key] = span
                pending.pop(span.key, None)
        for key in [key for key, span in running.items() if span.end < now]:
            del running[key]  # evicted (a finish before now was taken above): queued again
            pending[key] = workloads[key]
        while next_gone < len(gone) and gone[next_gone][0] < now:
            pending.pop(gone[next_gone][1], None)
            next_gone += 1
        workload = arrival.workload
        pending[workload.key] = workload
        recent.append(arrival)
        while recent[0].submit_at <= now - ARRIVAL_WINDOW_SECONDS:
            recent.popleft()
        if index % every:
            continue
        queue = local_queue_of(workload)
        ahead = sum(1 for other in pending.values() if other.key != workload.key and local_queue_of(other) == queue)
        mean = history.mean(queue)
        etas = forecast(
            objects,
            (_running(workloads[key], span, now, history) for key, span in running.items()),
            (Pending(other, queued_runtime(other, None, history)) for other in pending.values()),
            now,
            wanted=(workload.key,),
            recent=(Pending(seen.workload, queued_runtime(seen.workload, None, history)) for seen in recent),
        )
        own = histories[workload.key]
        yield Prediction(
            workload.key,
            now,
            gpus_of(workload),
            etas.get(workload.key),
            None if mean is None else ahead * mean,
            own.admissions[0].at if own.admissions else None,
        )


def _running(workload: Workload, span: _Span, now: float, history: RuntimeHistory) -> Running:
    remaining = remaining_runtime(workload, None, history, now - span.start)
    return Running(workload, span.cluster_queue, _assignments(workload, span.flavors), span.start, remaining)


def _assignments(workload: Workload, flavors: dict[str, dict[str, str]]) -> tuple[PodSetAssignment, ...]:
    """The admission as the replay recorded it (flavors per pod set; the full pod count)."""
    return tuple(
        PodSetAssignment(
            pod_set.name,
            flavors.get(pod_set.name, {}),
            pod_set.count,
            {resource: amount * pod_set.count for resource, amount in pod_set.requests.items()},
        )
        for pod_set in workload.pod_sets
    )


def _spans(history: WorkloadHistory) -> Iterator[_Span]:
    # Admissions and evictions alternate; the last admission ends at the finish (or never).
    for index, admission in enumerate(history.admissions):
        if index < len(history.evictions):
            end = history.evictions[index].at
        else:
            end = history.finished_at if history.finished_at is not None else float("inf")
        yield _Span(history.key, history.cluster_queue or "", admission.at, end, admission.flavors)


def _deactivations(histories: dict[str, WorkloadHistory]) -> Iterator[tuple[str, float]]:
    """Workloads whose last eviction deactivated them: gone from the queues from then on."""
    for key, history in histories.items():
        if history.evictions and len(history.evictions) >= len(history.admissions):
            last = history.evictions[-1]
            if last.reason == EvictionReason.DEACTIVATED.value:
                yield key, last.at


HOUR = 3600.0


def within(error: float, actual: float) -> bool:
    """Close enough: within a quarter of the actual wait, or an hour, whichever is larger."""
    return error <= max(0.25 * actual, HOUR)


def accuracy(made: Iterable[Prediction]) -> dict[str, Any]:
    """Median and p90 error (seconds, ``Prediction.error``) and the share ``within``, of the ETAs and of the
    naive baseline, over the predictions both made for workloads the replay admitted."""
    made_list = list(made)
    rows = [
        (p.error, abs(p.baseline_wait - p.actual_wait), p.actual_wait)
        for p in made_list
        if p.error is not None and p.baseline_wait is not None and p.actual_wait is not None
    ]

    def figures(column: int) -> dict[str, float | None]:
        if not rows:
            return {"medianErrorSeconds": None, "p90ErrorSeconds": None, "withinShare": None}
        errors = [row[column] for row in rows]
        hits = sum(within(error, row[2]) for error, row in zip(errors, rows, strict=True))
        return {
            "medianErrorSeconds": percentile(errors, 0.5),
            "p90ErrorSeconds": percentile(errors, 0.9),
            "withinShare": round(hits / len(rows), 4),
        }

    beyond = sum(1 for p in made_list if p.eta is not None and p.eta.beyond_horizon)
    return {"compared": len(rows), "beyondHorizon": beyond, "eta": figures(0), "baseline": figures(1)}


def with_etas(document: dict[str, Any], made: Iterable[Prediction]) -> dict[str, Any]:
    """The output document with each workload's ``eta`` and the top-level ``etaAccuracy`` (docs/simulate.md)."""
    listed = list(made)
    by_key = {p.key: p for p in listed}
    for entry in document["workloads"]:
        prediction = by_key.get(f"{entry['namespace']}/{entry['name']}")
        entry["eta"] = None if prediction is None else _eta_entry(prediction)
    return {**document, "etaAccuracy": accuracy(listed)}


def _eta_entry(prediction: Prediction) -> dict[str, Any]:
    eta = prediction.eta
    return {
        "predictedAt": prediction.submit_at,
        "predictedStartAt": None if eta is None or eta.beyond_horizon else eta.at,
        "beyondHorizon": eta is not None and eta.beyond_horizon,
        "runtimeSources": {} if eta is None else dict(eta.runtime_sources),
        "similarJobs": 0 if eta is None else eta.similar_jobs,
        "baselineWaitSeconds": prediction.baseline_wait,
    }


def eta_summary(figures: dict[str, Any], predicted: int) -> str:
    """The summary's lines on the ETAs: how far off, beside the naive baseline."""
    beyond = (
        f", {figures['beyondHorizon']} of them beyond the {duration(DEFAULT_HORIZON_SECONDS)} horizon"
        if figures["beyondHorizon"]
        else ""
    )
    lines = [
        f"\nAdmission ETAs: {predicted} predicted at submission, {figures['compared']} compared with the replay{beyond}"
    ]
    for label, key in (("kuota ETA", "eta"), ("naive baseline", "baseline")):
        row = figures[key]
        if row["medianErrorSeconds"] is None:
            continue
        lines.append(
            f"  {label:15} error median {duration(row['medianErrorSeconds'])}, p90 {duration(row['p90ErrorSeconds'])}; "
            f"within 25% or 1 h: {row['withinShare']:.0%}"
        )
    return "\n".join(lines) + "\n"
