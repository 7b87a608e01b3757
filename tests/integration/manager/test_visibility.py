"""Kueue's visibility API served by the manager through the real API server's aggregation layer: registered as
the chart registers it (APIServices, a Service; here an EndpointSlice at the host's address, as the manager
runs outside the cluster), discovered by kubectl, read by kueuectl and ``kubectl get --raw``, and refused to a
user whose RBAC does not allow it."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kuota.webhook.visibility.leader_pod import SERVING_LABEL
from kuota.webhook.visibility.routes import visibility_service_name
from tests.cluster import Cluster
from tests.cluster.binaries import ensure_kueuectl
from tests.cluster.pod_container import host_address
from tests.integration.manager.conftest import KUOTA_NAMESPACE, apply, ensure_namespace, get_json
from tests.integration.manager.guide_objects import VERBATIM, gpu_job
from tests.integration.manager.test_guide import admitted_workload, create_job, workload_of
from tests.integration.manager.test_kueuectl import _row, _table
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

GROUP = "visibility.kueue.x-k8s.io"
SERVICE = visibility_service_name("kuota-webhook")
CQ_PATH = f"/apis/{GROUP}/v1beta2/clusterqueues/research/pendingworkloads"
LQ_PATH = f"/apis/{GROUP}/v1beta1/namespaces/research/localqueues/research-queue/pendingworkloads"
VIEWER = "carol"
LEADER, FOLLOWER = "visibility-0", "visibility-1"


def _registration(port: int, ca_bundle: str) -> list[dict[str, Any]]:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": SERVICE, "namespace": KUOTA_NAMESPACE},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port, "protocol": "TCP"}]},
    }
    endpoints = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{SERVICE}-host",
            "namespace": KUOTA_NAMESPACE,
            "labels": {"kubernetes.io/service-name": SERVICE},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [host_address()], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }
    api_services = [
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": f"{version}.{GROUP}"},
            "spec": {
                "group": GROUP,
                "version": version,
                "groupPriorityMinimum": 100,
                "versionPriority": priority,
                "service": {"name": SERVICE, "namespace": KUOTA_NAMESPACE, "port": 443},
                "caBundle": ca_bundle,
            },
        }
        for version, priority in (("v1beta2", 200), ("v1beta1", 100))
    ]
    return [service, endpoints, *api_services]


def _available(cluster: Cluster, version: str) -> bool:
    found = get_json(cluster, "apiservice", f"{version}.{GROUP}")
    conditions = found.get("status", {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def _stand_in_pod(name: str) -> dict[str, Any]:
    """A Pod named as a replica's identity (its Pod, in a cluster), never scheduled: the serving label's target."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": KUOTA_NAMESPACE},
        "spec": {
            "nodeSelector": {"kuota.test/no-such-node": "true"},
            "containers": [{"name": "manager", "image": "kuota/manager:test"}],
        },
    }


def _serving_label(cluster: Cluster, pod: str) -> str | None:
    labels = get_json(cluster, "pod", pod, "-n", KUOTA_NAMESPACE)["metadata"].get("labels") or {}
    value: str | None = labels.get(SERVING_LABEL)
    return value


