"""Hostile and broken objects through the real API server: none stalls the webhook, none stops the manager.

A tenant allowed to create LocalQueues once stalled every review for half a minute with one quantity (so every
Job create in the cluster was refused meanwhile), and one malformed Workload put the manager in a crash loop.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.manager.conftest import get_json
from tests.integration.manager.guide_objects import FINETUNE_JOB, VERBATIM
from tests.integration.manager.test_guide import admitted_workload
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def _local_queue(weight: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"namespace": "research", "name": "hostile"},
        "spec": {"clusterQueue": "research", "fairSharing": {"weight": weight}},
    }


def _malformed_workload(name: str) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "resources": {"requests": "abc", "limits": ["nvidia.com/gpu"]}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "research"},
        "spec": {
            "queueName": "research-queue",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [container], "overhead": [["cpu", "1"]]}},
                }
            ],
        },
    }


def _kubectl_as(cluster: Cluster, kubeconfig: str, *args: str, input: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(cluster.binaries.kubectl), f"--kubeconfig={kubeconfig}", *args],
        capture_output=True, text=True, input=input, timeout=60, check=False,
    )  # fmt: skip


def _guide_job_is_admitted(cluster: Cluster) -> None:
    created = json.loads(cluster.kubectl("create", "-f", str(GUIDE / FINETUNE_JOB), "-o", "json").stdout)
    admitted_workload(cluster, "research", created["metadata"]["uid"])


def test_a_local_queue_with_a_huge_exponent_is_refused_at_once_and_job_reviews_never_wait(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    job_review_seconds: list[float] = []

    def create_jobs_meanwhile() -> None:
        for index in range(5):
            job = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": f"meanwhile-{index}", "namespace": "research"},
                "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}},
            }
            started = time.perf_counter()
            cluster.kubectl("create", "-f", "-", input=json.dumps(job))
            job_review_seconds.append(time.perf_counter() - started)

    meanwhile = threading.Thread(target=create_jobs_meanwhile)
    started = time.perf_counter()
    meanwhile.start()
    refused = [cluster.kubectl("create", "-f", "-", input=json.dumps(_local_queue("1e20000000")), check=False)]
    refused.append(cluster.kubectl("create", "-f", "-", input=json.dumps(_local_queue("9" * 5000)), check=False))
    refused_after = time.perf_counter() - started
    meanwhile.join(timeout=60)

    for answer in refused:
        assert answer.returncode != 0
        assert "spec.fairSharing.weight" in answer.stderr, answer.stderr
        assert "Traceback" not in answer.stderr and "failed to evaluate" not in answer.stderr
    assert "exponent beyond" in refused[0].stderr
    assert "significant digits" in refused[1].stderr
    assert refused_after < 10, f"two hostile LocalQueues took {refused_after:.1f} s to refuse"
    assert len(job_review_seconds) == 5 and max(job_review_seconds) < 10, job_review_seconds
    assert get_json(cluster, "localqueues", "-n", "research", "--field-selector=metadata.name=hostile")["items"] == []
    _guide_job_is_admitted(cluster)


def test_a_malformed_workload_is_refused_by_the_webhook_naming_the_field(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    answer = cluster.kubectl("create", "-f", "-", input=json.dumps(_malformed_workload("handmade")), check=False)
    assert answer.returncode != 0
    assert "spec.podSets[0].template.spec.containers[0].resources.requests" in answer.stderr, answer.stderr


def test_a_malformed_workload_that_got_in_never_stops_the_manager_and_the_guides_job_still_runs(
    cluster: Cluster, manager: ManagerProcess, guide_namespaces: tuple[str, ...]
) -> None:
    """Written with kuota's own identity (what a webhook outage, or Workloads left from before kuota, amount
    to), the Workload is in the API; the manager, running and restarted, says what is wrong and serves on."""
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    written = _kubectl_as(
        cluster, str(manager.kubeconfig), "create", "-f", "-", input=json.dumps(_malformed_workload("live"))
    )
    assert written.returncode == 0, written.stderr

    def told(name: str) -> dict[str, Any] | None:
        workload = get_json(cluster, "workload", name, "-n", "research")
        found = next(
            (c for c in workload.get("status", {}).get("conditions") or [] if c["type"] == "QuotaReserved"), None
        )
        return found if found is not None and found["reason"] == "Inadmissible" else None

    condition = wait_until(lambda: told("live"), "the malformed Workload to be told why it waits", timeout=60)
    assert "resources.requests" in condition["message"] and "resources.limits" in condition["message"]
    assert "spec.overhead" in condition["message"]
    events = get_json(cluster, "events", "-n", "research", "--field-selector=involvedObject.name=live")["items"]
    assert [e["reason"] for e in events if e["type"] == "Warning"] == ["InvalidWorkload"]
    assert manager.process is not None and manager.process.poll() is None, manager.log_tail()
    _guide_job_is_admitted(cluster)

    # A restart re-reads every Workload: the malformed one must not put the manager in a crash loop.
    manager.stop()
    manager.start()
    assert manager.process is not None and manager.process.poll() is None, manager.log_tail()
    second = _kubectl_as(
        cluster, str(manager.kubeconfig), "create", "-f", "-", input=json.dumps(_malformed_workload("after-restart"))
    )
    assert second.returncode == 0, second.stderr
    wait_until(lambda: told("after-restart"), "the second malformed Workload to be told why it waits", timeout=60)
    assert manager.process.poll() is None, manager.log_tail()
    assert "Traceback" not in manager.log_tail(200)
