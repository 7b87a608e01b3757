"""Kueue's own kubectl plugin (kueuectl, built at the side-by-side's Kueue version) against kuota: what it lists,
and what its stop and resume commands do, answered with the statuses, conditions and events Kueue gives."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.binaries import ensure_kueuectl
from tests.integration.manager.conftest import get_json, wait_for_event
from tests.integration.manager.guide_objects import VERBATIM, gpu_job
from tests.integration.manager.test_guide import admitted_workload, create_job, running_pods, workload_of
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kueuectl_binary() -> Path:
    return ensure_kueuectl()


def _kueuectl(cluster: Cluster, binary: Path, *args: str) -> str:
    result = subprocess.run(
        [str(binary), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"kueuectl {' '.join(args)} failed: {result.stderr.strip()}"
    return result.stdout


def _table(output: str) -> list[dict[str, str]]:
    """kueuectl's table as rows keyed by header; columns start where their headers do (cells may be empty)."""
    header, *lines = output.splitlines()
    names = [name.strip() for name in header.split("   ") if name.strip()]  # tabwriter pads with 3 spaces
    starts: list[int] = []
    for name in names:
        starts.append(header.index(name, starts[-1] + 1 if starts else 0))
    ends: list[int | None] = [*starts[1:], None]
    return [
        {name: line[start:end].strip() for name, start, end in zip(names, starts, ends, strict=True)} for line in lines
    ]


def _row(rows: list[dict[str, str]], name: str) -> dict[str, str]:
    found = [row for row in rows if row["NAME"] == name]
    assert len(found) == 1, f"{name} in {rows}"
    return found[0]


def _condition(obj: dict[str, Any], kind: str) -> tuple[str, str, str] | None:
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition["type"] == kind:
            return condition["status"], condition["reason"], condition["message"]
    return None


def _active(cluster: Cluster, *queue: str) -> tuple[str, str, str] | None:
    return _condition(get_json(cluster, *queue), "Active")


def _wait_active(cluster: Cluster, expected: tuple[str, str, str], *queue: str) -> None:
    wait_until(lambda: _active(cluster, *queue) == expected, f"{' '.join(queue)} Active to be {expected}", timeout=60)


def _apply_guide(cluster: Cluster) -> None:
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))


def _evicted(cluster: Cluster, job_uid: str, reason: str) -> dict[str, Any]:
    def evicted() -> dict[str, Any] | None:
        workload = workload_of(cluster, "research", job_uid)
        found = _condition(workload, "Evicted") if workload is not None else None
        return workload if found is not None and found[:2] == ("True", reason) else None

    return wait_until(evicted, f"the Workload of Job {job_uid} to be evicted: {reason}", timeout=60)


CQ_READY = ("True", "Ready", "Can admit new workloads")
CQ_STOPPED = ("False", "Stopped", "Can't admit new workloads: is stopped.")
LQ_READY = ("True", "Ready", "Can submit new workloads to localQueue")
LQ_STOPPED = ("False", "Stopped", "LocalQueue is stopped")
LQ_CLUSTER_QUEUE_INACTIVE = ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")


