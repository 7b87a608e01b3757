"""The training-operator's other kinds under kuota (TFJob, XGBoostJob, PaddleJob, JAXJob), each with the real
training-operator: suspended at creation (its runPolicy), held whole while its Workload does not fit, admitted
with Kueue's pod sets, the flavor in every pod, preempted as a whole, resumed, and its Workload gone with it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.cluster import Cluster
from tests.cluster.job_controllers import UpstreamController
from tests.integration.job_kinds.manifests import KubeflowKind, kubeflow_job
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


@dataclass(frozen=True)
class Case:
    """A kind, its replica types as written (Kueue orders them, not the spec) and the pod sets Kueue v0.20 makes."""

    kind: KubeflowKind
    replicas: dict[str, int]
    pod_sets: list[tuple[str, int]]


CASES = [
    Case(
        KubeflowKind("TFJob", "tfReplicaSpecs", "tensorflow"),
        {"Worker": 2, "PS": 1, "Chief": 1},
        [("chief", 1), ("ps", 1), ("worker", 2)],
    ),
    Case(
        KubeflowKind("XGBoostJob", "xgbReplicaSpecs", "xgboost"),
        {"Worker": 3, "Master": 1},
        [("master", 1), ("worker", 3)],
    ),
    Case(
        KubeflowKind("PaddleJob", "paddleReplicaSpecs", "paddle"),
        {"Worker": 3, "Master": 1},
        [("master", 1), ("worker", 3)],
    ),
    Case(KubeflowKind("JAXJob", "jaxReplicaSpecs", "jax"), {"Worker": 4}, [("worker", 4)]),
]
GPUS_PER_POD = 3  # 4 pods of 3: 12 of the queue's 16 GPUs


@pytest.mark.parametrize("case", CASES, ids=[case.kind.kind for case in CASES])
def test_a_kubeflow_job_waits_whole_then_is_placed_preempted_whole_resumed_and_its_workload_goes_with_it(
    cluster: Cluster, training_operator: UpstreamController, team: str, case: Case
) -> None:
    del training_operator
    kind = case.kind
    selector = "training.kubeflow.org/job-name=train"
    blocker = create(cluster, urgent_job(team, "blocker", pods_count=1, gpus_per_pod=8))  # 8 of 16: 12 do not fit
    admitted_workload(cluster, team, blocker["metadata"]["uid"])

    created = create(cluster, kubeflow_job(team, kind, "train", case.replicas, GPUS_PER_POD))
    assert created["spec"]["runPolicy"]["suspend"] is True
    uid = created["metadata"]["uid"]
    waiting = wait_until(lambda: workload_of(cluster, team, uid), f"the {kind.kind}'s Workload")
    assert waiting["metadata"]["name"].startswith(f"{kind.kind.lower()}-train-")
    assert [(p["name"], p["count"]) for p in waiting["spec"]["podSets"]] == case.pod_sets
    assert "admission" not in (waiting.get("status") or {})
    assert not get_json(cluster, "pods", "-n", team, "-l", selector)["items"]

    cluster.kubectl("delete", "job", "blocker", "-n", team, "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, selector, 4):
        assert_placed(pod)

    urgent = create(cluster, urgent_job(team, "urgent", pods_count=2, gpus_per_pod=8))
    admitted_workload(cluster, team, urgent["metadata"]["uid"])
    no_pods(cluster, team, selector)
    evicted = workload_of(cluster, team, uid)
    assert evicted is not None and "admission" not in (evicted.get("status") or {})
    assert get_json(cluster, kind.kind.lower(), "train", "-n", team)["spec"]["runPolicy"]["suspend"] is True
    cluster.kubectl("delete", "job", "urgent", "-n", team, "--cascade=foreground", "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, selector, 4):
        assert_placed(pod)

    cluster.kubectl("delete", kind.kind.lower(), "train", "-n", team, "--wait=false")
    wait_until(lambda: workload_of(cluster, team, uid) is None, f"the deleted {kind.kind}'s Workload to go", timeout=60)
