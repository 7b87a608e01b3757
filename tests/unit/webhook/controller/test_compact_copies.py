"""The copies the controller keeps of Workloads read as the full objects do to everything that reads them: the
engine's parse, and the run and restore patches the job adapters write from a Workload's pod sets;
:class:`NewestCopies` keeps them compact, hands out fresh copies, and scans only the finished ones."""

from __future__ import annotations

import copy
import sys
from typing import Any

from kuota.engine.decoding import parse_workload
from kuota.webhook.controller import state
from kuota.webhook.jobs.adapter import PodSetPlacement, workload_manifest, workload_pod_sets
from kuota.webhook.jobs.batch_job import ADAPTER as BATCH_JOB

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PLACEMENT = PodSetPlacement("main", {"gpu-type": "h100"}, [GPU_TOLERATION])


def _job() -> dict[str, Any]:
    container = {
        "name": "trainer",
        "image": "ghcr.io/your-org/trainer:1.0",
        "command": ["torchrun", "--nproc-per-node=8", "train.py"],
        "env": [{"name": f"VAR_{index}", "value": "x" * 40} for index in range(20)],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}},
        "imagePullPolicy": "Always",
        "terminationMessagePath": "/dev/termination-log",
    }
    init = {"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "16"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "research",
            "uid": "0f8e6c1a-5b1d-4e51-9c43-2f3ad7a0c9b1",
            "labels": {"kueue.x-k8s.io/queue-name": "research-queue"},
        },
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "template": {
                "metadata": {"labels": {"job-name": "train", "controller-uid": "0f8e6c1a"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [container],
                    "initContainers": [init],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}],
                    "nodeSelector": {"capacity-type": "on-demand"},
                    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                                ]
                            }
                        }
                    },
                    "overhead": {"cpu": "250m"},
                    "dnsPolicy": "ClusterFirst",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                },
            },
        },
    }


def _workload() -> dict[str, Any]:
    workload = workload_manifest(_job(), BATCH_JOB)
    workload["metadata"].update(uid="b3c1", resourceVersion="12", creationTimestamp="2026-12-01T10:00:00Z")
    workload["metadata"]["managedFields"] = [{"manager": "kuota", "fieldsV1": {"f:spec": {}}}]
    return workload


def _size(obj: Any) -> int:
    seen: set[int] = set()
    stack, total = [obj], 0
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend([*item.keys(), *item.values()])
        elif isinstance(item, list):
            stack.extend(item)
    return total


def test_a_kept_workload_parses_to_the_same_engine_workload_as_the_full_one() -> None:
    full = _workload()
    cut = state.compact_workload(full).load()
    assert parse_workload(cut) == parse_workload(full)
    assert cut["metadata"] == {k: v for k, v in full["metadata"].items() if k != "managedFields"}


def test_the_job_patches_written_from_a_kept_workload_are_the_full_ones() -> None:
    full = _workload()
    cut = state.compact_workload(full).load()
    job = _job()
    assert BATCH_JOB.run_patch(job, [PLACEMENT], workload_pod_sets(cut)) == BATCH_JOB.run_patch(
        job, [PLACEMENT], workload_pod_sets(full)
    )
    placed = copy.deepcopy(job)
    placed["spec"]["template"]["spec"]["nodeSelector"]["gpu-type"] = "h100"
    restore = BATCH_JOB.restore_patch(placed, workload_pod_sets(cut))
    assert restore is not None and restore == BATCH_JOB.restore_patch(placed, workload_pod_sets(full))
    assert BATCH_JOB.restore_patch(job, workload_pod_sets(cut)) is None


