"""The floor: the same generator replayed through ``kuota simulate``'s replay (the engine, no API, no
clock), as timelines the live runs are measured against. Pure."""

from __future__ import annotations

from benchmarks.side_by_side.errors import MeasureError
from benchmarks.side_by_side.measures import WorkloadTimeline
from benchmarks.side_by_side.plans import priority_values
from benchmarks.workloads.kueue_harness import HarnessSpec, harness_arrivals, harness_config
from kuota.simulator.config_reading import config_from_dicts
from kuota.simulator.replay import ReplayResult, WorkloadHistory, replay
from kuota.simulator.workload_reading import convert_lines


def simulate(spec: HarnessSpec, until: float | None = None) -> ReplayResult:
    objects = config_from_dicts(harness_config(spec).objects)
    arrivals = list(harness_arrivals(spec))
    lines = [(f"workload {index + 1}", a.workload) for index, a in enumerate(arrivals)]
    workloads = convert_lines(lines, priority_values(spec))
    return replay(objects, sorted(workloads, key=lambda w: w.submit_at), until)


def history_timeline(history: WorkloadHistory, workload_class: str, cpu: float) -> WorkloadTimeline:
    """Admissions paired with the eviction or finish that ended each; the last may still be open."""
    timeline = WorkloadTimeline(history.key, workload_class, cpu, history.submit_at)
    ends = sorted(e.at for e in history.evictions)
    for index, admission in enumerate(history.admissions):
        timeline.admit(admission.at)
        if index < len(ends):
            timeline.release(ends[index])
    if history.finished_at is not None:
        timeline.finish(history.finished_at)
    return timeline


def floor_timelines(spec: HarnessSpec) -> list[WorkloadTimeline]:
    result = simulate(spec)
    timelines = []
    for arrival in harness_arrivals(spec):
        key = f"{arrival.workload['namespace']}/{arrival.workload['name']}"
        history = result.workloads.get(key)
        if history is None:
            raise MeasureError(f"the replay has no history for {key}: was it dropped as invalid?")
        cpu = float(arrival.workload["podSets"][0]["requests"]["cpu"])
        timelines.append(history_timeline(history, arrival.workload_class, cpu))
    return timelines
