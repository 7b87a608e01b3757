"""Every supported values set lints cleanly; wrong values fail at install with a message naming the field."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.unit.chart.rendering import CHART, NAMESPACE, RELEASE, VALUES_SETS, render, run_helm


@pytest.mark.parametrize("name", sorted(VALUES_SETS))
def test_values_set_passes_helm_lint_strict(name: str) -> None:
    result = run_helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, values=VALUES_SETS[name], check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("name", sorted(VALUES_SETS))
def test_values_set_renders_only_namespaced_objects_into_the_release_namespace(name: str) -> None:
    cluster_scoped = {
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "APIService",
    }
    # The one object elsewhere: the visibility API's binding to the Role the API server keeps in kube-system.
    in_kube_system = {("RoleBinding", "kuota-visibility-auth-reader")}
    for obj in render(VALUES_SETS[name]).objects:
        where = obj["metadata"].get("namespace")
        if (obj["kind"], obj["metadata"]["name"]) in in_kube_system:
            assert where == "kube-system", f"{obj['kind']} {obj['metadata']['name']} lands in {where!r}"
        elif obj["kind"] in cluster_scoped:
            assert where is None, f"{obj['kind']} {obj['metadata']['name']} is cluster-scoped"
        else:
            assert where == NAMESPACE, f"{obj['kind']} {obj['metadata']['name']} lands in {where!r}"


BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("failure policy", {"webhook": {"failurePolicy": "Maybe"}}, "at '/webhook/failurePolicy': value must be one of"),
    ("misspelt key", {"manager": {"replicass": 3}}, "additional properties 'replicass' not allowed"),
    ("zero replicas", {"manager": {"replicas": 0}}, "at '/manager/replicas'"),
    ("certificate mode", {"webhook": {"certificates": {"mode": "vault"}}}, "at '/webhook/certificates/mode'"),
    ("report without Prometheus", {"report": {"enabled": True}}, "at '/report/prometheusUrl': minLength"),
    ("leaderless replicas", {"manager": {"replicas": 2, "leaderElect": False}}, "at '/manager/leaderElect'"),
    (
        "bad duration",
        {"webhook": {"certificates": {"certManager": {"duration": "90 days"}}}},
        "at '/webhook/certificates/certManager/duration'",
    ),
    ("bad window", {"report": {"window": "a week"}}, "at '/report/window'"),
    (
        "bad threshold",
        {"monitoring": {"prometheusRule": {"pendingThreshold": "2 hours"}}},
        "at '/monitoring/prometheusRule/pendingThreshold'",
    ),
    (
        "bad excluded namespace",
        {"webhook": {"excludedNamespaces": ["Kube_System"]}},
        "at '/webhook/excludedNamespaces/0'",
    ),
    ("bad digest", {"manager": {"image": {"digest": "latest"}}}, "at '/manager/image/digest'"),
    ("hostname label", {"exporter": {"hostnameLabel": "node"}}, "at '/exporter/hostnameLabel': value must be one of"),
    (
        "relabelings of an unknown component",
        {"monitoring": {"serviceMonitor": {"relabelings": {"exporters": []}}}},
        "additional properties 'exporters' not allowed",
    ),
    (
        "metric relabelings not a list",
        {"monitoring": {"podMonitor": {"metricRelabelings": {"manager": {"action": "drop"}}}}},
        "at '/monitoring/podMonitor/metricRelabelings/manager'",
    ),
]


@pytest.mark.parametrize(("case", "values", "message"), BAD_VALUES, ids=[case for case, _, _ in BAD_VALUES])
def test_wrong_values_are_rejected_by_the_schema_naming_the_field(
    case: str, values: dict[str, Any], message: str
) -> None:
    result = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, values=values, check=False)
    assert result.returncode != 0, f"{case}: accepted"
    assert "values don't meet the specifications of the schema" in result.stderr
    assert message in result.stderr, result.stderr


def test_a_disruption_budget_that_blocks_every_drain_is_refused() -> None:
    result = run_helm(
        "template", RELEASE, str(CHART), values={"manager": {"podDisruptionBudget": {"minAvailable": 2}}}, check=False
    )
    assert result.returncode != 0
    assert "manager.podDisruptionBudget.minAvailable (2) must be below manager.replicas (2)" in result.stderr


def test_every_kuota_value_in_the_guide_from_kueues_chart_exists() -> None:
    """The README's "Coming from Kueue's chart" table names real values, so the guide cannot drift."""
    readme = (CHART / "README.md").read_text()
    section = readme.split("## Coming from Kueue's chart", 1)[1].split("\n## ", 1)[0]
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    named: list[str] = []
    for row in section.splitlines():
        cells = row.split("|")
        if len(cells) > 3 and cells[1].strip().startswith("`"):
            named += re.findall(r"`([A-Za-z][\w.]*)(?:\.\*)?(?::[^`]*)?`", cells[2])
    assert len(named) > 15
    missing = []
    for path in named:
        node: Any = defaults
        for key in path.split("."):
            if not isinstance(node, dict) or key not in node:
                missing.append(path)
                break
            node = node[key]
    assert missing == []
