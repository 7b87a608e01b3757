"""Benchmark: the Philly 15k-job trace through ``kuota simulate``'s engine on the 14-team config.

Run: ``.venv/bin/python benchmarks/simulate_philly.py [--trace PATH]``. Users are hashed onto the 14 teams
(``kuota.simulator.queue_mapping``), which is uneven, as real teams are. Two runs of the same demand: the
config as shipped (one cohort, borrowing and preemption on) and the baseline with each team on its own
quota (no cohort), so the table shows both the engine's speed (target: under 2 s on one core) and what
borrowing does to the waits. Each runs twice, in a process of its own: with the engine as installed (mypyc-
compiled by ``setup.py``) and with its pure-Python sources, the baseline the compiled speed is quoted against.
Each replay is repeated ``--repeat`` times (default 3) and the best and median CPU times are printed: on a
shared virtual machine the same replay's CPU time varies by a fifth from one minute to the next, and the
best of several is the one least inflated by neighbours (the decisions are the same every time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Run as a script: the generators live in benchmarks/workloads, beside this file, not in the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

if TYPE_CHECKING:
    from kuota.simulator.replay import ReplayResult
    from kuota.simulator.workload_reading import SimulatedWorkload

DEFAULT_TRACE = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces" / "philly-15k.csv"
TARGET_SECONDS = 2.0


def _run(objects: list[dict[str, Any]], workloads: list[SimulatedWorkload]) -> tuple[float, ReplayResult]:
    from kuota.simulator.config_reading import config_from_dicts
    from kuota.simulator.replay import replay

    parsed = config_from_dicts(objects)
    started = time.process_time()
    result = replay(parsed, workloads, keep_history=False)
    return time.process_time() - started, result


def _measure(trace: Path, pure_python: bool, repeat: int) -> dict[str, Any]:
    """Both configs with one build of the engine, in this process."""
    from kuota.engine_build import engine_build, prefer_pure_python

    if pure_python:
        prefer_pure_python()
    from benchmarks.workloads.philly_teams import isolated_teams, philly_teams_config
    from kuota.simulator.config_reading import config_from_dicts, priority_values
    from kuota.simulator.summary import percentile
    from kuota.simulator.traces import read_trace, trace_workloads
    from kuota.simulator.workload_reading import convert_lines

    config = philly_teams_config()
    lines = list(trace_workloads(read_trace(trace), config.queues))
    workloads = list(
        convert_lines(((line["name"], line) for line in lines), priority_values(config_from_dicts(config.objects)))
    )
    rows = []
    for label, objects in (
        ("cohort, borrowing+preemption", list(config.objects)),
        ("baseline: isolated teams", isolated_teams(config.objects)),
    ):
        timings = []
        for _ in range(repeat):
            seconds, result = _run(objects, workloads)
            timings.append(seconds)
        waits = [w for totals in result.queues.values() for w in totals.waits]
        rows.append(
            {
                "label": label,
                "seconds": min(timings),
                "median": statistics.median(timings),
                "decisions": result.decisions,
                "evicted": sum(t.evicted for t in result.queues.values()),
                "p50": percentile(waits, 0.5),
                "p95": percentile(waits, 0.95),
                "mean": sum(waits) / len(waits) if waits else 0.0,
            }
        )
    return {"build": engine_build(), "jobs": len(workloads), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=3, help="replays of each config; the best is quoted")
    parser.add_argument("--child", choices=("installed", "pure"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_measure(args.trace, pure_python=args.child == "pure", repeat=args.repeat)))
        return
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, __file__, "--trace", str(args.trace), "--repeat", str(args.repeat), "--child", child],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for child in ("installed", "pure")
    ]
    installed, pure = runs
    print(f"Philly trace {args.trace.name}: {installed['jobs']} GPU jobs, 14 teams x 48 GPUs (users hashed onto teams)")
    print(
        f"{'config':30} {'engine':17} {'cpu s':>6} {'median':>6} {'vs 2 s':>7} {'vs pure':>7} {'decisions':>9} "
        f"{'evictions':>9} "
        f"{'dec/s':>7} {'wait p50':>9} {'wait p95':>9} {'mean wait':>10}"
    )
    for index in range(len(installed["rows"])):
        for run in runs:
            row = run["rows"][index]
            seconds = row["seconds"]
            print(
                f"{row['label']:30} {run['build']:17} {seconds:6.2f} {row['median']:6.2f} "
                f"{seconds / TARGET_SECONDS:6.2f}x "
                f"{seconds / pure['rows'][index]['seconds']:6.2f}x {row['decisions']:9d} {row['evicted']:9d} "
                f"{row['decisions'] / seconds:7.0f} {row['p50']:8.0f}s {row['p95']:8.0f}s {row['mean']:9.0f}s"
            )
    same = all(
        a["decisions"] == b["decisions"] and a["mean"] == b["mean"]
        for a, b in zip(installed["rows"], pure["rows"], strict=True)
    )
    print(f"both engines made the same decisions: {'yes' if same else 'NO'}")
    print(
        f"(cpu s: process CPU time of the replay alone, the best of {args.repeat}, beside their median; waits are "
        "per admission, in simulated seconds)"
    )


if __name__ == "__main__":
    main()
