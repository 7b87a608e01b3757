"""HA: every replica serves the webhook, only the Lease holder admits, and a graceful stop hands over fast."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.integration.manager.conftest import ensure_namespace, get_json, remove_queue_objects
from tests.integration.manager.guide_objects import VERBATIM, gpu_job
from tests.integration.manager.test_guide import admitted_workload, create_job
from tests.manager_process import ManagerProcess
from tests.paths import GUIDE
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

NAMESPACE = "kuota-ha"
LEASE_SECONDS = 15


def _holder(cluster: Cluster) -> str | None:
    result = cluster.kubectl("get", "lease", "kuota-manager", "-n", NAMESPACE, "-o", "json", check=False)
    if result.returncode != 0:
        return None
    holder = json.loads(result.stdout)["spec"].get("holderIdentity")
    return str(holder) if holder else None


def _admitted_count(manager: ManagerProcess) -> float:
    total = 0.0
    for line in manager.metrics().splitlines():
        if line.startswith("kueue_admitted_workloads_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture
def replicas(cluster: Cluster, kuota_crds: list[dict[str, Any]]) -> Iterator[tuple[ManagerProcess, ManagerProcess]]:
    del kuota_crds
    ensure_namespace(cluster, NAMESPACE, managed=False)
    ensure_namespace(cluster, "research")
    pair = tuple(
        ManagerProcess(cluster, NAMESPACE, identity=name, extra_args=(f"--lease-duration={LEASE_SECONDS}",))
        for name in ("replica-a", "replica-b")
    )
    first, second = pair
    try:
        first.start()
        wait_until(lambda: _holder(cluster) == "replica-a", "replica-a to hold the Lease")
        second.start()
        yield first, second
    finally:
        remove_queue_objects(cluster, ["research"])  # while a replica still runs to release the finalizers
        for replica in pair:
            replica.stop()
        second.unregister()


def test_only_the_leader_admits_and_a_graceful_stop_hands_over_well_inside_the_lease(
    cluster: Cluster, replicas: tuple[ManagerProcess, ManagerProcess]
) -> None:
    leader, follower = replicas
    for name in VERBATIM:
        cluster.kubectl("apply", "-f", str(GUIDE / name))
    first = create_job(cluster, gpu_job("ha-first", "research", pods=1, gpus_per_pod=4))
    admitted_workload(cluster, "research", first["metadata"]["uid"])
    assert _admitted_count(leader) == 1
    assert _admitted_count(follower) == 0
    # Kueue's replica_role; only the deciding replica shows queue gauges, so sums over replicas count once.
    pending = (("cluster_queue", "research"), ("replica_role", "leader"), ("status", "active"))
    assert ("kueue_pending_workloads", pending) in leader.metric_values()
    assert "kueue_pending_workloads{" not in follower.metrics()
    assert follower.ready()  # the follower serves the webhook and is ready while not leading

    stopped = time.monotonic()
    assert leader.stop() == 0
    wait_until(lambda: _holder(cluster) == "replica-b", "replica-b to take the Lease", timeout=LEASE_SECONDS)
    handover = time.monotonic() - stopped
    assert handover < LEASE_SECONDS / 2, f"handover took {handover:.1f}s of a {LEASE_SECONDS}s Lease"

    second = create_job(cluster, gpu_job("ha-second", "research", pods=1, gpus_per_pod=4))
    admitted_workload(cluster, "research", second["metadata"]["uid"])
    assert _admitted_count(follower) == 1
    assert 'replica_role="leader"' in follower.metrics()
    lease = get_json(cluster, "lease", "kuota-manager", "-n", NAMESPACE)
    assert lease["spec"]["leaseTransitions"] >= 1
