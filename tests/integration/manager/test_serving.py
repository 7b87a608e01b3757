"""Serving on the real control plane (kube-controller-manager's Deployment, ReplicaSet and StatefulSet controllers):
a Deployment's replicas are each a plain Pod Workload on a serving ClusterQueue with ``lendingLimit: 0``, a scaled
up Deployment's new pods wait gated until quota frees, a training queue in the cohort never borrows the serving
queue's idle GPUs, a StatefulSet is one Workload admitted as a whole, and a StatefulSet larger than every flavor
gets one clear reason while the rest runs on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import Cluster
from tests.cluster.nodes import RUN_SECONDS_ANNOTATION
from tests.integration.manager.conftest import KUOTA_NAMESPACE, apply, ensure_namespace, get_json
from tests.integration.manager.test_guide import GPU_TOLERATION
from tests.manager_process import ManagerProcess
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

SERVING = "serving-llm"
TRAINING = "serving-train"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def manager(
    cluster: Cluster, kuota_crds: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ManagerProcess]:
    """The manager with Kueue's Configuration enabling Deployments and StatefulSets beside Jobs."""
    del kuota_crds
    config = tmp_path_factory.mktemp("serving") / "config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "integrations:\n  frameworks: [batch/job, deployment, statefulset]\n"
    )
    ensure_namespace(cluster, KUOTA_NAMESPACE, managed=False)
    running = ManagerProcess(cluster, KUOTA_NAMESPACE, identity="manager-serving", extra_args=(f"--config={config}",))
    running.start()
    try:
        yield running
    finally:
        running.stop()
        running.unregister()


def _cluster_queue(name: str, gpus: int, lending_limit: int | None) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": GPU, "nominalQuota": gpus}
    if lending_limit is not None:
        gpu["lendingLimit"] = lending_limit
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": "serving-cohort",
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": [GPU], "flavors": [{"name": "serving-h100", "resources": [gpu]}]}],
        },
    }


def _local_queue(namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "queue", "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


@pytest.fixture(autouse=True)
def queues(cluster: Cluster, manager: ManagerProcess) -> Iterator[None]:
    """A serving ClusterQueue of 4 GPUs that lends none, and a training one of none, in one cohort."""
    for namespace in (SERVING, TRAINING):
        ensure_namespace(cluster, namespace)
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "serving-h100"},
        "spec": {"nodeLabels": {"gpu-type": "h100"}, "tolerations": [GPU_TOLERATION]},
    }
    urgent = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "serving-urgent"},
        "value": 1000,
    }
    apply(
        cluster,
        flavor,
        urgent,
        _cluster_queue("serving-cq", 4, lending_limit=0),
        _cluster_queue("training-cq", 0, lending_limit=None),
        _local_queue(SERVING, "serving-cq"),
        _local_queue(TRAINING, "training-cq"),
    )
    yield
    manager.ensure_started()
    for namespace in (SERVING, TRAINING):
        for kind in ("deployments", "statefulsets", "jobs"):
            cluster.kubectl("delete", kind, "--all", "-n", namespace, "--wait=false", check=False)
    for namespace in (SERVING, TRAINING):
        wait_until(lambda ns=namespace: not get_json(cluster, "workloads", "-n", ns)["items"],
                   f"every Workload in {namespace} to go", 90)  # fmt: skip
        wait_until(lambda ns=namespace: not get_json(cluster, "pods", "-n", ns)["items"], f"{namespace}'s pods", 90)
    cluster.kubectl("delete", "clusterqueue", "serving-cq", "training-cq", "--ignore-not-found")
    cluster.kubectl("delete", "resourceflavor", "serving-h100", "--ignore-not-found")
    cluster.kubectl("delete", "workloadpriorityclass", "serving-urgent", "--ignore-not-found")


def _container(gpus: int) -> dict[str, Any]:
    amount = {GPU: gpus}
    return {"name": "model", "image": "ghcr.io/your-org/llm:1.0", "resources": {"requests": amount, "limits": amount}}


def deployment(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": SERVING, "labels": {"kueue.x-k8s.io/queue-name": "queue"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {"metadata": {"labels": {"app": "llm"}}, "spec": {"containers": [_container(1)]}},
        },
    }


def statefulset(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": SERVING, "labels": {"kueue.x-k8s.io/queue-name": "queue"}},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [_container(1)]}},
        },
    }


