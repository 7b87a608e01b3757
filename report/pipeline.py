"""One report run, end to end: collect from Prometheus, compute, replay the what-if, write the three files.

This is the imperative shell; the policy lives in ``team_report`` and ``verdicts``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuota.report import report_html, report_json, report_markdown
from kuota.report.api_listing import ApiSource, read_cluster
from kuota.report.collection import collect
from kuota.report.errors import ReportError, ReportInputError
from kuota.report.prices import Price
from kuota.report.prometheus_api import PrometheusClient
from kuota.report.queue_config import namespace_queues
from kuota.report.team_report import Report, build_report
from kuota.report.verdicts import Thresholds
from kuota.report.whatif import run_whatif
from kuota.report.window import Window
from kuota.report.workload_history import job_history, with_known_priority_classes

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReportRequest:
    prometheus_url: str
    window: Window
    thresholds: Thresholds
    price: Price
    query_timeout_s: float = 120.0
    config_objects: list[dict[str, Any]] | None = None  # from --config; else the live ones when api is set
    history: Path | None = None
    workloads: Path | None = None  # `kubectl get workloads -A -o json` output
    api: ApiSource | None = None  # read Workloads (and queue objects, without --config) from the API server
    more_gpus: int = 8


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def measure(request: ReportRequest, progress: Progress) -> Report:
    config_objects, workload_items = await _read_sources(request, progress)
    teams = namespace_queues(config_objects) if config_objects else {}
    try:
        async with PrometheusClient(request.prometheus_url, request.query_timeout_s) as client:
            measurements = await collect(
                client,
                request.window,
                request.thresholds.idle_percent,
                request.thresholds.idle_elsewhere_gpus,
                progress,
            )
    except* ReportError as group:
        # concurrent queries fail together; the first one's message is the one to act on
        raise _first_leaf(group) from None
    scenarios = None
    notes: list[str] = []
    failed = None
    history = request.history
    with tempfile.TemporaryDirectory(prefix="kuota-report-") as temp:
        if workload_items is not None:
            jobs = job_history(workload_items, request.window.start, request.window.end)
            if config_objects is not None:
                jobs = with_known_priority_classes(jobs, _priority_class_names(config_objects))
            failed = jobs.failed_gpu_hours
            notes += [f"{count} Workloads left out of the job history: {why}." for why, count in jobs.skipped.items()]
            notes += [
                f"{count} Workloads name priority class {name}, which is not a WorkloadPriorityClass of the "
                "queues replayed: the what-if replays them at the default priority."
                for name, count in jobs.unknown_priority_classes.items()
            ]
            if history is None:
                history = Path(temp) / "history.jsonl"
                history.write_text("".join(json.dumps(r) + "\n" for r in jobs.records), encoding="utf-8")
        if history is not None and config_objects is not None:
            if request.config_objects is None and not any(o.get("kind") == "ClusterQueue" for o in config_objects):
                notes.append("The cluster has no ClusterQueue: there are no queues to replay the what-if against.")
            else:
                progress(
                    f"replaying {history} through kuota simulate: current queues, borrowing, +{request.more_gpus} GPUs"
                )
                scenarios = await run_whatif(config_objects, history, request.more_gpus)
        notes.append(
            "What-if utilization is admitted GPU-hours over nominal GPU quota in the replay "
            "(the simulator has no SM activity)."
        )
    progress("computing figures, verdicts and levers")
    return build_report(
        measurements,
        window=request.window,
        thresholds=request.thresholds,
        price=request.price,
        namespace_queues=teams,
        failed_gpu_hours=failed,
        whatif=scenarios,
        notes=notes,
    )


async def _read_sources(
    request: ReportRequest, progress: Progress
) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """(queue config objects, retained Workloads), each None when no source gives it."""
    if request.api is not None:
        with_queues = request.config_objects is None
        progress(
            f"listing Workloads{' and queue objects' if with_queues else ''} from the API server at "
            f"{request.api.access.server} ({request.api.origin})"
        )
        cluster = await read_cluster(request.api, with_queues=with_queues)
        return (cluster.config_objects if with_queues else request.config_objects), cluster.workloads
    if request.workloads is not None:
        progress(f"reading retained Workloads from {request.workloads}")
        return request.config_objects, _workload_items(request.workloads)
    return request.config_objects, None


def _priority_class_names(objects: list[dict[str, Any]]) -> set[str]:
    return {str((o.get("metadata") or {}).get("name")) for o in objects if o.get("kind") == "WorkloadPriorityClass"}


def _workload_items(path: Path) -> list[dict[str, Any]]:
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ReportInputError(
            f"--workloads {path} is not readable JSON ({error}); "
            "write it with 'kubectl get workloads.kueue.x-k8s.io -A -o json'"
        ) from error
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise ReportInputError(f"--workloads {path} has no 'items' list: give kubectl's List output")
    return [item for item in items if isinstance(item, dict)]


def write(report: Report, out_dir: Path, progress: Progress) -> list[Path]:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ReportInputError(f"--out {out_dir} cannot be created: {error}") from error
    written = []
    for name, render in (
        ("report.json", report_json.render),
        ("report.md", report_markdown.render),
        ("report.html", report_html.render),
    ):
        progress(f"writing {out_dir / name}")
        path = out_dir / name
        path.write_text(render(report), encoding="utf-8")
        written.append(path)
    return written
