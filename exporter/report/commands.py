"""The ``kuota report`` subcommand (argparse only at import time)."""

from kuota.pending import PendingSubcommand

REPORT = PendingSubcommand(
    name="report",
    summary="Write the weekly buy-versus-tune report from Prometheus and the job history.",
    example="kuota report --prometheus http://prometheus:9090 --window 7d --out report/",
    arrives_with="the report issue (#6)",
)
