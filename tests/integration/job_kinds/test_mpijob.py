"""An MPIJob (v2beta1) under kuota with the real mpi-operator: suspended at creation (its runPolicy), held whole
while its Workload does not fit, admitted with Kueue's pod sets (``launcher``, ``worker``), the flavor in every pod
(the launcher's Job too), preempted as a whole and resumed; one without a launcher gets one clear reason and no
Workload, and the next MPIJob is admitted as if it were not there."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.job_controllers import UpstreamController
from tests.integration.job_kinds.manifests import mpijob
from tests.integration.job_kinds.queueing import (
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


def _selector(name: str) -> str:
    return f"training.kubeflow.org/job-name={name}"


def test_an_mpijob_waits_whole_then_is_placed_preempted_whole_resumed_and_its_workload_goes_with_it(
    cluster: Cluster, mpi_operator: UpstreamController, team: str
) -> None:
    del mpi_operator
    blocker = create(cluster, urgent_job(team, "blocker", pods_count=1, gpus_per_pod=8))  # 8 of 16: 12 do not fit
    admitted_workload(cluster, team, blocker["metadata"]["uid"])

    created = create(cluster, mpijob(team, "allreduce", workers=4, gpus=3))
    assert created["spec"]["runPolicy"]["suspend"] is True
    uid = created["metadata"]["uid"]
    waiting = wait_until(lambda: workload_of(cluster, team, uid), "the MPIJob's Workload")
    assert waiting["metadata"]["name"].startswith("mpijob-allreduce-")
    assert [(p["name"], p["count"]) for p in waiting["spec"]["podSets"]] == [("launcher", 1), ("worker", 4)]
    assert "admission" not in (waiting.get("status") or {})
    assert not get_json(cluster, "pods", "-n", team, "-l", _selector("allreduce"))["items"]

    cluster.kubectl("delete", "job", "blocker", "-n", team, "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, _selector("allreduce"), 5):
        assert_placed(pod)

    urgent = create(cluster, urgent_job(team, "urgent", pods_count=2, gpus_per_pod=8))
    admitted_workload(cluster, team, urgent["metadata"]["uid"])
    no_pods(cluster, team, _selector("allreduce"))
    evicted = workload_of(cluster, team, uid)
    assert evicted is not None and "admission" not in (evicted.get("status") or {})
    cluster.kubectl("delete", "job", "urgent", "-n", team, "--cascade=foreground", "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, _selector("allreduce"), 5):
        assert_placed(pod)

    cluster.kubectl("delete", "mpijob", "allreduce", "-n", team, "--wait=false")
    wait_until(lambda: workload_of(cluster, team, uid) is None, "the deleted MPIJob's Workload to go", timeout=60)


def _compose_errors(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    events = get_json(cluster, "events", "-n", namespace, f"--field-selector=involvedObject.name={name}")["items"]
    return [e for e in events if e["reason"] == "ErrWorkloadCompose" and e["type"] == "Warning"]


def test_an_mpijob_without_a_launcher_is_told_why_it_gets_no_workload_and_the_next_one_runs(
    cluster: Cluster, mpi_operator: UpstreamController, team: str
) -> None:
    del mpi_operator
    headless = create(cluster, mpijob(team, "headless", workers=2, gpus=8, launcher=False))
    events = wait_until(lambda: _compose_errors(cluster, team, "headless"), "the MPIJob's ErrWorkloadCompose Event")
    assert {event["message"] for event in events} == {
        f"MPIJob {team}/headless has no Launcher in spec.mpiReplicaSpecs: the operator never runs it without one; "
        "add spec.mpiReplicaSpecs.Launcher"
    }

    whole = create(cluster, mpijob(team, "whole", workers=2, gpus=8))  # all 16 GPUs: none held by the headless one
    admitted_workload(cluster, team, whole["metadata"]["uid"])
    running_pods(cluster, team, _selector("whole"), 3)
    assert workload_of(cluster, team, headless["metadata"]["uid"]) is None
    assert get_json(cluster, "mpijob", "headless", "-n", team)["spec"]["runPolicy"]["suspend"] is True
