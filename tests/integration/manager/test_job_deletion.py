"""Deleting a Job gives its quota back at once, whatever the deletion's propagation."""

from __future__ import annotations

import pytest

from tests.cluster import Cluster
from tests.integration.manager.guide_objects import VERBATIM, gpu_job
from tests.integration.manager.test_guide import admitted_workload, create_job, running_pods, workload_of
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def test_a_job_deleted_with_orphan_propagation_still_gives_its_quota_to_the_next_job(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    first = create_job(cluster, gpu_job("first", "research", pods=2, gpus_per_pod=4))
    admitted_workload(cluster, "research", first["metadata"]["uid"])
    running_pods(cluster, "research", "first", 2)
    second = create_job(cluster, gpu_job("second", "research", pods=2, gpus_per_pod=4))
    waiting = wait_until(
        lambda: workload_of(cluster, "research", second["metadata"]["uid"]), "the second Job's Workload"
    )
    assert "admission" not in waiting.get("status", {})  # research's 8 GPUs are all the first Job's

    # Orphan propagation: the garbage collector strips the Workload's owner reference instead of deleting it
    # (or, if it has not discovered the Workload resource yet, deletes it as dangling at its next discovery,
    # up to 30 s later), so a prompt release is kuota's doing.
    cluster.kubectl("delete", "job", "first", "-n", "research", "--cascade=orphan")
    try:
        wait_until(
            lambda: workload_of(cluster, "research", first["metadata"]["uid"]) is None,
            "kuota to delete the deleted Job's Workload",
            timeout=10,
        )
        admitted_workload(cluster, "research", second["metadata"]["uid"])
    finally:
        cluster.kubectl("delete", "pods", "-n", "research", "-l", "job-name=first", "--wait=false")
