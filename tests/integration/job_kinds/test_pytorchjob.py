"""A Kubeflow PyTorchJob under kuota with the real training-operator: suspended at creation (its runPolicy),
admitted as one Workload (``master``, ``worker``), the flavor in every pod, preempted as a whole and resumed, the
quota back when it succeeds or is deleted."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.job_controllers import UpstreamController
from tests.integration.job_kinds.manifests import pytorchjob
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


def test_a_pytorchjob_is_admitted_whole_placed_preempted_whole_resumed_and_its_workload_goes_with_it(
    cluster: Cluster, training_operator: UpstreamController, team: str
) -> None:
    del training_operator
    created = create(cluster, pytorchjob(team, "ddp", workers=3, gpus=4))
    assert created["spec"]["runPolicy"]["suspend"] is True
    uid = created["metadata"]["uid"]

    workload = admitted_workload(cluster, team, uid)
    assert workload["metadata"]["name"].startswith("pytorchjob-ddp-")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("master", 1), ("worker", 3)]
    for pod in running_pods(cluster, team, _selector("ddp"), 4):
        assert_placed(pod)

    urgent = create(cluster, urgent_job(team, "urgent", pods_count=2, gpus_per_pod=8))
    admitted_workload(cluster, team, urgent["metadata"]["uid"])
    no_pods(cluster, team, _selector("ddp"))
    evicted = workload_of(cluster, team, uid)
    assert evicted is not None and "admission" not in (evicted.get("status") or {})
    cluster.kubectl("delete", "job", "urgent", "-n", team, "--cascade=foreground", "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, _selector("ddp"), 4):
        assert_placed(pod)

    cluster.kubectl("delete", "pytorchjob", "ddp", "-n", team, "--wait=false")
    wait_until(
        lambda: workload_of(cluster, team, uid) is None, "the deleted PyTorchJob's Workload to be deleted", timeout=60
    )


def test_a_succeeded_pytorchjob_gives_its_quota_to_the_one_waiting_whole_for_it(
    cluster: Cluster, training_operator: UpstreamController, team: str
) -> None:
    del training_operator
    first = create(cluster, pytorchjob(team, "first", workers=2, gpus=4, run_seconds=8))  # 12 of 16 GPUs
    admitted_workload(cluster, team, first["metadata"]["uid"])
    second = create(cluster, pytorchjob(team, "second", workers=1, gpus=4))  # 8 GPUs: 4 are free
    wait_until(lambda: workload_of(cluster, team, second["metadata"]["uid"]), "the second PyTorchJob's Workload")
    assert not get_json(cluster, "pods", "-n", team, "-l", _selector("second"))["items"]

    def finished() -> dict[str, Any] | None:
        workload = workload_of(cluster, team, first["metadata"]["uid"])
        conditions = (workload or {}).get("status", {}).get("conditions") or []
        return workload if any(c["type"] == "Finished" and c["status"] == "True" for c in conditions) else None

    done = wait_until(finished, "the first PyTorchJob's Workload to be Finished", timeout=120)
    assert next(c for c in done["status"]["conditions"] if c["type"] == "Finished")["reason"] == "Succeeded"
    admitted_workload(cluster, team, second["metadata"]["uid"])
    running_pods(cluster, team, _selector("second"), 2)
