"""One report run, end to end: collect from Prometheus, compute, replay the what-if, write the three files.

This is the imperative shell; the policy lives in ``figures`` and ``verdicts``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.report import report_html, report_json, report_markdown
from exporter.report.collection import collect
from exporter.report.errors import ReportError, ReportInputError
from exporter.report.figures import Report, build_report
from exporter.report.prices import Price
from exporter.report.prometheus_api import PrometheusClient
from exporter.report.verdicts import Thresholds
from exporter.report.whatif import run_whatif
from exporter.report.window import Window
from exporter.report.workload_history import job_history

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReportRequest:
    prometheus_url: str
    window: Window
    thresholds: Thresholds
    price: Price
    namespace_queues: Mapping[str, str]
    query_timeout_s: float = 120.0
    config_objects: list[dict[str, Any]] | None = None
    history: Path | None = None
    workloads: Path | None = None  # `kubectl get workloads -A -o json` output
    more_gpus: int = 8


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def measure(request: ReportRequest, progress: Progress) -> Report:
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
        if request.workloads is not None:
            progress(f"reading retained Workloads from {request.workloads}")
            jobs = job_history(_workload_items(request.workloads), request.window.start, request.window.end)
            failed = jobs.failed_gpu_hours
            notes += [f"{count} Workloads left out of the job history: {why}." for why, count in jobs.skipped.items()]
            if history is None:
                history = Path(temp) / "history.jsonl"
                history.write_text("".join(json.dumps(r) + "\n" for r in jobs.records), encoding="utf-8")
        if history is not None and request.config_objects is not None:
            progress(f"replaying {history} through kuota simulate: current queues, borrowing, "
                     f"+{request.more_gpus} GPUs")
            scenarios = await run_whatif(request.config_objects, history, request.more_gpus)
        notes.append("What-if utilization is admitted GPU-hours over nominal GPU quota in the replay "
                     "(the simulator has no SM activity).")
    progress("computing figures, verdicts and levers")
    return build_report(
        measurements,
        window=request.window,
        thresholds=request.thresholds,
        price=request.price,
        namespace_queues=request.namespace_queues,
        failed_gpu_hours=failed,
        whatif=scenarios,
        notes=notes,
    )


def _workload_items(path: Path) -> list[dict[str, Any]]:
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ReportInputError(f"--workloads {path} is not readable JSON ({error}); "
                               "write it with 'kubectl get workloads.kueue.x-k8s.io -A -o json'") from error
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
