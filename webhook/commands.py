"""The ``kuota manager`` subcommand (argparse only at import time)."""

from kuota.pending import PendingSubcommand

MANAGER = PendingSubcommand(
    name="manager",
    summary="Run the admission webhook and the quota controller against a cluster.",
    example="kuota manager --kubeconfig ~/.kube/config --config manager.yaml",
    arrives_with="the admission-plane issue (#4)",
)
