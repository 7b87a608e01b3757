from __future__ import annotations

from benchmarks.workloads.manifests import ResourceQuota, cluster_queue, workload_manifest
from kuota.simulator.lines import WorkloadLine


def finetune() -> WorkloadLine:
    return {
        "name": "llm-finetune-mon",
        "namespace": "applied-ml",
        "queue": "applied-ml-queue",
        "priorityClass": None,
        "submitAt": 0,
        "duration": 3600,
        "maxExecutionSeconds": 7200,
        "podSets": [
            {
                "name": "main",
                "count": 2,
                "requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "4"},
                "nodeSelector": {"gpu-type": "h100"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            }
        ],
    }


def test_a_live_workload_limits_extended_resources_to_their_requests() -> None:
    [pod_set] = workload_manifest(finetune(), priority_values={})["spec"]["podSets"]
    container = pod_set["template"]["spec"]["containers"][0]
    assert container["resources"] == {
        "requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "4"},
        "limits": {"nvidia.com/gpu": "4"},
    }


def test_a_live_workload_keeps_selector_tolerations_and_execution_limit() -> None:
    manifest = workload_manifest(finetune(), priority_values={}, labels={"app": "bench"})
    pod_spec = manifest["spec"]["podSets"][0]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"gpu-type": "h100"}
    assert pod_spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert manifest["spec"]["maximumExecutionTimeSeconds"] == 7200
    assert manifest["metadata"]["labels"] == {"app": "bench"}
    assert "priorityClassRef" not in manifest["spec"]
    assert "priority" not in manifest["spec"]


def test_unset_limits_are_left_out_of_a_cluster_queue() -> None:
    queue = cluster_queue(
        "research",
        cohort_name=None,
        flavor="h100-ondemand",
        quotas=(ResourceQuota("nvidia.com/gpu", 8, lending_limit=4),),
        namespace_selector={},
    )
    assert "cohortName" not in queue["spec"]
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 8, "lendingLimit": 4}
    ]