def test_kueuectl_lists_kuotas_queues_flavors_and_workloads_with_kueues_columns(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...], kueuectl_binary: Path
) -> None:
    _apply_guide(cluster)
    running = create_job(cluster, gpu_job("listed-running", "research", pods=2, gpus_per_pod=4))
    admitted = admitted_workload(cluster, "research", running["metadata"]["uid"])
    waiting = create_job(cluster, gpu_job("listed-waiting", "research", pods=1, gpus_per_pod=4))  # past quota
    wait_until(
        lambda: get_json(cluster, "clusterqueue", "research").get("status", {}).get("pendingWorkloads") == 1,
        "research's status to count the waiting Job",
        timeout=60,
    )

    queues = _table(_kueuectl(cluster, kueuectl_binary, "list", "clusterqueue"))
    assert list(queues[0]) == ["NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "ACTIVE", "AGE"]
    research = _row(queues, "research")
    assert (research["COHORT"], research["PENDING WORKLOADS"], research["ADMITTED WORKLOADS"]) == ("gpu-pool", "1", "1")
    assert research["ACTIVE"] == "true"

    wait_until(
        lambda: (
            get_json(cluster, "localqueue", "research-queue", "-n", "research")["status"].get("pendingWorkloads") == 1
        ),
        "research-queue's status to count the waiting Job",
        timeout=60,
    )
    locals_ = _table(_kueuectl(cluster, kueuectl_binary, "list", "localqueue", "-n", "research"))
    assert list(locals_[0]) == ["NAME", "CLUSTERQUEUE", "PENDING WORKLOADS", "ADMITTED WORKLOADS", "AGE"]
    local = _row(locals_, "research-queue")
    assert (local["CLUSTERQUEUE"], local["PENDING WORKLOADS"], local["ADMITTED WORKLOADS"]) == ("research", "1", "1")

    flavors = _table(_kueuectl(cluster, kueuectl_binary, "list", "resourceflavor"))
    assert list(flavors[0]) == ["NAME", "NODE LABELS", "AGE"]
    assert _row(flavors, "h100-ondemand")["NODE LABELS"] == "capacity-type=on-demand, gpu-type=h100"

    workloads = _table(_kueuectl(cluster, kueuectl_binary, "list", "workload", "-n", "research"))
    assert list(workloads[0]) == [
        "NAME", "JOB TYPE", "JOB NAME", "LOCALQUEUE", "CLUSTERQUEUE", "STATUS", "POSITION IN QUEUE", "EXEC TIME", "AGE"
    ]  # fmt: skip
    waiting_workload = workload_of(cluster, "research", waiting["metadata"]["uid"])
    assert waiting_workload is not None
    for workload, job, status in (
        (admitted, "listed-running", "ADMITTED"),
        (waiting_workload, "listed-waiting", "PENDING"),
    ):
        row = _row(workloads, workload["metadata"]["name"])
        assert (row["JOB TYPE"], row["JOB NAME"], row["LOCALQUEUE"]) == ("job", job, "research-queue")
        assert (row["CLUSTERQUEUE"], row["STATUS"]) == ("research", status)


def test_kueuectl_stop_holds_or_drains_a_clusterqueue_and_resume_admits_again(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...], kueuectl_binary: Path
) -> None:
    _apply_guide(cluster)
    first = create_job(cluster, gpu_job("before-stop", "research", pods=1, gpus_per_pod=4))
    admitted_workload(cluster, "research", first["metadata"]["uid"])

    # Hold: nothing new is admitted, what runs keeps running.
    _kueuectl(cluster, kueuectl_binary, "stop", "clusterqueue", "research", "--keep-already-running")
    assert get_json(cluster, "clusterqueue", "research")["spec"]["stopPolicy"] == "Hold"
    _wait_active(cluster, CQ_STOPPED, "clusterqueue", "research")
    _wait_active(cluster, LQ_CLUSTER_QUEUE_INACTIVE, "localqueue", "research-queue", "-n", "research")
    wait_until(
        lambda: _table(_kueuectl(cluster, kueuectl_binary, "list", "clusterqueue"))[0]["ACTIVE"] == "false",
        "kueuectl to list research as inactive",
    )
    held = create_job(cluster, gpu_job("while-held", "research", pods=1, gpus_per_pod=4))

    def told_stopped() -> tuple[str, str, str] | None:
        workload = workload_of(cluster, "research", held["metadata"]["uid"])
        found = _condition(workload, "QuotaReserved") if workload is not None else None
        return found if found is not None and "stopped" in found[2] else None

    assert wait_until(told_stopped, "the held Job's Workload to say its queue is stopped", timeout=60)[0] == "False"
    still = workload_of(cluster, "research", first["metadata"]["uid"])
    assert still is not None and _condition(still, "Admitted") == ("True", "Admitted", "The workload is admitted")

    # HoldAndDrain (kueuectl's default): what runs is evicted, as Kueue does.
    _kueuectl(cluster, kueuectl_binary, "stop", "clusterqueue", "research")
    assert get_json(cluster, "clusterqueue", "research")["spec"]["stopPolicy"] == "HoldAndDrain"
    drained = _evicted(cluster, first["metadata"]["uid"], "ClusterQueueStopped")
    assert _condition(drained, "Evicted") == ("True", "ClusterQueueStopped", "The ClusterQueue is stopped")
    event = ("Normal", "EvictedDueToClusterQueueStopped")
    assert wait_for_event(cluster, "research", "Workload", drained["metadata"]["name"], event) == (
        "The ClusterQueue is stopped"
    )
    assert wait_for_event(cluster, "research", "Job", "before-stop", ("Normal", "Stopped")) == (
        "The ClusterQueue is stopped"
    )

    _kueuectl(cluster, kueuectl_binary, "resume", "clusterqueue", "research")
    _wait_active(cluster, CQ_READY, "clusterqueue", "research")
    _wait_active(cluster, LQ_READY, "localqueue", "research-queue", "-n", "research")
    for created in (first, held):
        admitted_workload(cluster, "research", created["metadata"]["uid"])
        running_pods(cluster, "research", created["metadata"]["name"], 1)


