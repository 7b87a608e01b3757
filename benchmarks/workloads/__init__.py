"""Workload generators for the benchmarks and the tests: they ship with neither ``kuota`` nor its image.

Each produces the simulate contract's JSON Lines records (:class:`~kuota.simulator.lines.WorkloadLine`,
``docs/simulate.md``) and, for generated setups, the config objects as plain ``kueue.x-k8s.io/v1beta2`` dicts
(:class:`~benchmarks.workloads.manifests.QueueingConfig`). Pure: no clock, no globals, no I/O; random choices
come from a ``seed`` argument, so the same arguments always give the same workloads, in non-decreasing
``submitAt`` order, names unique per namespace. Bad parameters raise
:class:`kuota.simulator.errors.SourceSpecError`.

- :mod:`~benchmarks.workloads.philly_teams`: the 14-team config for the Philly benchmark.
- :mod:`~benchmarks.workloads.kueue_harness`: Kueue's performance-harness workload (config, time-ordered
  arrivals with their class), also for a live run (:func:`~benchmarks.workloads.manifests.workload_manifest`).
- :mod:`~benchmarks.workloads.synthetic`: seeded, lazy streams for the 10k/100k/1M scale benchmark.
- :mod:`~benchmarks.workloads.seed_week`: the guide's week in ``examples/seed/workloads.jsonl``.

The trace converter, which ``kuota simulate`` reads CSV traces with, is :mod:`kuota.simulator.traces`.
"""
