"""The ``kuota manager`` subcommand (argparse only at import time)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from kuota.durations import positive_seconds

T = TypeVar("T")


class _Manager:
    name = "manager"
    summary = "Run the admission webhook and the quota controller against a cluster."
    example = "kuota manager --kubeconfig ~/.kube/config --config manager.yaml --webhook-url https://127.0.0.1:9443"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--kubeconfig",
            nargs="?",
            const="",
            metavar="PATH",
            help="kubeconfig to use (default: in-cluster service account); without PATH, the files KUBECONFIG "
            "lists, else ~/.kube/config",
        )
        parser.add_argument(
            "--context", metavar="NAME", help="use this kubeconfig context, not the current one (implies --kubeconfig)"
        )
        parser.add_argument("--config", type=Path, help="a config.kueue.x-k8s.io/v1beta2 Configuration YAML file")
        parser.add_argument(
            "--namespace",
            default=os.environ.get("POD_NAMESPACE", "kuota-system"),
            help="kuota's own namespace: the Lease, the certificate Secret (default: $POD_NAMESPACE or kuota-system)",
        )
        parser.add_argument(
            "--identity",
            default=os.environ.get("POD_NAME", socket.gethostname()),
            help="this replica's name in the leader Lease (default: $POD_NAME or the host name)",
        )
        parser.add_argument("--webhook-listen", default=":9443", help="HOST:PORT of the TLS webhook (default :9443)")
        parser.add_argument("--metrics-listen", default=":8080", help="HOST:PORT of /metrics (default :8080)")
        parser.add_argument(
            "--metrics-secure",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="serve /metrics over HTTPS to callers whose token may get /metrics (default on; off: plain HTTP)",
        )
        parser.add_argument(
            "--health-listen", default=":8081", help="HOST:PORT of plain-HTTP /healthz and /readyz (default :8081)"
        )
        parser.add_argument(
            "--leader-elect",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="admit only while holding the Lease (default on; every replica serves the webhook)",
        )
        parser.add_argument("--lease-name", default="kuota-manager", help="the leader Lease's name")
        parser.add_argument(
            "--lease-duration", type=positive_seconds, default=15.0, help="Lease duration: a duration (15s) or seconds"
        )
        parser.add_argument("--service-name", default="kuota-webhook", help="the webhook Service (certificate SANs)")
        parser.add_argument("--cert-secret", default="kuota-webhook-tls", help="Secret holding the self-managed CA")
        parser.add_argument(
            "--cert-dir", type=Path, help="use tls.crt/tls.key written here (cert-manager) and generate nothing"
        )
        parser.add_argument("--mutating-webhook-config", default="kuota-mutating-webhook")
        parser.add_argument("--validating-webhook-config", default="kuota-validating-webhook")
        parser.add_argument(
            "--webhook-url",
            help="out of cluster: register the webhooks by this URL (e.g. https://127.0.0.1:9443) instead of a Service",
        )
        parser.add_argument(
            "--webhook-ip", action="append", default=[], help="an IP the serving certificate must carry (repeatable)"
        )
        parser.add_argument(
            "--visibility-api-service",
            action="append",
            default=[],
            help="an APIService of the visibility API whose caBundle the manager keeps set (repeatable)",
        )
        parser.add_argument(
            "--visibility",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="serve Kueue's visibility API (pending workloads) to the API server's front proxy (default on)",
        )
        parser.add_argument(
            "--visibility-serving-label",
            action="store_true",
            help="in a cluster: label this Pod (--identity names it) while it answers the visibility API, for "
            "the Service that routes that API to the leader only",
        )
        parser.add_argument("--failure-policy", choices=["Fail", "Ignore"], default="Fail")
        parser.add_argument(
            "--job-namespace-selector",
            help="with --webhook-url: a JSON label selector narrowing which namespaces' Jobs the webhook sees",
        )
        parser.add_argument(
            "--workload-retention",
            default="192h",
            help="keep finished Workloads this long for the report's history, e.g. 192h or 8d (default 192h)",
        )
        parser.add_argument(
            "--eta-interval",
            default="5s",
            help="recompute pending Workloads' admission ETAs this often, e.g. 5s, or less often where a replay "
            "takes more than 5%% of one core; 0 turns ETAs off (default 5s)",
        )
        parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])

    def run(self, args: argparse.Namespace) -> int:
        # uvloop: libuv's event loop and TLS, which serve the manager's traffic (watches, writes, reviews) in
        # about 7% less CPU than asyncio's (benchmarks/kueue_side_by_side.py).
        import uvloop

        from kuota.addresses import parse_host_port
        from kuota.durations import parse_duration
        from kuota.engine import EngineError
        from kuota.webhook.manager import ManagerError, ManagerOptions, run_manager

        logging.basicConfig(
            level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
        )
        try:
            webhook_host, webhook_port = _flag("--webhook-listen", parse_host_port, args.webhook_listen)
            metrics_host, metrics_port = _flag("--metrics-listen", parse_host_port, args.metrics_listen)
            health_host, health_port = _flag("--health-listen", parse_host_port, args.health_listen)
            options = ManagerOptions(
                kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None,
                context=args.context,
                in_cluster=args.kubeconfig is None and args.context is None,
                config=args.config,
                namespace=args.namespace,
                identity=args.identity,
                webhook_host=webhook_host,
                webhook_port=webhook_port,
                metrics_host=metrics_host,
                metrics_port=metrics_port,
                health_host=health_host,
                health_port=health_port,
                leader_elect=args.leader_elect,
                lease_name=args.lease_name,
                lease_duration=args.lease_duration,
                service_name=args.service_name,
                cert_secret=args.cert_secret,
                cert_dir=args.cert_dir,
                mutating_webhook_config=args.mutating_webhook_config,
                validating_webhook_config=args.validating_webhook_config,
                webhook_url=args.webhook_url,
                webhook_ips=tuple(args.webhook_ip),
                failure_policy=args.failure_policy,
                job_namespace_selector=json.loads(args.job_namespace_selector) if args.job_namespace_selector else None,
                workload_retention=_flag("--workload-retention", parse_duration, args.workload_retention),
                eta_interval=_flag("--eta-interval", parse_duration, args.eta_interval),
                metrics_secure=args.metrics_secure,
                visibility=args.visibility,
                visibility_api_services=tuple(args.visibility_api_service),
                visibility_serving_label=args.visibility_serving_label,
            )
            uvloop.run(run_manager(options))
        except (ManagerError, EngineError, json.JSONDecodeError) as error:
            print(f"kuota manager: {error}", file=sys.stderr)
            return 2
        return 0


def _flag(flag: str, parse: Callable[[str], T], value: str) -> T:
    """``parse(value)``; its ValueError becomes a ManagerError naming the flag."""
    from kuota.webhook.manager import ManagerError

    try:
        return parse(value)
    except ValueError as error:
        raise ManagerError(f"{flag} {error}") from error


MANAGER = _Manager()
