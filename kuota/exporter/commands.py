"""The ``kuota exporter`` subcommand (argparse only at import time).

Every flag can also come from the environment (``KUOTA_EXPORTER_<FLAG>``, e.g.
``KUOTA_EXPORTER_PROC_ROOT``; the node name also from ``NODE_NAME``, as the downward API usually sets it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kuota.durations import positive_seconds


def _env(flag: str, default: str | None = None) -> str | None:
    return os.environ.get("KUOTA_EXPORTER_" + flag.upper().replace("-", "_"), default)


class ExporterCommand:
    name = "exporter"
    summary = "Export per-GPU, per-pod and per-namespace GPU utilization from NVML for Prometheus."
    example = "kuota exporter --node-name $NODE_NAME --listen :9400 --proc-root /host/proc"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        node = _env("node-name", os.environ.get("NODE_NAME"))
        parser.add_argument("--node-name", default=node, required=node is None, help="this node's name (env NODE_NAME)")
        parser.add_argument("--listen", default=_env("listen", ":9400"), help="HOST:PORT to serve on (:9400)")
        parser.add_argument(
            "--proc-root",
            type=Path,
            default=Path(_env("proc-root", "/proc") or "/proc"),
            help="the host's /proc (NVML reports host PIDs; mount it or run with hostPID)",
        )
        parser.add_argument(
            "--pod-resources-socket",
            type=Path,
            default=Path(_env("pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock") or ""),
            help="the kubelet PodResources socket",
        )
        kubeconfig = _env("kubeconfig")
        parser.add_argument(
            "--kubeconfig",
            type=Path,
            default=Path(kubeconfig) if kubeconfig else None,
            help="kubeconfig for the pod watch (default: in-cluster service account)",
        )
        parser.add_argument(
            "--no-pod-watch",
            action="store_true",
            default=_env("no-pod-watch", "") not in ("", "0", "false"),
            help="do not watch pods (pod names then stay unresolved; for nodes without API access)",
        )
        for flag, default, text in (
            ("process-interval", "1", "seconds between per-process utilization samples"),
            ("device-interval", "5", "seconds between device readings"),
            ("pod-resources-interval", "10", "seconds between PodResources refreshes"),
            ("utilization-window", "30", "seconds over which per-pod SM utilization is averaged"),
            ("nvml-retry-interval", "10", "seconds between attempts to open an unavailable NVML"),
        ):
            parser.add_argument(
                f"--{flag}", type=positive_seconds, default=positive_seconds(_env(flag, default) or default), help=text
            )
        parser.add_argument(
            "--hostname-label",
            default=_env("hostname-label", "Hostname"),
            help="name of the node label on every series: Hostname (dcgm-exporter's) or hostname (its next release's)",
        )
        parser.add_argument("--log-level", default=_env("log-level", "INFO"), help="DEBUG, INFO, WARNING, ERROR")

    def run(self, args: argparse.Namespace) -> int:
        import asyncio
        import logging

        from kuota.exporter.errors import ExporterConfigurationError
        from kuota.exporter.service import ExporterService, ServiceSettings

        logging.basicConfig(
            level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr
        )
        try:
            settings = ServiceSettings.from_args(args)
        except ExporterConfigurationError as problem:
            print(f"kuota exporter: {problem}", file=sys.stderr)
            return 2
        problems: list[BaseException] = []
        try:
            asyncio.run(ExporterService(settings).run())
        except* ExporterConfigurationError as group:  # e.g. no kubeconfig outside a pod: say so, exit, no traceback
            problems.extend(group.exceptions)
        except* KeyboardInterrupt:
            pass
        for found in problems:
            print(f"kuota exporter: {found}", file=sys.stderr)
        return 2 if problems else 0


EXPORTER = ExporterCommand()
