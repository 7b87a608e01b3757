"""Benchmark: the Philly 15k-job trace through ``kuota simulate``'s engine on the 14-team config.

Run: ``.venv/bin/python benchmarks/simulate_philly.py [--trace PATH]``. Users are hashed onto the 14 teams
(``webhook.workloads.queue_mapping``), which is uneven, as real teams are. Two runs of the same demand: the
config as shipped (one cohort, borrowing and preemption on) and the baseline with each team on its own
quota (no cohort), so the table shows both the engine's speed (target: under 2 s on one core) and what
borrowing does to the waits.
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path
from typing import Any

from webhook.simulator.inputs import SimulatedWorkload, config_from_dicts, convert_lines, priority_values
from webhook.simulator.replay import ReplayResult, replay
from webhook.simulator.report import percentile
from webhook.workloads.philly_teams import philly_teams_config
from webhook.workloads.traces import read_trace, trace_workloads

DEFAULT_TRACE = Path("/work/shared/traces/philly-15k.csv")
TARGET_SECONDS = 2.0


def _without_cohort(objects: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    isolated = []
    for original in objects:
        if original["kind"] == "Cohort":
            continue
        obj = copy.deepcopy(original)
        if obj["kind"] == "ClusterQueue":
            obj["spec"].pop("cohortName", None)
            obj["spec"].pop("preemption", None)
        isolated.append(obj)
    return isolated


def _run(objects: list[dict[str, Any]], workloads: list[SimulatedWorkload]) -> tuple[float, ReplayResult]:
    parsed = config_from_dicts(objects)
    started = time.process_time()
    result = replay(parsed, workloads, keep_history=False)
    return time.process_time() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    args = parser.parse_args()
    config = philly_teams_config()
    lines = list(trace_workloads(read_trace(args.trace), config.queues))
    workloads = list(
        convert_lines(((line["name"], line) for line in lines), priority_values(config_from_dicts(config.objects)))
    )
    rows = []
    for label, objects in (
        ("cohort, borrowing+preemption", list(config.objects)),
        ("baseline: isolated teams", _without_cohort(config.objects)),
    ):
        seconds, result = _run(objects, workloads)
        waits = [w for totals in result.queues.values() for w in totals.waits]
        evicted = sum(t.evicted for t in result.queues.values())
        rows.append((label, seconds, result.decisions, evicted, waits))
    print(f"Philly trace {args.trace.name}: {len(workloads)} GPU jobs, 14 teams x 48 GPUs (users hashed onto teams)")
    header = (
        f"{'config':32} {'cpu s':>7} {'vs 2 s':>7} {'decisions':>9} {'evictions':>9} {'dec/s':>8} "
        f"{'wait p50':>9} {'wait p95':>9} {'mean wait':>10}"
    )
    print(header)
    for label, seconds, decisions, evicted, waits in rows:
        mean = sum(waits) / len(waits) if waits else 0.0
        print(
            f"{label:32} {seconds:7.2f} {seconds / TARGET_SECONDS:6.2f}x {decisions:9d} {evicted:9d} "
            f"{decisions / seconds:8.0f} {percentile(waits, 0.5):8.0f}s {percentile(waits, 0.95):8.0f}s "
            f"{mean:9.0f}s"
        )
    print("(cpu s: process CPU time of the replay alone; waits are per admission, in simulated seconds)")


if __name__ == "__main__":
    main()
