"""The chart's webhooks and RBAC rules follow managerConfig.integrations.frameworks exactly as the admission
plane generates them, and grant nothing for a kind that is not enabled."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.webhook.admission.endpoints import WebhookEndpoint, webhook_configurations
from kuota.webhook.jobs.pod_parents import PARENTS
from kuota.webhook.jobs.registry import ADAPTERS, select
from tests.unit.chart.rendering import NAMESPACE, render
from tests.unit.chart.test_manager import EXCLUDED, _grants, _rules

ALL = [adapter.framework for adapter in ADAPTERS] + [parent.framework for parent in PARENTS] + ["pod"]


def _values(frameworks: list[str]) -> dict[str, Any]:
    return {"managerConfig": {"integrations": {"frameworks": frameworks}}}


@pytest.mark.parametrize(
    "frameworks",
    [ALL, ["deployment"], ["leaderworkerset.x-k8s.io/leaderworkerset"]],
    ids=["all", "deployment-only", "leaderworkerset-only"],
)
def test_every_enabled_kinds_webhooks_render_as_the_admission_plane_registers_them(frameworks: list[str]) -> None:
    rendered = render(_values(frameworks))
    endpoint = WebhookEndpoint(service_name="kuota-webhook", service_namespace=NAMESPACE, service_port=443)
    registry = select(frameworks).registry
    expected = webhook_configurations(endpoint, b"", namespace_selector=EXCLUDED, integrations=registry)
    for want in expected:
        for webhook in want["webhooks"]:
            del webhook["clientConfig"]["caBundle"]
        assert rendered.one(want["kind"], want["metadata"]["name"])["webhooks"] == want["webhooks"]


def test_the_manager_is_granted_exactly_the_enabled_kinds_rules() -> None:
    def integration_grants(frameworks: list[str]) -> set[tuple[str, str, str, str]]:
        return _grants(_rules(render(_values(frameworks)), "ClusterRole", "kuota-manager"))

    base = integration_grants([])
    for frameworks in (
        ALL,
        ["batch/job", "pod"],
        ["pod"],
        ["deployment"],
        ["statefulset", "batch/job"],
        ["leaderworkerset.x-k8s.io/leaderworkerset"],
    ):
        # Beyond what every manager holds (topology-aware scheduling lists, watches and patches pods).
        python = _grants(select(frameworks).registry.rbac_rules()) - base
        assert integration_grants(frameworks) - base == python
    assert ("", "pods", "delete", "") not in integration_grants(["batch/job"])
