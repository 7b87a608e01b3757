"""kuota makes the Workload Kueue v0.17.0 makes: for one JobSet, one RayJob, one RayCluster, one RayService, each
training-operator kind (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob), one MPIJob (v2beta1), one TrainJob (its
ClusterTrainingRuntime on each side), one AppWrapper, one pod group, a Deployment's pods and a StatefulSet (both run by
the control plane's kube-controller-manager on each side) and a LeaderWorkerSet's groups, the same pod sets (names,
counts, each pod's requests), the same name and owners. Kueue runs on a control plane of its own (its CRDs and
kuota's may never share one) with the CRDs of those kinds installed, those integrations and ``pod`` enabled and its
pod webhook registered as its release registers it; no controller of those kinds is needed there, Kueue makes the
Workload from the object alone (a LeaderWorkerSet's groups' Workloads before any pod exists). A pod group's pod
sets are named by Kueue's hash of each pod's shape, so equal names mean kuota hashes the pods as stored exactly as
Kueue does."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.side_by_side.controllers import KueueController
from kuota.webhook.jobs.adapter import GroupVersionKind, workload_name
from kuota.webhook.jobs.pod import GROUP_NAME_LABEL, POD_KIND
from kuota.webhook.jobs.pod_parents import LEADERWORKERSET, STATEFULSET
from tests.cluster import Cluster
from tests.integration.job_kinds.manifests import (
    KubeflowKind,
    appwrapper,
    cluster_training_runtime,
    jobset,
    kubeflow_job,
    mpijob,
    pod_group,
    pytorchjob,
    raycluster,
    rayjob,
    rayservice,
    trainjob,
)
from tests.integration.job_kinds.queueing import create, get_json, workload_of
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

KUEUE_FRAMEWORKS = ("batch/job", "pod", "deployment", "statefulset", "jobset.x-k8s.io/jobset", "ray.io/rayjob",
                    "ray.io/raycluster", "ray.io/rayservice", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob",
                    "kubeflow.org/xgboostjob", "kubeflow.org/paddlejob", "kubeflow.org/jaxjob", "kubeflow.org/mpijob",
                    "trainer.kubeflow.org/trainjob", "workload.codeflare.dev/appwrapper",
                    "leaderworkerset.x-k8s.io/leaderworkerset")  # fmt: skip
TFJOB = KubeflowKind("TFJob", "tfReplicaSpecs", "tensorflow")
XGBOOSTJOB = KubeflowKind("XGBoostJob", "xgbReplicaSpecs", "xgboost")
PADDLEJOB = KubeflowKind("PaddleJob", "paddleReplicaSpecs", "paddle")
JAXJOB = KubeflowKind("JAXJob", "jaxReplicaSpecs", "jax")


@pytest.fixture(scope="module")
def kueue_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    plane = Cluster.start(tmp_path_factory.mktemp("kueue-control-plane"))
    kueue = KueueController(plane, frameworks=KUEUE_FRAMEWORKS)
    try:
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


def _in(namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(obj))
    copied["metadata"]["namespace"] = namespace
    return copied


def _workload_under(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
    created = create(cluster, _in(namespace, obj))
    uid = created["metadata"]["uid"]
    return wait_until(lambda: workload_of(cluster, namespace, uid), f"the Workload of {obj['kind']} {namespace}/{uid}")


def _group_workload_under(cluster: Cluster, namespace: str, members: list[dict[str, Any]]) -> dict[str, Any]:
    for member in members:
        create(cluster, _in(namespace, member))
    group = members[0]["metadata"]["labels"][GROUP_NAME_LABEL]

    def found() -> dict[str, Any] | None:
        items: list[dict[str, Any]] = get_json(cluster, "workloads", "-n", namespace)["items"]
        return next((item for item in items if item["metadata"]["name"] == group), None)

    return wait_until(found, f"the Workload of pod group {namespace}/{group}")


def _owners(workload: dict[str, Any]) -> list[tuple[str, str, bool]]:
    references = workload["metadata"]["ownerReferences"]
    return sorted((o["kind"], o["name"], bool(o.get("controller"))) for o in references)


@pytest.mark.timeout(1500)  # room for a cold build of Kueue when the cache lacks it
@pytest.mark.parametrize(
    "case",
    [
        (jobset("any", "train", workers=2, gpus=4), [("driver", 1), ("workers", 4)]),
        (rayjob("any", "tune", workers=2, gpus=4), [("head", 1), ("gpu", 2), ("submitter", 1)]),
        (raycluster("any", "notebook", workers=3, gpus=4), [("head", 1), ("gpu", 3)]),
        (rayservice("any", "serve", workers=2, gpus=4), [("head", 1), ("gpu", 2)]),
        (pytorchjob("any", "ddp", workers=3, gpus=4), [("master", 1), ("worker", 3)]),
        (
            kubeflow_job("any", TFJOB, "tf", {"Worker": 2, "PS": 1, "Chief": 1}, gpus=2),
            [("chief", 1), ("ps", 1), ("worker", 2)],
        ),
        (kubeflow_job("any", XGBOOSTJOB, "xgb", {"Worker": 3, "Master": 1}, gpus=1), [("master", 1), ("worker", 3)]),
        (kubeflow_job("any", PADDLEJOB, "paddle", {"Worker": 2, "Master": 1}, gpus=1), [("master", 1), ("worker", 2)]),
        (kubeflow_job("any", JAXJOB, "jax", {"Worker": 2}, gpus=4), [("worker", 2)]),
        (mpijob("any", "allreduce", workers=4, gpus=3), [("launcher", 1), ("worker", 4)]),
        (appwrapper("any", "wrapped", pods=4, gpus=2), [("wrapped-0", 4)]),
    ],
    ids=[
        "JobSet",
        "RayJob",
        "RayCluster",
        "RayService",
        "PyTorchJob",
        "TFJob",
        "XGBoostJob",
        "PaddleJob",
        "JAXJob",
        "MPIJob",
        "AppWrapper",
    ],
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


@pytest.mark.timeout(1500)  # room for a cold build of Kueue when the cache lacks it
def test_kuota_and_kueue_make_the_same_workload_for_a_trainjob(
    cluster: Cluster, kueue_cluster: Cluster, upstream_crds: list[str], team: str
) -> None:
    """Both read the pod sets from the ClusterTrainingRuntime the TrainJob names, so each plane holds it."""
    del upstream_crds
    runtime = cluster_training_runtime(f"{team}-gpus", gpus=3)
    obj = trainjob("any", "finetune", runtime["metadata"]["name"], nodes=4)
    kueue_cluster.kubectl("create", "namespace", team, check=False)
    workloads = []
    for plane in (kueue_cluster, cluster):
        create(plane, runtime)
        workloads.append(_workload_under(plane, team, obj))
    theirs, ours = workloads
    try:
        assert [(name, count) for name, count, _ in _shape(theirs)] == [("node", 4)]
        assert _shape(ours) == _shape(theirs)
        kind = GroupVersionKind("trainer.kubeflow.org", "v1alpha1", "TrainJob")
        for workload in (ours, theirs):
            uid = workload["metadata"]["labels"]["kueue.x-k8s.io/job-uid"]
            assert workload["metadata"]["name"] == workload_name("finetune", uid, kind)
            owner = workload["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["name"], owner["controller"]) == ("TrainJob", "finetune", True)
    finally:
        # No trainer runs on either plane to hold it with a finalizer; the namespace's cleanup takes the TrainJob.
        for plane in (kueue_cluster, cluster):
            plane.kubectl("delete", "clustertrainingruntime", runtime["metadata"]["name"], "--ignore-not-found")


@pytest.mark.timeout(1500)  # room for a cold build of Kueue when the cache lacks it
def test_kuota_and_kueue_make_the_same_workload_for_a_pod_group(
    cluster: Cluster, kueue_cluster: Cluster, team: str
) -> None:
    members = pod_group("any", "ddp", workers=2, gpus=4)
    kueue_cluster.kubectl("create", "namespace", team, check=False)
    theirs = _group_workload_under(kueue_cluster, team, members)
    ours = _group_workload_under(cluster, team, members)

    # two roles (the driver's shape and the workers'), named by Kueue's hash of the shape
    assert sorted(count for _, count, _ in _shape(theirs)) == [1, 2]
    assert all(len(name) == 8 for name, _, _ in _shape(theirs))
    assert _shape(ours) == _shape(theirs)
    expected_owners = sorted(("Pod", member["metadata"]["name"], False) for member in members)
    assert _owners(ours) == _owners(theirs) == expected_owners
    assert ours["spec"]["queueName"] == theirs["spec"]["queueName"]


def _serving_parents() -> list[dict[str, Any]]:
    """A Deployment of 2 one-GPU replicas and a StatefulSet of 2, queued."""
    resources = {"requests": {"nvidia.com/gpu": "1", "cpu": "2"}, "limits": {"nvidia.com/gpu": "1"}}
    container = {"name": "model", "image": "ghcr.io/your-org/llm:1.0", "resources": resources}
    parents = []
    for kind, name in (("Deployment", "llm"), ("StatefulSet", "kv")):
        spec: dict[str, Any] = {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}},
        }
        if kind == "StatefulSet":
            spec |= {"serviceName": name, "podManagementPolicy": "Parallel"}
        metadata = {"name": name, "namespace": "any", "labels": {"kueue.x-k8s.io/queue-name": "team-queue"}}
        parents.append({"apiVersion": "apps/v1", "kind": kind, "metadata": metadata, "spec": spec})
    return parents


def _serving_workloads(cluster: Cluster, namespace: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The Deployment's pods' Workloads (by pod name) and the StatefulSet's, once all three exist."""

    def found() -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
        items: list[dict[str, Any]] = get_json(cluster, "workloads", "-n", namespace)["items"]
        pods = [w for w in items if w["metadata"]["ownerReferences"][0]["kind"] == "Pod"]
        sets = [w for w in items if w["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"]
        if len(pods) < 2 or not sets:
            return None
        return sorted(pods, key=lambda w: w["metadata"]["ownerReferences"][0]["name"]), sets[0]

    return wait_until(found, f"the Workloads of the Deployment's 2 pods and of the StatefulSet in {namespace}")


@pytest.mark.timeout(1500)  # room for a cold build of Kueue when the cache lacks it
def test_kuota_and_kueue_make_the_same_workloads_for_a_deployment_and_a_statefulset(
    cluster: Cluster, kueue_cluster: Cluster, team: str
) -> None:
    kueue_cluster.kubectl("create", "namespace", team, check=False)
    sides = []
    for plane in (kueue_cluster, cluster):
        for parent in _serving_parents():
            create(plane, _in(team, parent))
        sides.append(_serving_workloads(plane, team))
    (their_pods, their_set), (our_pods, our_set) = sides

    # each Deployment pod a plain Pod Workload: pod set main of 1, named after the pod, owned by it
    assert [_shape(w) for w in our_pods] == [_shape(w) for w in their_pods]
    assert _shape(their_pods[0]) == [("main", 1, [{"nvidia.com/gpu": "1", "cpu": "2"}])]
    for workload in [*our_pods, *their_pods]:
        owner = workload["metadata"]["ownerReferences"][0]
        assert owner["controller"] is True
        assert workload["metadata"]["name"] == workload_name(owner["name"], owner["uid"], POD_KIND)
    # the StatefulSet one Workload: pod set main of replicas, named after it, owned by it
    assert _shape(our_set) == _shape(their_set) == [("main", 2, [{"nvidia.com/gpu": "1", "cpu": "2"}])]
    for workload in (our_set, their_set):
        owner = workload["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner.get("controller")) == ("StatefulSet", "kv", None)
        assert workload["metadata"]["name"] == workload_name("kv", owner["uid"], STATEFULSET.kind)
    assert our_set["spec"]["queueName"] == their_set["spec"]["queueName"] == "team-queue"


def _leaderworkerset(leader: bool) -> dict[str, Any]:
    """A queued LeaderWorkerSet of 2 groups of 3 one-GPU pods, with a leader template of its own or without."""
    resources = {"requests": {"nvidia.com/gpu": "1", "cpu": "2"}, "limits": {"nvidia.com/gpu": "1"}}
    worker = {"spec": {"containers": [{"name": "worker", "image": "ghcr.io/your-org/llm:1.0", "resources": resources}]}}
    groups: dict[str, Any] = {"size": 3, "workerTemplate": worker}
    if leader:
        lead = {"requests": {"cpu": "4"}}
        groups["leaderTemplate"] = {
            "spec": {"containers": [{"name": "leader", "image": "ghcr.io/your-org/llm:1.0", "resources": lead}]}
        }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm", "namespace": "any", "labels": {"kueue.x-k8s.io/queue-name": "team-queue"}},
        # What the LeaderWorkerSet's own webhook (not run here) defaults: Kueue's webhook writes the object back
        # whole, its empty rolloutStrategy.type and startupPolicy included, which the CRD's enums refuse.
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": groups,
            "rolloutStrategy": {"type": "RollingUpdate"},
            "startupPolicy": "LeaderCreated",
        },
    }


