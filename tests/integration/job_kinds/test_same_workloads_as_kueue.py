"""kuota makes the Workload Kueue v0.17.0 makes: for one JobSet and one RayJob, the same pod sets (names, counts,
each pod's requests), the same name prefix and owner. Kueue runs on a control plane of its own (its CRDs and
kuota's may never share one) with the JobSet and Ray CRDs installed and those integrations enabled; no JobSet or
KubeRay controller is needed there, Kueue makes the Workload from the object alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.side_by_side.controllers import KueueController
from kuota.webhook.jobs.adapter import GroupVersionKind, workload_name
from tests.cluster import Cluster
from tests.cluster.job_controllers import install_crds, jobset_crds, kuberay_crds
from tests.integration.job_kinds.manifests import jobset, rayjob
from tests.integration.job_kinds.queueing import create, workload_of
from tests.waiting import wait_until

KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "ray.io/rayjob", "ray.io/raycluster")


@pytest.fixture(scope="module")
def kueue_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    plane = Cluster.start(tmp_path_factory.mktemp("kueue-control-plane"))
    kueue = KueueController(plane, frameworks=KUEUE_FRAMEWORKS)
    try:
        install_crds(plane, [*jobset_crds(), *kuberay_crds()])
        kueue.install()
        kueue.start()
        yield plane
    finally:
        kueue.stop()
        plane.stop()


def _shape(workload: dict[str, Any]) -> list[tuple[str, int, list[dict[str, Any]]]]:
    """Each pod set's name, count and its pod's containers' requests (init containers first)."""
    shape = []
    for pod_set in workload["spec"]["podSets"]:
        spec = pod_set["template"]["spec"]
        containers = [*(spec.get("initContainers") or []), *spec["containers"]]
        requests = [(container.get("resources") or {}).get("requests") or {} for container in containers]
        shape.append((pod_set["name"], pod_set["count"], requests))
    return shape


def _workload_under(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    created = create(cluster, json.loads(json.dumps({**obj, "metadata": {**obj["metadata"], "namespace": namespace}})))
    uid = created["metadata"]["uid"]
    return wait_until(lambda: workload_of(cluster, namespace, uid), f"the Workload of {obj['kind']} {namespace}/{uid}")


@pytest.mark.timeout(1500)  # room for a cold build of Kueue when the cache lacks it
@pytest.mark.parametrize(
    "case",
    [
        (jobset("any", "train", workers=2, gpus=4), [("driver", 1), ("workers", 4)]),
        (rayjob("any", "tune", workers=2, gpus=4), [("head", 1), ("gpu", 2), ("submitter", 1)]),
    ],
    ids=["JobSet", "RayJob"],
)
def test_kuota_and_kueue_make_the_same_workload(
    cluster: Cluster,
    kueue_cluster: Cluster,
    upstream_crds: list[str],
    team: str,
    case: tuple[dict[str, Any], list[tuple[str, int]]],
) -> None:
    del upstream_crds
    obj, pod_sets = case  # the job, and the pod sets (name, count) Kueue is known to make of it
    kueue_cluster.kubectl("create", "namespace", team, check=False)
    theirs = _workload_under(kueue_cluster, team, obj)
    ours = _workload_under(cluster, team, obj)

    assert [(name, count) for name, count, _ in _shape(theirs)] == pod_sets
    assert _shape(ours) == _shape(theirs)
    group, _, version = obj["apiVersion"].rpartition("/")
    kind = GroupVersionKind(group, version, obj["kind"])
    for workload in (ours, theirs):  # Kueue's name, hash included, on both sides
        uid = workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"]
        assert workload["metadata"]["name"] == workload_name(obj["metadata"]["name"], uid, kind)
        owner = workload["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (obj["kind"], obj["metadata"]["name"], True)
