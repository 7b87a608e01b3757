"""Chaos: the manager is SIGKILLed at random moments while 500 Jobs from three teams flow, and restarted.

An independent watch checks at every Workload event that no ClusterQueue (and no cohort) holds more GPUs
than its limits allow and that no Job ever has two Workloads; in the end every Job has completed exactly once.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from typing import Any

import pytest

from kuota.kube.client import KubeApi
from kuota.kube.reflector import Reflector
from kuota.webhook.admission.reflected_cluster import WORKLOADS
from tests.cluster import RUN_SECONDS_ANNOTATION, Cluster
from tests.integration.manager.conftest import apply, get_json
from tests.integration.manager.guide_objects import VERBATIM, gpu_job, team_queues
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import async_wait_until

pytestmark = pytest.mark.integration

JOBS = 500
SEED = 20261130
TEAMS = ("research", "applied-ml", "inference")
# The most each ClusterQueue can ever hold: nominal 8 + what it may borrow (research is capped at 12; the
# others may borrow research's 8 and inference's lendable 4, or applied-ml's 8).
QUEUE_LIMIT = {"research": 20, "applied-ml": 20, "inference": 24}
COHORT_GPUS = 24


class Oracle:
    """What the API says is admitted, checked after every event."""

    def __init__(self) -> None:
        self.admitted: dict[str, tuple[str, int]] = {}
        self.workloads_per_job: dict[str, set[str]] = {}
        self.violations: list[str] = []
        self.events = 0
        self.peak = 0

    def observe(self, kind: str, workload: dict[str, Any]) -> None:
        self.events += 1
        key = f"{workload['metadata']['namespace']}/{workload['metadata']['name']}"
        job_uid = (workload["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid", "")
        if kind != "DELETED":
            self.workloads_per_job.setdefault(job_uid, set()).add(key)
            if len(self.workloads_per_job[job_uid]) > 1:
                self.violations.append(f"Job {job_uid} has Workloads {sorted(self.workloads_per_job[job_uid])}")
        admission = (workload.get("status") or {}).get("admission")
        reserved = any(
            c["type"] == "QuotaReserved" and c["status"] == "True"
            for c in (workload.get("status") or {}).get("conditions") or []
        )
        finished = any(
            c["type"] == "Finished" and c["status"] == "True"
            for c in (workload.get("status") or {}).get("conditions") or []
        )
        if kind == "DELETED" or not admission or not reserved or finished:
            self.admitted.pop(key, None)
        else:
            gpus = sum(int(p["resourceUsage"].get("nvidia.com/gpu", 0)) for p in admission["podSetAssignments"])
            self.admitted[key] = (admission["clusterQueue"], gpus)
        per_queue: dict[str, int] = {}
        for queue, gpus in self.admitted.values():
            per_queue[queue] = per_queue.get(queue, 0) + gpus
        for queue, used in per_queue.items():
            if used > QUEUE_LIMIT[queue]:
                self.violations.append(f"ClusterQueue {queue} holds {used} GPUs, over its limit {QUEUE_LIMIT[queue]}")
        total = sum(per_queue.values())
        self.peak = max(self.peak, total)
        if total > COHORT_GPUS:
            holders = ", ".join(f"{key} {queue} {gpus}" for key, (queue, gpus) in sorted(self.admitted.items()))
            self.violations.append(f"cohort gpu-pool holds {total} GPUs of {COHORT_GPUS}: {holders}")


def _workload_watch(api: KubeApi, oracle: Oracle) -> Reflector[dict[str, Any]]:
    """Every change of every Workload to the oracle, through a list+watch that relists after a 410."""
    reflector: Reflector[dict[str, Any]] = Reflector(api, WORKLOADS, dict)
    reflector.subscribe(lambda event: oracle.observe(event.type.value, event.value))
    return reflector


def _chaos_monkey(manager: ManagerProcess, stop: threading.Event, kills: list[float]) -> None:
    chance = random.Random(SEED)
    while not stop.wait(chance.uniform(4.0, 10.0)):
        manager.kill()
        kills.append(time.monotonic())
        time.sleep(chance.uniform(0.2, 1.5))
        manager.start(wait_ready=False)


def _jobs() -> list[dict[str, Any]]:
    chance = random.Random(SEED)
    jobs = []
    for index in range(JOBS):
        team = chance.choice(TEAMS)
        job = gpu_job(f"chaos-{index:03d}", team, pods=1, gpus_per_pod=chance.choice((1, 2, 2, 4)))
        job["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})[RUN_SECONDS_ANNOTATION] = str(
            chance.choice((0.5, 1, 2))
        )
        jobs.append(job)
    return jobs


async def test_killing_the_manager_at_random_never_overruns_quota_or_double_admits_and_every_job_finishes(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...], api_client: KubeApi
) -> None:
    for name in VERBATIM:
        await asyncio.to_thread(cluster.kubectl, "apply", "-f", str(GUIDE / name))
    await asyncio.to_thread(apply, cluster, *team_queues("applied-ml", gpus=8), *team_queues("inference", 8, 4))
    oracle = Oracle()
    watcher = asyncio.create_task(_workload_watch(api_client, oracle).run())
    stop_monkey = threading.Event()
    kills: list[float] = []
    monkey = threading.Thread(target=_chaos_monkey, args=(manager, stop_monkey, kills), daemon=True)
    monkey.start()
    try:
        jobs = _jobs()
        for start in range(0, JOBS, 10):  # a steady flow, 10 at a time
            batch = {"apiVersion": "v1", "kind": "List", "items": jobs[start : start + 10]}

            async def submitted(batch: dict[str, Any] = batch) -> bool:
                # While the only replica is down its webhook refuses Jobs (failurePolicy Fail): submit again,
                # as a CI system would. apply is idempotent for the Jobs that got through.
                result = await asyncio.to_thread(
                    cluster.kubectl, "apply", "-f", "-", input=json.dumps(batch), check=False
                )
                return result.returncode == 0

            await async_wait_until(submitted, f"Jobs {start}-{start + 9} to be accepted", timeout=120, interval=0.5)
            await asyncio.sleep(0.2)

        def completed() -> int:
            items = []
            for team in TEAMS:
                items += get_json(cluster, "jobs", "-n", team)["items"]
            return sum(1 for job in items if (job.get("status") or {}).get("succeeded") == 1)

        async def all_completed() -> bool:
            return await asyncio.to_thread(completed) == JOBS

        await async_wait_until(all_completed, f"all {JOBS} Jobs to complete", timeout=900, interval=2.0)
    finally:
        stop_monkey.set()
        await asyncio.to_thread(monkey.join, 30)
        watcher.cancel()
    manager.ensure_started()
    assert len(kills) >= 5, f"the manager was killed only {len(kills)} times"
    assert oracle.events > JOBS
    assert oracle.violations == []
    assert 0 < oracle.peak <= COHORT_GPUS
    for team in TEAMS:
        for job in get_json(cluster, "jobs", "-n", team)["items"]:
            assert job["status"].get("succeeded") == 1, job["metadata"]["name"]
            assert not job["status"].get("failed"), job["metadata"]["name"]