@pytest.fixture(scope="module")
def manager(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> Iterator[ManagerProcess]:
    """The manager listening where the API server's aggregator can reach it, registered for the visibility API."""
    del kuota_crds
    ensure_namespace(cluster, KUOTA_NAMESPACE, managed=False)
    apply(cluster, _stand_in_pod(LEADER), _stand_in_pod(FOLLOWER))
    running = ManagerProcess(
        cluster, KUOTA_NAMESPACE, identity=LEADER, webhook_host="0.0.0.0", extra_args=("--visibility-serving-label",)
    )
    running.start()
    try:
        secret = get_json(cluster, "secret", "kuota-webhook-tls", "-n", KUOTA_NAMESPACE)
        apply(cluster, *_registration(running.webhook_port, secret["data"]["ca.crt"]))
        for version in ("v1beta2", "v1beta1"):
            wait_until(lambda v=version: _available(cluster, v), f"APIService {version}.{GROUP} Available", timeout=120)
        yield running
    finally:
        for version in ("v1beta2", "v1beta1"):
            cluster.kubectl("delete", "apiservice", f"{version}.{GROUP}", "--ignore-not-found")
        cluster.kubectl("delete", "service", SERVICE, "-n", KUOTA_NAMESPACE, "--ignore-not-found")
        cluster.kubectl("delete", "endpointslice", f"{SERVICE}-host", "-n", KUOTA_NAMESPACE, "--ignore-not-found")
        running.stop()
        running.unregister()
        cluster.kubectl("delete", "pod", LEADER, FOLLOWER, "-n", KUOTA_NAMESPACE, "--ignore-not-found", "--wait=false")


@pytest.fixture(scope="module")
def viewer_rbac(cluster: Cluster) -> Iterator[None]:
    """carol may read research's LocalQueues' pending workloads, and nothing else of the visibility API."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "kuota-test-pending-lq-viewer"},
        "rules": [{"apiGroups": [GROUP], "resources": ["localqueues/pendingworkloads"], "verbs": ["get"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "carol-pending", "namespace": "research"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": VIEWER}],
    }
    apply(cluster, role, binding)
    yield
    cluster.kubectl("delete", "rolebinding", "carol-pending", "-n", "research", "--ignore-not-found")
    cluster.kubectl("delete", "clusterrole", role["metadata"]["name"], "--ignore-not-found")


def _raw(cluster: Cluster, path: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("get", "--raw", path, *extra, check=False)


def _summary(cluster: Cluster, path: str) -> dict[str, Any]:
    result = _raw(cluster, path)
    assert result.returncode == 0, f"kubectl get --raw {path}: {result.stderr.strip()}"
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def _queue_up(cluster: Cluster) -> tuple[dict[str, Any], list[str]]:
    """research full with a production fine-tune (8 GPUs), three 4-GPU Jobs waiting; their Workloads' names in
    the order the engine admits them (the sweep class first, then oldest first)."""
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    sweep = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
             "metadata": {"name": "sweep"}, "value": 100}  # fmt: skip
    apply(cluster, sweep)
    running = create_job(cluster, gpu_job("vis-running", "research", 2, 4, priority_class="production-finetune"))
    admitted_workload(cluster, "research", running["metadata"]["uid"])
    waiting = [
        create_job(cluster, gpu_job(name, "research", 1, 4, priority_class=priority))
        for name, priority in (("vis-low-1", None), ("vis-sweep", "sweep"), ("vis-low-2", None))
    ]

    def workloads() -> list[dict[str, Any]] | None:
        found = [workload_of(cluster, "research", job["metadata"]["uid"]) for job in waiting]
        return None if any(w is None for w in found) else [w for w in found if w is not None]

    pending = wait_until(workloads, "the waiting Jobs' Workloads", timeout=60)
    # Same priority: the older first, then by uid (creation times have whole seconds), as the engine orders.
    ordered = sorted(
        pending,
        key=lambda w: (-w["spec"].get("priority", 0), w["metadata"]["creationTimestamp"], w["metadata"]["uid"]),
    )
    return running, [w["metadata"]["name"] for w in ordered]


def _listed(summary: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in summary["items"]]


def test_pending_workloads_are_listed_in_admission_order_with_kueues_shapes_and_windows(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    running, expected = _queue_up(cluster)
    wait_until(lambda: _listed(_summary(cluster, CQ_PATH)) == expected, "the three Jobs listed in order", timeout=60)
    summary = _summary(cluster, CQ_PATH)
    assert (summary["kind"], summary["apiVersion"]) == ("PendingWorkloadsSummary", f"{GROUP}/v1beta2")
    first = summary["items"][0]
    assert first["priority"] == 100 and first["localQueueName"] == "research-queue"
    assert [(i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in summary["items"]] == [
        (0, 0),
        (1, 1),
        (2, 2),
    ]
    assert first["metadata"]["namespace"] == "research" and first["metadata"]["creationTimestamp"]
    assert [o["kind"] for o in first["metadata"]["ownerReferences"]] == ["Job"]

    window = _summary(cluster, LQ_PATH + "?offset=1&limit=1")
    assert window["apiVersion"] == f"{GROUP}/v1beta1" and _listed(window) == expected[1:2]
    assert (window["items"][0]["positionInClusterQueue"], window["items"][0]["positionInLocalQueue"]) == (1, 1)

    missing = _raw(cluster, f"/apis/{GROUP}/v1beta2/clusterqueues/nowhere/pendingworkloads")
    assert missing.returncode != 0 and "NotFound" in missing.stderr and '"nowhere" not found' in missing.stderr
    bad = _raw(cluster, CQ_PATH + "?limit=ten")
    assert bad.returncode != 0 and "limit='ten' is not an integer" in bad.stderr

    # Freeing research's 8 GPUs admits the first two listed; the third moves up to position 0.
    cluster.kubectl("delete", "job", "vis-running", "-n", "research", "--cascade=foreground", "--wait=false")
    wait_until(lambda: _listed(_summary(cluster, CQ_PATH)) == expected[2:], "the first two listed admitted", timeout=90)
    assert _summary(cluster, CQ_PATH)["items"][0]["positionInClusterQueue"] == 0
    del running


def test_kubectl_discovers_the_api_and_kueuectl_shows_positions_in_queue(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    versions = cluster.kubectl("api-versions").stdout.split()
    assert f"{GROUP}/v1beta2" in versions and f"{GROUP}/v1beta1" in versions
    resources = json.loads(cluster.kubectl("get", "--raw", f"/apis/{GROUP}/v1beta2").stdout)
    assert {r["name"]: r["verbs"] for r in resources["resources"]}["localqueues/pendingworkloads"] == ["get"]

    _, expected = _queue_up(cluster)
    wait_until(lambda: _listed(_summary(cluster, CQ_PATH)) == expected, "the three Jobs listed in order", timeout=60)
    binary: Path = ensure_kueuectl()
    listing = subprocess.run(
        [str(binary), f"--kubeconfig={cluster.kubeconfig}", "list", "workload", "-n", "research"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert listing.returncode == 0, listing.stderr
    rows = _table(listing.stdout)
    for position, name in enumerate(expected):
        row = _row(rows, name)
        assert (row["STATUS"], row["POSITION IN QUEUE"]) == ("PENDING", str(position))
    running_row = next(row for row in rows if row["JOB NAME"] == "vis-running")
    assert (running_row["STATUS"], running_row["POSITION IN QUEUE"]) == ("ADMITTED", "")


def test_a_user_sees_only_what_rbac_lets_them_see(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...], viewer_rbac: None
) -> None:
    del viewer_rbac
    _, expected = _queue_up(cluster)
    wait_until(lambda: _listed(_summary(cluster, CQ_PATH)) == expected, "the three Jobs listed in order", timeout=60)
    as_viewer = ("--as", VIEWER)
    allowed = _raw(cluster, LQ_PATH, *as_viewer)
    assert allowed.returncode == 0, allowed.stderr
    assert _listed(json.loads(allowed.stdout)) == expected
    other_namespace = LQ_PATH.replace("namespaces/research", "namespaces/applied-ml")
    for path in (other_namespace, CQ_PATH):
        refused = _raw(cluster, path, *as_viewer)
        assert refused.returncode != 0 and "Forbidden" in refused.stderr, (path, refused.stderr)
        assert f'User "{VIEWER}" cannot get resource' in refused.stderr


def _ask_directly(manager: ManagerProcess, ca_pem: bytes, path: str) -> tuple[int, dict[str, Any]]:
    """GET from one replica as the API server's front proxy would, naming an admin."""
    pki = manager.cluster.pki
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.load_cert_chain(pki.proxy_client_cert, pki.proxy_client_key)
    headers = {"X-Remote-User": "kuota-test-admin", "X-Remote-Group": "system:masters"}
    request = urllib.request.Request(f"https://127.0.0.1:{manager.webhook_port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as refusal:
        return refusal.code, json.loads(refusal.read())


def test_only_the_leader_is_labelled_for_the_visibility_service_and_a_follower_answers_503(
    cluster: Cluster, manager: ManagerProcess
) -> None:
    wait_until(lambda: _serving_label(cluster, LEADER) == "true", "the leader's Pod to be labelled", timeout=60)
    # A label left from an earlier run of the follower's Pod is removed when it starts.
    cluster.kubectl("label", "pod", FOLLOWER, "-n", KUOTA_NAMESPACE, f"{SERVING_LABEL}=true", "--overwrite")
    follower = ManagerProcess(
        cluster, KUOTA_NAMESPACE, identity=FOLLOWER, webhook_host="0.0.0.0", extra_args=("--visibility-serving-label",)
    )
    follower.start()
    try:
        wait_until(
            lambda: _serving_label(cluster, FOLLOWER) is None, "the follower's Pod to lose the label", timeout=60
        )
        ca_pem = base64.b64decode(
            get_json(cluster, "secret", "kuota-webhook-tls", "-n", KUOTA_NAMESPACE)["data"]["ca.crt"]
        )
        code, body = _ask_directly(follower, ca_pem, CQ_PATH)
        assert (code, body["reason"]) == (503, "ServiceUnavailable") and "not the leader" in body["message"]
        code, body = _ask_directly(manager, ca_pem, CQ_PATH)
        assert (code, body["reason"]) == (404, "NotFound")  # the leader answers: no ClusterQueue research now
        assert _serving_label(cluster, LEADER) == "true"
    finally:
        follower.stop()
        # The follower registered the webhooks at its own URL, as every replica started by URL does: take them back.
        manager.stop()
        manager.start()
