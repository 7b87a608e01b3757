"""``helm upgrade`` keeps the injected caBundle; ``helm uninstall`` leaves no webhook that would block Jobs."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator

import pytest

from kuota.webhook.crds import crd_manifests
from tests.cluster import Cluster
from tests.integration.chart.conftest import helm, install, job, kuota_webhook_configurations, uninstall
from tests.unit.chart.rendering import CHART, NAMESPACE, RELEASE

pytestmark = pytest.mark.integration

CA_PEM = b"-----BEGIN CERTIFICATE-----\nstand-in for the manager's CA\n-----END CERTIFICATE-----\n"


@pytest.fixture
def fresh_release(cluster: Cluster) -> Iterator[str]:
    notes = install(cluster)
    try:
        yield notes
    finally:
        uninstall(cluster)


def _webhooks(cluster: Cluster, kind: str, name: str) -> list[dict[str, object]]:
    hooks: list[dict[str, object]] = json.loads(cluster.kubectl("get", kind, name, "-o", "json").stdout)["webhooks"]
    return hooks


def test_upgrade_then_uninstall_leaves_no_webhook_blocking_jobs(
    cluster: Cluster, fresh_release: str, namespace: str
) -> None:
    encoded = base64.b64encode(CA_PEM).decode()
    # What the manager does at start: put its CA into every webhook (here as the chart's manager identity).
    for kind, name in (
        ("mutatingwebhookconfiguration", "kuota-mutating-webhook"),
        ("validatingwebhookconfiguration", "kuota-validating-webhook"),
    ):
        patch = [
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": encoded}
            for i in range(len(_webhooks(cluster, kind, name)))
        ]
        cluster.kubectl(
            "patch",
            kind,
            name,
            "--type=json",
            "-p",
            json.dumps(patch),
            f"--as=system:serviceaccount:{NAMESPACE}:kuota-manager",
        )

    helm(
        cluster,
        "upgrade",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--timeout",
        "120s",
        values={"webhook": {"timeoutSeconds": 5}, "exporter": {"enabled": False}},
    )

    for kind, name in (
        ("mutatingwebhookconfiguration", "kuota-mutating-webhook"),
        ("validatingwebhookconfiguration", "kuota-validating-webhook"),
    ):
        for hook in _webhooks(cluster, kind, name):
            assert hook["timeoutSeconds"] == 5, "the upgrade applied the new values"
            client_config = hook["clientConfig"]
            assert isinstance(client_config, dict)
            assert client_config.get("caBundle") == encoded, f"{name}: the upgrade wiped the injected caBundle"
    assert cluster.kubectl("get", "daemonset", "kuota-exporter", "-n", NAMESPACE, check=False).returncode != 0
    assert len(kuota_webhook_configurations(cluster)) == 2, "an upgrade must not leave a second configuration"

    helm(cluster, "uninstall", RELEASE, "--namespace", NAMESPACE, "--timeout", "120s")

    assert kuota_webhook_configurations(cluster) == []
    created = cluster.kubectl("create", "-f", "-", input=json.dumps(job("after-uninstall", namespace)), check=False)
    assert created.returncode == 0, f"a Job is blocked after uninstall: {created.stderr}"
    for crd in crd_manifests():
        kept = cluster.kubectl("get", "crd", crd["metadata"]["name"], check=False)
        assert kept.returncode == 0, f"{crd['metadata']['name']} was deleted: queues would have gone with it"


def test_the_first_queue_in_the_notes_is_accepted_by_the_crds(
    cluster: Cluster, fresh_release: str, namespace: str
) -> None:
    example = re.search(r"<<'YAML'\n(.*?)\n\s*YAML\n", fresh_release, re.DOTALL)
    assert example is not None, "NOTES lost its example"
    manifest = "\n".join(line.removeprefix("     ") for line in example.group(1).splitlines())
    # The CRDs are what is tested here: with no manager running, the validating webhook would refuse any object.
    helm(cluster, "uninstall", RELEASE, "--namespace", NAMESPACE, "--timeout", "120s")
    manifest = manifest.replace("namespace: research", f"namespace: {namespace}")
    result = cluster.kubectl("apply", "--dry-run=server", "--validate=strict", "-f", "-", input=manifest, check=False)
    assert result.returncode == 0, result.stderr
