"""A JobSet under kuota with the real JobSet controller: suspended at creation, admitted as one Workload when the
whole gang fits, the flavor in every pod, preempted as a whole and resumed, its quota back when it finishes or
is deleted."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.job_controllers import UpstreamController
from tests.integration.job_kinds.manifests import jobset
from tests.integration.job_kinds.queueing import (
    admitted_workload,
    apply,
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


def _selector(name: str) -> str:
    return f"jobset.sigs.k8s.io/jobset-name={name}"


def test_a_jobset_is_admitted_whole_placed_preempted_whole_resumed_and_its_workload_goes_with_it(
    cluster: Cluster, jobset_controller: UpstreamController, team: str
) -> None:
    del jobset_controller
    created = create(cluster, jobset(team, "train", workers=2, gpus=4))
    assert created["spec"]["suspend"] is True  # kuota's webhook: no pod before an admission
    uid = created["metadata"]["uid"]

    workload = admitted_workload(cluster, team, uid)
    assert workload["metadata"]["name"].startswith("jobset-train-")
    assert workload["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == [("driver", 1), ("workers", 4)]
    assert [a["name"] for a in workload["status"]["admission"]["podSetAssignments"]] == ["driver", "workers"]
    placed = running_pods(cluster, team, _selector("train"), 5)
    for pod in placed:
        assert_placed(pod)

    # An urgent Job needs all 16 GPUs: the JobSet's Workload is preempted and every one of its pods goes.
    urgent = create(cluster, urgent_job(team, "urgent", pods_count=2, gpus_per_pod=8))
    admitted_workload(cluster, team, urgent["metadata"]["uid"])
    no_pods(cluster, team, _selector("train"))
    wait_until(lambda: get_json(cluster, "jobset", "train", "-n", team)["spec"]["suspend"], "the JobSet suspended")
    evicted = workload_of(cluster, team, uid)
    assert evicted is not None and "admission" not in (evicted.get("status") or {})

    # The urgent Job goes: the JobSet is admitted again and runs all its pods, placed again.
    cluster.kubectl("delete", "job", "urgent", "-n", team, "--cascade=foreground", "--wait=false")
    admitted_workload(cluster, team, uid)
    for pod in running_pods(cluster, team, _selector("train"), 5):
        assert_placed(pod)

    cluster.kubectl("delete", "jobset", "train", "-n", team, "--wait=false")
    wait_until(
        lambda: workload_of(cluster, team, uid) is None, "the deleted JobSet's Workload to be deleted", timeout=60
    )


def test_a_jobset_waits_whole_until_the_gang_fits_and_a_finished_jobset_gives_its_quota_back(
    cluster: Cluster, jobset_controller: UpstreamController, team: str
) -> None:
    del jobset_controller
    first = create(cluster, jobset(team, "first", workers=1, gpus=6, run_seconds=8))  # 12 of the 16 GPUs
    admitted_workload(cluster, team, first["metadata"]["uid"])
    second = create(cluster, jobset(team, "second", workers=2, gpus=2))  # 8 GPUs: only 4 are free
    wait_until(lambda: workload_of(cluster, team, second["metadata"]["uid"]), "the second JobSet's Workload")
    running_pods(cluster, team, _selector("first"), 3)
    pending = workload_of(cluster, team, second["metadata"]["uid"])
    assert pending is not None and "admission" not in (pending.get("status") or {})
    assert not get_json(cluster, "pods", "-n", team, "-l", _selector("second"))["items"]  # not one pod of the gang

    def finished() -> dict[str, Any] | None:
        workload = workload_of(cluster, team, first["metadata"]["uid"])
        conditions = (workload or {}).get("status", {}).get("conditions") or []
        return workload if any(c["type"] == "Finished" and c["status"] == "True" for c in conditions) else None

    done = wait_until(finished, "the first JobSet's Workload to be Finished", timeout=120)
    condition = next(c for c in done["status"]["conditions"] if c["type"] == "Finished")
    assert condition["reason"] == "Succeeded"
    admitted_workload(cluster, team, second["metadata"]["uid"])
    running_pods(cluster, team, _selector("second"), 5)


def test_a_jobset_gated_by_a_check_starts_with_the_checks_pod_set_updates_in_every_pod(
    cluster: Cluster, jobset_controller: UpstreamController, team: str
) -> None:
    """A Ready check's podSetUpdates (labels, annotations, a toleration) reach each replicated job's template, so
    the JobSet controller's Jobs start pods that carry them; the JobSet stays suspended while the check is
    Pending."""
    del jobset_controller
    check = f"{team}-budget"
    apply(
        cluster,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": check},
            "spec": {"controllerName": "example.com/budget"},
        },
    )
    try:
        active = {"type": "Active", "status": "True", "reason": "Active", "message": "ok", "lastTransitionTime": _now()}
        cluster.kubectl(
            "patch", "admissioncheck", check, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"conditions": [active]}}),
        )  # fmt: skip
        strategy = {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": check}]}}}
        cluster.kubectl("patch", "clusterqueue", f"{team}-cq", "--type=merge", "-p", json.dumps(strategy))
        created = create(cluster, jobset(team, "gated", workers=1, gpus=2))

        def reserved() -> dict[str, Any] | None:
            workload = workload_of(cluster, team, created["metadata"]["uid"])
            return workload if workload is not None and (workload.get("status") or {}).get("admission") else None

        workload = wait_until(reserved, "the JobSet's quota reserved behind its check", timeout=90)
        assert get_json(cluster, "jobset", "gated", "-n", team)["spec"]["suspend"] is True
        toleration = {"key": "example.com/reserved", "operator": "Exists", "effect": "NoSchedule"}
        updates = [
            {
                "name": pod_set,
                "labels": {"example.com/slot": f"{pod_set}-slot"},
                "annotations": {"example.com/ticket": "42"},
                "tolerations": [toleration],
            }
            for pod_set in ("driver", "workers")
        ]
        entry = {"name": check, "state": "Ready", "message": "granted", "lastTransitionTime": _now()}
        cluster.kubectl(
            "patch", "workload", workload["metadata"]["name"], "-n", team, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"admissionChecks": [{**entry, "podSetUpdates": updates}]}}),
        )  # fmt: skip

        placed = running_pods(cluster, team, _selector("gated"), 3)
        for pod in placed:
            assert_placed(pod)
            pod_set = pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"]
            assert pod["metadata"]["labels"]["example.com/slot"] == f"{pod_set}-slot", pod["metadata"]["name"]
            assert pod["metadata"]["annotations"]["example.com/ticket"] == "42", pod["metadata"]["name"]
            assert toleration in pod["spec"]["tolerations"], pod["metadata"]["name"]
    finally:
        cluster.kubectl("delete", "jobset", "--all", "-n", team, "--wait=false")
        cluster.kubectl("delete", "admissioncheck", check, "--wait=false")


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
