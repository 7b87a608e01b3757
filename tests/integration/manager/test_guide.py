"""The guide on a real cluster: its YAML applied unchanged, its Job admitted whole on its flavor, and its
Saturday/Monday story of borrowing and reclaiming."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.cluster import RUN_SECONDS_ANNOTATION, Cluster
from tests.integration.manager.conftest import apply, events_of, get_json, wait_for_event
from tests.integration.manager.guide_objects import FINETUNE_JOB, VERBATIM, gpu_job, guide, team_queues
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind), None)


def _is_true(obj: dict[str, Any], kind: str) -> bool:
    found = _condition(obj, kind)
    return found is not None and found["status"] == "True"


def workload_of(cluster: Cluster, namespace: str, job_uid: str) -> dict[str, Any] | None:
    items = get_json(cluster, "workloads", "-n", namespace, "-l", f"kueue.x-k8s.io/job-uid={job_uid}")["items"]
    assert len(items) <= 1, f"a Job must have one Workload, found {len(items)}"
    return items[0] if items else None


def admitted_workload(cluster: Cluster, namespace: str, job_uid: str) -> dict[str, Any]:
    def admitted() -> dict[str, Any] | None:
        workload = workload_of(cluster, namespace, job_uid)
        return workload if workload is not None and _is_true(workload, "Admitted") else None

    return wait_until(admitted, f"the Workload of Job {job_uid} to be admitted", timeout=60)


def job_pods(cluster: Cluster, namespace: str, job: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(
        cluster, "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={job}"
    )["items"]
    return items


def running_pods(cluster: Cluster, namespace: str, job: str, count: int) -> list[dict[str, Any]]:
    def running() -> list[dict[str, Any]] | None:
        pods = [p for p in job_pods(cluster, namespace, job) if p["status"].get("phase") == "Running"]
        return pods if len(pods) == count else None

    return wait_until(running, f"{count} running pods of Job {namespace}/{job}", timeout=60)


def finish_job(cluster: Cluster, namespace: str, job: str) -> None:
    """The pods' containers exit 0 now (the fake kubelet completes pods that carry this annotation)."""
    cluster.kubectl(
        "annotate", "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={job}",
        f"{RUN_SECONDS_ANNOTATION}=0", "--overwrite",
    )  # fmt: skip


def gpu_usage(cluster: Cluster, cluster_queue: str) -> str | None:
    usage = get_json(cluster, "clusterqueue", cluster_queue).get("status", {}).get("flavorsUsage") or []
    for flavor in usage:
        for resource in flavor["resources"]:
            if resource["name"] == GPU:
                return str(resource["total"])
    return None