def pods_of(cluster: Cluster, app: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(cluster, "pods", "-n", SERVING, "-l", f"app={app}")["items"]
    return [pod for pod in items if not pod["metadata"].get("deletionTimestamp")]


def gated(pod: dict[str, Any]) -> bool:
    return any(gate["name"] == ADMISSION_GATE for gate in pod["spec"].get("schedulingGates") or [])


def running(pod: dict[str, Any]) -> bool:
    return not gated(pod) and pod.get("status", {}).get("phase") == "Running"


def workloads(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(cluster, "workloads", "-n", namespace)["items"]
    return items


def admitted(workload: dict[str, Any]) -> bool:
    return bool(workload.get("status", {}).get("admission"))


def condition_true(workload: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in workload.get("status", {}).get("conditions") or [])


def quota_reserved_message(workload: dict[str, Any]) -> str | None:
    for condition in workload.get("status", {}).get("conditions") or []:
        if condition["type"] == "QuotaReserved" and condition["status"] == "False":
            return str(condition.get("message", ""))
    return None


def training_job(
    namespace: str = TRAINING, labels: dict[str, str] | None = None, run_seconds: int | None = None
) -> Any:
    container = _container(2)
    annotations = {RUN_SECONDS_ANNOTATION: str(run_seconds)} if run_seconds is not None else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "finetune", "namespace": namespace,
                     "labels": {"kueue.x-k8s.io/queue-name": "queue", **(labels or {})}},
        "spec": {"template": {"metadata": {"annotations": annotations},
                              "spec": {"restartPolicy": "Never", "containers": [container]}}},
    }  # fmt: skip


def test_a_serving_deployment_holds_its_quota_its_new_replicas_wait_gated_and_training_never_borrows(
    cluster: Cluster,
) -> None:
    # The serving queue's 4 GPUs are idle, but it lends none: the training Job waits with the reason.
    apply(cluster, training_job())
    wait_until(
        lambda: [quota_reserved_message(w) for w in workloads(cluster, TRAINING)] or None,
        "the training Job's Workload to be pending",
        60,
    )

    apply(cluster, deployment(4))
    every_replica = wait_until(
        lambda: p if len(p := pods_of(cluster, "llm")) == 4 and all(map(running, p)) else None,
        "the Deployment's 4 replicas to run",
        90,
    )
    for pod in every_replica:  # each a plain Pod Workload, with the flavor's placement
        assert pod["spec"]["nodeSelector"] == {"gpu-type": "h100"}
        assert "finalizers" not in pod["metadata"]
    names = {w["metadata"]["name"] for w in workloads(cluster, SERVING) if admitted(w)}
    assert len(names) == 4 and all(name.startswith("pod-llm-") for name in names)

    cluster.kubectl("scale", "deployment", "llm", "-n", SERVING, "--replicas=6")
    waiting = wait_until(
        lambda: (
            [p for p in pods if gated(p)]
            if len(pods := pods_of(cluster, "llm")) == 6 and sum(map(running, pods)) == 4
            else None
        ),
        "6 replicas: 4 running, 2 gated",
        60,
    )
    assert len(waiting) == 2
    pending = wait_until(
        lambda: (
            reasons
            if len(reasons := [r for w in workloads(cluster, SERVING) if (r := quota_reserved_message(w))]) == 2
            else None
        ),
        "both new replicas' Workloads to say why they wait",
        60,
    )
    assert all("serving-cq" in message and GPU in message for message in pending)

    # Quota frees when a running replica goes: one of the two waiting pods takes its GPU.
    first = every_replica[0]["metadata"]["name"]
    cluster.kubectl("delete", "pod", first, "-n", SERVING, "--wait=false")
    waiting_names = {p["metadata"]["name"] for p in waiting}
    wait_until(
        lambda: any(running(p) for p in pods_of(cluster, "llm") if p["metadata"]["name"] in waiting_names) or None,
        "a waiting replica to start once a running one is deleted",
        60,
    )
    wait_until(
        lambda: sum(map(running, pods_of(cluster, "llm"))) == 4 or None,
        "4 replicas running again (quota 4)",
        60,
    )

    # Throughout, the training queue borrowed none of the serving queue's idle GPUs.
    [job_workload] = workloads(cluster, TRAINING)
    assert not admitted(job_workload)
    assert quota_reserved_message(job_workload)


