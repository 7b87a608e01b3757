"""A LeaderWorkerSet against the real LeaderWorkerSet controller (v0.8.0, Kueue v0.17's, its webhooks registered):
created with a queue label, each group is one Workload with pod sets ``leader`` and ``worker``; a group's pods wait
gated until its whole Workload fits, start with the flavor's nodeSelector and tolerations, are preempted as Kueue
preempts pods (deleted; the controller recreates the group, gated), and resume once quota frees. A rolling update
with ``maxSurge`` has its surge group governed as any other: a Workload, gated until admitted, gone after. On a TAS
flavor, the leader and its workers, one pod set group, are placed together in the domain they require."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.job_controllers import UpstreamController, install_crds, lws_crds, start_lws, stop_lws
from tests.integration.manager.conftest import KUOTA_NAMESPACE, apply, ensure_namespace, events_of, get_json
from tests.integration.manager.test_guide import GPU_TOLERATION
from tests.integration.manager.test_serving import admitted, gated, quota_reserved_message, running, training_job
from tests.manager_process import ManagerProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

NAMESPACE = "lws-serving"
API = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"


@pytest.fixture(scope="module")
def lws_controller(cluster: Cluster) -> Iterator[UpstreamController]:
    install_crds(cluster, lws_crds())
    controller = start_lws(cluster)
    try:
        yield controller
    finally:
        stop_lws(cluster)


@pytest.fixture(scope="module")
def manager(
    cluster: Cluster,
    kuota_crds: list[dict[str, Any]],
    lws_controller: UpstreamController,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ManagerProcess]:
    """The manager with Kueue's Configuration enabling LeaderWorkerSets beside Jobs, started once they are served."""
    del kuota_crds, lws_controller
    config = tmp_path_factory.mktemp("lws") / "config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "integrations:\n  frameworks: [batch/job, leaderworkerset.x-k8s.io/leaderworkerset]\n"
    )
    ensure_namespace(cluster, KUOTA_NAMESPACE, managed=False)
    running_manager = ManagerProcess(
        cluster, KUOTA_NAMESPACE, identity="manager-lws", extra_args=(f"--config={config}",)
    )
    running_manager.start()
    try:
        yield running_manager
    finally:
        running_manager.stop()
        running_manager.unregister()


@pytest.fixture(autouse=True)
def queues(cluster: Cluster, manager: ManagerProcess) -> Iterator[None]:
    """A ClusterQueue of 4 GPUs on a flavor with a nodeSelector and a toleration, and an urgent priority class."""
    ensure_namespace(cluster, NAMESPACE)
    gpu = {"name": GPU, "nominalQuota": 4}
    apply(
        cluster,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "lws-h100"},
            "spec": {"nodeLabels": {"gpu-type": "h100"}, "tolerations": [GPU_TOLERATION]},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "lws-urgent"},
            "value": 1000,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "lws-cq"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "lws-h100", "resources": [gpu]}]}],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "queue", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "lws-cq"},
        },
    )
    yield
    manager.ensure_started()
    for kind in ("leaderworkersets", "jobs"):
        cluster.kubectl("delete", kind, "--all", "-n", NAMESPACE, "--wait=false", check=False)
    wait_until(lambda: not get_json(cluster, "workloads", "-n", NAMESPACE)["items"], "every Workload to go", 90)
    wait_until(lambda: not get_json(cluster, "pods", "-n", NAMESPACE)["items"], "every pod to go", 90)
    cluster.kubectl("delete", "clusterqueue", "lws-cq", "--ignore-not-found")
    cluster.kubectl("delete", "resourceflavor", "lws-h100", "--ignore-not-found")
    cluster.kubectl("delete", "workloadpriorityclass", "lws-urgent", "--ignore-not-found")


def leaderworkerset(replicas: int, size: int) -> dict[str, Any]:
    def template(role: str) -> dict[str, Any]:
        amount = {GPU: 1}
        container = {"name": role, "image": "ghcr.io/your-org/llm:1.0", "resources": {"requests": amount,
                                                                                       "limits": amount}}  # fmt: skip
        return {"metadata": {"labels": {"role": role}}, "spec": {"containers": [container]}}

    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm", "namespace": NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": "queue"}},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {"size": size, "leaderTemplate": template("leader"),
                                     "workerTemplate": template("worker")},
        },
    }  # fmt: skip


