"""A Job naming a WorkloadPriorityClass that does not exist gets no Workload, as in Kueue: a Warning Event
``ErrWorkloadCompose`` on the Job says why, every other Job runs, and creating the class gives it its Workload."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.manager.conftest import apply, get_json
from tests.integration.manager.guide_objects import VERBATIM, gpu_job
from tests.integration.manager.test_guide import admitted_workload, create_job, workload_of
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def _compose_errors(cluster: Cluster, job: str) -> list[dict[str, Any]]:
    events = get_json(cluster, "events", "-n", "research", f"--field-selector=involvedObject.name={job}")["items"]
    return [e for e in events if e["reason"] == "ErrWorkloadCompose" and e["type"] == "Warning"]


def test_a_job_with_a_missing_priority_class_waits_without_a_workload_and_others_run(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    del manager, guide_namespaces
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    typo = create_job(cluster, gpu_job("typo", "research", pods=1, gpus_per_pod=1, priority_class="urgnet"))
    # One per reconcile of the Job (creating it, then suspending it, each comes back through the watch).
    events = wait_until(lambda: _compose_errors(cluster, "typo"), "the Job's ErrWorkloadCompose Event")
    assert all('workloadPriorityClass "urgnet" not found' in event["message"] for event in events)
    other = create_job(cluster, gpu_job("other", "research", pods=1, gpus_per_pod=1))
    admitted_workload(cluster, "research", other["metadata"]["uid"])
    assert workload_of(cluster, "research", typo["metadata"]["uid"]) is None
    apply(
        cluster,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "urgnet"},
            "value": 7,
        },
    )
    created = admitted_workload(cluster, "research", typo["metadata"]["uid"])
    assert created["spec"]["priority"] == 7