def create_job(cluster: Cluster, manifest: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = json.loads(
        cluster.kubectl("create", "-f", "-", "-o", "json", input=json.dumps(manifest)).stdout
    )
    return created


def test_the_guides_job_is_held_then_admitted_whole_on_h100_ondemand_and_gives_its_quota_back(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    created = json.loads(cluster.kubectl("create", "-f", str(GUIDE / FINETUNE_JOB), "-o", "json").stdout)
    job, uid = created["metadata"]["name"], created["metadata"]["uid"]
    assert created["spec"]["suspend"] is True

    workload = admitted_workload(cluster, "research", uid)
    assignment = workload["status"]["admission"]["podSetAssignments"][0]
    assert workload["status"]["admission"]["clusterQueue"] == "research"
    assert assignment["flavors"] == {"cpu": "h100-ondemand", "memory": "h100-ondemand", GPU: "h100-ondemand"}
    assert assignment["count"] == 2
    assert assignment["resourceUsage"] == {"cpu": "32", "memory": "256Gi", GPU: "8"}

    pods = running_pods(cluster, "research", job, 2)
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {"gpu-type": "h100", "capacity-type": "on-demand"}
        assert GPU_TOLERATION in pod["spec"]["tolerations"]
        assert pod["spec"]["nodeName"] in cluster.node_names
    wait_until(lambda: gpu_usage(cluster, "research") == "8", "research to show 8 GPUs in use")

    finish_job(cluster, "research", job)
    wait_until(lambda: _is_true(get_json(cluster, "job", job, "-n", "research"), "Complete"), "the Job to complete")
    finished = wait_until(
        lambda: (w := workload_of(cluster, "research", uid)) is not None and _is_true(w, "Finished") and w,
        "the Workload to be Finished",
    )
    assert _condition(finished, "Finished")["reason"] == "Succeeded"  # type: ignore[index]
    wait_until(lambda: gpu_usage(cluster, "research") == "0", "research's GPUs to be given back")
    # Kueue's events, on the objects Kueue records them on.
    name = finished["metadata"]["name"]  # type: ignore[index]
    reserved = wait_for_event(cluster, "research", "Workload", name, ("Normal", "QuotaReserved"))
    assert reserved.startswith("Quota reserved in ClusterQueue research, wait time since queued was ")
    admitted_message = wait_for_event(cluster, "research", "Workload", name, ("Normal", "Admitted"))
    assert admitted_message == "Admitted by ClusterQueue research, wait time since reservation was 0s"
    created_message = wait_for_event(cluster, "research", "Job", job, ("Normal", "CreatedWorkload"))
    assert created_message == f"Created Workload: research/{name}"
    started = wait_for_event(cluster, "research", "Job", job, ("Normal", "Started"))
    assert started.startswith("Admitted by clusterQueue research")
    finished_message = wait_for_event(cluster, "research", "Job", job, ("Normal", "FinishedWorkload"))
    assert finished_message == f"Workload 'research/{name}' is declared finished"
    admitted = (("cluster_queue", "research"), ("priority_class", ""), ("replica_role", "leader"))
    values = manager.metric_values()
    assert values[("kueue_admitted_workloads_total", admitted)] == 1
    assert values[("kueue_finished_workloads_total", admitted)] == 1
    assert values[("kueue_finished_workloads", (("cluster_queue", "research"), ("replica_role", "leader")))] == 1


def test_saturday_sweep_borrows_to_20_and_monday_finetune_reclaims_by_preempting_the_newest_sweeps(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    apply(cluster, *team_queues("applied-ml", gpus=8), *team_queues("inference", gpus=8, lending_limit=4))

    # Saturday: applied-ml and inference are idle; research's sweep runs on 20 GPUs (8 own + 12 borrowed).
    sweeps = []
    for index in range(5):
        created = create_job(cluster, gpu_job(f"sweep-{index}", "research", pods=1, gpus_per_pod=4))
        admitted_workload(cluster, "research", created["metadata"]["uid"])  # one at a time: a known admission order
        sweeps.append(created)
    wait_until(lambda: gpu_usage(cluster, "research") == "20", "research to run on 20 GPUs")
    # Queue order is by creationTimestamp, which has one-second resolution; equal stamps are a tie (in Kueue
    # too), so the sixth sweep is created in a later second than the fifth to be strictly the newest.
    fifth_created = sweeps[-1]["metadata"]["creationTimestamp"]
    wait_until(
        lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) > fifth_created,
        "the clock to pass the fifth sweep's creation second",
    )
    sixth = create_job(cluster, gpu_job("sweep-5", "research", pods=1, gpus_per_pod=4))

    # Monday 9:00: applied-ml's 8-GPU fine-tune fits its own nominal quota, so it reclaims it.
    finetune = create_job(
        cluster, gpu_job("llm-finetune", "applied-ml", pods=2, gpus_per_pod=4, priority_class="production-finetune")
    )
    finetune_workload = admitted_workload(cluster, "applied-ml", finetune["metadata"]["uid"])
    finetune_workload_uid = finetune_workload["metadata"]["uid"]
    running_pods(cluster, "applied-ml", "llm-finetune", 2)

    preempted = {"sweep-3", "sweep-4"}  # the most recently admitted borrowers, 8 GPUs
    for created in sweeps:
        name = created["metadata"]["name"]
        workload = workload_of(cluster, "research", created["metadata"]["uid"])
        assert workload is not None
        if name in preempted:
            assert _condition(workload, "Preempted")["reason"] == "InCohortReclamation"  # type: ignore[index]
            assert _is_true(workload, "Requeued")
            assert not _is_true(workload, "QuotaReserved")
            assert get_json(cluster, "job", name, "-n", "research")["spec"]["suspend"] is True
            victim = workload["metadata"]["name"]
            evicted = wait_for_event(cluster, "research", "Workload", victim, ("Normal", "EvictedDueToPreempted"))
            assert evicted == _condition(workload, "Evicted")["message"]  # type: ignore[index]
            assert evicted.startswith(f"Preempted to accommodate a workload (UID: {finetune_workload_uid}, ")
            assert "due to reclamation within the cohort; preemptor path: /gpu-pool/applied-ml" in evicted
            told = wait_for_event(cluster, "research", "Workload", victim, ("Normal", "Preempted"))
            assert told.startswith(evicted + "; preemptor effective priority: ")
            stopped = wait_for_event(cluster, "research", "Job", name, ("Normal", "Stopped"))
            assert stopped == evicted
            told_preemptor = (
                f"Preempted workload research/{victim} (UID: {workload['metadata']['uid']}) in ClusterQueue"
            )
            wait_until(
                lambda told=told_preemptor: any(
                    kind == "PreemptedWorkload" and m.startswith(f"{told} research; ")
                    for _, kind, m in events_of(
                        cluster, "applied-ml", "Workload", finetune_workload["metadata"]["name"]
                    )
                ),
                f"a PreemptedWorkload Event on the fine-tune naming {victim}",
                timeout=60,
            )
        else:
            assert _is_true(workload, "Admitted"), name
    wait_until(lambda: gpu_usage(cluster, "research") == "12", "research's status to show 12 GPUs in use")
    metrics = manager.metric_values()
    preempted = (
        ("preempting_cluster_queue", "applied-ml"),
        ("reason", "InCohortReclamation"),
        ("replica_role", "leader"),
    )
    assert metrics[("kueue_preempted_workloads_total", preempted)] == 2
    by_preemption = {("reason", "Preempted"), ("underlying_cause", ""), ("replica_role", "leader")}
    for name, queue in (
        ("kueue_evicted_workloads_total", ("cluster_queue", "research")),
        ("kueue_local_queue_evicted_workloads_total", ("namespace", "research")),
    ):
        evicted = sum(v for (n, labels), v in metrics.items() if n == name and {queue, *by_preemption} <= set(labels))
        assert evicted == 2, name
    leader = ("replica_role", "leader")
    usage = (
        ("cluster_queue", "research"),
        ("cohort", "gpu-pool"),
        ("flavor", "h100-ondemand"),
        leader,
        ("resource", GPU),
    )
    assert metrics[("kueue_cluster_queue_resource_usage", usage)] == 12
    assert metrics[("kueue_cluster_queue_resource_reservation", usage)] == 12
    assert metrics[("kueue_pending_workloads", (("cluster_queue", "research"), leader, ("status", "active")))] == 3
    pending_sixth = workload_of(cluster, "research", sixth["metadata"]["uid"])
    assert pending_sixth is not None and not _is_true(pending_sixth, "QuotaReserved")

    # The fine-tune finishes: the requeued sweeps resume (the oldest first).
    finish_job(cluster, "applied-ml", "llm-finetune")
    for created in sweeps[3:]:
        admitted_workload(cluster, "research", created["metadata"]["uid"])
        running_pods(cluster, "research", created["metadata"]["name"], 1)
    assert guide(FINETUNE_JOB)["spec"]["suspend"] is True  # the files themselves were never edited


def test_a_job_past_its_maximum_execution_time_is_suspended_and_its_workload_deactivated(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    job = gpu_job("time-boxed", "research", pods=1, gpus_per_pod=4)
    job["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "3"
    created = create_job(cluster, job)
    uid = created["metadata"]["uid"]
    admitted = admitted_workload(cluster, "research", uid)
    assert admitted["spec"]["maximumExecutionTimeSeconds"] == 3

    def deactivated() -> dict[str, Any] | None:
        workload = workload_of(cluster, "research", uid)
        return workload if workload is not None and workload["spec"].get("active") is False else None

    workload = wait_until(deactivated, "the Workload to be deactivated after 3 s of running", timeout=30)
    evicted = _condition(workload, "Evicted")
    assert evicted is not None and evicted["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert evicted["message"] == "The workload is deactivated due to exceeding the maximum execution time"
    requeued = _condition(workload, "Requeued")
    assert requeued is not None and (requeued["status"], requeued["reason"]) == ("False", evicted["reason"])
    assert not _is_true(workload, "QuotaReserved")
    name = workload["metadata"]["name"]
    event = ("Normal", "EvictedDueToDeactivatedDueToMaximumExecutionTimeExceeded")
    assert wait_for_event(cluster, "research", "Workload", name, event) == evicted["message"]
    warning = wait_for_event(cluster, "research", "Workload", name, ("Warning", "MaximumExecutionTimeExceeded"))
    assert warning == "The maximum execution time (3s) exceeded"
    wait_until(
        lambda: get_json(cluster, "job", "time-boxed", "-n", "research")["spec"]["suspend"], "the Job to be suspended"
    )
    wait_until(lambda: gpu_usage(cluster, "research") == "0", "research's GPUs to be given back")
