"""The metric contract between the parts, checked against each other's real output.

What is read: every PromQL query ``kuota report`` sends (recorded by a fake Prometheus while the real report
runs), every rule of the chart's PrometheusRule and every panel query of its Grafana dashboard. What is
produced: the manager's real registry and the exporter's real exposition, rendered, plus the series the
PrometheusRule records. Every series read (name, and the labels its selectors match on) must be produced by
some part: the report once read a quota metric no part exported, and its tests passed on their own idea of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.metrics_table import exporter_exposition, manager_exposition
from tests.unit.chart.rendering import VALUES_SETS, render
from tests.unit.report.conftest import END, every_series_present, run_report, serving

DASHBOARD = Path(__file__).resolve().parents[2] / "charts" / "kuota" / "files" / "dashboards" / "kuota-overview.json"
Series = dict[str, set[str]]  # metric name -> label names

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
# Labels Prometheus itself attaches to a scraped series, and the ones kube-prometheus renames a target's to.
_TARGET_LABELS = frozenset({"job", "instance", "exported_namespace", "exported_pod", "exported_container"})


def _is_kuota_series(name: str) -> bool:
    return name.startswith(("kueue_", "kuota_", "DCGM_")) or ":" in name


def _reads(queries: Iterable[str]) -> Series:
    """The series each query selects, with the labels its matchers name."""
    read: Series = {}
    for query in queries:
        # Grafana variables ($namespace), quoted strings and ranges ([3599999ms:60s]) name no series.
        text = re.sub(r"\[[^\]]*\]", "", re.sub(r"\$\w+", "", query))
        for name, matchers in _SELECTOR.findall(text):
            if _is_kuota_series(name):
                read.setdefault(name, set()).update(_MATCHER.findall(_STRING.sub('""', matchers)))
        names = {
            n for n in _IDENTIFIER.findall(_STRING.sub('""', re.sub(r"\{[^}]*\}", "", text))) if _is_kuota_series(n)
        }
        for name in names:
            read.setdefault(name, set())
        # A query over one series groups by that series' labels ("le" is a histogram's own).
        if len(names) == 1 and not next(iter(names)).count(":"):
            grouped = {label.strip() for clause in _GROUPING.findall(text) for label in clause.split(",")}
            read[next(iter(names))].update(grouped - {"", "le"})
    return read


def _exposed(text: str) -> Series:
    produced: Series = {}
    for family in text_string_to_metric_families(text):
        produced.setdefault(family.name, set())
        for sample in family.samples:
            produced.setdefault(sample.name, set()).update(sample.labels)
    return produced


def _manager_series() -> Series:
    return _exposed(manager_exposition())


def _exporter_series() -> Series:
    return _exposed(exporter_exposition())


def _rules() -> list[dict[str, str]]:
    rule = render(VALUES_SETS["monitoring"]).one("PrometheusRule")
    return [item for group in rule["spec"]["groups"] for item in group["rules"]]


def _produced() -> Series:
    produced: Series = {}
    for part in (_manager_series(), _exporter_series()):
        for name, labels in part.items():
            produced.setdefault(name, set()).update(labels)
    return produced


def _recorded() -> set[str]:
    return {rule["record"] for rule in _rules() if "record" in rule}


def _report_queries(tmp_path: Path) -> list[str]:
    queries: list[str] = []
    for mode, answer in (("kuota", every_series_present), ("dcgm-only", _dcgm_only)):
        with serving(answer) as prometheus:
            run = run_report("--prometheus", prometheus.url, out=tmp_path / mode, end=END)
        assert run.exit_code == 0, run.stderr
        queries += prometheus.queries
    return queries


def _dcgm_only(path: str, query: str) -> tuple[int, bytes]:
    """A cluster running dcgm-exporter instead of kuota's exporter: kuota's GPU series are absent."""
    if query.startswith("count(count_over_time(") and "kuota_" in query:
        return every_series_present(path, "absent")
    return every_series_present(path, query)


def _missing(read: Series, produced: Series, recorded: set[str]) -> list[str]:
    problems = []
    for name, labels in sorted(read.items()):
        if name in recorded:
            continue
        if name not in produced:
            problems.append(f"{name}: no part of kuota produces it")
            continue
        unknown = labels - produced[name] - _TARGET_LABELS
        if unknown:
            problems.append(f"{name}: matched on {sorted(unknown)}, which it does not carry")
    return problems


def test_every_series_the_report_reads_is_produced_by_the_manager_or_the_exporter(tmp_path: Path) -> None:
    read = _reads(_report_queries(tmp_path))
    assert "kueue_cluster_queue_nominal_quota" in read, "the report reads each team's quota"
    assert _missing(read, _produced(), set()) == []


def test_every_series_the_chart_rules_and_dashboard_read_is_produced_or_recorded() -> None:
    expressions = [rule["expr"] for rule in _rules()]
    panels = json.loads(DASHBOARD.read_text())["panels"]
    expressions += [target["expr"] for panel in panels for target in panel.get("targets", []) if "expr" in target]
    read = _reads(expressions)
    assert len(read) >= 5, read
    assert _missing(read, _produced(), _recorded()) == []


def test_a_renamed_series_breaks_the_contract() -> None:
    """The check itself can fail: a series the parts do not produce is reported, and so is a label."""
    produced = _produced()
    read = _reads(['sum by (cluster_queue) (kueue_cluster_queue_resource_nominal_quota{resource="nvidia.com/gpu"})'])
    assert _missing(read, produced, set()) == [
        "kueue_cluster_queue_resource_nominal_quota: no part of kuota produces it"
    ]
    read = _reads(['kueue_cluster_queue_nominal_quota{team="a"}'])
    assert _missing(read, produced, set()) == [
        "kueue_cluster_queue_nominal_quota: matched on ['team'], which it does not carry"
    ]
