"""The ``kuota certs`` subcommand (argparse only at import time)."""

from kuota.pending import PendingSubcommand

CERTS = PendingSubcommand(
    name="certs",
    summary="Print or write a CA, a webhook serving certificate and the caBundle for manual setups.",
    example="kuota certs --service kuota-webhook --namespace kuota-system --out ./tls",
    arrives_with="the admission-plane issue (#4)",
)
