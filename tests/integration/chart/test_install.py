"""``helm install`` into kuota-system on the real control plane, and what the chart's identities may and may not do."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import pytest

from kuota.certs.authority import ServingIdentity, issue_bundle
from kuota.certs.ca_bundle_injection import WebhookConfigurations, inject_ca_bundle
from kuota.certs.secret_store import SecretLocation, load_or_create
from kuota.kube.client import KubeApi
from kuota.kube.kubeconfig import from_kubeconfig
from tests.cluster import Cluster
from tests.integration.chart.conftest import install, job, kuota_webhook_configurations, uninstall
from tests.integration.manager.conftest import ensure_namespace
from tests.integration.manager.guide_objects import FINETUNE_JOB, VERBATIM
from tests.integration.manager.test_guide import admitted_workload, running_pods
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.unit.chart.rendering import NAMESPACE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

MANAGER = f"system:serviceaccount:{NAMESPACE}:kuota-manager"
EXPORTER = f"system:serviceaccount:{NAMESPACE}:kuota-exporter"
REPORT = f"system:serviceaccount:{NAMESPACE}:kuota-report"


@pytest.fixture(scope="module")
def release(cluster: Cluster) -> Iterator[str]:
    # emptyDir: this control plane runs no pvc-protection controller, so a PVC would hold the namespace forever.
    report = {"enabled": True, "prometheusUrl": "http://prometheus:9090", "storage": {"type": "emptyDir"}}
    output = install(cluster, {"report": report})
    try:
        yield output
    finally:
        uninstall(cluster)


def _can(cluster: Cluster, user: str, verb: str, resource: str, namespace: str | None = None) -> bool:
    """``resource`` is ``plural.group``, ``plural.group/name``, or ``plural.group:subresource``."""
    scope = ["--namespace", namespace] if namespace else ["--all-namespaces"]
    resource, _, subresource = resource.partition(":")
    if subresource:
        scope.append(f"--subresource={subresource}")
    result = cluster.kubectl("auth", "can-i", verb, resource, f"--as={user}", *scope, check=False)
    answer = result.stdout.strip()
    assert answer in ("yes", "no"), result.stderr
    return answer == "yes"


def test_the_release_installs_and_says_how_to_create_a_first_queue(release: str) -> None:
    assert "STATUS: deployed" in release
    assert "kind: ClusterQueue" in release and "kubectl get clusterqueue research" in release


MANAGER_MAY = [
    ("get", "jobs.batch"),
    ("watch", "jobs.batch"),
    ("patch", "jobs.batch"),
    ("update", "jobs.batch"),
    ("list", "clusterqueues.kueue.x-k8s.io"),
    ("patch", "clusterqueues.kueue.x-k8s.io:status"),
    ("watch", "localqueues.kueue.x-k8s.io"),
    ("update", "localqueues.kueue.x-k8s.io:status"),
    ("list", "resourceflavors.kueue.x-k8s.io"),
    ("watch", "cohorts.kueue.x-k8s.io"),
    ("list", "workloadpriorityclasses.kueue.x-k8s.io"),
    ("create", "workloads.kueue.x-k8s.io"),
    ("delete", "workloads.kueue.x-k8s.io"),
    ("patch", "workloads.kueue.x-k8s.io:status"),
    ("update", "workloads.kueue.x-k8s.io:finalizers"),
    ("watch", "namespaces"),
    ("create", "events"),
    ("patch", "events.events.k8s.io"),
    ("update", "mutatingwebhookconfigurations/kuota-mutating-webhook"),
    ("list", "validatingwebhookconfigurations/kuota-validating-webhook"),
    # The secure /metrics endpoint asks who its caller is and whether it may get /metrics.
    ("create", "tokenreviews.authentication.k8s.io"),
    ("create", "subjectaccessreviews.authorization.k8s.io"),
    # The visibility API's APIServices get the serving CA.
    ("update", "apiservices.apiregistration.k8s.io/v1beta2.visibility.kueue.x-k8s.io"),
    ("get", "apiservices.apiregistration.k8s.io/v1beta1.visibility.kueue.x-k8s.io"),
]

MANAGER_MAY_NOT = [
    ("delete", "namespaces"),
    ("create", "namespaces"),
    ("delete", "jobs.batch"),
    ("create", "jobs.batch"),
    ("create", "pods"),
    ("delete", "clusterqueues.kueue.x-k8s.io"),
    ("update", "clusterqueues.kueue.x-k8s.io"),
    ("update", "mutatingwebhookconfigurations/other-webhook"),
    ("list", "mutatingwebhookconfigurations"),
    ("create", "validatingwebhookconfigurations"),
    ("create", "clusterrolebindings"),
    ("escalate", "clusterroles"),
    ("impersonate", "serviceaccounts"),
    ("get", "secrets"),
    ("list", "secrets"),
    ("update", "resourceflavors.kueue.x-k8s.io:status"),
    ("update", "jobs.batch:status"),
    ("patch", "workloads.kueue.x-k8s.io:finalizers"),
    ("update", "apiservices.apiregistration.k8s.io/v1beta1.metrics.k8s.io"),
]


@pytest.mark.parametrize(("verb", "resource"), MANAGER_MAY, ids=[" ".join(p) for p in MANAGER_MAY])
def test_the_manager_may_do_its_work_cluster_wide(cluster: Cluster, release: str, verb: str, resource: str) -> None:
    del release
    assert _can(cluster, MANAGER, verb, resource)


@pytest.mark.parametrize(("verb", "resource"), MANAGER_MAY_NOT, ids=[" ".join(p) for p in MANAGER_MAY_NOT])
def test_the_manager_may_not_reach_beyond_its_work(cluster: Cluster, release: str, verb: str, resource: str) -> None:
    del release
    assert not _can(cluster, MANAGER, verb, resource)


def test_the_manager_reaches_only_its_own_secret_and_lease(cluster: Cluster, release: str, namespace: str) -> None:
    del release
    assert _can(cluster, MANAGER, "get", "secrets/kuota-webhook-tls", NAMESPACE)
    assert _can(cluster, MANAGER, "watch", "secrets/kuota-webhook-tls", NAMESPACE)
    assert _can(cluster, MANAGER, "create", "secrets", NAMESPACE)
    assert _can(cluster, MANAGER, "patch", "leases.coordination.k8s.io/kuota-manager", NAMESPACE)
    assert not _can(cluster, MANAGER, "get", "secrets/some-other-secret", NAMESPACE)
    assert not _can(cluster, MANAGER, "list", "secrets", NAMESPACE)
    assert not _can(cluster, MANAGER, "delete", "secrets/kuota-webhook-tls", NAMESPACE)
    assert not _can(cluster, MANAGER, "get", "secrets/kuota-webhook-tls", namespace)
    assert not _can(cluster, MANAGER, "create", "secrets", namespace)
    assert not _can(cluster, MANAGER, "get", "secrets", "kube-system")
    assert not _can(cluster, MANAGER, "update", "leases.coordination.k8s.io/kube-scheduler", NAMESPACE)


def test_the_manager_reads_the_front_proxy_configuration_and_patches_pods_without_deleting_them(
    cluster: Cluster, release: str
) -> None:
    del release
    assert _can(cluster, MANAGER, "get", "configmaps/extension-apiserver-authentication", "kube-system")
    assert not _can(cluster, MANAGER, "get", "configmaps/kube-proxy", "kube-system")
    # Topology-aware scheduling sends the gated pods of every kind to their domain, in every namespace, as
    # Kueue's manager does; deleting pods stays with the pod-based integrations, off in this release.
    assert _can(cluster, MANAGER, "patch", "pods", "default")
    assert not _can(cluster, MANAGER, "delete", "pods", "default")
    assert not _can(cluster, MANAGER, "update", "pods", "default")


def test_the_exporter_and_report_only_read(cluster: Cluster, release: str) -> None:
    del release
    assert _can(cluster, EXPORTER, "watch", "pods")
    assert not _can(cluster, EXPORTER, "get", "secrets")
    assert not _can(cluster, EXPORTER, "create", "pods/exec")
    assert _can(cluster, REPORT, "list", "workloads.kueue.x-k8s.io")
    assert not _can(cluster, REPORT, "watch", "workloads.kueue.x-k8s.io")
    assert not _can(cluster, REPORT, "get", "jobs.batch")


@pytest.fixture
async def as_manager(cluster: Cluster) -> AsyncIterator[KubeApi]:
    admin = from_kubeconfig(cluster.kubeconfig)
    async with KubeApi(dataclasses.replace(admin, headers={**admin.headers, "Impersonate-User": MANAGER})) as api:
        yield api


async def test_the_manager_identity_can_store_its_certificate_and_inject_the_ca(
    cluster: Cluster, release: str, as_manager: KubeApi
) -> None:
    """The self-managed TLS path (kuota's certs code) under nothing but the chart's RBAC."""
    del release
    location = SecretLocation(NAMESPACE, "kuota-webhook-tls")
    identity = ServingIdentity.for_service("kuota-webhook", NAMESPACE, ())
    stored = await load_or_create(as_manager, location, lambda: issue_bundle(identity, datetime.now(UTC)), 10)
    changed = await inject_ca_bundle(
        as_manager,
        WebhookConfigurations(
            mutating=("kuota-mutating-webhook",),
            validating=("kuota-validating-webhook",),
            api_services=("v1beta2.visibility.kueue.x-k8s.io", "v1beta1.visibility.kueue.x-k8s.io"),
        ),
        stored.bundle.ca_cert_pem,
        10,
    )
    assert changed == 4
    validating = json.loads(
        cluster.kubectl("get", "validatingwebhookconfiguration", "kuota-validating-webhook", "-o", "json").stdout
    )
    assert {hook["clientConfig"].get("caBundle") for hook in validating["webhooks"]} != {None}


def test_the_webhook_guards_job_creation_except_in_excluded_namespaces(
    cluster: Cluster, release: str, namespace: str
) -> None:
    """No manager runs here, so failurePolicy Fail refuses Jobs, proving the webhook is live where it should be."""
    del release
    assert sorted(kuota_webhook_configurations(cluster)) == [
        "mutatingwebhookconfigurations/kuota-mutating-webhook",
        "validatingwebhookconfigurations/kuota-validating-webhook",
    ]
    refused = cluster.kubectl("create", "-f", "-", input=json.dumps(job("guarded", namespace)), check=False)
    assert refused.returncode != 0
    assert "mjob.kuota.dev" in refused.stderr, refused.stderr
    for excluded in (NAMESPACE, "kube-system"):
        allowed = cluster.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(job("excluded", excluded)), check=False
        )
        assert allowed.returncode == 0, allowed.stderr


def test_the_manager_with_nothing_but_the_charts_identity_admits_the_guides_job(cluster: Cluster, release: str) -> None:
    """The manager from source, authenticated as the chart's ServiceAccount (a real token, not admin), does its
    whole job: certificate Secret, Lease, webhook registration, Workloads, Job placement."""
    del release
    token = cluster.kubectl("create", "token", "kuota-manager", "-n", NAMESPACE, "--duration=1h").stdout.strip()
    kubeconfig = cluster.kubeconfig_with_token("kuota-manager-sa", token)
    manager = ManagerProcess(cluster, NAMESPACE, identity="chart-identity", kubeconfig=kubeconfig)
    ensure_namespace(cluster, "research")
    manager.start()
    try:
        assert "manager acts as " + MANAGER in manager.log_path.read_text()
        for name in VERBATIM:
            cluster.kubectl("apply", "-f", str(GUIDE / name))
        created = json.loads(cluster.kubectl("create", "-f", str(GUIDE / FINETUNE_JOB), "-o", "json").stdout)
        assert created["spec"]["suspend"] is True
        workload = admitted_workload(cluster, "research", created["metadata"]["uid"])
        assert workload["status"]["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "h100-ondemand"
        pods = running_pods(cluster, "research", created["metadata"]["name"], 2)
        assert all(p["spec"]["nodeSelector"]["gpu-type"] == "h100" for p in pods)
        assert "Forbidden" not in manager.log_path.read_text()
    finally:
        cluster.kubectl("delete", "jobs", "--all", "-n", "research", "--wait=false")
        wait_until(
            lambda: not json.loads(cluster.kubectl("get", "workloads", "-n", "research", "-o", "json").stdout)["items"],
            "the guide's Workload to be released by the manager",
        )
        manager.stop()
        cluster.kubectl("delete", "clusterqueues,localqueues,resourceflavors,workloadpriorityclasses", "--all", "-A")


def test_the_exporter_pods_are_admitted_node_critical_with_the_dcgm_hostname_label(
    cluster: Cluster, release: str
) -> None:
    """The API server's priority admission resolves system-node-critical for a pod in the release namespace."""
    del release
    daemonset = json.loads(cluster.kubectl("get", "daemonset", "kuota-exporter", "-n", NAMESPACE, "-o", "json").stdout)
    template = daemonset["spec"]["template"]
    assert template["spec"]["priorityClassName"] == "system-node-critical"
    assert "--hostname-label=Hostname" in template["spec"]["containers"][0]["args"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "exporter-probe", "namespace": NAMESPACE}}
    pod |= {"spec": template["spec"]}
    admitted = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod), check=False
    )
    assert admitted.returncode == 0, admitted.stderr
    assert json.loads(admitted.stdout)["spec"]["priority"] == 2_000_001_000
