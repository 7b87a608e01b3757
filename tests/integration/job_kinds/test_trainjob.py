"""A Kubeflow Trainer v2 TrainJob under kuota with the real trainer controller (and the JobSet controller under it):
suspended at creation, its pod sets made from the ClusterTrainingRuntime it names, held whole while they do not fit,
the flavor in every pod through Kueue's runtime patch, preempted as a whole and resumed; one naming a runtime that
does not exist gets one clear reason and no Workload, and the next TrainJob is admitted as if it were not there; once
that runtime is created, the TrainJob gets its Workload and runs (kuota watches the runtimes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.job_controllers import UpstreamController
from tests.integration.job_kinds.manifests import cluster_training_runtime, trainjob
from tests.integration.job_kinds.queueing import (
    admitted_workload,
    apply,
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


@pytest.fixture
def runtime(cluster: Cluster, trainer: UpstreamController, team: str) -> Iterator[str]:
    """A ClusterTrainingRuntime of 3-GPU nodes, named for the test's namespace."""
    del trainer
    name = f"{team}-gpus"
    apply(cluster, cluster_training_runtime(name, gpus=3))
    try:
        yield name
    finally:
        # The trainer holds it with a finalizer until the TrainJobs naming it are gone (after this, with the team).
        cluster.kubectl("delete", "clustertrainingruntime", name, "--ignore-not-found", "--wait=false")


def _selector(name: str) -> str:
    return f"jobset.sigs.k8s.io/jobset-name={name}"


def test_a_trainjob_waits_whole_then_is_placed_preempted_whole_resumed_and_its_workload_goes_with_it(
    cluster: Cluster, runtime: str, team: str
) -> None:
    blocker = create(cluster, urgent_job(team, "blocker", pods_count=1, gpus_per_pod=8))  # 8 of 16: 12 do not fit
    admitted_workload(cluster, team, blocker["metadata"]["uid"])

    created = create(cluster, trainjob(team, "finetune", runtime, nodes=4))
    assert created["spec"]["suspend"] is True
    uid = created["metadata"]["uid"]
    waiting = wait_until(lambda: workload_of(cluster, team, uid), "the TrainJob's Workload")
    assert waiting["metadata"]["name"].startswith("trainjob-finetune-")
    assert [(p["name"], p["count"]) for p in waiting["spec"]["podSets"]] == [("node", 4)]
    assert "admission" not in (waiting.get("status") or {})
    assert not get_json(cluster, "pods", "-n", team, "-l", _selector("finetune"))["items"]

    cluster.kubectl("delete", "job", "blocker", "-n", team, "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, _selector("finetune"), 4):
        assert_placed(pod)

    urgent = create(cluster, urgent_job(team, "urgent", pods_count=2, gpus_per_pod=8))
    admitted_workload(cluster, team, urgent["metadata"]["uid"])
    no_pods(cluster, team, _selector("finetune"))
    evicted = workload_of(cluster, team, uid)
    assert evicted is not None and "admission" not in (evicted.get("status") or {})
    cluster.kubectl("delete", "job", "urgent", "-n", team, "--cascade=foreground", "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, _selector("finetune"), 4):
        assert_placed(pod)

    cluster.kubectl("delete", "trainjob", "finetune", "-n", team, "--wait=false")
    wait_until(lambda: workload_of(cluster, team, uid) is None, "the deleted TrainJob's Workload to go", timeout=60)


def _compose_errors(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    events = get_json(cluster, "events", "-n", namespace, f"--field-selector=involvedObject.name={name}")["items"]
    return [e for e in events if e["reason"] == "ErrWorkloadCompose" and e["type"] == "Warning"]


def test_a_trainjob_naming_a_runtime_that_does_not_exist_is_told_why_and_the_next_one_runs(
    cluster: Cluster, runtime: str, team: str
) -> None:
    lost = create(cluster, trainjob(team, "lost", f"{team}-no-such-runtime", nodes=2))
    events = wait_until(lambda: _compose_errors(cluster, team, "lost"), "the TrainJob's ErrWorkloadCompose Event")
    assert {event["message"] for event in events} == {
        f'TrainJob {team}/lost names ClusterTrainingRuntime "{team}-no-such-runtime", which does not exist: create '
        "it or fix spec.runtimeRef"
    }

    whole = create(cluster, trainjob(team, "whole", runtime, nodes=5))  # 15 of 16 GPUs: none held by the lost one
    admitted_workload(cluster, team, whole["metadata"]["uid"])
    running_pods(cluster, team, _selector("whole"), 5)
    assert workload_of(cluster, team, lost["metadata"]["uid"]) is None
    assert get_json(cluster, "trainjob", "lost", "-n", team)["spec"]["suspend"] is True


def test_a_trainjob_whose_runtime_is_created_after_it_gets_its_workload_then_and_is_admitted(
    cluster: Cluster, team: str
) -> None:
    # No trainer controller asked for: run alone, nothing but kuota's watch of the runtimes brings the TrainJob
    # back (the trainer, retrying a TrainJob whose runtime is missing, writes its status once the runtime exists).
    name = f"{team}-late"
    late = create(cluster, trainjob(team, "late", name, nodes=2))
    wait_until(lambda: _compose_errors(cluster, team, "late"), "the TrainJob's ErrWorkloadCompose Event")
    assert workload_of(cluster, team, late["metadata"]["uid"]) is None
    apply(cluster, cluster_training_runtime(name, gpus=3))
    try:
        workload = admitted_workload(cluster, team, late["metadata"]["uid"], timeout=30)
        assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("node", 2)]
        started = wait_until(
            lambda: j if (j := get_json(cluster, "trainjob", "late", "-n", team))["spec"]["suspend"] is False else None,
            "kuota to start the TrainJob",
        )
        [patch] = [p for p in started["spec"]["runtimePatches"] if p["manager"] == "kueue.x-k8s.io/manager"]
        assert patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    finally:
        cluster.kubectl("delete", "clustertrainingruntime", name, "--ignore-not-found", "--wait=false")