def test_kueuectl_stop_drains_a_localqueue_and_resume_admits_again(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...], kueuectl_binary: Path
) -> None:
    _apply_guide(cluster)
    created = create_job(cluster, gpu_job("in-local", "research", pods=1, gpus_per_pod=4))
    admitted_workload(cluster, "research", created["metadata"]["uid"])

    _kueuectl(cluster, kueuectl_binary, "stop", "localqueue", "research-queue", "-n", "research")
    _wait_active(cluster, LQ_STOPPED, "localqueue", "research-queue", "-n", "research")
    _wait_active(cluster, CQ_READY, "clusterqueue", "research")  # only the LocalQueue stopped
    drained = _evicted(cluster, created["metadata"]["uid"], "LocalQueueStopped")
    assert _condition(drained, "Evicted") == ("True", "LocalQueueStopped", "The LocalQueue is stopped")
    event = ("Normal", "EvictedDueToLocalQueueStopped")
    assert wait_for_event(cluster, "research", "Workload", drained["metadata"]["name"], event) == (
        "The LocalQueue is stopped"
    )
    wait_until(
        lambda: get_json(cluster, "localqueue", "research-queue", "-n", "research")["status"]["admittedWorkloads"] == 0,
        "research-queue to count no admitted workload",
        timeout=60,
    )
    local = _row(_table(_kueuectl(cluster, kueuectl_binary, "list", "localqueue", "-n", "research")), "research-queue")
    assert (local["PENDING WORKLOADS"], local["ADMITTED WORKLOADS"]) == ("0", "0")  # Kueue counts none when stopped

    _kueuectl(cluster, kueuectl_binary, "resume", "localqueue", "research-queue", "-n", "research")
    _wait_active(cluster, LQ_READY, "localqueue", "research-queue", "-n", "research")
    admitted_workload(cluster, "research", created["metadata"]["uid"])
    running_pods(cluster, "research", "in-local", 1)


def test_kueuectl_stop_deactivates_a_workload_and_resume_requeues_it(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...], kueuectl_binary: Path
) -> None:
    _apply_guide(cluster)
    created = create_job(cluster, gpu_job("switched", "research", pods=1, gpus_per_pod=4))
    uid = created["metadata"]["uid"]
    name = admitted_workload(cluster, "research", uid)["metadata"]["name"]
    running_pods(cluster, "research", "switched", 1)

    _kueuectl(cluster, kueuectl_binary, "stop", "workload", name, "-n", "research")
    deactivated = _evicted(cluster, uid, "Deactivated")
    assert deactivated["spec"]["active"] is False
    assert _condition(deactivated, "Evicted") == ("True", "Deactivated", "The workload is deactivated")
    assert _condition(deactivated, "Requeued") == ("False", "Deactivated", "The workload is deactivated")
    event = ("Normal", "EvictedDueToDeactivated")
    assert wait_for_event(cluster, "research", "Workload", name, event) == "The workload is deactivated"
    wait_until(lambda: get_json(cluster, "job", "switched", "-n", "research")["spec"]["suspend"], "the Job to stop")

    _kueuectl(cluster, kueuectl_binary, "resume", "workload", name, "-n", "research")
    readmitted = admitted_workload(cluster, "research", uid)
    assert readmitted["spec"]["active"] is True
    running_pods(cluster, "research", "switched", 1)
