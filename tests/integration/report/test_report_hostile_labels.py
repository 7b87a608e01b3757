"""Label values chosen to break the report, stored in and answered by a real Prometheus: report.md shows
them escaped, report.html (charts included) is written, and a --workloads dump with bad items still reports."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kuota.report.writers.markdown_file import markdown_text
from tests.integration.report.conftest import run_report
from tests.integration.report.openmetrics import OpenMetricsHistory
from tests.prometheus_server import PrometheusServer, backfill_openmetrics

pytestmark = pytest.mark.integration

END = 1_790_006_400
START = END - 3 * 3600
# as Prometheus stores them; the OpenMetrics text below escapes the backslash
NAMESPACES = ("<script>alert(1)</script>", "[x](javascript:alert(1))", "$\\foo{$", "team|a")


def _openmetrics_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@pytest.fixture(scope="module")
def hostile_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    workdir = tmp_path_factory.mktemp("hostile-labels")
    om = OpenMetricsHistory()
    samples = range(START - 600, END + 1, 60)
    for gpu, namespace in enumerate(NAMESPACES):
        labels = {"gpu": str(gpu), "UUID": f"GPU-{gpu}", "namespace": _openmetrics_value(namespace), "pod": "p"}
        om.gauge("kuota_gpu_up", {"gpu": str(gpu), "UUID": f"GPU-{gpu}"}, ((t, 1) for t in samples))
        om.gauge("kuota_gpu_allocated", labels, ((t, 1) for t in samples))
        om.gauge("kuota_pod_gpu_sm_utilization_percent", labels, ((t, 20 + 10 * gpu) for t in samples))
    history = om.write_file(workdir / "history.om")
    backfill_openmetrics(history, workdir / "tsdb")
    with PrometheusServer.start(workdir / "prometheus", tsdb=workdir / "tsdb", lookback_delta="90s") as server:
        yield server


def test_hostile_label_values_are_escaped_in_report_md_and_charted_in_report_html(
    hostile_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run = run_report(
        "--prometheus", hostile_prometheus.url, "--end", str(END), "--window", "3h", "--resolution", "1m", out=out
    )
    assert run.exit_code == 0, run.stderr
    teams = {team["name"] for team in run.json()["teams"]}
    assert teams == set(NAMESPACES)
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "<script" not in markdown and not re.search(r"(?<!\\)\]\(javascript:", markdown)
    for namespace in NAMESPACES:
        assert f"### {markdown_text(namespace)}\n" in markdown
        assert f"| {markdown_text(namespace)} | {markdown_text(namespace)} | unknown (3.0) |" in markdown  # namespaces
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<!-- $\\foo{$ -->" in page and 'data-charts="4"' in page  # 3 charts of these labels and the trend
    # these series carry no GPU memory and no prices for a commitment: the levers are listed, unpriced, not charted
    assert "No lever has dollars to chart: the table says what each lacks." in page
    rows = list(csv.DictReader(io.StringIO((out / "report.csv").read_text(encoding="utf-8"), newline="")))
    assert {row["name"] for row in rows if row["scope"] == "namespace"} == set(NAMESPACES), "CSV quoting keeps them"


def test_a_dump_with_bad_items_still_reports_and_counts_them(
    hostile_prometheus: PrometheusServer, tmp_path: Path
) -> None:
    good = {
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "$\\foo{$", "creationTimestamp": "2026-09-21T16:10:00Z"},
        "spec": {"queueName": "q", "podSets": [{"count": 1, "template": {"spec": {"containers": []}}}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": "bad"}]},
    }
    dump = tmp_path / "w.json"
    dump.write_text(json.dumps({"kind": "List", "items": [good, {"kind": "Pod"}]}), encoding="utf-8")
    run = run_report(
        "--prometheus",
        hostile_prometheus.url,
        "--end",
        str(END),
        "--window",
        "3h",
        "--workloads",
        str(dump),
        out=tmp_path,
    )
    assert run.exit_code == 0, run.stderr
    assert "left out 1 of 2 item(s): status.conditions[].lastTransitionTime is not an RFC 3339 time" in run.stderr
    assert "left out 1 of 2 item(s): not a kueue.x-k8s.io Workload" in run.stderr
