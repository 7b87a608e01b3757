"""Finished Workloads are kept for the report's history, then deleted once the retention has passed."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.manager.conftest import ensure_namespace, remove_queue_objects
from tests.integration.manager.guide_objects import VERBATIM, gpu_job
from tests.integration.manager.test_guide import admitted_workload, create_job, finish_job, workload_of
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def test_a_finished_workload_is_deleted_after_the_retention_and_not_before(
    cluster: Cluster, kuota_crds: list[dict[str, Any]]
) -> None:
    del kuota_crds
    ensure_namespace(cluster, "kuota-retention", managed=False)
    ensure_namespace(cluster, "research")
    manager = ManagerProcess(cluster, "kuota-retention", identity="retention", extra_args=("--workload-retention=4s",))
    manager.start()
    try:
        for name in VERBATIM:
            cluster.kubectl("apply", "-f", str(GUIDE / name))
        job = create_job(cluster, gpu_job("short-lived", "research", pods=1, gpus_per_pod=1))
        uid = job["metadata"]["uid"]
        admitted_workload(cluster, "research", uid)
        finish_job(cluster, "research", "short-lived")

        def finished() -> bool:
            workload = workload_of(cluster, "research", uid)
            return workload is not None and any(
                c["type"] == "Finished" and c["status"] == "True" for c in workload["status"]["conditions"]
            )

        wait_until(finished, "the Workload to be Finished")
        kept_until = time.monotonic() + 2
        while time.monotonic() < kept_until:
            assert workload_of(cluster, "research", uid) is not None, "deleted before its retention"
        wait_until(
            lambda: workload_of(cluster, "research", uid) is None, "the expired Workload to be deleted", timeout=20
        )
        assert cluster.kubectl("get", "job", "short-lived", "-n", "research", check=False).returncode == 0
    finally:
        remove_queue_objects(cluster, ["research"])
        manager.stop()
        manager.unregister()
