"""Benchmark: how right are kuota's admission ETAs? The Philly and Helios traces replayed on the 14-team config.

Run: ``.venv/bin python benchmarks/eta_accuracy.py [--trace PATH ...] [--every N]``. Each trace is replayed
once (``kuota simulate``'s replay: users hashed onto the 14 teams, uneven as real teams are); then, at every
submission (every N-th with ``--every``), the ETA the controller would have shown is predicted from only
what was known then (:mod:`kuota.simulator.eta_replay`: the engine replayed forward with the last 24 hours'
submissions expected again, every runtime from the history of finished jobs of the same LocalQueue and shape,
since trace jobs declare none) and compared with the admission the replay made. Beside it the naive
baseline: position in the LocalQueue x the queue's mean runtime. Errors are absolute, in hours, over the jobs
both predicted and the replay admitted (an ETA "beyond" the 30-day horizon was off by how much sooner the
admission came); "within" is the share within 25% of the actual wait or 1 h, whichever is larger. Target:
median error at most half the baseline's. A full run takes about 4 h of CPU (Philly's long queues cost 0.9 s
a prediction): ``--every 10`` gives the figures in a fraction of it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workloads.philly_teams import philly_teams_config
from kuota.simulator.config_reading import config_from_dicts, priority_values
from kuota.simulator.eta_replay import HOUR, Prediction, predictions, within
from kuota.simulator.replay import replay
from kuota.simulator.runtimes import gpus_of
from kuota.simulator.summary import percentile
from kuota.simulator.traces import read_trace, trace_workloads
from kuota.simulator.workload_reading import convert_lines

TRACES = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces"
DEFAULT_TRACES = (TRACES / "philly-15k.csv", TRACES / "helios-15k.csv")
SIZE_CLASSES = (("1 GPU", 1, 1), ("2-4 GPUs", 2, 4), ("5-8 GPUs", 5, 8), ("9+ GPUs", 9, 1 << 30))


def _row(label: str, chosen: Sequence[Prediction]) -> str:
    both = [p for p in chosen if p.error is not None and p.baseline_wait is not None and p.actual_wait is not None]
    if not both:
        return f"{label:10} {len(chosen):6d} {'-':>7}"
    eta_errors = [p.error or 0.0 for p in both]
    base_errors = [abs((p.baseline_wait or 0.0) - (p.actual_wait or 0.0)) for p in both]
    eta_within = sum(within(e, p.actual_wait or 0.0) for e, p in zip(eta_errors, both, strict=True)) / len(both)
    base_within = sum(within(e, p.actual_wait or 0.0) for e, p in zip(base_errors, both, strict=True)) / len(both)
    beyond = sum(1 for p in both if p.eta is not None and p.eta.beyond_horizon) / len(both)
    eta_median, base_median = percentile(eta_errors, 0.5), percentile(base_errors, 0.5)
    ratio = f"{eta_median / base_median:5.2f}" if base_median > 0 else "    -"
    return (
        f"{label:10} {len(chosen):6d} {len(both) / len(chosen):6.0%} {beyond:6.0%} "
        f"{eta_median / HOUR:8.2f} {percentile(eta_errors, 0.9) / HOUR:8.2f} {eta_within:7.0%} | "
        f"{base_median / HOUR:8.2f} {percentile(base_errors, 0.9) / HOUR:8.2f} {base_within:7.0%} | {ratio}"
    )


def measure(trace: Path, every: int, gpus_per_team: int) -> list[str]:
    config = philly_teams_config(gpus_per_team=gpus_per_team)
    objects = config_from_dicts(config.objects)
    lines = list(trace_workloads(read_trace(trace), config.queues))
    arrivals = list(convert_lines(((line["name"], line) for line in lines), priority_values(objects)))
    result = replay(objects, arrivals)
    started = time.process_time()
    made = list(predictions(objects, arrivals, result, every))
    seconds = time.process_time() - started
    waits = [p.actual_wait for p in made if p.actual_wait is not None]
    span = max(arrival.submit_at for arrival in arrivals) - min(arrival.submit_at for arrival in arrivals)
    demand = sum(gpus_of(arrival.workload) * arrival.duration for arrival in arrivals) / max(1.0, span)
    out = [
        f"{trace.name}: {len(arrivals)} GPU jobs on 14 teams x {gpus_per_team} GPUs (users hashed onto teams), "
        f"offered load {demand / (14 * gpus_per_team):.0%} of the GPUs over the trace's {span / HOUR:.0f} h; "
        f"{len(made)} predictions in {seconds:.0f} s CPU ({seconds / max(1, len(made)) * 1000:.1f} ms each); "
        f"actual wait median {percentile(waits, 0.5) / HOUR:.2f} h, p90 {percentile(waits, 0.9) / HOUR:.2f} h",
        f"{'size':10} {'jobs':>6} {'shown':>6} {'beyond':>6} {'eta p50':>8} {'eta p90':>8} {'within':>7} | "
        f"{'base p50':>8} {'base p90':>8} {'within':>7} | p50 ratio",
        _row("all", made),
    ]
    for label, low, high in SIZE_CLASSES:
        out.append(_row(label, [p for p in made if low <= p.gpus <= high]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trace", type=Path, action="append", help="a trace CSV (default: Philly and Helios)")
    parser.add_argument("--every", type=int, default=1, help="predict at every N-th submission (default 1: all)")
    parser.add_argument(
        "--gpus-per-team",
        type=int,
        action="append",
        help="GPUs per team, one per --trace in order (default: 48 for Philly, 16 for Helios, whose jobs "
        "are shorter: at 48 nearly every job starts at once and there is nothing to predict)",
    )
    args = parser.parse_args()
    traces = args.trace or list(DEFAULT_TRACES)
    sizes = args.gpus_per_team or [16 if "helios" in trace.name else 48 for trace in traces]
    if len(sizes) != len(traces):
        parser.error("give one --gpus-per-team per --trace")
    for trace, gpus in zip(traces, sizes, strict=True):
        print("\n".join(measure(trace, max(1, args.every), gpus)), flush=True)
        print()
    print("(errors in hours, absolute, over jobs both predicted and admitted; 'shown': share with an ETA and a")
    print(" baseline; 'beyond': of those, predicted beyond the 30-day horizon; 'within': within 25% of the actual")
    print(" wait or 1 h; ratio: ETA median error / baseline's)")


if __name__ == "__main__":
    main()
