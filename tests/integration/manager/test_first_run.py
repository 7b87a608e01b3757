"""The guide's first-run failures, each answered with a reason where the user looks: kubectl's output,
``kubectl describe workload``, the Job's events."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.manager.conftest import apply, get_json, wait_for_event
from tests.integration.manager.guide_objects import FLAVOR, RESEARCH_LOCAL_QUEUE, RESEARCH_QUEUE, gpu_job, guide
from tests.integration.manager.test_guide import admitted_workload, create_job, running_pods, workload_of
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def _apply_guide_queues(cluster: Cluster, *names: str) -> None:
    for name in names:
        cluster.kubectl("apply", "-f", str(GUIDE / name))


def _events(cluster: Cluster, namespace: str, kind: str, name: str) -> list[str]:
    items = get_json(
        cluster, "events", "-n", namespace, "--field-selector", f"involvedObject.kind={kind},involvedObject.name={name}"
    )["items"]
    return [f"{e['reason']}: {e['message']}" for e in items]


def _pending_message(cluster: Cluster, namespace: str, uid: str) -> str | None:
    workload = workload_of(cluster, namespace, uid)
    if workload is None:
        return None
    for condition in workload.get("status", {}).get("conditions") or []:
        if condition["type"] == "QuotaReserved" and condition["status"] == "False":
            return str(condition["message"])
    return None


def test_missing_queue_label_is_warned_at_creation_and_the_job_is_left_alone(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    job = gpu_job("no-label", "research", pods=1, gpus_per_pod=4)
    del job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    job["spec"]["suspend"] = False
    result = cluster.kubectl("create", "-f", "-", input=json.dumps(job))
    assert "requests GPUs but has no kueue.x-k8s.io/queue-name label" in result.stderr
    assert "kuota does not queue it" in result.stderr
    created = get_json(cluster, "job", "no-label", "-n", "research")
    assert created["spec"]["suspend"] is False
    assert workload_of(cluster, "research", created["metadata"]["uid"]) is None


def test_flavor_labels_matching_no_node_leave_pods_pending_with_the_selector_named(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    flavor = guide(FLAVOR)
    flavor["spec"]["nodeLabels"]["gpu-type"] = "h200"  # no node carries it
    apply(cluster, flavor)
    _apply_guide_queues(cluster, RESEARCH_QUEUE, RESEARCH_LOCAL_QUEUE)
    created = create_job(cluster, gpu_job("wrong-labels", "research", pods=1, gpus_per_pod=4))
    admitted_workload(cluster, "research", created["metadata"]["uid"])

    def scheduler_said_why() -> list[str] | None:
        pods = get_json(cluster, "pods", "-n", "research", "-l", "batch.kubernetes.io/job-name=wrong-labels")["items"]
        messages = [m for p in pods for m in _events(cluster, "research", "Pod", p["metadata"]["name"])]
        return messages if any("didn't match Pod's node affinity/selector" in m for m in messages) else None

    wait_until(scheduler_said_why, "the scheduler's FailedScheduling event on the pod", timeout=60)
    started = [m for m in _events(cluster, "research", "Job", "wrong-labels") if m.startswith("Started")]
    assert started and "gpu-type=h200" in started[0]


def test_quota_without_cpu_and_memory_makes_the_workload_inadmissible_with_the_resource_named(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    queue = guide(RESEARCH_QUEUE)
    group = queue["spec"]["resourceGroups"][0]
    group["coveredResources"] = ["nvidia.com/gpu"]
    group["flavors"][0]["resources"] = [r for r in group["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu"]
    _apply_guide_queues(cluster, FLAVOR, RESEARCH_LOCAL_QUEUE)
    apply(cluster, queue)
    created = create_job(cluster, gpu_job("no-cpu-quota", "research", pods=1, gpus_per_pod=4))
    uid = created["metadata"]["uid"]
    message = wait_until(lambda: _pending_message(cluster, "research", uid), "the Workload's pending reason")
    assert "ClusterQueue research does not cover resource cpu" in message
    described = cluster.kubectl("describe", "workload", "-n", "research").stdout
    assert "does not cover resource cpu" in described
    workload = workload_of(cluster, "research", uid)
    assert workload is not None
    warned = wait_for_event(cluster, "research", "Workload", workload["metadata"]["name"], ("Warning", "Pending"))
    assert "ClusterQueue research does not cover resource cpu" in warned  # Kueue's event: the pending reason
    assert get_json(cluster, "job", "no-cpu-quota", "-n", "research")["spec"]["suspend"] is True


def test_a_job_created_before_the_webhook_is_suspended_once_the_manager_starts(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    _apply_guide_queues(cluster, FLAVOR, RESEARCH_QUEUE, RESEARCH_LOCAL_QUEUE)
    manager.stop()
    manager.unregister()
    job = gpu_job("early", "research", pods=1, gpus_per_pod=4)
    job["spec"]["suspend"] = False
    job["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    created = create_job(cluster, job)
    running_pods(cluster, "research", "early", 1)  # it really ran without kuota

    manager.start()
    stopped = wait_for_event(cluster, "research", "Job", "early", ("Normal", "Stopped"))
    assert stopped == "Not admitted by cluster queue"  # Kueue's event when it suspends a Job running unadmitted
    admitted_workload(cluster, "research", created["metadata"]["uid"])
    pods = running_pods(cluster, "research", "early", 1)
    assert pods[0]["spec"]["nodeSelector"] == {"gpu-type": "h100", "capacity-type": "on-demand"}


def test_a_job_selector_conflicting_with_the_flavor_is_never_admitted_and_says_why(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    _apply_guide_queues(cluster, FLAVOR, RESEARCH_QUEUE, RESEARCH_LOCAL_QUEUE)
    job: dict[str, Any] = copy.deepcopy(gpu_job("pinned-a100", "research", pods=1, gpus_per_pod=4))
    job["spec"]["template"]["spec"]["nodeSelector"] = {"gpu-type": "a100"}
    created = create_job(cluster, job)
    message = wait_until(
        lambda: _pending_message(cluster, "research", created["metadata"]["uid"]), "the Workload's pending reason"
    )
    assert "nodeSelector gpu-type=a100 contradicts flavor h100-ondemand's node label gpu-type=h100" in message
    assert get_json(cluster, "job", "pinned-a100", "-n", "research")["spec"]["suspend"] is True
