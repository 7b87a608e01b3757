"""Fixtures for the chart on the real control plane: foreign CRDs the chart renders objects of, and releases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.manager_process import restore_crd_conversion
from tests.unit.chart.rendering import CHART, NAMESPACE, RELEASE, run_helm
from tests.waiting import wait_until

# The Prometheus operator's and cert-manager's kinds, reduced to what the API server needs to accept objects of
# them (group, version, kind, scope); their fields are checked by the unit tier (promtool, shapes), not here.
FOREIGN_KINDS = (
    ("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
    ("monitoring.coreos.com", "PodMonitor", "podmonitors"),
    ("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
    ("cert-manager.io", "Certificate", "certificates"),
    ("cert-manager.io", "Issuer", "issuers"),
)


def _minimal_crd(group: str, kind: str, plural: str) -> dict[str, Any]:
    version = "v1"
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {"kuota.test/minimal-crd": "true"}},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "scope": "Namespaced",
            "versions": [{"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
        },
    }


def as_list(objects: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


@pytest.fixture(scope="module")
def foreign_crds(cluster: Cluster) -> Iterator[None]:
    """Minimal CRDs for ServiceMonitor, PodMonitor, PrometheusRule, Certificate and Issuer; removed afterwards."""
    manifests = [_minimal_crd(*kind) for kind in FOREIGN_KINDS]
    cluster.kubectl("apply", "-f", "-", input=as_list(manifests))
    for manifest in manifests:
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{manifest['metadata']['name']}")
    for group, kind, plural in FOREIGN_KINDS:

        def discovered(resource: str = f"{plural}.{group}") -> bool:
            return cluster.kubectl("get", resource, "-A", check=False).returncode == 0

        wait_until(discovered, f"discovery of {kind}")
    yield
    cluster.kubectl("delete", "crd", "-l", "kuota.test/minimal-crd=true", "--wait=false", check=False)


def helm(cluster: Cluster, *args: str, values: dict[str, Any] | None = None) -> str:
    result = run_helm(*args, "--kubeconfig", str(cluster.kubeconfig), values=values)
    return result.stdout


def install(cluster: Cluster, values: dict[str, Any] | None = None) -> str:
    """helm install into kuota-system. CRDs left by an earlier release (kept) or by other tests are adopted."""
    restore_crd_conversion(cluster)
    return helm(
        cluster,
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        "--take-ownership",
        "--timeout",
        "120s",
        values=values or {},
    )


def uninstall(cluster: Cluster) -> None:
    """Remove the release and its namespace, and wait until the namespace is gone so the next install starts clean."""
    run_helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--kubeconfig", str(cluster.kubeconfig), check=False)
    restore_crd_conversion(cluster)  # the kept CRDs, from a manager registered by URL meanwhile
    cluster.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false")
    wait_until(
        lambda: cluster.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0,
        f"namespace {NAMESPACE} to be deleted",
        timeout=90,
    )


def kuota_webhook_configurations(cluster: Cluster) -> list[str]:
    names: list[str] = []
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        listed = json.loads(cluster.kubectl("get", kind, "-o", "json").stdout)["items"]
        names += [
            f"{kind}/{item['metadata']['name']}"
            for item in listed
            if any(hook["name"].endswith(".kuota.dev") for hook in item.get("webhooks") or [])
        ]
    return names


def job(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
                }
            }
        },
    }
