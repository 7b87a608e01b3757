"""One report run, end to end: read the job history and queues, collect from Prometheus, compute, replay the
what-if, write the files (report.json, report.csv, report.md, report.html and the trend charts' SVG files).

This is the imperative shell; the policy lives in ``figures`` (``team_report`` and ``verdicts``). Every input is
read and checked before the first query, so a bad file fails in a second, not after minutes of PromQL. The
files are rendered whole before the first is written, and each is written through :mod:`kuota.files`: a
temporary file beside it, renamed over the final name only once all of them are on disk, so a failed run
leaves the previous report as it was, and a symlink planted at a final name is replaced, never followed.
``--out`` itself may be a symlink to a folder (the user named it); it is created when missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kuota.files import PRIVATE_FILE_MODE, atomic_writer
from kuota.report.errors import ReportInputError
from kuota.report.figures.calibration import ReplayedWeek, Tolerance
from kuota.report.figures.commitments import CommitmentTable
from kuota.report.figures.measurements import Measurements
from kuota.report.figures.prices import Price, PriceTable, check_price_keys
from kuota.report.figures.schema import Report
from kuota.report.figures.team_report import build_report
from kuota.report.figures.verdicts import Thresholds
from kuota.report.figures.window import Window, trend_day_ends
from kuota.report.figures.workload_levers import WorkloadRun
from kuota.report.sources.api_listing import ApiSource, read_cluster
from kuota.report.sources.collection import collect
from kuota.report.sources.previous_report import read_previous
from kuota.report.sources.prometheus_access import PrometheusAccess
from kuota.report.sources.prometheus_api import PrometheusClient
from kuota.report.sources.queue_config import namespace_queues
from kuota.report.sources.whatif import check_replayable, run_whatif
from kuota.report.sources.workload_dump import read_dump
from kuota.report.sources.workload_history import (
    RetainedWorkloads,
    StartedBefore,
    job_history,
    with_known_priority_classes,
)
from kuota.report.writers import csv_file, html_file, json_file, markdown_file
from kuota.report.writers.svg_charts import all_charts
from kuota.report.writers.trends import TREND_CHARTS

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
    prometheus_access: PrometheusAccess | None = None  # credentials, headers, TLS; None: none
    prices: PriceTable | None = None  # per flavor or GPU model; ``price`` for the others (default: for all)
    previous: Path | None = None  # an earlier report.json, compared with week over week
    commitments: CommitmentTable | None = None  # --commitment: prices the commitment lever
    tolerance: Tolerance = field(default_factory=Tolerance)  # of the what-if's calibration against the measured week


async def measure(request: ReportRequest, progress: Progress) -> Report:
    previous = None
    if request.previous is not None:
        progress(f"reading the previous report {request.previous}")
        previous = read_previous(request.previous)
    config_objects, retained = await _read_sources(request, progress)
    teams = namespace_queues(config_objects) if config_objects else {}
    scenarios = None
    current_week: ReplayedWeek | None = None
    notes: list[str] = []
    failed = None
    serving = None
    runs: list[WorkloadRun] | None = None
    history = request.history
    started_before = StartedBefore()
    with tempfile.TemporaryDirectory(prefix="kuota-report-") as temp:
        if retained is not None:
            jobs = job_history(retained, request.window.start, request.window.end)
            if config_objects is not None:
                jobs = with_known_priority_classes(jobs, _priority_class_names(config_objects))
            failed = jobs.failed_gpu_hours
            serving = jobs.serving_gpu_hours
            runs = jobs.runs
            notes += [f"{count} item(s) left out of the job history: {why}." for why, count in jobs.skipped.items()]
            notes += [
                f"{count} Workloads name priority class {name}, which is not a WorkloadPriorityClass of the "
                "queues replayed: the what-if replays them at the default priority."
                for name, count in jobs.unknown_priority_classes.items()
            ]
            if history is None:
                history = Path(temp) / "history.jsonl"
                _write_history(history, jobs.records)
                started_before = jobs.started_before
                notes += _started_before_notes(started_before)
        replay = _replayed(request, config_objects, history)
        if replay is None and history is not None and config_objects is not None:
            notes.append("The cluster has no ClusterQueue: there are no queues to replay the what-if against.")
        if replay is not None:
            progress(f"checking that {replay[1]} replays through kuota simulate against the queues")
            await check_replayable(*replay)
        measurements = await _collect(request, progress)
        if request.prices is not None:
            # the flavors of the queues, of Kueue's quota series and of the retained Workloads' admissions
            flavors = _flavor_names(config_objects or [], measurements) | {r.flavor for r in runs or () if r.flavor}
            check_price_keys(request.prices, flavors, _models(measurements))
        notes[:0] = measurements.notes
        if replay is not None:
            progress(
                f"replaying {replay[1]} through kuota simulate: current queues, borrowing, +{request.more_gpus} GPUs"
            )
            whatif = await run_whatif(*replay, request.more_gpus, request.window.length_s, started_before)
            scenarios, current_week = whatif.scenarios, whatif.current_week
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
        serving_gpu_hours=serving,
        whatif=scenarios,
        notes=notes,
        prices=request.prices,
        trend_day_ends=trend_day_ends(request.window),
        previous=previous,
        workload_runs=runs,
        commitments=request.commitments,
        replayed_week=current_week,
        tolerance=request.tolerance,
    )


def _started_before_notes(started: StartedBefore) -> list[str]:
    """Nothing created before the window is left out silently: the what-if replays it from the start."""
    notes = []
    if started.holding:
        notes.append(
            f"{len(started.holding)} Workload(s) created before the window replayed from its start, holding their "
            "quota from its first instant for the run time they had left in it."
        )
    if started.pending_since:
        notes.append(
            f"{len(started.pending_since)} Workload(s) created before the window replayed from its start, pending "
            "then, submitted at its first instant in creation order (their waits counted from creation)."
        )
    return notes


def _replayed(
    request: ReportRequest, config_objects: list[dict[str, Any]] | None, history: Path | None
) -> tuple[list[dict[str, Any]], Path] | None:
    """(queues, history) the what-if replays, or None: without both, or when the cluster has no ClusterQueue
    (a --config without one is an error of the what-if)."""
    if config_objects is None or history is None:
        return None
    if request.config_objects is None and not any(o.get("kind") == "ClusterQueue" for o in config_objects):
        return None
    return config_objects, history


async def _collect(request: ReportRequest, progress: Progress) -> Measurements:
    async with PrometheusClient(
        request.prometheus_url, request.query_timeout_s, access=request.prometheus_access
    ) as client:
        return await collect(
            client,
            request.window,
            request.thresholds.idle_percent,
            request.thresholds.idle_elsewhere_gpus,
            progress,
        )


async def _read_sources(
    request: ReportRequest, progress: Progress
) -> tuple[list[dict[str, Any]] | None, RetainedWorkloads | None]:
    """(queue config objects, retained Workloads), each None when no source gives it."""
    if request.api is not None:
        with_queues = request.config_objects is None
        progress(
            f"listing Workloads{' and queue objects' if with_queues else ''} from the API server at "
            f"{request.api.access.server} ({request.api.origin})"
        )
        cluster = await read_cluster(request.api, with_queues=with_queues)
        _warn(cluster.workloads, "the API server's Workloads", progress)
        return (cluster.config_objects if with_queues else request.config_objects), cluster.workloads
    if request.workloads is not None:
        progress(f"reading retained Workloads from {request.workloads}")
        retained = read_dump(request.workloads)
        _warn(retained, f"--workloads {request.workloads}", progress)
        return request.config_objects, retained
    return request.config_objects, None


def _warn(retained: RetainedWorkloads, source: str, progress: Progress) -> None:
    for line in retained.warnings():
        progress(f"warning: {source}: {line}")


def _priority_class_names(objects: Iterable[Mapping[str, Any]]) -> set[str]:
    names = set()
    for obj in objects:
        metadata = obj.get("metadata")
        if obj.get("kind") == "WorkloadPriorityClass" and isinstance(metadata, dict):
            names.add(str(metadata.get("name")))
    return names


def _flavor_names(objects: Iterable[Mapping[str, Any]], measurements: Measurements) -> set[str]:
    """The ResourceFlavors the queue objects name, and those Kueue's quota series carry."""
    names = {flavor for _, flavor in measurements.queues.usage_by_flavor} if measurements.queues else set()
    for obj in objects:
        metadata, spec = obj.get("metadata"), obj.get("spec")
        if obj.get("kind") == "ResourceFlavor" and isinstance(metadata, dict):
            names.add(str(metadata.get("name")))
        if obj.get("kind") == "ClusterQueue" and isinstance(spec, dict):
            groups = [group for group in spec.get("resourceGroups") or [] if isinstance(group, dict)]
            for group in groups:
                names.update(str(f.get("name")) for f in group.get("flavors") or [] if isinstance(f, dict))
    return names


