"""Wires the exporter together: the sampler, the pod watch and the HTTP server under one TaskGroup."""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from kuota.addresses import parse_host_port
from kuota.exporter.errors import ExporterConfigurationError
from kuota.exporter.exposition import HOSTNAME_LABELS
from kuota.exporter.http_server import build_app
from kuota.exporter.pod_watch import PodWatch
from kuota.exporter.sampling import NodeSampler, SamplerSettings
from kuota.exporter.snapshot import PODS
from kuota.http_serving import serve

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceSettings:
    sampler: SamplerSettings
    host: str
    port: int
    kubeconfig: Path | None
    watch_pods: bool
    hostname_label: str = HOSTNAME_LABELS[0]

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ServiceSettings:
        try:
            host, port = parse_host_port(args.listen)
        except ValueError as problem:
            raise ExporterConfigurationError(f"--listen {problem}") from problem
        if not args.node_name:
            raise ExporterConfigurationError("--node-name is empty: pass the node's name (env NODE_NAME)")
        if args.hostname_label not in HOSTNAME_LABELS:
            raise ExporterConfigurationError(
                f"--hostname-label {args.hostname_label!r} is not one of {', '.join(HOSTNAME_LABELS)}: pass Hostname "
                "(dcgm-exporter's spelling so far) or hostname (its next release's)"
            )
        return cls(
            sampler=SamplerSettings(
                node_name=args.node_name,
                proc_root=args.proc_root,
                pod_resources_socket=args.pod_resources_socket,
                process_interval=args.process_interval,
                device_interval=args.device_interval,
                pod_resources_interval=args.pod_resources_interval,
                utilization_window=args.utilization_window,
                nvml_retry_interval=args.nvml_retry_interval,
            ),
            host=host,
            port=port,
            kubeconfig=args.kubeconfig,
            watch_pods=not args.no_pod_watch,
            hostname_label=args.hostname_label,
        )


class ExporterService:
    def __init__(self, settings: ServiceSettings, sampler: NodeSampler | None = None) -> None:
        self.settings = settings
        self.sampler = sampler or NodeSampler(settings.sampler)

    async def run(self) -> None:
        runner = (
            await serve(
                build_app(lambda: self.sampler.snapshot, self.settings.hostname_label),
                self.settings.host,
                self.settings.port,
            )
        ).runner
        try:
            log.info(
                "kuota exporter for node %s serving on %s:%d",
                self.settings.sampler.node_name,
                self.settings.host,
                self.settings.port,
            )
            async with asyncio.TaskGroup() as group:
                group.create_task(self.sampler.run(), name="sampler")
                if self.settings.watch_pods:
                    watch = PodWatch(
                        self.settings.sampler.node_name,
                        self.settings.kubeconfig,
                        on_change=self.sampler.set_pods,
                        on_error=lambda _error: self.sampler.count_error(PODS),
                    )
                    group.create_task(watch.run(), name="pod-watch")
        finally:
            await runner.cleanup()
