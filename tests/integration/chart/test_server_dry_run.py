"""Every object the chart renders is accepted by the real API server; the manager meets Pod Security restricted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.chart.conftest import as_list
from tests.unit.chart.rendering import VALUES_SETS, pod_spec, render

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("name", sorted(VALUES_SETS))
def test_every_rendered_object_passes_server_side_dry_run(
    cluster: Cluster, foreign_crds: None, namespace: str, name: str
) -> None:
    del foreign_crds
    objects = render(VALUES_SETS[name], namespace=namespace).objects
    # Server-side apply: CRDs kept by an earlier release carry no kubectl last-applied annotation to diff against.
    result = cluster.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kuota-chart-test",
        "--dry-run=server",
        "--validate=strict",
        "-f",
        "-",
        input=as_list(objects),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    accepted = [line for line in result.stdout.splitlines() if "(server dry run)" in line]
    assert len(accepted) == len(objects), result.stdout
    assert "Warning" not in result.stderr, result.stderr


def _pod(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pss-{obj['metadata']['name']}", "namespace": namespace},
        "spec": pod_spec(obj),
    }


def _dry_run_pod(cluster: Cluster, pod: dict[str, Any]) -> Any:
    return cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)


def test_manager_and_report_pods_are_admitted_where_pod_security_restricted_is_enforced(
    cluster: Cluster, namespace: str
) -> None:
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    rendered = render(VALUES_SETS["report"], namespace=namespace)
    # The ServiceAccount admission plugin needs the pods' accounts to exist.
    cluster.kubectl("apply", "-f", "-", input=as_list(rendered.of_kind("ServiceAccount")))
    for obj in (rendered.one("Deployment", "kuota-manager"), rendered.one("CronJob", "kuota-report")):
        result = _dry_run_pod(cluster, _pod(obj, namespace))
        assert result.returncode == 0, f"{obj['kind']} {obj['metadata']['name']}: {result.stderr}"


def test_the_exporter_needs_a_privileged_namespace_as_the_notes_say(cluster: Cluster, namespace: str) -> None:
    rendered = render(namespace=namespace)
    cluster.kubectl("apply", "-f", "-", input=as_list(rendered.of_kind("ServiceAccount")))
    exporter = _pod(rendered.one("DaemonSet", "kuota-exporter"), namespace)
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline")
    refused = _dry_run_pod(cluster, exporter)
    assert refused.returncode != 0
    assert "hostPID" in refused.stderr and "hostPath" in refused.stderr, refused.stderr
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=privileged", "--overwrite")
    assert _dry_run_pod(cluster, exporter).returncode == 0
