"""The webhook registered by URL on the real API server, with certificates from a Secret and a live cache.

The Job webhooks are narrowed to the test's namespace so that no other test's Jobs pass through them; the
ClusterQueue webhook is cluster-wide while a test runs and is removed afterwards.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import yaml

from kuota.certs.authority import ServingIdentity
from kuota.certs.ca_bundle_injection import WebhookConfigurations
from kuota.certs.rotation import SecretBackedCertificates
from kuota.certs.secret_store import SecretLocation
from kuota.certs.serving_context import ReloadableServerContext
from kuota.engine.model import LabelSelector
from kuota.kube.client import KubeApi
from kuota.webhook.admission.endpoints import WebhookEndpoint, kuota_rules, webhook_configurations
from kuota.webhook.admission.job_policy import JobPolicy, KuotaIdentity
from kuota.webhook.admission.reflected_cluster import ReflectedClusterFacts
from kuota.webhook.admission.server import AdmissionRoutes, AdmissionServer, ReadinessCheck, build_app
from tests.cluster import Cluster
from tests.paths import GUIDE
from tests.waiting import async_wait_until, wait_until

pytestmark = pytest.mark.integration

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUOTA_USER = "system:serviceaccount:kuota-system:kuota-manager"


@dataclass
class RunningWebhook:
    url: str
    facts: ReflectedClusterFacts
    certificates: SecretBackedCertificates
    configurations: WebhookConfigurations
    ca_pem: bytes


def _job(namespace: str, name: str, labels: dict[str, str] | None = None, suspend: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "suspend": suspend,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }


async def kubectl(cluster: Cluster, *args: str, check: bool = True, document: Any = None) -> Any:
    """kubectl off the event loop: the webhook answering the API server runs on this loop."""
    text = None if document is None else json.dumps(document)
    return await asyncio.to_thread(cluster.kubectl, *args, check=check, input=text)


async def _create(cluster: Cluster, document: dict[str, Any]) -> dict[str, Any]:
    result = await kubectl(cluster, "create", "-o", "json", "-f", "-", document=document)
    created: dict[str, Any] = json.loads(result.stdout)
    return created


@pytest.fixture
async def webhook(
    cluster: Cluster, namespace: str, api_client: KubeApi, kuota_crds: object
) -> AsyncIterator[RunningWebhook]:
    del kuota_crds
    context = ReloadableServerContext()
    facts = ReflectedClusterFacts.from_api(api_client)
    policy = JobPolicy(
        manage_jobs_without_queue_name=False,
        managed_jobs_namespace_selector=LabelSelector(),
        kuota=KuotaIdentity(usernames=frozenset({KUOTA_USER})),
    )
    routes = AdmissionRoutes(
        rules=kuota_rules(policy, facts),
        readiness=(ReadinessCheck("certificates", lambda: context.loaded), ReadinessCheck("caches", facts.synced)),
    )
    server = AdmissionServer(build_app(routes), context.context, host="127.0.0.1", port=0)
    runner = await server.start()
    url = f"https://127.0.0.1:{server.bound_port}"
    # Registered first with an empty caBundle: the certificate source must inject the real one.
    mutating, validating = webhook_configurations(
        WebhookEndpoint(url=url),
        b"",
        namespace_selector={"matchLabels": {"kubernetes.io/metadata.name": namespace}},
    )
    mutating["metadata"]["name"] += f"-{namespace}"
    validating["metadata"]["name"] += f"-{namespace}"
    for configuration in (mutating, validating):
        await kubectl(cluster, "create", "-f", "-", document=configuration)
    configurations = WebhookConfigurations((mutating["metadata"]["name"],), (validating["metadata"]["name"],))
    certificates = SecretBackedCertificates(
        api=api_client,
        secret=SecretLocation(namespace, "kuota-webhook-tls"),
        identity=ServingIdentity(dns_names=("localhost",), ip_addresses=("127.0.0.1",)),
        configurations=configurations,
        context=context,
    )
    async with asyncio.TaskGroup() as group:
        caches = group.create_task(facts.run())
        certificates_ready = asyncio.Event()
        rotation = group.create_task(certificates.run(certificates_ready))
        await asyncio.wait_for(certificates_ready.wait(), timeout=30)
        await async_wait_until(facts.synced, "the webhook's caches to sync")
        stored = await api_client.request("GET", f"/api/v1/namespaces/{namespace}/secrets/kuota-webhook-tls")
        ca_pem = base64.b64decode(stored.object()["data"]["ca.crt"])
        # The API server reads webhook configurations through an informer: wait until ours is in force.
        await asyncio.to_thread(
            wait_until,
            lambda: _dry_run_is_suspended(cluster, namespace),
            "the API server to call the mutating webhook",
        )
        try:
            yield RunningWebhook(url, facts, certificates, configurations, ca_pem)
        finally:
            caches.cancel()
            rotation.cancel()
            for kind, name in (
                ("mutatingwebhookconfiguration", mutating["metadata"]["name"]),
                ("validatingwebhookconfiguration", validating["metadata"]["name"]),
            ):
                await kubectl(cluster, "delete", kind, name, check=False)
            await runner.cleanup()


def _dry_run_is_suspended(cluster: Cluster, namespace: str) -> bool:
    probe = _job(namespace, "probe", {QUEUE_LABEL: "probe"})
    result = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", check=False, input=json.dumps(probe)
    )
    return result.returncode == 0 and json.loads(result.stdout)["spec"]["suspend"] is True


async def test_the_secret_backed_ca_is_injected_and_verifies_the_served_certificate(
    webhook: RunningWebhook, cluster: Cluster
) -> None:
    for kind, name in (
        ("mutatingwebhookconfiguration", webhook.configurations.mutating[0]),
        ("validatingwebhookconfiguration", webhook.configurations.validating[0]),
    ):
        stored = json.loads((await kubectl(cluster, "get", kind, name, "-o", "json")).stdout)
        assert {item["clientConfig"]["caBundle"] for item in stored["webhooks"]} == {
            base64.b64encode(webhook.ca_pem).decode()
        }
    trusting = ssl.create_default_context(cadata=webhook.ca_pem.decode())
    async with aiohttp.ClientSession() as session, session.get(f"{webhook.url}/readyz", ssl=trusting) as answer:
        assert (answer.status, await answer.text()) == (200, "ok")


async def test_a_second_replica_adopts_the_stored_certificates(webhook: RunningWebhook, api_client: KubeApi) -> None:
    replica_context = ReloadableServerContext()
    replica = SecretBackedCertificates(
        api=api_client,
        secret=webhook.certificates.secret,
        identity=webhook.certificates.identity,
        configurations=webhook.configurations,
        context=replica_context,
    )
    await replica.reconcile_once()
    assert replica_context.cert_pem == webhook.certificates.context.cert_pem


async def test_a_job_without_queue_label_gets_the_namespace_default_queue_and_is_suspended(
    webhook: RunningWebhook, cluster: Cluster, namespace: str
) -> None:
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {"clusterQueue": "research"},
    }
    await _create(cluster, queue)
    await async_wait_until(
        lambda: webhook.facts.local_queue_exists(namespace, "default"), "the LocalQueue in the cache"
    )
    created = await _create(cluster, _job(namespace, "plain"))
    assert created["metadata"]["labels"] == {QUEUE_LABEL: "default"}
    assert created["spec"]["suspend"] is True


async def test_the_guides_job_is_held_suspended_and_a_user_cannot_unsuspend_it(
    webhook: RunningWebhook, cluster: Cluster, namespace: str
) -> None:
    del webhook
    job = yaml.safe_load((GUIDE / "job-llm-finetune.yaml").read_text())
    # The guide's namespace is `research`; the webhook under test serves this test's namespace only.
    job["metadata"]["namespace"] = namespace
    job["spec"]["suspend"] = False
    created = await _create(cluster, job)
    assert created["spec"]["suspend"] is True
    name = created["metadata"]["name"]
    patch = json.dumps({"spec": {"suspend": False}})
    result = await kubectl(cluster, "patch", "job", name, "-n", namespace, "--type=merge", "-p", patch, check=False)
    assert result.returncode != 0
    assert 'admission webhook "vjob.kuota.dev" denied the request' in result.stderr
    assert f"Job {namespace}/{name} is queued in kuota (queue research-queue): only kuota unsuspends it" in (
        result.stderr
    )


async def test_the_queue_name_cannot_change_while_the_workload_is_admitted(
    webhook: RunningWebhook, cluster: Cluster, namespace: str
) -> None:
    created = await _create(cluster, _job(namespace, "admitted", {QUEUE_LABEL: "a"}, True))
    uid = created["metadata"]["uid"]
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-admitted", "namespace": namespace, "labels": {"kueue.x-k8s.io/job-uid": uid}},
        "spec": {"queueName": "a", "podSets": [{"name": "main", "count": 1, "template": {"spec": {}}}]},
    }
    await _create(cluster, workload)
    status = {
        "status": {
            "admission": {"clusterQueue": "research", "podSetAssignments": [{"name": "main", "count": 1}]},
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "test",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    }
    await kubectl(
        cluster,
        "patch",
        "workload",
        "job-admitted",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )
    await async_wait_until(
        lambda: webhook.facts.job_workload_admitted(namespace, uid), "the admitted Workload in the cache"
    )
    relabel = json.dumps({"metadata": {"labels": {QUEUE_LABEL: "b"}}})
    result = await kubectl(
        cluster, "patch", "job", "admitted", "-n", namespace, "--type=merge", "-p", relabel, check=False
    )
    assert result.returncode != 0
    assert "cannot change from 'a' to 'b' while its Workload is admitted" in result.stderr


async def test_a_cluster_queue_the_engine_rejects_is_refused_with_every_field(
    webhook: RunningWebhook, cluster: Cluster
) -> None:
    del webhook
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "engine-rejects"},
        "spec": {
            "cohortName": "c",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4, "lendingLimit": 8}]}],
                },
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "g", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
                },
            ],
        },
    }
    result = await kubectl(cluster, "create", "-f", "-", check=False, document=queue)
    assert result.returncode != 0
    assert "ClusterQueue engine-rejects is invalid" in result.stderr
    assert "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: 8" in result.stderr
    assert 'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"' in result.stderr