def _models(measurements: Measurements) -> set[str]:
    gpu = measurements.gpu
    if gpu is None:
        return set()
    return {*gpu.models_seen, *(model for _, model in gpu.allocated_by_model if model)}


def _write_history(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    with atomic_writer(path, mode=PRIVATE_FILE_MODE) as file:
        for record in records:
            file.write(json.dumps(record, allow_nan=False).encode("utf-8") + b"\n")


def write(report: Report, out_dir: Path, progress: Progress) -> list[Path]:
    """report.json, report.csv, report.md, report.html and the trend charts' SVG files in ``out_dir``, all of
    them or (on any failure) none: see the module's docstring."""
    progress("drawing the charts")
    charts = all_charts(report)
    trend_files = {chart.chart_id: chart.file_name for chart in TREND_CHARTS}
    rendered = []
    for name, render in (
        ("report.json", json_file.render),
        ("report.csv", csv_file.render),
        ("report.md", markdown_file.render),
        ("report.html", lambda whole: html_file.render(whole, charts)),
    ):
        progress(f"rendering {name}")
        rendered.append((out_dir / name, render(report).encode("utf-8")))
    rendered += [
        (out_dir / trend_files[cid], svg.encode("utf-8"))
        for cid, _, svg in charts
        if svg is not None and cid in trend_files
    ]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ReportInputError(f"--out {out_dir} cannot be created: {error}") from error
    try:
        with contextlib.ExitStack() as files:
            for path, content in rendered:
                progress(f"writing {path}")
                file = files.enter_context(atomic_writer(path))
                file.write(content)
                # on disk before any file is renamed: a full disk fails here, with every old file in place
                file.flush()
                os.fsync(file.fileno())
    except OSError as error:
        raise ReportInputError(f"--out {out_dir}: the report cannot be written: {error}") from error
    return [path for path, _ in rendered]
