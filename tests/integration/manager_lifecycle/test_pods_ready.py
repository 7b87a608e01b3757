"""waitForPodsReady on a real control plane: a Job whose pods run gets PodsReady=True (Started); a Job whose pods can
never be scheduled waits (WaitForStart), is evicted on the timeout (PodsReadyTimeout) and suspended, backs off,
is requeued (BackoffFinished), and is deactivated past backoffLimitCount."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

import pytest
import yaml

from tests.cluster import Cluster
from tests.integration.manager.conftest import ensure_namespace, get_json, remove_queue_objects, wait_for_event
from tests.integration.manager.guide_objects import VERBATIM, gpu_job
from tests.integration.manager.test_guide import admitted_workload, create_job, workload_of
from tests.integration.manager.test_pods import create, gpu_pod, single_workload_name
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

NAMESPACE = "research"
NOT_READY = "Not all pods are ready or succeeded"


class WorkloadVersions:
    """Every version of the namespace's Workloads, as ``kubectl get -w`` shows them: a condition that holds only
    for an instant is still seen."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        command = [str(cluster.binaries.kubectl), f"--kubeconfig={cluster.kubeconfig}"]
        command += ["get", "workloads", "-n", namespace, "-w", "-o", "json"]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.seen: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self._process.stdout:
            buffer += line
            while buffer.strip():
                try:
                    obj, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break
                buffer = buffer.lstrip()[end:]
                with self._lock:
                    self.seen.append(obj)

    def of(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [obj for obj in self.seen if obj["metadata"]["name"] == name]

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)


def _condition(obj: dict[str, Any], kind: str) -> tuple[str, str, str] | None:
    found = next((c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind), None)
    return None if found is None else (found["status"], found["reason"], found.get("message", ""))


def _since(obj: dict[str, Any], kind: str) -> float | None:
    """When the condition ``kind`` last turned True (epoch seconds); None when it is not True."""
    found = next((c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind), None)
    if found is None or found["status"] != "True":
        return None
    return datetime.fromisoformat(found["lastTransitionTime"].replace("Z", "+00:00")).timestamp()


def _first(versions: list[dict[str, Any]], what: str, check: Any, after: int = -1) -> int:
    for index, obj in enumerate(versions):
        if index > after and check(obj):
            return index
    raise AssertionError(f"no version of the Workload after #{after} where {what}: {versions!r}"[:4000])


@contextlib.contextmanager
def _manager(
    cluster: Cluster, wait_for_pods_ready: dict[str, Any], frameworks: tuple[str, ...] = ("batch/job",)
) -> Iterator[ManagerProcess]:
    """A manager whose Configuration sets ``wait_for_pods_ready``; the guide's queue objects, jobs and pods gone
    after."""
    ensure_namespace(cluster, "kuota-pods-ready", managed=False)
    ensure_namespace(cluster, NAMESPACE)
    config = cluster.workdir / "pods-ready-config.yaml"
    configuration = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "waitForPodsReady": wait_for_pods_ready,
        "integrations": {"frameworks": list(frameworks)},
    }
    config.write_text(yaml.safe_dump(configuration))
    manager = ManagerProcess(cluster, "kuota-pods-ready", identity="pods-ready", extra_args=(f"--config={config}",))
    manager.start()
    try:
        yield manager
    finally:
        # Pods go while the manager runs: it releases their finalizers.
        cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--wait=false", check=False)
        wait_until(lambda: not get_json(cluster, "pods", "-n", NAMESPACE)["items"], "the pods to be deleted", 60)
        remove_queue_objects(cluster, [NAMESPACE])
        manager.stop()
        manager.unregister()


