"""RayJob, RayCluster and RayService under kuota with the real KubeRay operator: suspended at creation, admitted
as one Workload (``head``, the worker groups and the RayJob's ``submitter``), the flavor in every pod, preempted as
a whole and resumed, the quota back when a RayJob finishes or any of them is deleted; a running RayService whose
cluster config asks other pods is stopped and resumes on a new Workload of its new size, and a queued one's Workload
is updated to its new size, as Kueue has it."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.simulator.lines import SERVING_ANNOTATION
from tests.cluster import Cluster
from tests.cluster.job_controllers import UpstreamController
from tests.integration.job_kinds.manifests import OWNER_LABEL, raycluster, rayjob, rayservice
from tests.integration.job_kinds.queueing import (
    FLAVOR_LABELS,
    admitted_workload,
    assert_placed,
    create,
    get_json,
    no_pods,
    running_pods,
    urgent_job,
    workload_of,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def _preempt_and_resume(cluster: Cluster, team: str, uid: str, owner: str, pods: int) -> None:
    """An urgent Job takes all 16 GPUs: every pod of ``owner`` goes; when it is gone they all run again, placed."""
    selector = f"{OWNER_LABEL}={owner}"
    urgent = create(cluster, urgent_job(team, "urgent", pods_count=2, gpus_per_pod=8))
    admitted_workload(cluster, team, urgent["metadata"]["uid"])
    no_pods(cluster, team, selector)
    evicted = workload_of(cluster, team, uid)
    assert evicted is not None and "admission" not in (evicted.get("status") or {})
    cluster.kubectl("delete", "job", "urgent", "-n", team, "--cascade=foreground", "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, selector, pods, timeout=180):
        assert_placed(pod)


def test_a_rayjob_is_admitted_whole_placed_preempted_whole_resumed_and_its_workload_goes_with_it(
    cluster: Cluster, kuberay_operator: UpstreamController, team: str
) -> None:
    del kuberay_operator
    created = create(cluster, rayjob(team, "tune", workers=2, gpus=4))
    assert created["spec"]["suspend"] is True
    uid = created["metadata"]["uid"]

    workload = admitted_workload(cluster, team, uid)
    assert workload["metadata"]["name"].startswith("rayjob-tune-")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("head", 1), ("gpu", 2), ("submitter", 1)]
    # head, two workers, then (once KubeRay sees the cluster ready) the submitter: every one placed.
    for pod in running_pods(cluster, team, f"{OWNER_LABEL}=tune", 4, timeout=180):
        assert_placed(pod)

    _preempt_and_resume(cluster, team, uid, "tune", 4)
    assert get_json(cluster, "rayjob", "tune", "-n", team)["spec"]["suspend"] is False

    cluster.kubectl("delete", "rayjob", "tune", "-n", team, "--wait=false")
    wait_until(
        lambda: workload_of(cluster, team, uid) is None, "the deleted RayJob's Workload to be deleted", timeout=60
    )


def test_a_finished_rayjob_gives_its_quota_to_the_rayjob_waiting_whole_for_it(
    cluster: Cluster, kuberay_operator: UpstreamController, team: str
) -> None:
    del kuberay_operator
    first = create(cluster, rayjob(team, "first", workers=2, gpus=6, submitter_fails=True))  # 12 of 16 GPUs
    admitted_workload(cluster, team, first["metadata"]["uid"])
    second = create(cluster, rayjob(team, "second", workers=2, gpus=4))  # 8 GPUs: only 4 are free
    wait_until(lambda: workload_of(cluster, team, second["metadata"]["uid"]), "the second RayJob's Workload")
    assert not get_json(cluster, "pods", "-n", team, "-l", f"{OWNER_LABEL}=second")["items"]

    def finished() -> dict[str, Any] | None:
        workload = workload_of(cluster, team, first["metadata"]["uid"])
        conditions = (workload or {}).get("status", {}).get("conditions") or []
        return workload if any(c["type"] == "Finished" and c["status"] == "True" for c in conditions) else None

    done = wait_until(finished, "the first RayJob's Workload to be Finished", timeout=180)
    assert next(c for c in done["status"]["conditions"] if c["type"] == "Finished")["reason"] == "Failed"
    admitted_workload(cluster, team, second["metadata"]["uid"])
    running_pods(cluster, team, f"{OWNER_LABEL}=second", 4, timeout=180)


def test_a_raycluster_is_admitted_whole_preempted_whole_resumed_and_deleting_it_frees_its_quota(
    cluster: Cluster, kuberay_operator: UpstreamController, team: str
) -> None:
    del kuberay_operator
    created = create(cluster, raycluster(team, "notebook", workers=3, gpus=4))
    assert created["spec"]["suspend"] is True
    uid = created["metadata"]["uid"]
    workload = admitted_workload(cluster, team, uid)
    assert workload["metadata"]["name"].startswith("raycluster-notebook-")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("head", 1), ("gpu", 3)]
    for pod in running_pods(cluster, team, f"{OWNER_LABEL}=notebook", 4, timeout=180):
        assert_placed(pod)
    _preempt_and_resume(cluster, team, uid, "notebook", 4)

    waiting = create(cluster, raycluster(team, "waiting", workers=2, gpus=4))  # 8 GPUs: 4 are free
    pending = wait_until(lambda: workload_of(cluster, team, waiting["metadata"]["uid"]), "the waiting Workload")
    assert "admission" not in (pending.get("status") or {})
    assert not get_json(cluster, "pods", "-n", team, "-l", f"{OWNER_LABEL}=waiting")["items"]

    cluster.kubectl("delete", "raycluster", "notebook", "-n", team, "--wait=false")
    wait_until(
        lambda: workload_of(cluster, team, uid) is None, "the deleted RayCluster's Workload to be deleted", timeout=60
    )
    admitted_workload(cluster, team, waiting["metadata"]["uid"])
    running_pods(cluster, team, f"{OWNER_LABEL}=waiting", 3, timeout=180)


def test_a_rayservice_waits_suspended_until_it_fits_runs_placed_is_preempted_whole_and_resumed(
    cluster: Cluster, kuberay_operator: UpstreamController, team: str
) -> None:
    del kuberay_operator
    blocker = create(cluster, raycluster(team, "blocker", workers=3, gpus=4))  # 12 of 16 GPUs
    admitted_workload(cluster, team, blocker["metadata"]["uid"])
    created = create(cluster, rayservice(team, "serve", workers=2, gpus=4))  # 8 GPUs: only 4 are free
    assert created["spec"]["rayClusterConfig"]["suspend"] is True
    uid = created["metadata"]["uid"]
    pending = wait_until(lambda: workload_of(cluster, team, uid), "the RayService's Workload")
    assert pending["metadata"]["name"].startswith("rayservice-serve-")
    assert pending["metadata"]["annotations"][SERVING_ANNOTATION] == "true"
    assert [(p["name"], p["count"]) for p in pending["spec"]["podSets"]] == [("head", 1), ("gpu", 2)]
    assert "admission" not in (pending.get("status") or {})
    assert not get_json(cluster, "pods", "-n", team, "-l", f"{OWNER_LABEL}=serve")["items"]
    assert _cluster_config(cluster, team, "serve")["suspend"] is True

    cluster.kubectl("delete", "raycluster", "blocker", "-n", team, "--wait=false")
    admitted_workload(cluster, team, uid)
    running = wait_until(lambda: _running_cluster_of(cluster, team, "serve"), "the RayService's RayCluster to run")
    templates = [running["spec"]["headGroupSpec"]["template"]] + [
        group["template"] for group in running["spec"]["workerGroupSpecs"]
    ]
    for template in templates:
        assert template["spec"]["nodeSelector"] == FLAVOR_LABELS
    for pod in running_pods(cluster, team, f"{OWNER_LABEL}=serve", 3, timeout=180):
        assert_placed(pod)
    # Without a Ray dashboard KubeRay never marks it Ready: the Workload stays admitted all the same.
    status = get_json(cluster, "rayservice", "serve", "-n", team).get("status") or {}
    assert not any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])

    # Preempted: suspended again and its quota freed for the urgent Job. (KubeRay acts on a changed
    # rayClusterConfig only after reading the Serve applications from the Ray dashboard, which fake pods do not
    # run: its RayCluster is left as it was, so the pods are not checked here.)
    urgent = create(cluster, urgent_job(team, "urgent", pods_count=2, gpus_per_pod=8))
    admitted_workload(cluster, team, urgent["metadata"]["uid"])
    evicted = workload_of(cluster, team, uid)
    assert evicted is not None and "admission" not in (evicted.get("status") or {})
    wait_until(lambda: _cluster_config(cluster, team, "serve")["suspend"] is True, "the RayService suspended")
    cluster.kubectl("delete", "job", "urgent", "-n", team, "--cascade=foreground", "--wait=false")
    admitted_workload(cluster, team, uid)
    resumed = wait_until(
        lambda: (config := _cluster_config(cluster, team, "serve"))["suspend"] is False and config,
        "the RayService resumed",
    )
    assert resumed["headGroupSpec"]["template"]["spec"]["nodeSelector"] == FLAVOR_LABELS

    cluster.kubectl("delete", "rayservice", "serve", "-n", team, "--wait=false")
    wait_until(
        lambda: workload_of(cluster, team, uid) is None, "the deleted RayService's Workload to be deleted", timeout=60
    )


def test_a_running_rayservice_scaled_is_stopped_and_resumes_on_a_new_workload_of_its_new_size(
    cluster: Cluster, kuberay_operator: UpstreamController, team: str
) -> None:
    del kuberay_operator
    created = create(cluster, rayservice(team, "scaled", workers=1, gpus=4))
    uid = created["metadata"]["uid"]
    first = admitted_workload(cluster, team, uid)
    wait_until(lambda: _cluster_config(cluster, team, "scaled")["suspend"] is False, "the RayService started")

    # One worker more: KubeRay would grow the running cluster, so the Workload of one worker no longer holds it.
    cluster.kubectl("patch", "rayservice", "scaled", "-n", team, "--type=json", "-p", "[" + ", ".join(
        f'{{"op": "replace", "path": "/spec/rayClusterConfig/workerGroupSpecs/0/{field}", "value": 2}}'
        for field in ("replicas", "minReplicas", "maxReplicas")) + "]")  # fmt: skip

    def replaced() -> dict[str, Any] | None:
        workload = workload_of(cluster, team, uid)
        new = workload is not None and workload["metadata"]["uid"] != first["metadata"]["uid"]
        return workload if new and (workload.get("status") or {}).get("admission") else None

    second = wait_until(replaced, "a new Workload of the RayService's new size, admitted", 90)
    assert second["metadata"]["name"] == first["metadata"]["name"]
    assert [(p["name"], p["count"]) for p in second["spec"]["podSets"]] == [("head", 1), ("gpu", 2)]
    events = get_json(cluster, "events", "-n", team, "--field-selector=involvedObject.name=scaled")["items"]
    said = {(e["reason"], e["message"]) for e in events}
    assert ("Stopped", "No matching Workload; restoring pod templates according to existent Workload") in said
    assert ("DeletedWorkload", f"Deleted not matching Workload: {team}/{first['metadata']['name']}") in said
    resumed = wait_until(
        lambda: (config := _cluster_config(cluster, team, "scaled"))["suspend"] is False and config,
        "the RayService resumed on its new Workload",
    )
    assert resumed["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"] == FLAVOR_LABELS


def test_a_queued_rayservice_scaled_keeps_its_workload_updated_to_its_new_size(
    cluster: Cluster, kuberay_operator: UpstreamController, team: str
) -> None:
    del kuberay_operator
    blocker = create(cluster, raycluster(team, "blocker", workers=3, gpus=4))  # 12 of 16 GPUs
    admitted_workload(cluster, team, blocker["metadata"]["uid"])
    created = create(cluster, rayservice(team, "queued", workers=2, gpus=4))  # 8 GPUs: only 4 are free
    uid = created["metadata"]["uid"]
    queued = wait_until(lambda: workload_of(cluster, team, uid), "the RayService's Workload")

    # One worker fewer: 4 GPUs, which fit. Its Workload holds no quota yet, so it is updated, not replaced.
    cluster.kubectl("patch", "rayservice", "queued", "-n", team, "--type=json", "-p", "[" + ", ".join(
        f'{{"op": "replace", "path": "/spec/rayClusterConfig/workerGroupSpecs/0/{field}", "value": 1}}'
        for field in ("replicas", "minReplicas", "maxReplicas")) + "]")  # fmt: skip
    updated = admitted_workload(cluster, team, uid)
    assert updated["metadata"]["uid"] == queued["metadata"]["uid"]
    assert [(p["name"], p["count"]) for p in updated["spec"]["podSets"]] == [("head", 1), ("gpu", 1)]
    events = get_json(cluster, "events", "-n", team, "--field-selector=involvedObject.name=queued")["items"]
    key = f"{team}/{queued['metadata']['name']}"
    assert ("UpdatedWorkload", f"Updated not matching Workload for suspended job: {key}") in {
        (e["reason"], e["message"]) for e in events
    }
    wait_until(lambda: _cluster_config(cluster, team, "queued")["suspend"] is False, "the RayService started")


def _cluster_config(cluster: Cluster, namespace: str, service: str) -> dict[str, Any]:
    config: dict[str, Any] = get_json(cluster, "rayservice", service, "-n", namespace)["spec"]["rayClusterConfig"]
    return config


def _running_cluster_of(cluster: Cluster, namespace: str, service: str) -> dict[str, Any] | None:
    """The RayCluster KubeRay made for the RayService, once one of them is not suspended."""
    for item in get_json(cluster, "rayclusters", "-n", namespace)["items"]:
        owners = item["metadata"].get("ownerReferences") or []
        ours = any(o["kind"] == "RayService" and o["name"] == service for o in owners)
        if ours and not item["spec"].get("suspend"):
            return dict(item)
    return None
