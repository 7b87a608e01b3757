"""Render ``charts/kuota`` with helm for the chart's tests, and pick objects out of the result.

Shared by the unit tier (``helm lint``/``helm template`` only) and the integration tier (the same renders,
applied to the real control plane), so both test exactly the same values sets.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
CHART = REPO_ROOT / "charts" / "kuota"
RELEASE = "kuota"
NAMESPACE = "kuota-system"

# The values sets every chart test runs against: defaults, and each optional part switched on or off.
VALUES_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "cert-manager": {"webhook": {"certificates": {"mode": "cert-manager"}}},
    "exporter-off": {"exporter": {"enabled": False}},
    "monitoring": {
        "monitoring": {
            "serviceMonitor": {"enabled": True},
            "podMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True},
            "dashboard": {"enabled": True},
        }
    },
    "report": {
        "report": {
            "enabled": True,
            "prometheusUrl": "http://prometheus.monitoring:9090",
            "queueConfigMap": "kuota-queues",
            "summaryWebhook": {"url": "https://hooks.example.com/kuota"},
        }
    },
    "single-replica": {"manager": {"replicas": 1, "leaderElect": False}, "webhook": {"failurePolicy": "Ignore"}},
}


class HelmError(AssertionError):
    """helm exited non-zero; the message carries its stderr."""


@dataclass(frozen=True)
class Rendered:
    """The objects one ``helm template`` produced."""

    objects: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [obj for obj in self.of_kind(kind) if name is None or obj["metadata"]["name"] == name]
        if len(found) != 1:
            names = [obj["metadata"]["name"] for obj in self.of_kind(kind)]
            raise AssertionError(f"expected one {kind} {name or ''}, found {names}")
        return found[0]

    def kinds(self) -> set[str]:
        return {obj["kind"] for obj in self.objects}


def helm_binary() -> Path:
    from tests.cluster.binaries import ensure_binaries

    return ensure_binaries().helm


def run_helm(
    *args: str, values: Mapping[str, Any] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run helm with ``values`` passed as one values file on stdin."""
    command = [str(helm_binary()), *args]
    if values is not None:
        command += ["--values", "-"]
    result = subprocess.run(
        command, input=json.dumps(values or {}), capture_output=True, text=True, timeout=120, check=False
    )
    if check and result.returncode != 0:
        raise HelmError(f"{' '.join(command[1:])} failed ({result.returncode}):\n{result.stderr}")
    return result


def render(values: Mapping[str, Any] | None = None, namespace: str = NAMESPACE) -> Rendered:
    result = run_helm("template", RELEASE, str(CHART), "--namespace", namespace, values=values or {})
    return Rendered([doc for doc in yaml.safe_load_all(result.stdout) if doc])


def containers(pod_spec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    yield from pod_spec.get("initContainers", [])
    yield from pod_spec["containers"]


def pod_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec inside a Deployment, DaemonSet or CronJob."""
    if obj["kind"] == "CronJob":
        spec: dict[str, Any] = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        return spec
    template_spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return template_spec
