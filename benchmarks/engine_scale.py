"""Benchmark: the engine on synthetic streams of 10k, 100k and 1M workloads over 1,000 ClusterQueues.

Run: ``.venv/bin/python benchmarks/engine_scale.py [--sizes 10000,100000,1000000]``. Each size runs in its own
process (so peak memory is that size's), replaying ``benchmarks.workloads.synthetic`` through the simulator with
no per-workload history (``keep_history=False``: a finished workload is forgotten, so memory is the engine's
and the pending and running workloads').

The stream (its module docstring has the rules): 1,000 ClusterQueues (8 GPUs nominal, borrowingLimit 8) in
100 cohorts of 10, borrowing and preemption on; every cohort is offered 80% of its nominal GPUs on average,
split unevenly over its queues (some borrow, some lend, none wants more than it can ever hold), arriving in
bursts of mean 4 workloads of one shape (1 to 8 GPUs) and priority, running an hour on average. The queues
and the load are the same at every size; a bigger stream is the same system run longer (10k is about 4.3
simulated hours, 1M about 18 days), so the cost per decision is comparable. At 80% the backlog stays near
3,000 pending workloads for the whole run (at 90%, queueing for the 8-GPU shapes keeps it creeping up).

Each size runs with the engine as installed (mypyc-compiled by ``setup.py``); the sizes in ``--pure-sizes`` run
again with its pure-Python sources, the baseline the compiled speed is quoted against (``vs pure``).

Reported: the offered load, CPU seconds of the replay (the lazy stream's generation and conversion included,
about 8 us a workload), decisions (admissions + evictions) per second, CPU microseconds per decision and its
ratio to the smallest size (flat or logarithmic growth is the target), and peak RSS (target for 1M: under
2 minutes and 2 GB).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

# Run as a script: the generators live in benchmarks/workloads, beside this file, not in the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET_1M_SECONDS = 120
TARGET_1M_BYTES = 2 * 1024**3


def _one(size: int, pure_python: bool) -> dict[str, float | str]:
    from kuota.engine_build import engine_build, prefer_pure_python

    if pure_python:
        prefer_pure_python()
    from benchmarks.workloads.synthetic import SyntheticSpec, synthetic_config, synthetic_workloads
    from kuota.simulator.config_reading import config_from_dicts, priority_values
    from kuota.simulator.replay import replay
    from kuota.simulator.workload_reading import convert_lines

    spec = SyntheticSpec(workloads=size)
    objects = config_from_dicts(synthetic_config(spec).objects)
    stream = convert_lines(((line["name"], line) for line in synthetic_workloads(spec)), priority_values(objects))
    started = time.process_time()
    result = replay(objects, stream, keep_history=False)
    seconds = time.process_time() - started
    admissions = sum(t.admissions for t in result.queues.values())
    return {
        "build": engine_build(),
        "size": size,
        "seconds": seconds,
        "decisions": result.decisions,
        "admissions": admissions,
        "evictions": sum(t.evicted for t in result.queues.values()),
        "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "simulated_days": result.end / 86400,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--pure-sizes", default="10000,100000", help="sizes to run again as pure Python")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--pure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(_one(args.child, args.pure)))
        return
    rows = []
    pure_sizes = {int(s) for s in args.pure_sizes.split(",") if s}
    for size in (int(s) for s in args.sizes.split(",")):
        for pure in (False, True) if size in pure_sizes else (False,):
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(size), *(["--pure"] if pure else [])],
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append(json.loads(done.stdout))
    base: dict[str, float] = {}
    for row in rows:  # the smallest size of each build
        base.setdefault(row["build"], row["seconds"] / row["decisions"])
    pure_seconds = {row["size"]: row["seconds"] for row in rows if row["build"] == "pure Python"}
    print("synthetic streams, 1,000 ClusterQueues in 100 cohorts (benchmarks.workloads.synthetic)")
    print(
        f"{'workloads':>10} {'engine':17} {'sim days':>8} {'cpu s':>8} {'admissions':>10} {'evictions':>9} "
        f"{'decisions/s':>11} "
        f"{'us/decision':>11} {'vs smallest':>11} {'vs pure':>7} {'peak RSS':>9}"
    )
    for row in rows:
        per = row["seconds"] / row["decisions"]
        versus = f"{row['seconds'] / pure_seconds[row['size']]:6.2f}x" if row["size"] in pure_seconds else "      -"
        print(
            f"{row['size']:>10,} {row['build']:17} {row['simulated_days']:8.1f} {row['seconds']:8.1f} "
            f"{row['admissions']:>10,} "
            f"{row['evictions']:>9,} {row['decisions'] / row['seconds']:11,.0f} {per * 1e6:11.1f} "
            f"{per / base[row['build']]:10.2f}x {versus} {row['peak_rss'] / 2**20:7.0f}MB"
        )
    from benchmarks.workloads.synthetic import MEAN_BURST, SyntheticSpec

    offered = SyntheticSpec(workloads=0)
    print(
        f"offered load: {offered.offered_load:.0%} of every cohort's nominal GPUs, "
        f"{offered.arrival_rate * 3600:,.0f} workloads per simulated hour in bursts of {MEAN_BURST:g} on average"
    )
    million = [r for r in rows if r["size"] == 1_000_000 and r["build"] != "pure Python"]
    for row in million:
        ok = row["seconds"] < TARGET_1M_SECONDS and row["peak_rss"] < TARGET_1M_BYTES
        print(f"1M target (<{TARGET_1M_SECONDS} s, <2 GB): {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