def lws_pods(cluster: Cluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(cluster, "pods", "-n", NAMESPACE, "-l", NAME_LABEL)["items"]
    return [pod for pod in items if not pod["metadata"].get("deletionTimestamp")]


def group_workloads(cluster: Cluster) -> list[dict[str, Any]]:
    items = get_json(cluster, "workloads", "-n", NAMESPACE)["items"]
    return [w for w in items if w["metadata"]["name"].startswith("leaderworkerset-llm-")]


def by_group(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        groups.setdefault(pod["metadata"]["labels"].get(GROUP_LABEL, ""), []).append(pod)
    return groups


def test_each_group_is_one_workload_gated_until_it_fits_placed_preempted_and_resumed(cluster: Cluster) -> None:
    # 3 groups of a leader and a worker, 1 GPU each: 6 GPUs asked of 4, so two groups run and one waits whole.
    apply(cluster, leaderworkerset(replicas=3, size=2))
    workloads = wait_until(
        lambda: w if len(w := group_workloads(cluster)) == 3 and sum(map(admitted, w)) == 2 else None,
        "3 group Workloads, 2 admitted",
        90,
    )
    for workload in workloads:
        assert [(s["name"], s["count"]) for s in workload["spec"]["podSets"]] == [("leader", 1), ("worker", 1)]
        [owner] = workload["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("LeaderWorkerSet", "llm")
    admitted_names = {w["metadata"]["name"] for w in workloads if admitted(w)}
    [waiting_name] = [w["metadata"]["name"] for w in workloads if not admitted(w)]
    reason = wait_until(
        lambda: next((m for w in group_workloads(cluster) if w["metadata"]["name"] == waiting_name
                      if (m := quota_reserved_message(w))), None),
        "the waiting group's Workload to say why",
        60,
    )  # fmt: skip
    assert GPU in reason

    def settled() -> dict[str, list[dict[str, Any]]] | None:
        groups = by_group(lws_pods(cluster))
        runs = all(len(groups.get(name, [])) == 2 and all(map(running, groups[name])) for name in admitted_names)
        return groups if runs and groups.get(waiting_name) and all(map(gated, groups[waiting_name])) else None

    groups = wait_until(settled, "the admitted groups' pods running, the waiting group's gated", 120)
    assert "" not in groups  # every pod of the LeaderWorkerSet was put in its group
    for name in admitted_names:
        for pod in groups[name]:  # started with the flavor's placement
            assert pod["spec"]["nodeSelector"] == {"gpu-type": "h100"}
            assert GPU_TOLERATION in pod["spec"]["tolerations"]
            assert "finalizers" not in pod["metadata"]

    # an urgent Job of 2 GPUs preempts one group: its pods are deleted, and the controller's new ones wait gated
    apply(cluster, training_job(NAMESPACE, {"kueue.x-k8s.io/priority-class": "lws-urgent"}, run_seconds=20))
    wait_until(
        lambda: sum(map(admitted, group_workloads(cluster))) == 1 or None, "one group preempted by the urgent Job", 60
    )
    wait_until(
        lambda: sum(map(running, lws_pods(cluster))) == 2 or None, "only the one admitted group's pods running", 90
    )
    job = next(w for w in get_json(cluster, "workloads", "-n", NAMESPACE)["items"]
               if w["metadata"]["name"].startswith("job-finetune-"))  # fmt: skip
    assert admitted(job)

    # once the urgent Job finishes, its GPUs go back: two groups run again
    wait_until(
        lambda: (
            (sum(map(admitted, group_workloads(cluster))) == 2 and sum(map(running, lws_pods(cluster))) == 4) or None
        ),
        "two groups running again once the Job ends",
        120,
    )

    # scaled down to one group, the others' Workloads go and their quota with them
    cluster.kubectl("patch", "leaderworkerset", "llm", "-n", NAMESPACE, "--type=merge", "-p",
                    '{"spec": {"replicas": 1}}')  # fmt: skip
    wait_until(lambda: len(group_workloads(cluster)) == 1 or None, "the groups scaled away to lose their Workloads", 60)


def ungoverned(cluster: Cluster) -> list[str]:
    """The running pods of the LeaderWorkerSet whose group's Workload was admitted neither just before nor just
    after the pods were read (so one admitted, or deleted, between the reads is not taken for ungoverned)."""

    def admitted_names() -> set[str]:
        return {w["metadata"]["name"] for w in group_workloads(cluster) if admitted(w)}

    before = admitted_names()
    pods = lws_pods(cluster)
    governed = before | admitted_names()
    return [
        pod["metadata"]["name"]
        for pod in pods
        if running(pod) and pod["metadata"]["labels"].get(GROUP_LABEL) not in governed
    ]


def test_a_rolling_update_with_surge_governs_the_surge_group_and_leaves_nothing_over(cluster: Cluster) -> None:
    # 2 groups of a leader and a worker take the 4 GPUs; maxSurge 1 with maxUnavailable 0: the controller makes a
    # third group with the new template and rolls no old group until that one is ready.
    lws = leaderworkerset(replicas=2, size=2)
    lws["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0},
    }
    apply(cluster, lws)
    wait_until(
        lambda: sum(map(running, lws_pods(cluster))) == 4 and sum(map(admitted, group_workloads(cluster))) == 2,
        "both groups admitted and running",
        120,
    )
    image = "ghcr.io/your-org/llm:2.0"
    cluster.kubectl("patch", "leaderworkerset", "llm", "-n", NAMESPACE, "--type=json", "-p",
                    f'[{{"op": "replace", "path": "/spec/leaderWorkerTemplate/workerTemplate/spec/containers/0/image",'
                    f' "value": "{image}"}}]')  # fmt: skip

    def surge_waiting() -> dict[str, Any] | None:
        assert not ungoverned(cluster)
        surge = [w for w in group_workloads(cluster) if w["metadata"]["name"].startswith("leaderworkerset-llm-2-")]
        if not surge or not quota_reserved_message(surge[0]):
            return None
        pods = by_group(lws_pods(cluster)).get(surge[0]["metadata"]["name"], [])
        return surge[0] if pods and all(map(gated, pods)) else None

    surge = wait_until(surge_waiting, "the surge group's Workload, waiting for quota, its pods gated", 90)
    assert not admitted(surge) and GPU in (quota_reserved_message(surge) or "")
    [owner] = surge["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("LeaderWorkerSet", "llm")

    # 2 GPUs more: the surge group is admitted and runs, then the old groups roll onto the new template; at no
    # point does a pod run in a group whose Workload is not admitted
    cluster.kubectl("patch", "clusterqueue", "lws-cq", "--type=json", "-p",
                    '[{"op": "replace", "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota", '
                    '"value": 6}]')  # fmt: skip

    def rolled_and_settled() -> bool:
        assert not ungoverned(cluster)
        status = get_json(cluster, "leaderworkerset", "llm", "-n", NAMESPACE).get("status") or {}
        pods = lws_pods(cluster)
        workloads = group_workloads(cluster)
        return (
            status.get("updatedReplicas") == 2
            and len(workloads) == 2
            and all(map(admitted, workloads))
            and len(pods) == 4
            and all(running(p) for p in pods)
            and all(
                p["spec"]["containers"][0]["image"] == image
                for p in pods
                if p["metadata"]["labels"]["role"] == "worker"
            )
        )

    wait_until(rolled_and_settled, "the rollout done: 2 groups on the new template, the surge Workload gone", 180)
    assert not any(w["metadata"]["name"] == surge["metadata"]["name"] for w in group_workloads(cluster))
    # the surge group ran (briefly: the controller removes it once an old group is updated and ready) admitted
    surge_events = events_of(cluster, NAMESPACE, "Workload", surge["metadata"]["name"])
    assert any(reason == "Admitted" for _, reason, _ in surge_events)


RACK = "example.com/rack"


@pytest.fixture
def tas_queue(cluster: Cluster) -> Iterator[dict[str, str]]:
    """The first three fake 8-GPU nodes in two racks (r1: two nodes, r2: one), a Topology of racks and hosts, a TAS
    flavor on them and a queue with GPU quota to spare: only the topology decides. Each node's rack by name."""
    first, second, third = cluster.node_names[:3]
    by_node = {first: "r1", second: "r1", third: "r2"}
    for node, rack in by_node.items():
        cluster.kubectl("label", "node", node, f"{RACK}={rack}", "--overwrite")
    levels = [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]
    flavors = [{"name": "lws-h100-tas", "resources": [{"name": GPU, "nominalQuota": 48}]}]
    apply(
        cluster,
        {"apiVersion": API, "kind": "Topology", "metadata": {"name": "lws-racks"}, "spec": {"levels": levels}},
        {
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": {"name": "lws-h100-tas"},
            "spec": {"nodeLabels": {"gpu-type": "h100"}, "topologyName": "lws-racks", "tolerations": [GPU_TOLERATION]},
        },
        {
            "apiVersion": API,
            "kind": "ClusterQueue",
            "metadata": {"name": "lws-tas"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [{"coveredResources": [GPU], "flavors": flavors}],
            },
        },
        {
            "apiVersion": API,
            "kind": "LocalQueue",
            "metadata": {"name": "tas-queue", "namespace": NAMESPACE},
            "spec": {"clusterQueue": "lws-tas"},
        },
    )
    try:
        yield by_node
    finally:
        cluster.kubectl("delete", "leaderworkersets", "--all", "-n", NAMESPACE, "--wait=false", check=False)
        wait_until(lambda: not group_workloads(cluster), "the group Workloads to go", 90)
        cluster.kubectl("delete", "localqueue", "tas-queue", "-n", NAMESPACE, "--ignore-not-found")
        cluster.kubectl("delete", "clusterqueue", "lws-tas", "--ignore-not-found")
        cluster.kubectl("delete", "resourceflavor", "lws-h100-tas", "--ignore-not-found")
        cluster.kubectl("delete", "topology", "lws-racks", "--ignore-not-found")
        for node in by_node:
            cluster.kubectl("label", "node", node, f"{RACK}-", check=False)


def test_a_groups_leader_and_worker_share_the_rack_they_require(cluster: Cluster, tas_queue: dict[str, str]) -> None:
    # Kueue's pod set groups: a 4-GPU leader and an 8-GPU worker, each requiring one rack, in group "llm". Placed
    # one by one, the leader would take r2 (the fullest rack that holds it) and leave the worker no room there;
    # placed together, both go to r1, on two nodes, and each pod is sent there through its topology gate.
    lws = leaderworkerset(replicas=1, size=2)
    lws["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "tas-queue"
    templates = lws["spec"]["leaderWorkerTemplate"]
    for name, gpus in (("leaderTemplate", 4), ("workerTemplate", 8)):
        templates[name]["metadata"]["annotations"] = {
            "kueue.x-k8s.io/podset-required-topology": RACK,
            "kueue.x-k8s.io/podset-group-name": "llm",
        }
        container = templates[name]["spec"]["containers"][0]
        container["resources"] = {"requests": {GPU: gpus}, "limits": {GPU: gpus}}
    apply(cluster, lws)
    (workload,) = wait_until(
        lambda: w if len(w := group_workloads(cluster)) == 1 and admitted(w[0]) else None,
        "the group's Workload admitted",
        90,
    )
    requests = {s["name"]: s.get("topologyRequest") for s in workload["spec"]["podSets"]}
    assert requests == {name: {"required": RACK, "podSetGroupName": "llm"} for name in ("leader", "worker")}
    assignments = workload["status"]["admission"]["podSetAssignments"]
    assert all(assigned.get("topologyAssignment") for assigned in assignments)

    def placed() -> list[dict[str, Any]] | None:
        pods = lws_pods(cluster)
        return pods if len(pods) == 2 and all(map(running, pods)) else None

    pods = wait_until(placed, "the leader and the worker running", 120)
    nodes = {pod["spec"]["nodeName"] for pod in pods}
    assert {tas_queue[node] for node in nodes} == {"r1"}
    assert len(nodes) == 2
    for pod in pods:
        assert not pod["spec"].get("schedulingGates")
        assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == pod["spec"]["nodeName"]
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] in {"leader", "worker"}
