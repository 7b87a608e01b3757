"""Admission ETAs on the real control plane: a pending Job's Workload says when it is expected to start (its
pending message and the ``ETA`` printer column), and the runtime history the ETAs learn from survives a
manager restart through its LocalQueue's annotation, after the finished Workload itself is gone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.manager.conftest import ensure_namespace, get_json, remove_queue_objects
from tests.integration.manager.guide_objects import VERBATIM, gpu_job
from tests.integration.manager.test_guide import admitted_workload, create_job, finish_job, workload_of
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

HISTORY = "kuota.dev/runtime-history"


def _pending_message(cluster: Cluster, uid: str) -> str:
    workload = workload_of(cluster, "research", uid)
    if workload is None:
        return ""
    reserved = [c for c in workload.get("status", {}).get("conditions") or [] if c["type"] == "QuotaReserved"]
    return str(reserved[0]["message"]) if reserved and reserved[0]["status"] == "False" else ""


def _history(cluster: Cluster) -> dict[str, Any] | None:
    local_queue = get_json(cluster, "localqueue", "research-queue", "-n", "research")
    text = (local_queue["metadata"].get("annotations") or {}).get(HISTORY)
    return None if text is None else dict(json.loads(text))


def test_a_pending_job_is_told_its_eta_and_the_history_behind_it_survives_a_restart(
    cluster: Cluster, kuota_crds: list[dict[str, Any]]
) -> None:
    del kuota_crds
    ensure_namespace(cluster, "kuota-etas", managed=False)
    ensure_namespace(cluster, "research")
    manager = ManagerProcess(cluster, "kuota-etas", identity="etas", extra_args=("--eta-interval=1s",))
    manager.start()
    try:
        for name in VERBATIM:
            cluster.kubectl("apply", "-f", str(GUIDE / name))
        first = gpu_job("eta-first", "research", pods=2, gpus_per_pod=4)  # the research queue's 8 GPUs
        first["metadata"]["annotations"] = {"kuota.dev/expected-runtime": "2h"}
        first_uid = create_job(cluster, first)["metadata"]["uid"]
        admitted_workload(cluster, "research", first_uid)
        second_uid = create_job(cluster, gpu_job("eta-second", "research", pods=2, gpus_per_pod=4))["metadata"]["uid"]

        message = wait_until(
            lambda: (m := _pending_message(cluster, second_uid)) and "expected to start" in m and m,
            "the pending Workload's message to give its ETA",
            timeout=120,
        )
        assert message.endswith("; expected to start in about 2 h, from 1 declared runtime"), message
        workload = workload_of(cluster, "research", second_uid)
        assert workload is not None
        name = workload["metadata"]["name"]
        eta = wait_until(
            lambda: ((workload_of(cluster, "research", second_uid) or {})["metadata"].get("annotations") or {}).get(
                "kuota.dev/eta"
            ),
            "the ETA annotation the printer column reads",
            timeout=60,
        )
        table = cluster.kubectl("get", "workloads", name, "-n", "research").stdout.splitlines()
        assert "ETA" in table[0].split(), table
        assert eta in table[1].split(), table

        finish_job(cluster, "research", "eta-first")
        admitted_workload(cluster, "research", second_uid)
        history = wait_until(lambda: _history(cluster), "the finished job's runtime on its LocalQueue", timeout=60)
        assert list(history["shapes"]) == ["gpus-8"] and len(history["shapes"]["gpus-8"]) == 1
        # The finished Workload goes with its Job: after the restart, only the LocalQueue remembers it ran.
        cluster.kubectl("delete", "job", "eta-first", "-n", "research", "--cascade=background")
        wait_until(
            lambda: workload_of(cluster, "research", first_uid) is None, "the finished Workload to go", timeout=60
        )

        manager.stop()
        manager.start()
        third_uid = create_job(cluster, gpu_job("eta-third", "research", pods=2, gpus_per_pod=4))["metadata"]["uid"]
        # "eta-second" declares no runtime: its end comes from the one job in the restored history.
        message = wait_until(
            lambda: (m := _pending_message(cluster, third_uid)) and "from 1 similar job" in m and m,
            "the ETA of the job behind it, from the history restored after the restart",
            timeout=120,
        )
        assert "expected to start" in message
        assert _history(cluster) == history
    finally:
        manager.ensure_started()
        remove_queue_objects(cluster, ["research"])
        manager.stop()
        manager.unregister()
