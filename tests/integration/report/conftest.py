"""Fixtures for the report's integration tests: a real Prometheus holding generated history, and the CLI."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kuota.cli import main
from tests.integration.report import helios_earth, openmetrics, synthetic_week
from tests.prometheus_server import PrometheusServer, backfill_openmetrics


@dataclass(frozen=True)
class ReportRun:
    exit_code: int
    stderr: str
    out: Path

    def json(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads((self.out / "report.json").read_text(encoding="utf-8"))
        return body


def run_report(*args: str, out: Path) -> ReportRun:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        code = main(["report", *args, "--out", str(out)])
    return ReportRun(code, stderr.getvalue(), out)


def _week_prometheus(
    tmp_path_factory: pytest.TempPathFactory, exporters: synthetic_week.GpuExporters
) -> Iterator[PrometheusServer]:
    """The generated week backfilled; lookback 30 s (< the 5 min sample spacing): see tests/prometheus_server.py."""
    workdir = tmp_path_factory.mktemp(f"synthetic-week-{exporters}")
    history = synthetic_week.history(exporters).write_file(workdir / "history.om")
    backfill_openmetrics(history, workdir / "tsdb")
    history.unlink()
    with PrometheusServer.start(workdir / "prometheus", tsdb=workdir / "tsdb", lookback_delta="30s") as server:
        yield server


@pytest.fixture(scope="session")
def synthetic_week_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """The week with kuota's series and (deliberately wrong) dcgm-exporter ones side by side."""
    yield from _week_prometheus(tmp_path_factory, synthetic_week.GpuExporters.KUOTA_AND_DCGM)


@pytest.fixture(scope="session")
def dcgm_week_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """The same week as dcgm-exporter alone reports it, relabelled by kube-prometheus."""
    yield from _week_prometheus(tmp_path_factory, synthetic_week.GpuExporters.DCGM_ONLY)


@pytest.fixture(scope="session", params=list(synthetic_week.GpuExporters), ids=str)
def synthetic_week_exporters(request: pytest.FixtureRequest) -> synthetic_week.GpuExporters:
    """Every figure of the week must come out the same whichever GPU exporters Prometheus scraped."""
    exporters: synthetic_week.GpuExporters = request.param
    return exporters


@pytest.fixture(scope="session")
def synthetic_week_report(
    synthetic_week_exporters: synthetic_week.GpuExporters,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> ReportRun:
    prometheus: PrometheusServer = request.getfixturevalue(
        "dcgm_week_prometheus"
        if synthetic_week_exporters is synthetic_week.GpuExporters.DCGM_ONLY
        else "synthetic_week_prometheus"
    )
    workdir = tmp_path_factory.mktemp(f"synthetic-week-report-{synthetic_week_exporters}")
    config = workdir / "queues.yaml"
    config.write_text(synthetic_week.CONFIG_YAML, encoding="utf-8")
    return run_report(
        "--prometheus",
        prometheus.url,
        "--end",
        str(synthetic_week.END),
        "--window",
        "7d",
        "--resolution",
        "5m",
        "--config",
        str(config),
        "--price",
        "p5.48xlarge",
        out=workdir / "out",
    )


@pytest.fixture(scope="session")
def priced_week_report(
    synthetic_week_report: ReportRun,
    synthetic_week_exporters: synthetic_week.GpuExporters,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> ReportRun:
    """The same week again, its H100s priced by their GPU model, compared with the first run (--previous)."""
    prometheus: PrometheusServer = request.getfixturevalue(
        "dcgm_week_prometheus"
        if synthetic_week_exporters is synthetic_week.GpuExporters.DCGM_ONLY
        else "synthetic_week_prometheus"
    )
    workdir = tmp_path_factory.mktemp(f"priced-week-report-{synthetic_week_exporters}")
    config = workdir / "queues.yaml"
    config.write_text(synthetic_week.CONFIG_YAML, encoding="utf-8")
    return run_report(
        "--prometheus",
        prometheus.url,
        "--end",
        str(synthetic_week.END),
        "--window",
        "7d",
        "--resolution",
        "5m",
        "--config",
        str(config),
        "--price",
        str(synthetic_week.FREE_GPU_PRICE),
        "--price",
        f"{synthetic_week.MODEL}={synthetic_week.MODEL_PRICE}",
        "--previous",
        str(synthetic_week_report.out / "report.json"),
        out=workdir / "out",
    )


def _helios_cache() -> Path:
    """Backfilling a month of 16 teams takes promtool a minute or two: keep the blocks, keyed by the inputs."""
    digest = hashlib.sha256()
    for source in (Path(helios_earth.__file__), Path(openmetrics.__file__)):
        digest.update(source.read_bytes())
    for trace in sorted(helios_earth.traces_folder().glob("earth_*.csv.gz")):
        digest.update(f"{trace.name}:{trace.stat().st_size}".encode())
    root = Path(os.environ.get("KUOTA_CACHE", Path.home() / ".cache" / "kuota"))
    return root / "report" / f"helios-earth-{digest.hexdigest()[:16]}"


@pytest.fixture(scope="session")
def helios_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    cache = _helios_cache()
    if not (cache / "complete").exists():
        building = cache.with_name(cache.name + f".building-{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        history = helios_earth.history(helios_earth.load()).write_file(building / "history.om")
        backfill_openmetrics(history, building / "tsdb")
        history.unlink()
        (building / "complete").write_text("ok\n", encoding="utf-8")
        shutil.rmtree(cache, ignore_errors=True)
        building.rename(cache)
    workdir = tmp_path_factory.mktemp("helios-earth")
    shutil.copytree(cache / "tsdb", workdir / "tsdb")
    with PrometheusServer.start(workdir / "prometheus", tsdb=workdir / "tsdb", lookback_delta="1h") as server:
        yield server
