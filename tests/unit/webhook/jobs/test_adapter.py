"""What every adapter shares: Kueue's Workload naming, suspension at any depth, placement of each pod set."""

from __future__ import annotations

import hashlib

from kuota.webhook.jobs.adapter import (
    GroupVersionKind,
    PodSet,
    PodSetPlacement,
    SuspendFieldAdapter,
    workload_manifest,
    workload_name,
)
from kuota.webhook.jobs.batch_job import ADAPTER as BATCH_JOB
from tests.unit.webhook.admission.static_facts import apply_patch
from tests.unit.webhook.jobs.merge_patch import apply_merge_patch

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_workload_names_are_kueues_for_any_kind() -> None:
    kind = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
    digest = hashlib.sha1(b"JobSet\njobset.x-k8s.io\ntrain\nu-1").hexdigest()[:5]
    assert workload_name("train", "u-1", kind) == f"jobset-train-{digest}"
    long = workload_name("x" * 300, "u-1", kind)
    assert len(long) == 253 and long.startswith("jobset-xxx")


class _RunPolicyKind(SuspendFieldAdapter):
    suspend_path = ("spec", "runPolicy", "suspend")


def test_suspension_is_added_at_the_first_missing_level_of_the_kinds_suspend_field() -> None:
    nested = _RunPolicyKind()
    bare = {"spec": {}}
    assert apply_patch(bare, nested.suspend_on_create(bare)) == {"spec": {"runPolicy": {"suspend": True}}}
    with_policy = {"spec": {"runPolicy": {"cleanPodPolicy": "None"}}}
    patched = apply_patch(with_policy, nested.suspend_on_create(with_policy))
    assert patched["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "suspend": True}
    assert nested.is_suspended(patched) and not nested.is_suspended(bare)
    assert nested.suspend_patch(patched) == {"spec": {"runPolicy": {"suspend": True}}}
    assert nested.resume_patch() == {"spec": {"runPolicy": {"suspend": False}}}


def test_a_jobs_run_patch_places_its_pod_set_and_its_restore_patch_undoes_it() -> None:
    template = {"spec": {"nodeSelector": {"zone": "a"}, "containers": [{"name": "c", "image": "i"}]}}
    job = {
        "metadata": {"name": "train", "namespace": "research", "uid": "u-1", "labels": {}},
        "spec": {"parallelism": 2, "template": template},
    }
    originals = [PodSet("main", 2, template)]
    placement = PodSetPlacement("main", {"gpu-type": "h100"}, [GPU_TOLERATION])
    run = BATCH_JOB.run_patch(job, [placement], originals)
    assert run == {
        "spec": {
            "suspend": False,
            "template": {"spec": {"nodeSelector": {"zone": "a", "gpu-type": "h100"}, "tolerations": [GPU_TOLERATION]}},
        }
    }
    placed = {
        **job,
        "spec": {**job["spec"], "template": {"spec": {**template["spec"], **run["spec"]["template"]["spec"]}}},
    }
    # a merge patch merges maps: the flavor's key is deleted by name, the job's own kept
    restore = BATCH_JOB.restore_patch(placed, originals)
    assert restore == {
        "spec": {"template": {"spec": {"nodeSelector": {"zone": "a", "gpu-type": None}, "tolerations": None}}}
    }
    assert apply_merge_patch(placed, restore)["spec"]["template"] == template
    assert BATCH_JOB.restore_patch(job, originals) is None
    manifest = workload_manifest(job, BATCH_JOB)
    assert [(ps["name"], ps["count"]) for ps in manifest["spec"]["podSets"]] == [("main", 2)]
