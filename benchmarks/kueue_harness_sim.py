"""Benchmark: Kueue's scheduler performance harness ("baseline") replayed in simulated time.

Run: ``.venv/bin/python benchmarks/kueue_harness_sim.py``. The workload is Kueue's (5 cohorts x 6
ClusterQueues, 20 cpu nominal, borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue
LowerPriority; per queue 350 small, 100 medium, 50 large workloads: ``benchmarks.workloads.kueue_harness``).
Decisions take no time here, so the figures are the floor a live controller can reach; they are compared
with the thresholds Kueue's harness enforces on a live cluster.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

# Run as a script: the generators live in benchmarks/workloads, beside this file, not in the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workloads.kueue_harness import HarnessSpec, harness_arrivals, harness_config
from kuota.simulator.config_reading import config_from_dicts, priority_values
from kuota.simulator.replay import replay
from kuota.simulator.workload_reading import convert_lines

# Kueue test/performance/scheduler baseline thresholds (mean time to admission per class, seconds).
KUEUE_THRESHOLDS = {"large": 23.0, "medium": 90.0, "small": 260.0}
KUEUE_MIN_UTILIZATION = 0.5
KUEUE_MAX_WALL_SECONDS = 425.0


def main() -> None:
    spec = HarnessSpec()
    objects = config_from_dicts(harness_config(spec).objects)
    arrivals = list(harness_arrivals(spec))
    class_of = {f"{a.workload['namespace']}/{a.workload['name']}": a.workload_class for a in arrivals}
    stream = list(convert_lines(((a.workload["name"], a.workload) for a in arrivals), priority_values(objects)))
    started = time.process_time()
    result = replay(objects, stream)
    seconds = time.process_time() - started
    waits: dict[str, list[float]] = defaultdict(list)
    cpu_seconds = 0.0
    for key, history in result.workloads.items():
        first = history.admissions[0]
        waits[class_of[key]].append(first.at - history.submit_at)
    for item in stream:
        cpu_seconds += item.workload.pod_sets[0].requests["cpu"] / 1000 * item.duration
    makespan = max(h.finished_at or 0.0 for h in result.workloads.values())
    capacity = spec.cohorts * spec.queues_per_cohort * spec.nominal_cpu
    utilization = cpu_seconds / (capacity * makespan)
    print(
        f"Kueue perf harness in simulated time: {len(stream):,} workloads, {spec.cohorts} cohorts x "
        f"{spec.queues_per_cohort} ClusterQueues, {capacity} cpu; replay took {seconds:.1f} s of CPU"
    )
    print(f"{'class':8} {'workloads':>9} {'mean wait':>10} {'max wait':>9} {'Kueue threshold':>16} {'ratio':>7}")
    for name in ("large", "medium", "small"):
        values = waits[name]
        mean = sum(values) / len(values)
        print(
            f"{name:8} {len(values):9,} {mean:9.2f}s {max(values):8.2f}s {KUEUE_THRESHOLDS[name]:15.0f}s "
            f"{mean / KUEUE_THRESHOLDS[name]:7.3f}"
        )
    print(
        f"utilization {utilization:.1%} (Kueue floor {KUEUE_MIN_UTILIZATION:.0%}); simulated makespan "
        f"{makespan:.1f} s (Kueue's live wall limit {KUEUE_MAX_WALL_SECONDS:.0f} s); evictions "
        f"{sum(t.evicted for t in result.queues.values())}"
    )


if __name__ == "__main__":
    main()