def test_a_statefulset_is_one_workload_admitted_whole_and_scaled_to_zero_frees_its_quota(cluster: Cluster) -> None:
    apply(cluster, statefulset("kv", 3))
    pods = wait_until(
        lambda: p if len(p := pods_of(cluster, "kv")) == 3 and all(map(running, p)) else None,
        "the StatefulSet's 3 pods to run",
        90,
    )
    [workload] = workloads(cluster, SERVING)
    assert workload["metadata"]["name"].startswith("statefulset-kv-")
    assert [(s["name"], s["count"]) for s in workload["spec"]["podSets"]] == [("main", 3)]
    assert admitted(workload)
    assert {p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] for p in pods} == {workload["metadata"]["name"]}
    wait_until(  # every pod Ready: the group's PodsReady, as Kueue's pod integration says it
        lambda: condition_true(workloads(cluster, SERVING)[0], "PodsReady") or None, "the group's PodsReady", 60
    )

    # only to or from 0 while queued (Kueue v0.20); scaled to 0 its quota is freed, scaled up it queues again
    refused = cluster.kubectl("patch", "statefulset", "kv", "-n", SERVING, "--type=merge", "-p",
                              '{"spec": {"replicas": 4}}', check=False)  # fmt: skip
    assert refused.returncode != 0 and "changes only to or from 0 (asked 3 -> 4)" in refused.stderr
    # the scale subresource is no webhook's to review: the pod it adds is not counted, so it waits gated
    cluster.kubectl("scale", "statefulset", "kv", "-n", SERVING, "--replicas=4")
    extra = wait_until(lambda: next((p for p in pods_of(cluster, "kv") if p["metadata"]["name"] == "kv-3"), None),
                       "the StatefulSet's fourth pod", 60)  # fmt: skip
    assert gated(extra) and sum(map(running, pods_of(cluster, "kv"))) == 3
    # a running pod deleted frees its place, which the waiting pod takes; its replacement waits in turn
    cluster.kubectl("delete", "pod", "kv-0", "-n", SERVING)
    by_name = wait_until(
        lambda: (
            pods
            if "kv-0" in (pods := {p["metadata"]["name"]: p for p in pods_of(cluster, "kv")}) and running(pods["kv-3"])
            else None
        ),
        "kv-3 to take kv-0's place",
        60,
    )
    assert gated(by_name["kv-0"]) and sum(map(running, by_name.values())) == 3
    cluster.kubectl("patch", "statefulset", "kv", "-n", SERVING, "--type=merge", "-p", '{"spec": {"replicas": 0}}')
    wait_until(lambda: not workloads(cluster, SERVING) or None, "the scaled-to-zero StatefulSet's Workload to go", 60)
    wait_until(lambda: not pods_of(cluster, "kv") or None, "the StatefulSet's pods to go", 60)
    cluster.kubectl("patch", "statefulset", "kv", "-n", SERVING, "--type=merge", "-p", '{"spec": {"replicas": 2}}')
    wait_until(
        lambda: (len(p := pods_of(cluster, "kv")) == 2 and all(map(running, p))) or None,
        "the StatefulSet scaled up from 0 to run again",
        90,
    )
    [again] = workloads(cluster, SERVING)
    assert [(s["name"], s["count"]) for s in again["spec"]["podSets"]] == [("main", 2)]


def test_a_deployments_replicas_are_preempted_as_kueue_preempts_pods_and_resume_once_quota_frees(
    cluster: Cluster,
) -> None:
    apply(cluster, deployment(4))
    wait_until(lambda: sum(map(running, pods_of(cluster, "llm"))) == 4 or None, "4 serving replicas to run", 90)
    apply(cluster, training_job(SERVING, {"kueue.x-k8s.io/priority-class": "serving-urgent"}, run_seconds=20))
    # Kueue stops a preempted pod by deleting it; the ReplicaSet's replacements queue gated
    wait_until(
        lambda: (
            (len(pods := pods_of(cluster, "llm")) == 4 and sum(map(running, pods)) == 2 and sum(map(gated, pods)) == 2)
            or None
        ),
        "two replicas preempted: 2 running, 2 gated replacements",
        60,
    )
    job_workload = next(w for w in workloads(cluster, SERVING) if w["metadata"]["name"].startswith("job-finetune-"))
    assert admitted(job_workload)
    # once the urgent Job finishes, its GPUs go back to the replacements
    wait_until(lambda: sum(map(running, pods_of(cluster, "llm"))) == 4 or None, "the replicas to resume", 90)


def test_a_statefulset_larger_than_every_flavor_gets_one_clear_reason_and_the_rest_runs_on(cluster: Cluster) -> None:
    apply(cluster, deployment(2))
    wait_until(lambda: sum(map(running, pods_of(cluster, "llm"))) == 2 or None, "2 serving replicas to run", 90)
    apply(cluster, statefulset("huge", 6))
    message = wait_until(
        lambda: next(
            (m for w in workloads(cluster, SERVING) if w["metadata"]["name"].startswith("statefulset-huge-")
             if (m := quota_reserved_message(w))),
            None,
        ),
        "the oversized StatefulSet's Workload to say why it waits",
        60,
    )  # fmt: skip
    assert GPU in message
    assert all(gated(p) for p in pods_of(cluster, "huge"))
    assert sum(map(running, pods_of(cluster, "llm"))) == 2  # nothing else stopped
    events = json.loads(
        cluster.kubectl("get", "events", "-n", SERVING, "-o", "json", "--field-selector", "type=Warning").stdout
    )["items"]
    assert not [e for e in events if e["involvedObject"].get("name") == "llm"]
