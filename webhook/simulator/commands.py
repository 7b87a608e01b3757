"""The ``kuota simulate`` subcommand (argparse only at import time)."""

from kuota.pending import PendingSubcommand

SIMULATE = PendingSubcommand(
    name="simulate",
    summary="Replay workloads through the quota engine and report who ran where and who waited.",
    example="kuota simulate --config examples/seed --workloads examples/seed/workloads.jsonl",
    arrives_with="the quota-engine issue (#3)",
)
