"""The ``kuota report`` subcommand (argparse only at import time; the report's modules load inside run)."""

from __future__ import annotations

import argparse
import sys


class _ReportCommand:
    name = "report"
    summary = "Write the weekly buy-versus-tune report from Prometheus and the job history."
    example = (
        "kuota report --prometheus http://prometheus:9090 --kubeconfig ~/.kube/config --window 7d "
        "--price p5.48xlarge --out report/"
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        source = parser.add_argument_group("sources")
        source.add_argument(
            "--prometheus",
            required=True,
            metavar="URL",
            help="Prometheus base URL (the one scraping the exporters and the manager)",
        )
        cluster = source.add_mutually_exclusive_group()
        cluster.add_argument(
            "--kubeconfig",
            nargs="?",
            const="",
            metavar="PATH",
            help="read the retained Workloads and the current queue objects from this kubeconfig's cluster "
            "(its current context; token, client certificate or exec plugin such as aws eks get-token, with "
            "its proxy-url); without PATH, the files KUBECONFIG lists, merged as kubectl merges them, else "
            "~/.kube/config",
        )
        source.add_argument(
            "--context",
            metavar="NAME",
            help="use this kubeconfig context instead of the current one (implies --kubeconfig)",
        )
        cluster.add_argument(
            "--in-cluster",
            action="store_true",
            help="as --kubeconfig, with the pod's service account (the chart's CronJob)",
        )
        source.add_argument(
            "--config",
            metavar="PATH",
            help="queue config as for 'kuota simulate' (YAML file or folder); its LocalQueues "
            "map namespaces to ClusterQueues, and it is what the what-if replays "
            "(default with --kubeconfig or --in-cluster: the cluster's queue objects)",
        )
        source.add_argument(
            "--history", metavar="FILE", help="the window's jobs as JSON Lines in simulate's format, for the what-if"
        )
        source.add_argument(
            "--workloads",
            metavar="FILE",
            help="retained Workloads, as 'kubectl get workloads.kueue.x-k8s.io -A -o json' "
            "writes them (instead of --kubeconfig or --in-cluster): GPU-hours of failed "
            "or cancelled jobs, and the what-if's history when --history is not given",
        )
        source.add_argument(
            "--more-gpus",
            type=int,
            default=8,
            metavar="N",
            help="GPUs added in the what-if's buy scenario (default 8, one node)",
        )
        source.add_argument(
            "--calibration-wait-factor",
            type=float,
            default=2.0,
            metavar="FACTOR",
            help="the what-if moves no verdict of a team (or the cluster) whose replayed p95 wait is off the "
            "measured one by more than this factor (default 2; waits both under a minute agree)",
        )
        source.add_argument(
            "--calibration-allocation-points",
            type=float,
            default=10.0,
            metavar="POINTS",
            help="... or whose replayed allocation (GPU-hours over nominal quota) is off the measured one by more "
            "than this many percentage points (default 10)",
        )
        source.add_argument(
            "--timeout",
            type=float,
            default=120.0,
            metavar="SECONDS",
            help="timeout of each Prometheus query (default 120)",
        )
        access = parser.add_argument_group(
            "Prometheus access", "credentials, headers and TLS for --prometheus (a managed Prometheus, Thanos, Mimir)"
        )
        authorization = access.add_mutually_exclusive_group()
        authorization.add_argument(
            "--prometheus-bearer-token-file",
            metavar="FILE",
            help="send the bearer token this file holds; read again whenever the file changes (a rotated token)",
        )
        authorization.add_argument(
            "--prometheus-bearer-token",
            metavar="TOKEN",
            help="send this bearer token; every user of the machine can read it (ps, shell history): "
            "prefer --prometheus-bearer-token-file",
        )
        authorization.add_argument(
            "--prometheus-basic-auth", metavar="USER", help="basic auth as USER, with --prometheus-password-file"
        )
        access.add_argument(
            "--prometheus-password-file",
            metavar="FILE",
            help="the basic-auth password, read from this file (again whenever it changes)",
        )
        access.add_argument(
            "--prometheus-header",
            action="append",
            default=[],
            metavar="'NAME: VALUE'",
            help="send this header too, e.g. 'X-Scope-OrgID: team-a' (a Mimir or Cortex tenant); repeatable",
        )
        access.add_argument(
            "--prometheus-ca-file", metavar="FILE", help="PEM CA that signed Prometheus' certificate (https)"
        )
        access.add_argument("--prometheus-cert-file", metavar="FILE", help="PEM client certificate, with a key file")
        access.add_argument(
            "--prometheus-key-file", metavar="FILE", help="unencrypted PEM key of --prometheus-cert-file"
        )
        access.add_argument(
            "--prometheus-server-name",
            metavar="NAME",
            help="the name in Prometheus' certificate, when it is not the URL's host",
        )
        access.add_argument(
            "--prometheus-insecure-skip-verify",
            action="store_true",
            help="do not verify Prometheus' certificate (tests only: anyone on the path can read the credentials)",
        )
        window = parser.add_argument_group("window")
        window.add_argument(
            "--window", default="7d", help="length, a whole number of hours or under an hour (default 7d)"
        )
        window.add_argument("--end", help="end of the window, RFC 3339 or Unix seconds (default now)")
        window.add_argument(
            "--resolution", default="1m", help="step of time-weighted sums; at least the scrape interval (default 1m)"
        )
        window.add_argument("--timezone", default="UTC", help="for nights and weekends (default UTC)")
        window.add_argument("--work-hours", default="9-19", help="Mon-Fri working hours (default 9-19)")
        rules = parser.add_argument_group("thresholds and prices")
        rules.add_argument(
            "--price",
            action="append",
            metavar="[FLAVOR=]PRICE",
            help="dollars per GPU-hour, or an instance preset (p5.48xlarge: 8xH100, $55.04/h; p4d.24xlarge: "
            "8xA100, $21.96/h; docs/report.md); repeat as FLAVOR=PRICE to price a ResourceFlavor or a "
            "GPU model (modelName) apart, and to name a smaller model's price for right-sizing "
            "('NVIDIA L4=0.80'); the bare one is the default for the others (default p5.48xlarge); "
            "FLAVOR-spot=PRICE is the spot price of FLAVOR (or of a GPU model), below its on-demand price",
        )
        rules.add_argument(
            "--commitment",
            action="append",
            metavar="[MODEL=]PRICE|DISCOUNT%",
            help="what a reserved GPU-hour costs, in dollars or as a discount off on demand (e.g. 35%%), to price "
            "a commitment sized to the measured floor; repeat as MODEL=... per GPU model or flavor (the bare "
            "one is the default)",
        )
        rules.add_argument(
            "--previous",
            metavar="PATH",
            help="an earlier report.json: adds a week-over-week comparison per team",
        )
        rules.add_argument(
            "--low-utilization",
            type=float,
            default=50.0,
            metavar="PERCENT",
            help="average utilization under this is low (default 50)",
        )
        rules.add_argument(
            "--long-wait", default="30m", help="p95 admission wait over this is a long queue (default 30m)"
        )
        rules.add_argument(
            "--idle-percent", type=float, default=5.0, help="an hour under this mean utilization is idle (default 5)"
        )
        rules.add_argument(
            "--idle-holder-hours",
            type=float,
            default=2.0,
            help="list pods with at least this many idle GPU-hours (default 2)",
        )
        rules.add_argument(
            "--right-size-percent",
            type=float,
            default=30.0,
            metavar="PERCENT",
            help="a pod whose p95 SM use is at most this may move to a smaller GPU model (default 30)",
        )
        rules.add_argument(
            "--idle-elsewhere-gpus",
            type=int,
            default=8,
            help="'idle elsewhere' means at least this many GPUs of other queues' quota unused (default 8, one node)",
        )
        parser.add_argument(
            "--out",
            default="kuota-report",
            metavar="DIR",
            help="folder for report.md, report.html, report.json, report.csv and the trend charts' SVG files "
            "(default ./kuota-report)",
        )

    def run(self, args: argparse.Namespace) -> int:
        import asyncio
        from datetime import UTC, datetime
        from pathlib import Path

        from kuota.report.errors import ReportError, ReportInputError
        from kuota.report.figures.calibration import Tolerance
        from kuota.report.figures.commitments import parse_commitments
        from kuota.report.figures.prices import parse_prices
        from kuota.report.figures.verdicts import Thresholds
        from kuota.report.figures.window import MAX_WINDOW_S, Window, WorkHours, parse_end, whole_seconds
        from kuota.report.pipeline import ReportRequest, measure, write
        from kuota.report.sources.api_listing import api_source
        from kuota.report.sources.prometheus_access import prometheus_access
        from kuota.report.sources.prometheus_api import prometheus_url
        from kuota.report.sources.queue_config import load_objects

        def optional_path(text: str | None) -> Path | None:
            return Path(text) if text is not None else None

        def progress(line: str) -> None:
            print(f"kuota report: {line}", file=sys.stderr, flush=True)

        def bounded(value: float, flag: str, lowest: float, highest: float, *, above: bool = False) -> float:
            # argparse's float() takes "nan" and "inf"; no threshold or timeout is either
            if not (lowest < value if above else lowest <= value) or not value <= highest:
                shown = f"above {lowest:g}" if above else f"from {lowest:g}"
                raise ReportInputError(f"{flag} {value:g} must be a number {shown} to {highest:g}")
            return value

        try:
            prometheus = prometheus_url(args.prometheus)
            access = prometheus_access(
                prometheus,
                bearer_token=args.prometheus_bearer_token,
                bearer_token_file=optional_path(args.prometheus_bearer_token_file),
                basic_auth=args.prometheus_basic_auth,
                password_file=optional_path(args.prometheus_password_file),
                headers=args.prometheus_header,
                ca_file=optional_path(args.prometheus_ca_file),
                cert_file=optional_path(args.prometheus_cert_file),
                key_file=optional_path(args.prometheus_key_file),
                insecure_skip_verify=args.prometheus_insecure_skip_verify,
                server_name=args.prometheus_server_name,
            )
            resolution = whole_seconds(args.resolution, "--resolution")
            window = Window.build(
                whole_seconds(args.window, "--window"),
                parse_end(args.end, resolution, datetime.now(UTC)),
                resolution,
                WorkHours.parse(args.work_hours, args.timezone),
            )
            if args.idle_elsewhere_gpus < 1:
                raise ReportInputError("--idle-elsewhere-gpus must be at least 1")
            thresholds = Thresholds(
                low_utilization_percent=bounded(args.low_utilization, "--low-utilization", 0, 100),
                long_wait_s=whole_seconds(args.long_wait, "--long-wait"),
                idle_percent=bounded(args.idle_percent, "--idle-percent", 0, 100),
                idle_holder_hours=bounded(args.idle_holder_hours, "--idle-holder-hours", 0, MAX_WINDOW_S / 3600),
                idle_elsewhere_gpus=args.idle_elsewhere_gpus,
                right_size_percent=bounded(args.right_size_percent, "--right-size-percent", 0, 100),
            )
            timeout = bounded(args.timeout, "--timeout", 0, 86400, above=True)
            if args.context is not None and args.in_cluster:
                raise ReportInputError(
                    "--context picks a kubeconfig context: pass it with --kubeconfig, not --in-cluster"
                )
            live = args.kubeconfig is not None or args.context is not None or args.in_cluster
            if live and args.workloads:
                raise ReportInputError(
                    "--workloads and --kubeconfig/--in-cluster both give the retained Workloads: pass one"
                )
            objects = load_objects(Path(args.config)) if args.config else None
            if args.history and objects is None and not live:
                raise ReportInputError(
                    "--history needs the queues to replay it against: pass --config, --kubeconfig or --in-cluster"
                )
            if not 1 <= args.more_gpus <= 1_000_000:
                raise ReportInputError("--more-gpus must be from 1 to 1000000")
            prices = parse_prices(args.price or [])
            commitments = parse_commitments(args.commitment or [], prices)
            tolerance = Tolerance(
                wait_factor=bounded(args.calibration_wait_factor, "--calibration-wait-factor", 1, 1e6),
                allocation_points=bounded(
                    args.calibration_allocation_points, "--calibration-allocation-points", 0, 100
                ),
            )
            request = ReportRequest(
                prometheus,
                window,
                thresholds,
                prices.default,
                timeout,
                config_objects=objects,
                history=Path(args.history) if args.history else None,
                more_gpus=args.more_gpus,
                prices=prices,
                commitments=commitments,
                previous=Path(args.previous) if args.previous else None,
                workloads=Path(args.workloads) if args.workloads else None,
                api=api_source(optional_path(args.kubeconfig or None), args.context, pod=args.in_cluster)
                if live
                else None,
                prometheus_access=access,
                tolerance=tolerance,
            )
            report = asyncio.run(measure(request, progress))
            written = write(report, Path(args.out), progress)
        except ReportError as error:
            print(f"kuota report: error: {error}", file=sys.stderr)
            return error.exit_code
        if report.empty:
            progress("the window is empty: no GPU or queue series have samples in it (said so in the report)")
        progress(f"cluster verdict: {report.cluster.verdict.quadrant.value}; wrote {', '.join(map(str, written))}")
        return 0


REPORT = _ReportCommand()
