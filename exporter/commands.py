"""The ``kuota exporter`` subcommand (argparse only at import time)."""

from kuota.pending import PendingSubcommand

EXPORTER = PendingSubcommand(
    name="exporter",
    summary="Export per-GPU, per-pod and per-namespace GPU utilization from NVML for Prometheus.",
    example="kuota exporter --node-name $NODE_NAME --listen :9400",
    arrives_with="the node-exporter issue (#5)",
)