@pytest.fixture
def pods_ready_manager(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> Iterator[ManagerProcess]:
    del kuota_crds
    wait = {"timeout": "5s", "requeuingStrategy": {"backoffBaseSeconds": 1, "backoffLimitCount": 1}}
    with _manager(cluster, wait) as manager:
        yield manager


def _metric(manager: ManagerProcess, series: str, **labels: str) -> float:
    """The sum of the manager's samples of ``series`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(
        value for (name, found), value in manager.metric_values().items() if name == series and wanted <= set(found)
    )


def test_pods_never_ready_are_evicted_backed_off_requeued_then_deactivated_and_ready_pods_start(
    cluster: Cluster, pods_ready_manager: ManagerProcess
) -> None:
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    versions = WorkloadVersions(cluster, NAMESPACE)
    try:
        stuck_manifest = gpu_job("never-ready", NAMESPACE, pods=1, gpus_per_pod=1)
        stuck_manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kuota.test/no-such-node": "true"}
        stuck = create_job(cluster, stuck_manifest)
        runs = create_job(cluster, gpu_job("gets-ready", NAMESPACE, pods=1, gpus_per_pod=1))

        def started() -> dict[str, Any] | None:
            workload = workload_of(cluster, NAMESPACE, runs["metadata"]["uid"])
            ready = None if workload is None else _condition(workload, "PodsReady")
            return workload if ready is not None and ready[:2] == ("True", "Started") else None

        running = wait_until(started, "the running Job's Workload to be PodsReady", timeout=60)
        assert _condition(running, "PodsReady") == (
            "True",
            "Started",
            "All pods reached readiness and the workload is running",
        )
        queue = {"cluster_queue": running["status"]["admission"]["clusterQueue"]}
        local_queue = {"name": running["spec"]["queueName"], "namespace": NAMESPACE}
        for series, labels in (
            ("kueue_ready_wait_time_seconds_count", queue),
            ("kueue_admitted_until_ready_wait_time_seconds_count", queue),
            ("kueue_local_queue_ready_wait_time_seconds_count", local_queue),
            ("kueue_local_queue_admitted_until_ready_wait_time_seconds_count", local_queue),
        ):
            assert _metric(pods_ready_manager, series, **labels) == 1, series

        def deactivated() -> dict[str, Any] | None:
            workload = workload_of(cluster, NAMESPACE, stuck["metadata"]["uid"])
            return workload if workload is not None and workload["spec"].get("active") is False else None

        workload = wait_until(deactivated, "the never-ready Job's Workload to be deactivated", timeout=90)
        name = workload["metadata"]["name"]
        assert _condition(workload, "Evicted") == (
            "True",
            "DeactivatedDueToRequeuingLimitExceeded",
            "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
        )
        assert _condition(workload, "Requeued")[:2] == ("False", "DeactivatedDueToRequeuingLimitExceeded")  # type: ignore[index]
        # counted as Kueue counts them: each timeout before the limit, then the deactivation with its cause
        assert workload["status"]["schedulingStats"]["evictions"] == [
            {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1},
            {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1},
        ]
        # the metrics label each eviction as the Workload counts it
        for cause in (
            {"reason": "PodsReadyTimeout", "underlying_cause": "WaitForStart"},
            {"reason": "Deactivated", "underlying_cause": "RequeuingLimitExceeded"},
        ):
            for series in ("kueue_evicted_workloads_total", "kueue_evicted_workloads_once_total"):
                assert _metric(pods_ready_manager, series, **queue, **cause) == 1, (series, cause)
            assert _metric(pods_ready_manager, "kueue_local_queue_evicted_workloads_total", **local_queue, **cause) == 1
        # its pods were never ready: no time from ready to evicted
        assert _metric(pods_ready_manager, "kueue_pods_ready_to_evicted_time_seconds_count", **queue) == 0
        wait_until(
            lambda: (
                cluster.kubectl(
                    "get", "job", "never-ready", "-n", NAMESPACE, "-o", "jsonpath={.spec.suspend}"
                ).stdout.strip()
                == "true"
            ),
            "the deactivated Workload's Job to be suspended",
        )
        message = f"Exceeded the PodsReady timeout {NAMESPACE}/{name}"
        assert wait_for_event(cluster, NAMESPACE, "Workload", name, ("Normal", "EvictedDueToPodsReadyTimeout")) == (
            message
        )

        seen = versions.of(name)
        waiting = _first(
            seen,
            "PodsReady is False, WaitForStart",
            lambda obj: (
                _condition(obj, "PodsReady") == ("False", "WaitForStart", "Not all pods are ready or succeeded")
            ),
        )
        evicted = _first(
            seen,
            "it is evicted on the PodsReady timeout, not requeued yet",
            lambda obj: (
                _condition(obj, "Evicted") == ("True", "PodsReadyTimeout", message)
                and _condition(obj, "Requeued") == ("False", "PodsReadyTimeout", message)
                and (obj["status"].get("requeueState") or {}).get("count") == 1
                and "requeueAt" in obj["status"]["requeueState"]
                and not obj["status"].get("admission")
            ),
            after=waiting,
        )
        requeued = _first(
            seen,
            "its backoff finished",
            lambda obj: (
                _condition(obj, "Requeued") == ("True", "BackoffFinished", "The workload backoff was finished")
                and "requeueAt" not in (obj["status"].get("requeueState") or {})
            ),
            after=evicted,
        )
        readmitted = _first(
            seen, "it is admitted again", lambda obj: bool(obj.get("status", {}).get("admission")), after=requeued
        )
        _first(seen, "it is deactivated", lambda obj: obj["spec"].get("active") is False, readmitted)
    finally:
        versions.stop()


def test_the_requeue_count_survives_a_manager_restart(cluster: Cluster, pods_ready_manager: ManagerProcess) -> None:
    """Restarted after the first timeout, the manager reads requeueState back: the next timeout is past
    backoffLimitCount 1 and deactivates, where a forgotten count would evict and requeue once more."""
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    versions = WorkloadVersions(cluster, NAMESPACE)
    try:
        manifest = gpu_job("never-ready-restarted", NAMESPACE, pods=1, gpus_per_pod=1)
        manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kuota.test/no-such-node": "true"}
        uid = create_job(cluster, manifest)["metadata"]["uid"]

        def evicted_once() -> dict[str, Any] | None:
            workload = workload_of(cluster, NAMESPACE, uid)
            count = None if workload is None else (workload["status"].get("requeueState") or {}).get("count")
            return workload if count == 1 else None

        name = wait_until(evicted_once, "the first PodsReady timeout", timeout=60)["metadata"]["name"]
        pods_ready_manager.stop()
        pods_ready_manager.start()

        def deactivated() -> dict[str, Any] | None:
            workload = workload_of(cluster, NAMESPACE, uid)
            return workload if workload is not None and workload["spec"].get("active") is False else None

        workload = wait_until(deactivated, "the Workload to be deactivated after the restart", timeout=90)
        assert _condition(workload, "Evicted")[:2] == ("True", "DeactivatedDueToRequeuingLimitExceeded")  # type: ignore[index]
        counts = {(obj.get("status", {}).get("requeueState") or {}).get("count") for obj in versions.of(name)}
        assert counts <= {None, 1}, f"requeued again after the restart: counts {counts}"
    finally:
        versions.stop()


def _bare_workload(name: str) -> dict[str, Any]:
    """A Workload created directly, owned by no job: nothing ever writes its PodsReady."""
    container = {"name": "main", "image": "trainer", "resources": {"requests": {"nvidia.com/gpu": "1"}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "queueName": f"{NAMESPACE}-queue",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


def test_a_workload_with_no_job_times_out_backs_off_and_is_deactivated_as_kueue_does(
    cluster: Cluster, pods_ready_manager: ManagerProcess
) -> None:
    """Kueue's workload controller times out every admitted Workload whose PodsReady is not True, whoever owns it;
    one created directly never gets PodsReady, so it is evicted ``timeout`` after its admission, backs off, is
    admitted again and is deactivated past backoffLimitCount 1."""
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    versions = WorkloadVersions(cluster, NAMESPACE)
    try:
        name = "no-job"
        create(cluster, _bare_workload(name))

        def deactivated() -> dict[str, Any] | None:
            workload = get_json(cluster, "workload", name, "-n", NAMESPACE)
            return workload if workload["spec"].get("active") is False else None

        workload = wait_until(deactivated, "the Workload with no job to be deactivated", timeout=90)
        assert _condition(workload, "Evicted")[:2] == ("True", "DeactivatedDueToRequeuingLimitExceeded")  # type: ignore[index]
        assert workload["status"]["schedulingStats"]["evictions"] == [
            {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1},
            {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1},
        ]
        message = f"Exceeded the PodsReady timeout {NAMESPACE}/{name}"
        assert wait_for_event(cluster, NAMESPACE, "Workload", name, ("Normal", "EvictedDueToPodsReadyTimeout")) == (
            message
        )
        seen = versions.of(name)
        # Kueue writes PodsReady only from a job's pods: a Workload of no job never has it.
        assert all(_condition(obj, "PodsReady") is None for obj in seen)
        admitted = _first(seen, "it is admitted", lambda obj: _since(obj, "Admitted") is not None)
        evicted = _first(
            seen,
            "it is evicted on the PodsReady timeout and backs off",
            lambda obj: (
                _condition(obj, "Evicted") == ("True", "PodsReadyTimeout", message)
                and _condition(obj, "Requeued") == ("False", "PodsReadyTimeout", message)
                and (obj["status"].get("requeueState") or {}).get("count") == 1
            ),
            after=admitted,
        )
        admitted_at, evicted_at = _since(seen[admitted], "Admitted"), _since(seen[evicted], "Evicted")
        assert admitted_at is not None and evicted_at is not None
        assert evicted_at - admitted_at >= 5, "evicted before the 5s timeout ran out"
        requeued = _first(
            seen,
            "its backoff finished",
            lambda obj: _condition(obj, "Requeued") == ("True", "BackoffFinished", "The workload backoff was finished"),
            after=evicted,
        )
        _first(seen, "it is admitted again", lambda obj: bool(obj.get("status", {}).get("admission")), after=requeued)
    finally:
        versions.stop()


def test_under_block_admission_a_workload_with_no_job_holds_admissions_until_it_times_out(
    cluster: Cluster, kuota_crds: list[dict[str, Any]]
) -> None:
    """Kueue's scheduler waits on every admitted Workload without PodsReady True: one with no job, whose PodsReady
    nothing writes, holds the next admission until its timeout deactivates it (backoffLimitCount 0)."""
    del kuota_crds
    wait = {"timeout": "10s", "blockAdmission": True, "requeuingStrategy": {"backoffLimitCount": 0}}
    with _manager(cluster, wait):
        for name in VERBATIM:
            cluster.kubectl("apply", "-f", str(GUIDE / name))
        create(cluster, _bare_workload("holds-admission"))
        wait_until(
            lambda: _since(get_json(cluster, "workload", "holds-admission", "-n", NAMESPACE), "Admitted"),
            "the Workload with no job to be admitted",
        )
        uid = create_job(cluster, gpu_job("waits-for-it", NAMESPACE, pods=1, gpus_per_pod=1))["metadata"]["uid"]

        def held() -> dict[str, Any] | None:
            workload = workload_of(cluster, NAMESPACE, uid)
            shown = None if workload is None else _condition(workload, "QuotaReserved")
            return workload if shown is not None and shown[:2] == ("False", "WaitingForPodsReady") else None

        wait_until(held, "the Job's Workload to wait for the Workload with no job", timeout=8)
        admitted = admitted_workload(cluster, NAMESPACE, uid)
        bare = get_json(cluster, "workload", "holds-admission", "-n", NAMESPACE)
        assert bare["spec"].get("active") is False, "admitted while the Workload with no job still waited"
        deactivated_at, admitted_at = _since(bare, "Evicted"), _since(admitted, "Admitted")
        assert deactivated_at is not None and admitted_at is not None and admitted_at >= deactivated_at


def _never_ready_job(name: str) -> dict[str, Any]:
    manifest = gpu_job(name, NAMESPACE, pods=1, gpus_per_pod=1)
    manifest["spec"]["template"]["spec"]["nodeSelector"] = {"kuota.test/no-such-node": "true"}
    return manifest


def test_block_admission_admits_nothing_while_an_admitted_workload_waits_for_its_pods(
    cluster: Cluster, kuota_crds: list[dict[str, Any]]
) -> None:
    """The second Job stays suspended, its Workload QuotaReserved False with Kueue's reason WaitingForPodsReady,
    until the first's pods time out (and, backoffLimitCount 0, it is deactivated); a third is admitted only once
    the second's pods are ready."""
    del kuota_crds
    wait = {"timeout": "15s", "blockAdmission": True, "requeuingStrategy": {"backoffLimitCount": 0}}
    with _manager(cluster, wait):
        for name in VERBATIM:
            cluster.kubectl("apply", "-f", str(GUIDE / name))
        stuck_uid = create_job(cluster, _never_ready_job("blocks-admission"))["metadata"]["uid"]
        stuck = admitted_workload(cluster, NAMESPACE, stuck_uid)
        waiting_uid = create_job(cluster, gpu_job("waits-its-turn", NAMESPACE, pods=1, gpus_per_pod=1))["metadata"][
            "uid"
        ]

        def held() -> dict[str, Any] | None:
            workload = workload_of(cluster, NAMESPACE, waiting_uid)
            shown = None if workload is None else _condition(workload, "QuotaReserved")
            return workload if shown is not None and shown[:2] == ("False", "WaitingForPodsReady") else None

        waiting = wait_until(held, "the second Workload to wait for the first's pods", timeout=12)
        assert _condition(waiting, "QuotaReserved")[2].startswith(  # type: ignore[index]
            "waiting for all admitted workloads to be in PodsReady condition"
        )
        assert get_json(cluster, "job", "waits-its-turn", "-n", NAMESPACE)["spec"]["suspend"] is True
        assert _condition(workload_of(cluster, NAMESPACE, stuck_uid) or stuck, "Evicted") is None
        admitted = admitted_workload(cluster, NAMESPACE, waiting_uid)

        def evicted_at(workload: dict[str, Any]) -> str | None:
            found = next((c for c in workload["status"]["conditions"] if c["type"] == "Evicted"), None)
            return None if found is None or found["status"] != "True" else str(found["lastTransitionTime"])

        stuck = workload_of(cluster, NAMESPACE, stuck_uid) or stuck
        deactivated_at = evicted_at(stuck)
        assert deactivated_at is not None, "admitted while the first Workload's pods were not ready"
        assert stuck["spec"].get("active") is False  # backoffLimitCount 0: the first timeout deactivates
        admitted_condition = next(c for c in admitted["status"]["conditions"] if c["type"] == "Admitted")
        assert admitted_condition["lastTransitionTime"] >= deactivated_at
        # Its pods get ready: only then is the next one admitted.
        third_uid = create_job(cluster, gpu_job("after-ready-pods", NAMESPACE, pods=1, gpus_per_pod=1))["metadata"][
            "uid"
        ]
        third = admitted_workload(cluster, NAMESPACE, third_uid)
        second = workload_of(cluster, NAMESPACE, waiting_uid) or admitted
        ready = next(c for c in second["status"]["conditions"] if c["type"] == "PodsReady")
        assert ready["status"] == "True"
        third_admitted = next(c for c in third["status"]["conditions"] if c["type"] == "Admitted")
        assert third_admitted["lastTransitionTime"] >= ready["lastTransitionTime"]


def _stuck(manifest: dict[str, Any]) -> dict[str, Any]:
    """The pod can never be scheduled, so never ready."""
    manifest["spec"]["nodeSelector"] = {"kuota.test/no-such-node": "true"}
    return manifest


def test_plain_pods_and_pod_groups_wait_for_start_then_start_or_time_out_like_a_job(
    cluster: Cluster, kuota_crds: list[dict[str, Any]]
) -> None:
    del kuota_crds
    wait = {"timeout": "5s", "requeuingStrategy": {"backoffLimitCount": 0}}
    with _manager(cluster, wait, frameworks=("batch/job", "pod")):
        for name in VERBATIM:
            cluster.kubectl("apply", "-f", str(GUIDE / name))
        versions = WorkloadVersions(cluster, NAMESPACE)
        try:
            single = single_workload_name(create(cluster, gpu_pod("ready-pod", 1)))
            stuck_single = single_workload_name(create(cluster, _stuck(gpu_pod("stuck-pod", 1))))
            for index in range(2):
                create(cluster, gpu_pod(f"ready-gang-{index}", 1, group=("ready-gang", 2)))
            create(cluster, gpu_pod("stuck-gang-0", 1, group=("stuck-gang", 2)))
            create(cluster, _stuck(gpu_pod("stuck-gang-1", 1, group=("stuck-gang", 2))))

            def reached(name: str, what: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]] | None:
                seen = versions.of(name)
                return seen if any(what(obj) for obj in seen) else None

            def waiting_for_start(obj: dict[str, Any]) -> bool:
                return _condition(obj, "PodsReady") == ("False", "WaitForStart", NOT_READY)

            def started(obj: dict[str, Any]) -> bool:
                ready = _condition(obj, "PodsReady")
                return ready == ("True", "Started", "All pods reached readiness and the workload is running")

            def deactivated(obj: dict[str, Any]) -> bool:
                return obj["spec"].get("active") is False and _condition(obj, "Evicted") == (
                    "True",
                    "DeactivatedDueToRequeuingLimitExceeded",
                    "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
                )

            for name in (single, "ready-gang"):
                seen = wait_until(partial(reached, name, started), f"{name}'s pods to be ready", timeout=60)
                _first(
                    seen, "its pods started", started, after=_first(seen, "it waits for its pods", waiting_for_start)
                )
            for name in (stuck_single, "stuck-gang"):
                seen = wait_until(partial(reached, name, deactivated), f"{name} to time out", timeout=60)
                timed_out = _first(seen, "it timed out", deactivated, after=_first(seen, "it waits", waiting_for_start))
                assert not any(started(obj) for obj in seen[:timed_out]), f"{name}'s pods were never ready"
                assert seen[timed_out]["status"]["schedulingStats"]["evictions"] == [
                    {"reason": "Deactivated", "underlyingCause": "RequeuingLimitExceeded", "count": 1}
                ]
        finally:
            versions.stop()
