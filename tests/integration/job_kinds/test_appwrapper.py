"""An AppWrapper under kuota with the real AppWrapper controller: suspended at creation, its declared pod sets as
Kueue makes them (``<name>-<index>``), held whole while they do not fit, the flavor in every pod of its components
through their ``podSetInfos``, preempted as a whole and resumed, its Workload gone with it."""

from __future__ import annotations

import pytest

from tests.cluster import Cluster
from tests.cluster.job_controllers import UpstreamController
from tests.integration.job_kinds.manifests import appwrapper
from tests.integration.job_kinds.queueing import (
    admitted_workload,
    assert_placed,
    create,
    get_json,
    no_pods,
    running_pods,
    urgent_job,
    workload_of,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.integration
SELECTOR = "workload.codeflare.dev/appwrapper=wrapped"


def test_an_appwrapper_waits_whole_then_is_placed_preempted_whole_resumed_and_its_workload_goes_with_it(
    cluster: Cluster, appwrapper_controller: UpstreamController, team: str
) -> None:
    del appwrapper_controller
    blocker = create(cluster, urgent_job(team, "blocker", pods_count=1, gpus_per_pod=8))  # 8 of 16: 12 do not fit
    admitted_workload(cluster, team, blocker["metadata"]["uid"])

    created = create(cluster, appwrapper(team, "wrapped", pods=4, gpus=3))
    assert created["spec"]["suspend"] is True
    uid = created["metadata"]["uid"]
    waiting = wait_until(lambda: workload_of(cluster, team, uid), "the AppWrapper's Workload")
    assert waiting["metadata"]["name"].startswith("appwrapper-wrapped-")
    assert [(p["name"], p["count"]) for p in waiting["spec"]["podSets"]] == [("wrapped-0", 4)]
    assert "admission" not in (waiting.get("status") or {})
    assert not get_json(cluster, "pods", "-n", team, "-l", SELECTOR)["items"]

    cluster.kubectl("delete", "job", "blocker", "-n", team, "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, SELECTOR, 4):
        assert_placed(pod)

    urgent = create(cluster, urgent_job(team, "urgent", pods_count=2, gpus_per_pod=8))
    admitted_workload(cluster, team, urgent["metadata"]["uid"])
    no_pods(cluster, team, SELECTOR)
    evicted = workload_of(cluster, team, uid)
    assert evicted is not None and "admission" not in (evicted.get("status") or {})
    cluster.kubectl("delete", "job", "urgent", "-n", team, "--cascade=foreground", "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, SELECTOR, 4):
        assert_placed(pod)

    cluster.kubectl("delete", "appwrapper", "wrapped", "-n", team, "--wait=false")
    wait_until(lambda: workload_of(cluster, team, uid) is None, "the deleted AppWrapper's Workload to go", timeout=60)
