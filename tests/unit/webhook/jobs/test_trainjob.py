"""A TrainJob's pod sets come from the runtime it names, as Kueue v0.20 makes them; its admission is a runtime
patch of Kueue's manager, which a restore empties; a TrainJob naming no existing runtime makes no Workload."""

from __future__ import annotations

import pytest

from kuota.webhook.controller.errors import InvalidJobError
from kuota.webhook.jobs import trainjob
from kuota.webhook.jobs.adapter import Finished, ObjectReference, PodSetPlacement, workload_manifest
from kuota.webhook.jobs.registry import select
from tests.unit.webhook.jobs import objects
from tests.unit.webhook.jobs.merge_patch import apply_merge_patch

ADAPTER = trainjob.ADAPTER
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_the_pod_sets_are_the_runtime_s_replicated_jobs_with_the_trainer_step_on_the_runtime_s_nodes() -> None:
    job = ADAPTER.with_referenced(objects.trainjob(), objects.training_runtime(num_nodes=3))
    assert [(p.name, p.count) for p in ADAPTER.pod_sets(job)] == [("dataset-initializer", 1), ("node", 3)]


def test_the_trainjob_s_num_nodes_and_resources_per_node_win_over_the_runtime_s() -> None:
    job = objects.trainjob(num_nodes=4)
    job["spec"]["trainer"]["resourcesPerNode"] = {
        "requests": {"nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    runtime = objects.training_runtime(num_nodes=3)
    pod_sets = ADAPTER.pod_sets(ADAPTER.with_referenced(job, runtime))
    assert [(p.name, p.count) for p in pod_sets] == [("dataset-initializer", 1), ("node", 4)]
    assert pod_sets[1].template["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "2"}
    # The runtime itself is left as it was read.
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert node["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "8"


def test_the_runtime_referenced_is_the_cluster_runtime_by_default_or_the_namespaced_one_named() -> None:
    job = objects.trainjob()
    assert ADAPTER.reference(job) == ObjectReference(
        "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", None, "torch-distributed"
    )
    job["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    assert ADAPTER.reference(job).plural == "trainingruntimes"
    assert ADAPTER.reference(job).namespace == "research"


def test_the_manager_may_list_and_watch_the_runtimes_so_a_trainjob_gets_its_workload_when_its_runtime_comes() -> None:
    rules = select([ADAPTER.framework]).registry.rbac_rules()
    runtimes = [rule for rule in rules if "trainingruntimes" in rule["resources"]]
    assert runtimes == [
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["trainingruntimes", "clustertrainingruntimes"],
            "verbs": ["get", "list", "watch"],
        }
    ]


def test_a_trainjob_naming_a_runtime_that_does_not_exist_makes_no_workload_and_says_so() -> None:
    job = ADAPTER.with_referenced(objects.trainjob("lost"), None)
    with pytest.raises(InvalidJobError) as raised:
        workload_manifest(job, ADAPTER)
    assert str(raised.value) == (
        'TrainJob research/lost names ClusterTrainingRuntime "torch-distributed", which does not exist: create it '
        "or fix spec.runtimeRef"
    )


def test_an_admission_is_kueue_s_runtime_patch_and_a_restore_empties_it_keeping_other_managers_patches() -> None:
    job = objects.trainjob()
    others = {"manager": "someone-else", "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"a": "b"}}}}}
    job["spec"]["runtimePatches"] = [others]
    originals = ADAPTER.pod_sets(ADAPTER.with_referenced(job, objects.training_runtime()))
    placements = [PodSetPlacement(p.name, {"gpu-type": "h100"}, [TOLERATION]) for p in originals]

    running = apply_merge_patch(job, ADAPTER.run_patch(job, placements, originals))
    assert not ADAPTER.is_suspended(running)
    assert running["spec"]["runtimePatches"][0] == others
    own = running["spec"]["runtimePatches"][1]
    assert own["manager"] == "kueue.x-k8s.io/manager"
    placed = own["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [p["name"] for p in placed] == ["dataset-initializer", "node"]
    for entry in placed:
        assert entry["template"]["spec"]["template"]["spec"] == {
            "nodeSelector": {"gpu-type": "h100"},
            "tolerations": [TOLERATION],
        }

    stopped = apply_merge_patch(running, ADAPTER.suspend_patch(running))
    restored = apply_merge_patch(stopped, ADAPTER.restore_patch(stopped, originals) or {})
    assert restored["spec"]["runtimePatches"][1]["trainingRuntimeSpec"]["template"]["spec"] == {}
    assert ADAPTER.restore_patch(restored, originals) is None


def test_its_pods_are_ready_when_every_child_job_is_and_it_finishes_with_complete() -> None:
    job = objects.trainjob()
    assert not ADAPTER.pods_ready(job)
    job["status"] = {
        "jobsStatus": [{"name": "node", "ready": 1, "active": 0}, {"name": "dataset-initializer", "active": 1}]
    }
    assert not ADAPTER.pods_ready(job)
    assert ADAPTER.has_active_pods(job)
    job["status"]["jobsStatus"][1] = {"name": "dataset-initializer", "succeeded": 1}
    assert ADAPTER.pods_ready(job)
    job["status"]["conditions"] = [{"type": "Complete", "status": "True", "message": "TrainJob is completed"}]
    assert ADAPTER.finished(job) == Finished(True, "TrainJob is completed")
