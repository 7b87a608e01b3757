"""Workload sources for ``kuota simulate`` and the benchmarks: traces, generators and the seed week.

Everything here produces the simulate contract's JSON Lines workload records
(:class:`~webhook.workloads.lines.WorkloadLine`, exactly DESIGN.md's keys) and, for generated setups, the
config objects as plain ``kueue.x-k8s.io/v1beta2`` dicts (:class:`~webhook.workloads.manifests.QueueingConfig`).
Pure: no clock, no globals, no I/O but reading a trace file the caller names; random choices come from a
``seed`` argument, so the same arguments always give the same workloads.

- :mod:`~webhook.workloads.traces`: Philly/Helios trace CSV -> workloads, users hashed onto LocalQueues
  (:func:`convert_trace`; lazily :func:`read_trace` + :func:`trace_workloads`).
- :mod:`~webhook.workloads.queue_mapping`: the stable user -> LocalQueue hash (:func:`queue_for_user`).
- :mod:`~webhook.workloads.philly_teams`: the 14-team config for the Philly benchmark.
- :mod:`~webhook.workloads.kueue_harness`: Kueue's performance-harness workload (config, time-ordered
  arrivals with their class), also for a live run (:func:`~webhook.workloads.manifests.workload_manifest`).
- :mod:`~webhook.workloads.synthetic`: seeded, lazy streams for the 10k/100k/1M scale benchmark.
- :mod:`~webhook.workloads.seed_week`: the guide's week in ``examples/seed/workloads.jsonl``.

Every generator yields workloads in non-decreasing ``submitAt`` order, names unique per namespace.
Errors: :mod:`~webhook.workloads.errors` (one tree, rooted at :class:`WorkloadSourceError`).
"""

from webhook.workloads.errors import SourceSpecError, TraceFormatError, WorkloadSourceError
from webhook.workloads.kueue_harness import (
    HarnessArrival,
    HarnessSpec,
    WorkloadClass,
    harness_arrivals,
    harness_config,
    harness_workloads,
)
from webhook.workloads.lines import PodSetLine, Toleration, WorkloadLine, to_json_line, to_jsonl
from webhook.workloads.manifests import Manifest, QueueingConfig, render_yaml, workload_manifest
from webhook.workloads.philly_teams import philly_teams_config
from webhook.workloads.queue_mapping import QueueTarget, queue_for_user
from webhook.workloads.seed_week import render_week_jsonl, week_workloads
from webhook.workloads.synthetic import SCALE_SIZES, SyntheticSpec, synthetic_config, synthetic_workloads
from webhook.workloads.traces import (
    ConvertedTrace,
    CpuOnlyRows,
    TraceOptions,
    TraceRow,
    convert_trace,
    read_trace,
    trace_workloads,
)

__all__ = [
    "SCALE_SIZES",
    "ConvertedTrace",
    "CpuOnlyRows",
    "HarnessArrival",
    "HarnessSpec",
    "Manifest",
    "PodSetLine",
    "QueueTarget",
    "QueueingConfig",
    "SourceSpecError",
    "SyntheticSpec",
    "Toleration",
    "TraceFormatError",
    "TraceOptions",
    "TraceRow",
    "WorkloadClass",
    "WorkloadLine",
    "WorkloadSourceError",
    "convert_trace",
    "harness_arrivals",
    "harness_config",
    "harness_workloads",
    "philly_teams_config",
    "queue_for_user",
    "read_trace",
    "render_week_jsonl",
    "render_yaml",
    "synthetic_config",
    "synthetic_workloads",
    "to_json_line",
    "to_jsonl",
    "trace_workloads",
    "week_workloads",
    "workload_manifest",
]
