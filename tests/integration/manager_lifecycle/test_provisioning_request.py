"""Kueue's ProvisioningRequest admission check controller, run by kuota, on a real control plane with the real
ProvisioningRequest CRD (from the ``k8s.io/autoscaler/cluster-autoscaler/apis`` module Kueue v0.20 pins, fetched
through the Go module proxy as the control plane's binaries are).

The cluster autoscaler that would answer the requests is not run: the Go module proxy the test machines reach
refuses the ``k8s.io/autoscaler/cluster-autoscaler`` module ("403 Forbidden: This module version is not
available", for its version list, for v1.31.0 and for the commit the pinned ``apis`` module was cut from) while
it serves that ``apis`` module. So the test plays the autoscaler: it writes the requests' ``Provisioned`` and
``Failed`` conditions, as ``test_admission_checks.py`` plays a check's controller.

Shown: a ClusterQueue gated by a provisioning check reserves quota, creates the request with its PodTemplates,
keeps the Job suspended until ``Provisioned=True``, then starts it with the consume annotation; a ``Failed``
request retries after its backoff with the next attempt, and past ``backoffLimitCount`` the Workload is
deactivated. Bad input: an AdmissionCheck naming a missing config is inactive with Kueue's reason (one log line),
a config with 101 parameters is refused by its CRD; neither stops anything else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.binaries import AUTOSCALER_APIS_MODULE, AUTOSCALER_APIS_VERSION, module_dir
from tests.integration.manager.conftest import apply, ensure_namespace, get_json, remove_queue_objects, wait_for_event
from tests.integration.manager.guide_objects import gpu_job
from tests.integration.manager.test_guide import create_job, workload_of
from tests.manager_process import ManagerProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

NAMESPACE = "provisioning"
API = "kueue.x-k8s.io/v1beta2"
CHECK = "capacity"
CLASS = "check-capacity.autoscaling.x-k8s.io"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
POOL_LABEL = "kuota.dev/test-pool"
PROVISIONED_POOL_LABEL = "kuota.dev/provisioned-pool"


@pytest.fixture(scope="module")
def provisioning_request_crd(cluster: Cluster) -> None:
    crd = module_dir(AUTOSCALER_APIS_MODULE, AUTOSCALER_APIS_VERSION) / (
        "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"
    )
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/provisioningrequests.autoscaling.x-k8s.io"
    )
    wait_until(
        lambda: cluster.kubectl("get", "provisioningrequests.autoscaling.x-k8s.io", "-A", check=False).returncode == 0,
        "autoscaling.x-k8s.io discovery",
    )


@pytest.fixture
def provisioning_manager(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], provisioning_request_crd: None
) -> Iterator[ManagerProcess]:
    del kuota_crds, provisioning_request_crd
    ensure_namespace(cluster, "kuota-provisioning", managed=False)
    ensure_namespace(cluster, NAMESPACE)
    manager = ManagerProcess(cluster, "kuota-provisioning", identity="provisioning")
    manager.start()
    try:
        yield manager
    finally:
        remove_queue_objects(cluster, [NAMESPACE])
        cluster.kubectl("delete", "admissionchecks,provisioningrequestconfigs", "--all")
        manager.stop()
        manager.unregister()


def _job(name: str, **annotations: str) -> dict[str, Any]:
    job = gpu_job(name, NAMESPACE, pods=1, gpus_per_pod=1)
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"nvidia.com/gpu": 1}
    job["metadata"].setdefault("annotations", {}).update(annotations)
    return job


def _condition(obj: dict[str, Any], kind: str) -> tuple[str, str, str] | None:
    found = next((c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind), None)
    return None if found is None else (found["status"], found["reason"], found.get("message", ""))


def _workload_where(cluster: Cluster, job: dict[str, Any], what: str, check: Any) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        workload = workload_of(cluster, NAMESPACE, job["metadata"]["uid"])
        return workload if workload is not None and check(workload) else None

    return wait_until(found, f"the Workload of Job {job['metadata']['name']}: {what}", timeout=60)


def _check_entry(workload: dict[str, Any]) -> dict[str, Any]:
    [entry] = [c for c in workload["status"].get("admissionChecks") or [] if c["name"] == CHECK]
    return entry


def _request(cluster: Cluster, name: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        result = cluster.kubectl("get", "provisioningrequest", name, "-n", NAMESPACE, "-o", "json", check=False)
        return json.loads(result.stdout) if result.returncode == 0 else None

    return wait_until(found, f"ProvisioningRequest {name}", timeout=60)


def _answer(cluster: Cluster, name: str, condition: str, message: str, **status: Any) -> None:
    """What the cluster autoscaler does: set the request's condition (and details)."""
    entry = {"type": condition, "status": "True", "reason": condition, "message": message}
    entry["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    patch = {"status": {"conditions": [entry], **status}}
    cluster.kubectl(
        "patch", "provisioningrequest", name, "-n", NAMESPACE, "--subresource=status", "--type=merge",
        "-p", json.dumps(patch),
    )  # fmt: skip


def _suspended(cluster: Cluster, job: str) -> bool:
    return cluster.kubectl("get", "job", job, "-n", NAMESPACE, "-o", "jsonpath={.spec.suspend}").stdout == "true"


def _check_active(cluster: Cluster, name: str) -> tuple[str, str, str] | None:
    return _condition(get_json(cluster, "admissioncheck", name), "Active")


def _setup(cluster: Cluster) -> None:
    flavors = [{"name": "pooled-gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]}]
    apply(
        cluster,
        {
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": {"name": "pooled-gpu"},
            "spec": {"nodeLabels": {POOL_LABEL: "gpu-pool"}},
        },
        {
            "apiVersion": API,
            "kind": "ProvisioningRequestConfig",
            "metadata": {"name": "capacity-config"},
            "spec": {
                "provisioningClassName": CLASS,
                "parameters": {"ValidUntilSeconds": "600"},
                "managedResources": ["nvidia.com/gpu"],
                "retryStrategy": {"backoffLimitCount": 1, "backoffBaseSeconds": 2, "backoffMaxSeconds": 10},
                "podSetUpdates": {
                    "nodeSelector": [{"key": PROVISIONED_POOL_LABEL, "valueFromProvisioningClassDetail": "pool"}]
                },
            },
        },
        {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": "capacity-config",
                },
            },
        },
        {
            "apiVersion": API,
            "kind": "AdmissionCheck",
            "metadata": {"name": "misconfigured"},
            "spec": {
                "controllerName": "kueue.x-k8s.io/provisioning-request",
                "parameters": {
                    "apiGroup": "kueue.x-k8s.io",
                    "kind": "ProvisioningRequestConfig",
                    "name": "no-such-config",
                },
            },
        },
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": "provisioned"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": flavors}],
                "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]},
            },
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": f"{NAMESPACE}-queue", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "provisioned"},
        },
    )


