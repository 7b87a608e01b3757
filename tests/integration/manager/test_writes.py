"""How many writes the manager makes to a Workload over its life, counted by the API server: the manager runs as a
user of its own, whose writes to Workloads one FlowSchema matches, and the test reads that FlowSchema's
dispatched-requests counter. The test's own writes (creating the Workloads, finishing them) go as the admin and
are not counted.

Per Workload, as Kueue writes it: an admission is one status write (QuotaReserved and Admitted together, no
AdmissionChecks); a finish none (no finalizer on a Workload created directly); a preemption one on the victim
(Evicted, Preempted, QuotaReserved False and Requeued together) and the preemptor's admission; a Workload that
waits past the grace period one write of its pending reason, not rewritten while the reason stays the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.side_by_side.process_usage import WRITE_VERBS, dispatched_requests
from tests.cluster import Cluster
from tests.integration.manager.conftest import KUOTA_NAMESPACE, apply, ensure_namespace, get_json, wait_for_event
from tests.manager_process import ManagerProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

COUNTED_USER = "kuota-manager-counted"
COUNTED_GROUP = "kuota-test-counted-managers"
WRITES_SCHEMA = "count-kuota-manager-workload-writes"
NAMESPACE = "writes"


def _identity_objects() -> list[dict[str, Any]]:
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "kuota-test-counted-managers"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": COUNTED_GROUP}],
    }
    schema = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": WRITES_SCHEMA},
        "spec": {
            "matchingPrecedence": 50,  # before every built-in schema but 'exempt', which matches system:masters only
            "priorityLevelConfiguration": {"name": "exempt"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": COUNTED_USER}}],
                    "resourceRules": [
                        {
                            "verbs": list(WRITE_VERBS),
                            "apiGroups": ["kueue.x-k8s.io"],
                            "resources": ["workloads", "workloads/status"],
                            "namespaces": ["*"],
                        }
                    ],
                }
            ],
        },
    }
    return [binding, schema]


@pytest.fixture(scope="module")
def manager(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> Iterator[ManagerProcess]:
    """This module's manager: the conftest's, as the counted user (not in system:masters, whose requests the
    mandatory 'exempt' FlowSchema takes before any other)."""
    del kuota_crds
    ensure_namespace(cluster, KUOTA_NAMESPACE, managed=False)
    ensure_namespace(cluster, NAMESPACE)
    apply(cluster, *_identity_objects())
    wait_until(lambda: _schema_in_force(cluster), f"FlowSchema {WRITES_SCHEMA} to be in force", timeout=60)
    running = ManagerProcess(
        cluster, KUOTA_NAMESPACE, kubeconfig=cluster.kubeconfig_for(COUNTED_USER, (COUNTED_GROUP,))
    )
    running.start()
    try:
        yield running
    finally:
        running.stop()
        running.unregister()
        cluster.kubectl("delete", "flowschema", WRITES_SCHEMA, "--ignore-not-found")
        cluster.kubectl("delete", "clusterrolebinding", "kuota-test-counted-managers", "--ignore-not-found")


def _schema_in_force(cluster: Cluster) -> bool:
    """The API server's flow-control configuration has taken the schema in (it says whether its priority
    level exists)."""
    conditions = get_json(cluster, "flowschema", WRITES_SCHEMA).get("status", {}).get("conditions") or []
    return any(c["type"] == "Dangling" and c["status"] == "False" for c in conditions)


def _writes(cluster: Cluster) -> int:
    return dispatched_requests(cluster.kubectl("get", "--raw", "/metrics").stdout, WRITES_SCHEMA)


def _queues(cluster: Cluster, cpu: int) -> None:
    apply(
        cluster,
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "writes"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "writes"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "writes", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "writes", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "writes"},
        },
    )


def _workload(name: str, cpu: int, priority: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "queueName": "writes",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": str(cpu)}}}
                            ],
                        }
                    },
                }
            ],
        },
    }


def _is_true(cluster: Cluster, name: str, condition: str) -> bool:
    workload = get_json(cluster, "workload", name, "-n", NAMESPACE)
    conditions = workload.get("status", {}).get("conditions") or []
    return any(c["type"] == condition and c["status"] == "True" for c in conditions)


def _finish(cluster: Cluster, name: str) -> None:
    """Finished True, as a job's controller (or Kueue's harness runner) writes it: by the admin, not counted."""
    condition = {
        "type": "Finished",
        "status": "True",
        "reason": "Succeeded",
        "message": "finished by the test",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    workload = get_json(cluster, "workload", name, "-n", NAMESPACE)
    conditions = [*(workload.get("status", {}).get("conditions") or []), condition]
    patch = json.dumps({"status": {"conditions": conditions}})
    cluster.kubectl("patch", "workload", name, "-n", NAMESPACE, "--subresource=status", "--type=merge", "-p", patch)


def _queue_holds(cluster: Cluster, reserving: int, pending: int) -> bool:
    """The ClusterQueue's status, which the manager writes after it has taken in what changed, says so."""
    queue_status = get_json(cluster, "clusterqueue", "writes").get("status", {})
    return (queue_status.get("reservingWorkloads", 0), queue_status.get("pendingWorkloads", 0)) == (reserving, pending)


def test_an_admission_is_one_write_and_a_finish_none(cluster: Cluster, manager: ManagerProcess) -> None:
    del manager
    _queues(cluster, cpu=10)
    before = _writes(cluster)
    names = [f"fits-{i}" for i in range(5)]
    apply(cluster, *(_workload(name, cpu=1) for name in names))
    for name in names:
        wait_until(lambda name=name: _is_true(cluster, name, "Admitted"), f"{name} to be admitted", timeout=60)
    wait_until(lambda: _queue_holds(cluster, reserving=5, pending=0), "the queue to hold the five", timeout=60)
    for name in names:
        _finish(cluster, name)
    wait_until(lambda: _queue_holds(cluster, reserving=0, pending=0), "the queue to be empty", timeout=60)
    assert _writes(cluster) - before == len(names)


def test_a_preemption_is_one_write_on_the_victim_and_its_wait_one_more(
    cluster: Cluster, manager: ManagerProcess
) -> None:
    del manager
    _queues(cluster, cpu=2)
    before = _writes(cluster)
    apply(cluster, _workload("low", cpu=2))
    wait_until(lambda: _is_true(cluster, "low", "Admitted"), "low to be admitted", timeout=60)
    apply(cluster, _workload("high", cpu=2, priority=100))
    wait_until(lambda: _is_true(cluster, "high", "Admitted"), "high to be admitted", timeout=60)
    assert _is_true(cluster, "low", "Preempted") and _is_true(cluster, "low", "Evicted")
    # The victim waits past the grace period: its pending reason is written once, and told in an event.
    wait_for_event(cluster, NAMESPACE, "Workload", "low", ("Warning", "Pending"))
    wait_until(lambda: _queue_holds(cluster, reserving=1, pending=1), "the queue to hold high, low waiting", timeout=60)
    _finish(cluster, "high")
    wait_until(lambda: _is_true(cluster, "low", "Admitted"), "low to be admitted again", timeout=60)
    _finish(cluster, "low")
    wait_until(lambda: _queue_holds(cluster, reserving=0, pending=0), "the queue to be empty", timeout=60)
    # low: admitted, evicted, its pending reason, admitted again; high: admitted.
    assert _writes(cluster) - before == 5