def test_a_kept_workload_holds_none_of_the_template_kuota_does_not_read_and_is_about_half_the_size() -> None:
    full = _workload()
    cut = state.compact_workload(full).load()
    (pod_set,) = cut["spec"]["podSets"]
    assert set(pod_set["template"]) <= {"spec", "metadata"}
    assert set(pod_set["template"].get("metadata", {})) <= {"labels", "annotations"}, "what a restore puts back"
    assert set(pod_set["template"]["spec"]) == {"containers", "initContainers", "nodeSelector", "tolerations",
                                                "affinity", "overhead"}  # fmt: skip
    assert pod_set["template"]["spec"]["containers"] == [
        {"name": "trainer", "resources": full["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]}
    ]
    assert _size(cut) < 0.6 * _size(full)
    assert len(state.compact_workload(full).json) < 0.5 * len(state.compact_job(full).json)


def test_the_workload_view_keeps_the_cut_copy_of_what_kuota_itself_wrote() -> None:
    view = state.NewestCopies(state.compact_workload)
    view.wrote(_workload())
    (key,) = view
    copy_one, copy_two = view.get(key), view.get(key)
    assert copy_one == copy_two and copy_one is not copy_two  # a fresh copy for every reader
    assert copy_one is not None and "env" not in copy_one["spec"]["podSets"][0]["template"]["spec"]["containers"][0]


def test_the_view_takes_only_newer_versions_and_decodes_only_finished_workloads_when_scanning() -> None:
    view = state.NewestCopies(state.compact_workload)
    workload = _workload()
    assert view.observe("research/w", state.compact_workload(workload))
    older = copy.deepcopy(workload)
    older["metadata"]["resourceVersion"] = "11"
    assert not view.observe("research/w", state.compact_workload(older))
    assert list(view.finished()) == []
    finished = copy.deepcopy(workload)
    finished["metadata"]["resourceVersion"] = "13"
    finished["status"] = {"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded"}]}
    assert view.observe("research/w", state.compact_workload(finished))
    assert [obj["metadata"]["resourceVersion"] for obj in view.finished()] == ["13"]
    assert view.observe("research/w", None) and len(view) == 0


def test_the_watchs_echo_of_our_own_write_replaces_our_copy_so_the_view_and_the_watch_share_one() -> None:
    view = state.NewestCopies(state.compact_workload)
    workload = _workload()
    view.wrote(workload)
    echo = state.compact_workload(workload)
    assert not view.observe("research/" + workload["metadata"]["name"], echo)  # no news
    assert view._objects["research/" + workload["metadata"]["name"]] is echo


def test_the_watch_reuses_the_copy_kept_of_our_own_write_and_compacts_anything_else() -> None:
    view = state.NewestCopies(state.compact_workload)
    workload = _workload()
    view.wrote(workload)
    kept = view._objects["research/" + workload["metadata"]["name"]]
    assert view.compact_watched(copy.deepcopy(workload)) is kept  # the echo: no second compaction
    changed = copy.deepcopy(workload)
    changed["metadata"]["resourceVersion"] = str(int(workload["metadata"]["resourceVersion"]) + 1)
    changed["spec"]["active"] = False
    fresh = view.compact_watched(changed)
    assert fresh is not kept and fresh == state.compact_workload(changed)
    unknown = copy.deepcopy(workload)
    unknown["metadata"]["name"] = "other"
    assert view.compact_watched(unknown) == state.compact_workload(unknown)


def test_the_answer_to_a_write_that_arrives_after_the_watch_saw_the_object_deleted_is_not_kept() -> None:
    view = state.NewestCopies(state.compact_workload)
    workload = _workload()
    key = "research/" + workload["metadata"]["name"]
    assert view.observe(key, state.compact_workload(workload))
    deleting = copy.deepcopy(workload)  # the answer to the finalizer's release, the API deleting it meanwhile
    deleting["metadata"] |= {"resourceVersion": "13", "deletionTimestamp": "2026-12-06T07:00:00Z", "finalizers": []}
    assert view.observe(key, None)  # the watch's DELETED event first
    view.wrote(deleting)
    assert view.get(key) is None and len(view) == 0
    view.wrote(workload)  # a copy that is not being deleted (one made again) is kept
    assert view.get(key) is not None