def test_bad_configs_are_one_line_each_and_stop_nothing_else(
    cluster: Cluster, provisioning_manager: ManagerProcess
) -> None:
    _setup(cluster)
    too_many = {
        "apiVersion": API,
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "too-many"},
        "spec": {"provisioningClassName": CLASS, "parameters": {f"p{i}": "v" for i in range(101)}},
    }
    refused = cluster.kubectl("apply", "-f", "-", input=json.dumps(too_many), check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines() == [
        'The ProvisioningRequestConfig "too-many" is invalid: spec.parameters: Too many: 101: must have at most 100 '
        "items"
    ]
    missing = (
        "False",
        "BadParametersRef",
        'provisioningrequestconfigs.kueue.x-k8s.io "no-such-config" not found',
    )
    wait_until(lambda: _check_active(cluster, "misconfigured") == missing, "the misconfigured check to be inactive")
    wait_until(
        lambda: _check_active(cluster, CHECK) == ("True", "Active", "The admission check is active"),
        "the configured check to be active beside it",
    )
    lines = [line for line in provisioning_manager.log_tail().splitlines() if "AdmissionCheck misconfigured" in line]
    assert len(lines) == 1 and missing[2] in lines[0], lines
    wait_until(
        lambda: (_condition(get_json(cluster, "clusterqueue", "provisioned"), "Active") or ("",))[0] == "True",
        "the ClusterQueue of the configured check to be active",
    )


def test_a_provisioned_request_starts_the_job_and_a_failed_one_retries_then_deactivates(
    cluster: Cluster, provisioning_manager: ManagerProcess
) -> None:
    del provisioning_manager
    _setup(cluster)
    wait_until(
        lambda: (_condition(get_json(cluster, "clusterqueue", "provisioned"), "Active") or ("",))[0] == "True",
        "the ClusterQueue to be active once its check is",
    )

    # Quota reserved, the request and its PodTemplate made, the Job kept suspended.
    job = create_job(cluster, _job("provisioned", **{"provreq.kueue.x-k8s.io/ValidUntilSeconds": "300"}))
    reserved = _workload_where(
        cluster, job, "quota reserved", lambda w: (_condition(w, "QuotaReserved") or ("",))[0] == "True"
    )
    workload = reserved["metadata"]["name"]
    name = f"{workload}-{CHECK}-1"
    request = _request(cluster, name)
    template = f"ppt-{name}-main"
    assert request["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true"}
    [owner] = request["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Workload",
        workload,
        reserved["metadata"]["uid"],
        True,
    )
    assert request["spec"]["provisioningClassName"] == CLASS
    assert request["spec"]["parameters"] == {"ValidUntilSeconds": "300"}  # the job's annotation wins
    assert request["spec"]["podSets"] == [{"podTemplateRef": {"name": template}, "count": 1}]
    assert wait_for_event(cluster, NAMESPACE, "Workload", workload, ("Normal", "ProvisioningRequestCreated")) == (
        f'Created ProvisioningRequest: "{name}"'
    )

    def handed_over() -> dict[str, Any] | None:
        found = get_json(cluster, "podtemplate", template, "-n", NAMESPACE)
        owners = found["metadata"].get("ownerReferences") or []
        return found if [(o["kind"], o["name"]) for o in owners] == [("ProvisioningRequest", name)] else None

    pod_template = wait_until(handed_over, "the PodTemplate to be owned by its request")
    pod_spec = pod_template["template"]["spec"]
    assert pod_spec["nodeSelector"][POOL_LABEL] == "gpu-pool"  # the admitted flavor's nodeLabels
    assert pod_spec["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    assert pod_spec["containers"][0]["image"] == job["spec"]["template"]["spec"]["containers"][0]["image"]
    assert _check_entry(reserved)["state"] == "Pending"
    assert _suspended(cluster, "provisioned")

    # Provisioned: Ready, admitted, the Job starts with the consume and class annotations.
    _answer(cluster, name, "Provisioned", "capacity is there", provisioningClassDetails={"pool": "pool-7"})
    admitted = _workload_where(cluster, job, "admitted", lambda w: (_condition(w, "Admitted") or ("",))[0] == "True")
    entry = _check_entry(admitted)
    assert (entry["state"], entry["message"]) == ("Ready", "capacity is there")
    assert wait_for_event(cluster, NAMESPACE, "Workload", workload, ("Normal", "AdmissionCheckUpdated")) == (
        f"Admission check {CHECK} updated state from Pending to Ready with message: capacity is there"
    )
    wait_until(lambda: not _suspended(cluster, "provisioned"), "the provisioned Job to start")
    started = get_json(cluster, "job", "provisioned", "-n", NAMESPACE)["spec"]["template"]
    assert started["metadata"]["annotations"][CONSUME] == name
    assert started["metadata"]["annotations"]["autoscaling.x-k8s.io/provisioning-class-name"] == CLASS
    assert started["spec"]["nodeSelector"][PROVISIONED_POOL_LABEL] == "pool-7"
    cluster.kubectl("delete", "job", "provisioned", "-n", NAMESPACE, "--cascade=background")

    # Failed: Retry, evicted, its request deleted, queued again after the backoff with the next attempt.
    failing = create_job(cluster, _job("failing"))
    first = _workload_where(
        cluster, failing, "quota reserved", lambda w: (_condition(w, "QuotaReserved") or ("",))[0] == "True"
    )
    failing_workload = first["metadata"]["name"]
    first_request = f"{failing_workload}-{CHECK}-1"
    _request(cluster, first_request)
    _answer(cluster, first_request, "Failed", "no capacity in the zone")
    second_request = f"{failing_workload}-{CHECK}-2"
    _request(cluster, second_request)
    retried = _workload_where(
        cluster, failing, "reserved again", lambda w: (_condition(w, "QuotaReserved") or ("",))[0] == "True"
    )
    entry = _check_entry(retried)
    assert (entry["retryCount"], entry["requeueAfterSeconds"]) == (1, 2)  # backoffBaseSeconds * 2^0
    assert [e for e in retried["status"]["schedulingStats"]["evictions"] if e["reason"] == "AdmissionCheck"]
    wait_until(
        lambda: (
            cluster.kubectl("get", "provisioningrequest", first_request, "-n", NAMESPACE, check=False).returncode != 0
        ),
        "the evicted attempt's request to be deleted",
    )
    assert _suspended(cluster, "failing")

    # Past backoffLimitCount: Rejected, the Workload deactivated, the Job left suspended.
    _answer(cluster, second_request, "Failed", "still no capacity")
    deactivated = _workload_where(cluster, failing, "deactivated", lambda w: w["spec"].get("active") is False)
    assert _condition(deactivated, "Evicted") == (
        "True",
        "DeactivatedDueToAdmissionCheck",
        f'The workload is deactivated due to AdmissionCheck in Rejected state: "{CHECK}" (still no capacity)',
    )
    assert _suspended(cluster, "failing")
