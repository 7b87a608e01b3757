"""AdmissionChecks on a real control plane, the test playing the check's controller (``example.com/budget``, which
kuota does not run): a ClusterQueue naming a missing check, or one not Active, is inactive with Kueue's reason; a
Job queued behind an Active check has its quota reserved and stays suspended while the check is Pending, starts
with the check's podSetUpdates once it is Ready; a Retry evicts (AdmissionCheck) and frees the quota, the Workload
is queued again after requeueAfterSeconds; a Rejected check deactivates with a Warning event."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.manager.conftest import apply, ensure_namespace, get_json, remove_queue_objects, wait_for_event
from tests.integration.manager.guide_objects import gpu_job
from tests.integration.manager.test_guide import create_job, workload_of
from tests.manager_process import ManagerProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

NAMESPACE = "checks"
API = "kueue.x-k8s.io/v1beta2"
CHECK = "budget"
UPDATES = [
    {
        "name": "main",
        "labels": {"example.com/budget": "granted"},
        "annotations": {"example.com/budget-ticket": "42"},
        "tolerations": [{"key": "example.com/reserved", "operator": "Exists", "effect": "NoSchedule"}],
    }
]


def _job(name: str) -> dict[str, Any]:
    """A one-pod Job asking for one GPU only (the queues here cover nothing else)."""
    job = gpu_job(name, NAMESPACE, pods=1, gpus_per_pod=1)
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"nvidia.com/gpu": 1}
    return job


def _queue(name: str, checks: list[str]) -> dict[str, Any]:
    flavors = [{"name": "any-gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]}]
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}],
            "admissionChecksStrategy": {"admissionChecks": [{"name": check} for check in checks]},
        },
    }


@pytest.fixture
def checks_manager(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> Iterator[ManagerProcess]:
    del kuota_crds
    ensure_namespace(cluster, "kuota-checks", managed=False)
    ensure_namespace(cluster, NAMESPACE)
    config = cluster.workdir / "checks-config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "integrations:\n  frameworks: [batch/job, pod]\n"
    )
    manager = ManagerProcess(cluster, "kuota-checks", identity="checks", extra_args=(f"--config={config}",))
    manager.start()
    try:
        yield manager
    finally:
        # Pods go while the manager runs: it releases their finalizers.
        cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--wait=false", check=False)
        wait_until(lambda: not get_json(cluster, "pods", "-n", NAMESPACE)["items"], "the pods to be deleted", 60)
        remove_queue_objects(cluster, [NAMESPACE])
        cluster.kubectl("delete", "admissionchecks", "--all")
        manager.stop()
        manager.unregister()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(obj: dict[str, Any], kind: str) -> tuple[str, str, str] | None:
    found = next((c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind), None)
    return None if found is None else (found["status"], found["reason"], found.get("message", ""))


def _set_check(cluster: Cluster, workload: dict[str, Any], state: str, **fields: Any) -> None:
    """What the check's controller does: write its entry of the Workload's status.admissionChecks."""
    entry = {"name": CHECK, "state": state, "lastTransitionTime": _now(), "message": f"budget says {state}", **fields}
    patch = {"status": {"admissionChecks": [entry]}}
    name = workload["metadata"]["name"]
    cluster.kubectl(
        "patch", "workload", name, "-n", NAMESPACE, "--subresource=status", "--type=merge", "-p", json.dumps(patch)
    )


def _workload_where(cluster: Cluster, job: dict[str, Any], what: str, check: Any) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        workload = workload_of(cluster, NAMESPACE, job["metadata"]["uid"])
        return workload if workload is not None and check(workload) else None

    return wait_until(found, f"the Workload of Job {job['metadata']['name']}: {what}", timeout=60)


def _cluster_queue_active(cluster: Cluster, name: str) -> tuple[str, str, str] | None:
    return _condition(get_json(cluster, "clusterqueue", name), "Active")


def _suspended(cluster: Cluster, job: str) -> bool:
    return cluster.kubectl("get", "job", job, "-n", NAMESPACE, "-o", "jsonpath={.spec.suspend}").stdout == "true"


def test_checks_gate_admission_then_retry_requeues_and_rejection_deactivates(
    cluster: Cluster, checks_manager: ManagerProcess
) -> None:
    del checks_manager
    apply(
        cluster,
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "any-gpu"}},
        {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {"controllerName": "example.com/budget"},
        },
        _queue("checked", [CHECK]),
        _queue("unchecked", ["no-such-check"]),
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": f"{NAMESPACE}-queue", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "checked"},
        },
    )
    wait_until(
        lambda: (
            _cluster_queue_active(cluster, "unchecked")
            == (
                "False",
                "AdmissionCheckNotFound",
                "Can't admit new workloads: references missing AdmissionCheck(s): no-such-check.",
            )
        ),
        "the ClusterQueue naming a missing check to be inactive, AdmissionCheckNotFound",
    )
    wait_until(
        lambda: (
            _cluster_queue_active(cluster, "checked")
            == (
                "False",
                "AdmissionCheckInactive",
                "Can't admit new workloads: references inactive AdmissionCheck(s): budget.",
            )
        ),
        "the ClusterQueue naming a check its controller has not made Active to be inactive",
    )
    active = {"type": "Active", "status": "True", "reason": "Active", "message": "ok", "lastTransitionTime": _now()}
    cluster.kubectl(
        "patch", "admissioncheck", CHECK, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"conditions": [active]}}),
    )  # fmt: skip
    wait_until(
        lambda: (_cluster_queue_active(cluster, "checked") or ("",))[0] == "True",
        "the ClusterQueue to be active once its check is",
    )

    # Pending: quota reserved, not admitted, the Job suspended.
    first = create_job(cluster, _job("first"))
    reserved = _workload_where(
        cluster,
        first,
        "quota reserved with the check Pending",
        lambda w: (_condition(w, "QuotaReserved") or ("",))[0] == "True",
    )
    assert _condition(reserved, "Admitted") == (
        "False",
        "UnsatisfiedAdmissionChecks",
        "The workload has not all checks ready",
    )
    assert [(c["name"], c["state"]) for c in reserved["status"]["admissionChecks"]] == [(CHECK, "Pending")]
    assert _suspended(cluster, "first")

    # Ready with podSetUpdates: admitted, the Job starts carrying them.
    _set_check(cluster, reserved, "Ready", podSetUpdates=UPDATES)
    admitted = _workload_where(cluster, first, "admitted", lambda w: (_condition(w, "Admitted") or ("",))[0] == "True")
    assert wait_for_event(cluster, NAMESPACE, "Workload", admitted["metadata"]["name"], ("Normal", "Admitted"))
    wait_until(lambda: not _suspended(cluster, "first"), "the admitted Job to start")
    template = get_json(cluster, "job", "first", "-n", NAMESPACE)["spec"]["template"]
    assert template["metadata"]["labels"]["example.com/budget"] == "granted"
    assert template["metadata"]["annotations"]["example.com/budget-ticket"] == "42"
    assert UPDATES[0]["tolerations"][0] in template["spec"]["tolerations"]
    cluster.kubectl("delete", "job", "first", "-n", NAMESPACE, "--cascade=background")

    # Retry: evicted, quota released (the next Job gets it), checks reset, requeued after requeueAfterSeconds.
    retried = create_job(cluster, _job("retried"))
    waiting = _workload_where(
        cluster, retried, "quota reserved", lambda w: (_condition(w, "QuotaReserved") or ("",))[0] == "True"
    )
    rejected = create_job(cluster, _job("rejected"))
    _set_check(cluster, waiting, "Retry", requeueAfterSeconds=8)
    evicted = _workload_where(
        cluster,
        retried,
        "evicted by its check",
        lambda w: (_condition(w, "Evicted") or ("",))[:2] == ("True", "AdmissionCheck"),
    )
    assert _condition(evicted, "Evicted") == (
        "True",
        "AdmissionCheck",
        'Evicted due to AdmissionCheck in Retry state: "budget" (budget says Retry)',
    )
    assert _condition(evicted, "Requeued")[:2] == ("False", "AdmissionCheck")  # type: ignore[index]
    assert not evicted["status"].get("admission")
    assert "requeueAt" in evicted["status"]["requeueState"]
    [reset] = evicted["status"]["admissionChecks"]
    assert (reset["state"], reset["retryCount"], reset["message"]) == (
        "Pending",
        1,
        "Reset to Pending after eviction. Previously: Retry",
    )
    other = _workload_where(
        cluster, rejected, "the freed quota reserved", lambda w: (_condition(w, "QuotaReserved") or ("",))[0] == "True"
    )

    # Rejected: deactivated with a Warning event; its quota goes back to the retried Job once its wait is over.
    _set_check(cluster, other, "Rejected")
    deactivated = _workload_where(cluster, rejected, "deactivated", lambda w: w["spec"].get("active") is False)
    assert _condition(deactivated, "Evicted") == (
        "True",
        "DeactivatedDueToAdmissionCheck",
        'The workload is deactivated due to AdmissionCheck in Rejected state: "budget" (budget says Rejected)',
    )
    assert wait_for_event(
        cluster, NAMESPACE, "Workload", deactivated["metadata"]["name"], ("Warning", "AdmissionCheckRejected")
    ) == ('Deactivated due to AdmissionCheck in Rejected state: "budget" (budget says Rejected)')
    wait_until(lambda: _suspended(cluster, "rejected"), "the rejected Job to stay suspended")
    again = _workload_where(
        cluster,
        retried,
        "requeued and its quota reserved again",
        lambda w: (_condition(w, "QuotaReserved") or ("",))[0] == "True",
    )
    assert [(c["state"], c.get("retryCount")) for c in again["status"]["admissionChecks"]] == [("Pending", 1)]


def test_a_plain_pod_is_ungated_with_its_checks_pod_set_updates(
    cluster: Cluster, checks_manager: ManagerProcess
) -> None:
    """Every kind gets what a Ready check's podSetUpdates say (labels, annotations, nodeSelector, tolerations), as a
    Job does: a pod stays gated while the check is Pending and is ungated carrying them."""
    del checks_manager
    apply(
        cluster,
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "any-gpu"}},
        {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {"controllerName": "example.com/budget"},
        },
        _queue("checked", [CHECK]),
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": f"{NAMESPACE}-queue", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "checked"},
        },
    )
    active = {"type": "Active", "status": "True", "reason": "Active", "message": "ok", "lastTransitionTime": _now()}
    cluster.kubectl(
        "patch", "admissioncheck", CHECK, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"conditions": [active]}}),
    )  # fmt: skip
    wait_until(
        lambda: (_cluster_queue_active(cluster, "checked") or ("",))[0] == "True", "the ClusterQueue to be active"
    )
    gpu = {"nvidia.com/gpu": 1}
    container = {"name": "main", "image": "trainer", "resources": {"requests": gpu, "limits": gpu}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "notebook",
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": f"{NAMESPACE}-queue"},
        },
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    cluster.kubectl("create", "-f", "-", input=json.dumps(pod))

    def workload_where(what: str, check: Any) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            items = get_json(cluster, "workloads", "-n", NAMESPACE)["items"]
            return next((w for w in items if check(w)), None)

        return wait_until(found, f"the pod's Workload: {what}", timeout=60)

    reserved = workload_where("quota reserved", lambda w: (_condition(w, "QuotaReserved") or ("",))[0] == "True")
    gates = get_json(cluster, "pod", "notebook", "-n", NAMESPACE)["spec"].get("schedulingGates") or []
    assert {"name": "kueue.x-k8s.io/admission"} in gates, "ungated while its check is Pending"

    updates = [{**UPDATES[0], "name": "main", "nodeSelector": {"example.com/pool": "reserved"}}]
    _set_check(cluster, reserved, "Ready", podSetUpdates=updates)

    def ungated() -> dict[str, Any] | None:
        found = get_json(cluster, "pod", "notebook", "-n", NAMESPACE)
        return None if found["spec"].get("schedulingGates") else found

    placed = wait_until(ungated, "the pod to be ungated")
    assert placed["metadata"]["labels"]["example.com/budget"] == "granted"
    assert placed["metadata"]["annotations"]["example.com/budget-ticket"] == "42"
    assert placed["spec"]["nodeSelector"]["example.com/pool"] == "reserved"
    assert UPDATES[0]["tolerations"][0] in placed["spec"]["tolerations"]
