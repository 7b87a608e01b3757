"""Each upstream kind's pod sets, names and counts as Kueue v0.17 makes them, and its life as the adapter reads
it from the status its controller writes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from kuota.simulator.lines import SERVING_ANNOTATION
from kuota.webhook.controller.errors import InvalidJobError
from kuota.webhook.controller.state import compact_workload
from kuota.webhook.jobs import jobset, kubeflow, raycluster, rayjob, rayservice
from kuota.webhook.jobs.adapter import (
    Finished,
    PodSetPlacement,
    matches_workload,
    merged_patches,
    workload_manifest,
    workload_pod_sets,
)
from tests.unit.webhook.jobs import objects
from tests.unit.webhook.jobs.merge_patch import apply_merge_patch


def test_a_jobset_has_one_pod_set_per_replicated_job_of_replicas_times_parallelism_capped_by_completions() -> None:
    pod_sets = jobset.ADAPTER.pod_sets(objects.jobset())
    assert [(p.name, p.count) for p in pod_sets] == [("driver", 1), ("workers", 3 * 2)]


def test_a_jobset_workload_carries_kueue_s_name_and_an_owner_reference_to_the_jobset() -> None:
    manifest = workload_manifest(objects.jobset("train"), jobset.ADAPTER)
    assert manifest["metadata"]["name"].startswith("jobset-train-")
    assert len(manifest["metadata"]["name"]) == len("jobset-train-") + 5
    owner = manifest["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["controller"]) == (
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "train",
        True,
    )


def test_a_jobset_finishes_with_its_completed_or_failed_condition_and_is_active_while_a_job_is() -> None:
    job = objects.jobset()
    assert jobset.ADAPTER.finished(job) is None
    job["status"] = {"replicatedJobsStatus": [{"name": "workers", "active": 2, "ready": 0, "succeeded": 0}]}
    assert jobset.ADAPTER.has_active_pods(job)
    assert not jobset.ADAPTER.pods_ready(job)
    job["status"]["replicatedJobsStatus"] = [
        {"name": "Driver", "active": 1, "ready": 1},
        {"name": "workers", "active": 3, "ready": 3},
    ]
    assert jobset.ADAPTER.pods_ready(job)
    job["status"]["conditions"] = [{"type": "Failed", "status": "True", "message": "jobset failed: workers-1"}]
    assert jobset.ADAPTER.finished(job) == Finished(False, "jobset failed: workers-1")


def test_ray_pod_sets_are_the_head_then_each_worker_group_lower_cased_with_replicas_times_hosts() -> None:
    expected = [("head", 1), ("gpu-workers", 4), ("cpu", 1)]
    assert [(p.name, p.count) for p in raycluster.ADAPTER.pod_sets(objects.raycluster())] == expected
    interactive = objects.rayjob(mode="InteractiveMode")
    assert [(p.name, p.count) for p in rayjob.ADAPTER.pod_sets(interactive)] == expected


def test_a_rayjob_in_k8s_job_mode_counts_kuberay_s_default_submitter_unless_it_names_its_own() -> None:
    default = rayjob.ADAPTER.pod_sets(objects.rayjob())[-1]
    assert (default.name, default.count) == ("submitter", 1)
    container = default.template["spec"]["containers"][0]
    assert container["image"] == "trainer:1"  # the head's image, as KubeRay's default submitter has it
    assert container["resources"]["requests"] == {"cpu": "500m", "memory": "200Mi"}
    own = objects.pod_template(0)
    assert rayjob.ADAPTER.pod_sets(objects.rayjob(submitter=own))[-1].template == own


def test_a_rayjob_without_its_own_submitter_template_is_started_without_one_as_kueue_does() -> None:
    job = objects.rayjob()
    patch = rayjob.ADAPTER.run_patch(job, [], rayjob.ADAPTER.pod_sets(job))
    assert "submitterPodTemplate" not in patch["spec"]


def test_a_rayjob_finishes_with_its_deployment_status_and_succeeds_with_its_ray_job() -> None:
    job = objects.rayjob()
    for idle in ("", "New", "Suspended"):
        job["status"] = {"jobDeploymentStatus": idle}
        assert not rayjob.ADAPTER.has_active_pods(job)
        assert rayjob.ADAPTER.finished(job) is None
    job["status"] = {"jobDeploymentStatus": "Running", "rayClusterStatus": {"state": "ready"}}
    assert rayjob.ADAPTER.has_active_pods(job)
    assert rayjob.ADAPTER.pods_ready(job)
    job["status"] = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "done"}
    assert rayjob.ADAPTER.finished(job) == Finished(True, "done")
    job["status"] = {"jobDeploymentStatus": "Failed", "jobStatus": "", "reason": "SubmissionFailed"}
    assert rayjob.ADAPTER.finished(job) == Finished(False, "SubmissionFailed")


def test_a_raycluster_never_finishes_and_holds_pods_until_kuberay_reports_it_suspended() -> None:
    cluster = objects.raycluster()
    assert not raycluster.ADAPTER.has_active_pods(cluster)  # never reconciled: no pods
    cluster["status"] = {"state": "ready"}
    assert raycluster.ADAPTER.has_active_pods(cluster)
    assert raycluster.ADAPTER.pods_ready(cluster)
    cluster["status"] = {"state": "suspended"}
    assert not raycluster.ADAPTER.has_active_pods(cluster)
    assert raycluster.ADAPTER.finished(cluster) is None


def test_a_rayservice_has_its_cluster_config_s_pod_sets_and_a_serving_workload_named_for_it() -> None:
    service = objects.rayservice("serve")
    pod_sets = rayservice.ADAPTER.pod_sets(service)
    cluster = raycluster.ADAPTER.pod_sets({"spec": service["spec"]["rayClusterConfig"]})
    assert [(p.name, p.count, p.template) for p in pod_sets] == [(p.name, p.count, p.template) for p in cluster]
    manifest = workload_manifest(service, rayservice.ADAPTER)
    assert manifest["metadata"]["name"].startswith("rayservice-serve-")
    assert manifest["metadata"]["annotations"][SERVING_ANNOTATION] == "true"
    owner = manifest["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == ("ray.io/v1", "RayService", "serve")
    assert SERVING_ANNOTATION not in (workload_manifest(objects.raycluster(), raycluster.ADAPTER)["metadata"]).get(
        "annotations", {}
    )


def test_a_rayservice_is_held_by_its_cluster_config_s_suspend_and_active_and_ready_while_it_is_ready() -> None:
    service = objects.rayservice()
    assert rayservice.ADAPTER.is_suspended(service)
    assert rayservice.ADAPTER.suspend_patch(service) == {"spec": {"rayClusterConfig": {"suspend": True}}}
    service["spec"]["rayClusterConfig"]["suspend"] = False
    assert not rayservice.ADAPTER.is_suspended(service)
    service["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "Initializing"}]}
    assert not rayservice.ADAPTER.has_active_pods(service)
    assert not rayservice.ADAPTER.pods_ready(service)
    service["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    assert rayservice.ADAPTER.has_active_pods(service)
    assert rayservice.ADAPTER.pods_ready(service)
    assert rayservice.ADAPTER.finished(service) is None


def test_a_pytorchjob_has_master_then_worker_whatever_the_spec_s_order() -> None:
    pod_sets = kubeflow.PYTORCHJOB.pod_sets(objects.pytorchjob())
    assert [(p.name, p.count) for p in pod_sets] == [("master", 1), ("worker", 3)]


@pytest.mark.parametrize(
    ("adapter", "make", "expected"),
    [
        (kubeflow.TFJOB, objects.tfjob, [("chief", 1), ("ps", 2), ("worker", 4), ("evaluator", 1)]),
        (kubeflow.XGBOOSTJOB, objects.xgboostjob, [("master", 1), ("worker", 2)]),
        (kubeflow.PADDLEJOB, objects.paddlejob, [("master", 1), ("worker", 2)]),
        (kubeflow.JAXJOB, objects.jaxjob, [("worker", 4)]),
        (kubeflow.MPIJOB, objects.mpijob, [("launcher", 1), ("worker", 4)]),
    ],
    ids=["TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"],
)
def test_a_kubeflow_job_has_one_pod_set_per_replica_type_in_kueue_s_order(
    adapter: kubeflow.KubeflowJobAdapter, make: Callable[[], dict[str, Any]], expected: list[tuple[str, int]]
) -> None:
    assert [(p.name, p.count) for p in adapter.pod_sets(make())] == expected


def test_each_kubeflow_kind_is_enabled_by_kueue_s_framework_name_and_served_at_its_plural() -> None:
    assert [(a.framework, a.plural, a.kind.api_version) for a in kubeflow.ADAPTERS] == [
        ("kubeflow.org/pytorchjob", "pytorchjobs", "kubeflow.org/v1"),
        ("kubeflow.org/tfjob", "tfjobs", "kubeflow.org/v1"),
        ("kubeflow.org/xgboostjob", "xgboostjobs", "kubeflow.org/v1"),
        ("kubeflow.org/paddlejob", "paddlejobs", "kubeflow.org/v1"),
        ("kubeflow.org/jaxjob", "jaxjobs", "kubeflow.org/v1"),
        ("kubeflow.org/mpijob", "mpijobs", "kubeflow.org/v2beta1"),
    ]


def test_an_mpijob_without_a_launcher_makes_no_workload_and_the_error_says_what_to_add() -> None:
    job = objects.mpijob("headless")
    del job["spec"]["mpiReplicaSpecs"]["Launcher"]
    with pytest.raises(InvalidJobError) as raised:
        workload_manifest(job, kubeflow.MPIJOB)
    assert str(raised.value) == (
        "MPIJob research/headless has no Launcher in spec.mpiReplicaSpecs: the operator never runs it without one; "
        "add spec.mpiReplicaSpecs.Launcher"
    )


def test_a_pytorchjob_is_held_by_its_run_policy_and_finishes_with_its_succeeded_condition() -> None:
    job = objects.pytorchjob()
    assert kubeflow.PYTORCHJOB.is_suspended(job)
    job["spec"].pop("runPolicy")
    assert not kubeflow.PYTORCHJOB.is_suspended(job)
    assert kubeflow.PYTORCHJOB.suspend_on_create(job) == [
        {"op": "add", "path": "/spec/runPolicy", "value": {"suspend": True}}
    ]
    job["status"] = {
        "replicaStatuses": {"Worker": {"active": 3}},
        "conditions": [{"type": "Running", "status": "True"}],
    }
    assert kubeflow.PYTORCHJOB.has_active_pods(job)
    assert kubeflow.PYTORCHJOB.pods_ready(job)
    job["status"]["conditions"].append(
        {"type": "Succeeded", "status": "True", "message": "PyTorchJob ddp is successfully completed."}
    )
    assert kubeflow.PYTORCHJOB.finished(job) == Finished(True, "PyTorchJob ddp is successfully completed.")


def test_a_running_rayservice_matches_its_workload_until_its_cluster_config_asks_other_pods() -> None:
    service = objects.rayservice()
    # the Workload as the controller keeps it (templates cut to what it reads), and the service started placed
    workload = compact_workload(workload_manifest(service, rayservice.ADAPTER)).load()
    originals = workload_pod_sets(workload)
    placements = [PodSetPlacement(p.name, {"gpu-type": "h100"}, [objects.GPU_TOLERATION]) for p in originals]
    started = apply_merge_patch(service, rayservice.ADAPTER.run_patch(service, placements, originals))
    assert matches_workload(rayservice.ADAPTER.pod_sets(started), workload)
    upgraded = copy.deepcopy(started)  # another image: quota counts the same pods
    upgraded["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "b:2"
    assert matches_workload(rayservice.ADAPTER.pod_sets(upgraded), workload)

    scaled = copy.deepcopy(started)
    scaled["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = 3
    assert not matches_workload(rayservice.ADAPTER.pod_sets(scaled), workload)
    # stopped in one write, its templates as the Workload has them: the next Workload is made from those
    restore = rayservice.ADAPTER.restore_patch(scaled, originals)
    assert restore is not None
    stopped = apply_merge_patch(scaled, merged_patches(rayservice.ADAPTER.suspend_patch(scaled), restore))
    assert rayservice.ADAPTER.is_suspended(stopped)
    for pod_set in rayservice.ADAPTER.pod_sets(stopped):  # the flavor's placement gone
        assert not pod_set.template["spec"].get("nodeSelector") and not pod_set.template["spec"].get("tolerations")
    assert [p.count for p in rayservice.ADAPTER.pod_sets(stopped)] == [1, 6, 1]
    bigger = copy.deepcopy(started)
    bigger["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"nvidia.com/gpu": "1"}
    }
    assert not matches_workload(rayservice.ADAPTER.pod_sets(bigger), workload)
    grown = copy.deepcopy(started)
    grown["spec"]["rayClusterConfig"]["workerGroupSpecs"].append(
        {"groupName": "more", "template": objects.pod_template(1)}
    )
    assert not matches_workload(rayservice.ADAPTER.pod_sets(grown), workload)
