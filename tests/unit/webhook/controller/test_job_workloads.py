"""A Job as the queue sees it: its Workload's name and shape, and the patches that start and restore it."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from kuota.webhook.controller.errors import JobConflictError
from kuota.webhook.controller.job_workloads import (
    finished_condition,
    pod_count,
)
from kuota.webhook.jobs.adapter import PodSetPlacement, placed_pod_spec, workload_manifest, workload_name
from kuota.webhook.jobs.batch_job import ADAPTER as BATCH_JOB

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
H100 = PodSetPlacement("main", {"gpu-type": "h100", "capacity-type": "on-demand"}, [GPU_TOLERATION])


def _job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "llm-finetune-x7k2q",
            "namespace": "research",
            "uid": "0b6c1f4e-1111-2222-3333-444455556666",
            "labels": {"kueue.x-k8s.io/queue-name": "research-queue"},
        },
        "spec": {
            "suspend": True,
            "parallelism": 2,
            "completions": 2,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "trainer", "image": "t"}]}},
            **spec,
        },
    }


def test_workload_name_is_kueues_prefix_and_five_hex_of_sha1_of_kind_group_name_uid() -> None:
    digest = hashlib.sha1(b"Job\nbatch\nllm-finetune-x7k2q\n0b6c1f4e-1111-2222-3333-444455556666").hexdigest()
    assert workload_name("llm-finetune-x7k2q", "0b6c1f4e-1111-2222-3333-444455556666", BATCH_JOB.kind) == (
        f"job-llm-finetune-x7k2q-{digest[:5]}"
    )


def test_long_job_names_are_cut_so_the_workload_name_fits_253_characters() -> None:
    assert len(workload_name("a" * 300, "uid", BATCH_JOB.kind)) == 253


@pytest.mark.parametrize(
    ("spec", "expected"),
    [({}, 2), ({"parallelism": 4, "completions": 2}, 2), ({"parallelism": 3, "completions": None}, 3)],
)
def test_pod_count_is_parallelism_capped_by_completions(spec: dict[str, Any], expected: int) -> None:
    assert pod_count(_job(**spec)) == expected


def test_pod_count_defaults_parallelism_to_one() -> None:
    job = _job()
    del job["spec"]["parallelism"], job["spec"]["completions"]
    assert pod_count(job) == 1


def test_workload_is_owned_by_its_job_and_carries_its_template_queue_priority_and_time_limit() -> None:
    job = _job()
    job["metadata"]["labels"].update(
        {"kueue.x-k8s.io/priority-class": "production-finetune", "kueue.x-k8s.io/max-exec-time-seconds": "3600"}
    )
    workload = workload_manifest(job, BATCH_JOB)
    assert workload["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": job["metadata"]["uid"]}
    assert workload["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    owner = workload["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Job",
        "llm-finetune-x7k2q",
        job["metadata"]["uid"],
        True,
    )
    assert workload["spec"]["queueName"] == "research-queue"
    assert workload["spec"]["podSets"] == [{"name": "main", "count": 2, "template": job["spec"]["template"]}]
    assert workload["spec"]["priorityClassRef"]["name"] == "production-finetune"
    assert workload["spec"]["maximumExecutionTimeSeconds"] == 3600
    assert "annotations" not in workload["metadata"]


def test_the_jobs_expected_runtime_annotation_goes_with_its_workload_and_no_other() -> None:
    job = _job()
    job["metadata"]["annotations"] = {"kuota.dev/expected-runtime": "90m", "team.example/owner": "ana"}
    assert workload_manifest(job, BATCH_JOB)["metadata"]["annotations"] == {"kuota.dev/expected-runtime": "90m"}


def test_admission_merges_flavor_labels_and_tolerations_into_the_original_template() -> None:
    job = _job()
    original = copy.deepcopy(job["spec"]["template"])
    original["spec"]["nodeSelector"] = {"zone": "a"}
    placed = placed_pod_spec("Job research/trainer", original, H100)
    assert placed["nodeSelector"] == {
        "zone": "a",
        "gpu-type": "h100",
        "capacity-type": "on-demand",
    }
    assert placed["tolerations"] == [GPU_TOLERATION]


def test_a_toleration_the_job_already_has_is_not_added_twice() -> None:
    original = {"spec": {"tolerations": [GPU_TOLERATION]}}
    assert placed_pod_spec("Job research/trainer", original, H100)["tolerations"] == [GPU_TOLERATION]


def test_a_job_selector_that_contradicts_its_flavor_is_a_conflict_naming_both_values() -> None:
    original = {"spec": {"nodeSelector": {"gpu-type": "a100"}}}
    with pytest.raises(JobConflictError, match=r"gpu-type=a100 but its admitted flavor needs gpu-type=h100"):
        placed_pod_spec("Job research/trainer", original, H100)


def test_a_job_is_finished_by_its_complete_or_failed_condition_only() -> None:
    job = _job()
    assert finished_condition(job) is None
    job["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    assert finished_condition(job) is None
    job["status"]["conditions"].append({"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"})
    assert finished_condition(job) == ("Failed", "BackoffLimitExceeded")
