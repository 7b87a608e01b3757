"""The engine's decisions on five fixed streams, each as one SHA-256: a refactor must leave every digest as it was.

Run: ``.venv/bin/python benchmarks/decision_digest.py [--trace PATH]``. The streams are the Philly 15k trace on
the 14-team config (as shipped, one cohort with borrowing and preemption, and with each team isolated), the
trace's first 1,000 jobs on that config with fair sharing on (the guide's Configuration, both preemption
strategies: fair sharing costs far more per decision, hence the shorter stream), Kueue's performance harness,
and the synthetic 100k stream of ``benchmarks/engine_scale.py``. Each digest is
over ``kuota simulate``'s output document (every workload's admissions, with flavors and borrowing, its
evictions with reason and preemptor, its finish time; every ClusterQueue's totals), serialized with sorted
keys, so any change in any decision changes it. Prints one line a stream: its name, workloads, decisions and
digest, and the CPU seconds it took.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workloads.kueue_harness import HarnessSpec, harness_config, harness_workloads
from benchmarks.workloads.philly_teams import isolated_teams, philly_teams_config
from benchmarks.workloads.synthetic import SyntheticSpec, synthetic_config, synthetic_workloads
from kuota.simulator.config_reading import config_from_dicts, priority_values
from kuota.simulator.replay import replay
from kuota.simulator.summary import output_document
from kuota.simulator.traces import read_trace, trace_workloads
from kuota.simulator.workload_reading import convert_lines

FAIR_SHARING = {  # the guide's configuration-fairsharing.yaml, as the manager's --config would read it
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]},
}
DEFAULT_TRACE = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces" / "philly-15k.csv"


def _digest(name: str, documents: Iterable[Mapping[str, Any]], lines: Iterable[Mapping[str, Any]]) -> None:
    objects = config_from_dicts(documents)
    stream = list(convert_lines(((line["name"], line) for line in lines), priority_values(objects)))
    started = time.process_time()
    result = replay(objects, stream)
    seconds = time.process_time() - started
    text = json.dumps(output_document(result), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    print(f"{name:28} {len(stream):>8,} workloads {result.decisions:>8,} decisions  {digest}  ({seconds:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    args = parser.parse_args()
    philly = philly_teams_config()
    philly_lines = list(trace_workloads(read_trace(args.trace), philly.queues))
    _digest("philly, cohort", philly.objects, philly_lines)
    _digest("philly, isolated teams", isolated_teams(philly.objects), philly_lines)
    _digest("philly 1k, fair sharing", [*philly.objects, FAIR_SHARING], philly_lines[:1000])
    harness = HarnessSpec()
    _digest("kueue harness", harness_config(harness).objects, harness_workloads(harness))
    synthetic = SyntheticSpec(workloads=100_000)
    _digest("synthetic 100k", synthetic_config(synthetic).objects, synthetic_workloads(synthetic))


if __name__ == "__main__":
    main()
