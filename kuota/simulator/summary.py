"""The simulate contract's output: the ``--output`` JSON document and the summary a team lead reads.

The JSON shape is the contract in ``docs/simulate.md``; other tools read it, so keys never change.
Admission waits are measured per admission: from submission, or from the eviction that sent the workload
back, to the admission.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from kuota.simulator.replay import Outcome, QueueTotals, ReplayResult, WorkloadHistory

_MAX_EVENT_LINES = 12


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (0 for no values is not a thing here: callers check emptiness)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def _waits(totals: QueueTotals) -> dict[str, float | None]:
    if not totals.waits:
        return {"p50": None, "p95": None, "max": None}
    return {"p50": percentile(totals.waits, 0.5), "p95": percentile(totals.waits, 0.95), "max": max(totals.waits)}


def output_document(result: ReplayResult) -> dict[str, Any]:
    workloads = [
        {
            "name": h.name,
            "namespace": h.namespace,
            "clusterQueue": h.cluster_queue,
            "status": h.outcome.value,
            "reason": h.reason,
            "admissions": [{"at": a.at, "flavors": a.flavors, "borrowing": a.borrowing} for a in h.admissions],
            "evictions": [{"at": e.at, "reason": e.reason, "preemptedBy": e.preempted_by} for e in h.evictions],
            "finishedAt": h.finished_at,
        }
        for h in sorted(result.workloads.values(), key=lambda h: (h.submit_at, h.namespace, h.name))
    ]
    queues = {
        name: {
            "admissionWaitSeconds": _waits(totals),
            "admitted": totals.admitted,
            "evicted": totals.evicted,
            "gpuHoursAdmitted": round(totals.gpu_seconds / 3600, 3),
        }
        for name, totals in sorted(result.queues.items())
    }
    return {"workloads": workloads, "clusterQueues": queues}


def clock(seconds: float) -> str:
    """``d2 09:00`` style: whole days since the start, then the time of day."""
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"d{days} {hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 1 or seconds == 0 else f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def summary(result: ReplayResult) -> str:
    histories = list(result.workloads.values())
    lines = [
        f"kuota simulate: {len(histories)} workloads over {len(result.queues)} ClusterQueues, "
        f"simulated to {clock(result.end)} (times are days and hours since the start)",
        "",
    ]
    lines += _queue_table(result)
    lines += ["", "What happened:"]
    events = sorted(_borrowing_events(result) + _eviction_events(histories))
    if len(events) > _MAX_EVENT_LINES:
        hidden = len(events) - _MAX_EVENT_LINES
        events = [*events[:_MAX_EVENT_LINES], (math.inf, f"  ... and {hidden} more (see --output)")]
    lines += [text for _, text in events] + _longest_waits(histories)
    lines += _unfinished(histories)
    return "\n".join(lines) + "\n"


def _queue_table(result: ReplayResult) -> list[str]:
    header = ("ClusterQueue", "admitted", "evicted", "wait p50", "wait p95", "wait max", "peak GPUs", "GPU-hours")
    rows = [header]
    for name, totals in sorted(result.queues.items()):
        waits = _waits(totals)
        peak = f"{totals.peak_gpus}/{totals.nominal_gpus}" if totals.nominal_gpus or totals.peak_gpus else "-"
        rows.append(
            (
                name,
                str(totals.admitted),
                str(totals.evicted),
                duration(waits["p50"]),
                duration(waits["p95"]),
                duration(waits["max"]),
                peak,
                f"{totals.gpu_seconds / 3600:.1f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    text = [
        "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row))
        for row in rows
    ]
    return [*text, "(peak GPUs: most in use at once / nominal quota; above nominal means borrowed from the cohort)"]


_WHY = {
    "InCohortReclamation": "to take back its own nominal quota",
    "InClusterQueue": "of lower priority in the same ClusterQueue",
    "InCohortReclaimWhileBorrowing": "while borrowing (borrowWithinCohort)",
    "InCohortFairSharing": "to even out fair shares",
}


def _borrowing_events(result: ReplayResult) -> list[tuple[float, str]]:
    events = []
    for name, totals in sorted(result.queues.items()):
        if totals.nominal_gpus and totals.peak_gpus > totals.nominal_gpus:
            events.append(
                (
                    totals.peak_at,
                    f"  {clock(totals.peak_at)}  {name} runs on {totals.peak_gpus} GPUs, "
                    f"{totals.peak_gpus - totals.nominal_gpus} borrowed beyond its {totals.nominal_gpus} "
                    "nominal (its peak)",
                )
            )
    return events


def _eviction_events(histories: list[WorkloadHistory]) -> list[tuple[float, str]]:
    by_preemptor: dict[tuple[float, str, str], list[WorkloadHistory]] = defaultdict(list)
    events: list[tuple[float, str]] = []
    for history in histories:
        for eviction in history.evictions:
            if eviction.preempted_by is not None:
                key = (eviction.at, eviction.preempted_by, eviction.preemption_reason or "")
                by_preemptor[key].append(history)
            else:
                events.append((eviction.at, f"  {clock(eviction.at)}  {history.key} is evicted ({eviction.reason})"))
    for (at, preemptor, why), victims in sorted(by_preemptor.items()):
        names = ", ".join(v.name for v in sorted(victims, key=lambda v: v.name))
        owners = ", ".join(sorted({v.cluster_queue or "?" for v in victims}))
        resumed = [v for v in victims if any(a.at > at for a in v.admissions)]
        later = f"; {len(resumed)} of {len(victims)} resumed later" if resumed else ""
        events.append(
            (
                at,
                f"  {clock(at)}  {preemptor} preempts {len(victims)} of {owners}'s workloads "
                f"{_WHY.get(why, why)}: {names}{later}",
            )
        )
    return events


def _longest_waits(histories: list[WorkloadHistory]) -> list[str]:
    waited = sorted(
        ((a.waited, h) for h in histories for a in h.admissions if a.waited > 0),
        key=lambda pair: (-pair[0], pair[1].key),
    )[:5]
    if not waited:
        if any(not h.admissions for h in histories):
            return ["  no admission waited, but some workloads were never admitted (below)"]
        return ["  nobody waited: every workload was admitted when it arrived"]
    lines = ["  longest waits before admission:"]
    lines += [f"    {h.key} ({h.cluster_queue}) waited {duration(wait)}" for wait, h in waited]
    return lines


def _unfinished(histories: list[WorkloadHistory]) -> list[str]:
    counts = Counter(h.outcome for h in histories)
    lines = ["", "Workloads: " + ", ".join(f"{counts[o]} {o.value.lower()}" for o in Outcome if counts[o])]
    stuck = [h for h in histories if h.outcome in (Outcome.PENDING, Outcome.INADMISSIBLE, Outcome.DEACTIVATED)]
    reasons = Counter((h.outcome.value, h.reason or "unknown") for h in stuck)
    for (outcome, reason), count in reasons.most_common(_MAX_EVENT_LINES):
        lines.append(f"  {count} {outcome.lower()}: {reason}")
    return lines