def _group_workloads_under(cluster: Cluster, namespace: str, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The Workloads of each of the LeaderWorkerSet's groups, by name, once there is one per group."""
    created = create(cluster, _in(namespace, obj))
    uid, groups = created["metadata"]["uid"], created["spec"]["replicas"]

    def found() -> list[dict[str, Any]] | None:
        selector = f"kueue.x-k8s.io/job-uid={uid}"
        items: list[dict[str, Any]] = get_json(cluster, "workloads", "-n", namespace, "-l", selector)["items"]
        return sorted(items, key=lambda w: w["metadata"]["name"]) if len(items) == groups else None

    return wait_until(found, f"the {groups} group Workloads of LeaderWorkerSet {namespace}/{uid}")


@pytest.mark.timeout(1500)  # room for a cold build of Kueue when the cache lacks it
@pytest.mark.parametrize(
    "case",
    [(True, [("leader", 1), ("worker", 2)]), (False, [("main", 3)])],
    ids=["leader-and-workers", "workers-only"],
)
def test_kuota_and_kueue_make_the_same_workloads_for_a_leaderworkerset(
    cluster: Cluster,
    kueue_cluster: Cluster,
    upstream_crds: list[str],
    team: str,
    case: tuple[bool, list[tuple[str, int]]],
) -> None:
    """One Workload per group, named after the LeaderWorkerSet and the group's index, owned by it (not as its
    controller), with pod sets leader (1) and worker (size - 1), or main (size) without a leader template."""
    del upstream_crds
    leader, pod_sets = case  # a leader template or not, and the pod sets (name, count) Kueue is known to make
    obj = _leaderworkerset(leader)
    kueue_cluster.kubectl("create", "namespace", team, check=False)
    theirs = _group_workloads_under(kueue_cluster, team, obj)
    ours = _group_workloads_under(cluster, team, obj)

    for their_group, our_group in zip(theirs, ours, strict=True):
        assert [(name, count) for name, count, _ in _shape(their_group)] == pod_sets
        assert _shape(our_group) == _shape(their_group)
        assert our_group["spec"]["queueName"] == their_group["spec"]["queueName"] == "team-queue"
    for workloads in (ours, theirs):
        uid = workloads[0]["metadata"]["labels"]["kueue.x-k8s.io/job-uid"]
        names = [workload_name(f"llm-{index}", uid, LEADERWORKERSET.kind) for index in range(2)]
        assert [w["metadata"]["name"] for w in workloads] == sorted(names)
        for workload in workloads:
            [owner] = workload["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner.get("controller")) == ("LeaderWorkerSet", "llm", None)
