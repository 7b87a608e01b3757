"""Queues, namespaces and reads shared by the job-kind tests: one ClusterQueue of ``GPUS`` H100s per test
namespace, on a flavor that places pods on the fake H100 nodes (its nodeLabels and the GPU taint's toleration)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import yaml

from tests.cluster import Cluster
from tests.manager_process import MANAGED_LABEL, ManagerProcess
from tests.waiting import wait_until

FRAMEWORKS = (
    "batch/job",
    "jobset.x-k8s.io/jobset",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "ray.io/rayservice",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
    "trainer.kubeflow.org/trainjob",
    "workload.codeflare.dev/appwrapper",
    "deployment",
    "statefulset",
    "leaderworkerset.x-k8s.io/leaderworkerset",
    "pod",
)
# Pods last: a pod group is its pods (the manager releases their finalizers).
JOB_KINDS = ("jobsets.jobset.x-k8s.io", "rayjobs.ray.io", "rayservices.ray.io", "rayclusters.ray.io",
             "pytorchjobs.kubeflow.org", "tfjobs.kubeflow.org", "xgboostjobs.kubeflow.org", "paddlejobs.kubeflow.org",
             "jaxjobs.kubeflow.org",
             "mpijobs.kubeflow.org", "trainjobs.trainer.kubeflow.org",
             "appwrappers.workload.codeflare.dev", "jobs", "deployments.apps", "statefulsets.apps",
             "leaderworkersets.leaderworkerset.x-k8s.io", "pods")  # fmt: skip
QUEUE = "team-queue"
GPUS = 16
FLAVOR_LABELS = {"gpu-type": "h100"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
URGENT = "urgent"


def get_json(cluster: Cluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def apply(cluster: Cluster, *objects: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))


def create(cluster: Cluster, obj: dict[str, Any]) -> dict[str, Any]:
    """Create through the API server (and so kuota's webhooks); the object as stored."""
    created: dict[str, Any] = json.loads(
        cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(obj)).stdout
    )
    return created


def ensure_managed_namespace(cluster: Cluster) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("label", "namespace", name, f"{MANAGED_LABEL}=true")
    flavor, cluster_queue = f"{name}-h100", f"{name}-cq"
    apply(
        cluster,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": FLAVOR_LABELS, "tolerations": [GPU_TOLERATION]},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": flavor,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "512"},
                                    {"name": "memory", "nominalQuota": "4Ti"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": str(GPUS)},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": name},
            "spec": {"clusterQueue": cluster_queue},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": f"{name}-{URGENT}"},
            "value": 1000,
        },
    )
    return name


def clean_slate(cluster: Cluster, manager: ManagerProcess, namespace: str) -> None:
    """Every job of every kind and their Workloads gone (the manager releases the finalizers), then the queues."""
    manager.ensure_started()
    for kind in JOB_KINDS:
        cluster.kubectl("delete", kind, "--all", "-n", namespace, "--wait=false", check=False)
    wait_until(
        lambda: not get_json(cluster, "workloads", "-n", namespace)["items"],
        f"every Workload in {namespace} to be deleted",
        timeout=90,
    )
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    cluster.kubectl("delete", "clusterqueue", f"{namespace}-cq", "--ignore-not-found")
    cluster.kubectl("delete", "resourceflavor", f"{namespace}-h100", "--ignore-not-found")
    cluster.kubectl("delete", "workloadpriorityclass", f"{namespace}-{URGENT}", "--ignore-not-found")


def workload_of(cluster: Cluster, namespace: str, uid: str) -> dict[str, Any] | None:
    items = get_json(cluster, "workloads", "-n", namespace, "-l", f"kueue.x-k8s.io/job-uid={uid}")["items"]
    return items[0] if items else None


def admitted_workload(cluster: Cluster, namespace: str, uid: str, timeout: float = 90) -> dict[str, Any]:
    def admitted() -> dict[str, Any] | None:
        workload = workload_of(cluster, namespace, uid)
        return workload if workload and (workload.get("status") or {}).get("admission") else None

    return wait_until(admitted, f"the Workload of {namespace}/{uid} to be admitted", timeout=timeout)


def pods(cluster: Cluster, namespace: str, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(cluster, "pods", "-n", namespace, "-l", selector)["items"]
    return [pod for pod in items if not pod["metadata"].get("deletionTimestamp")]


def running_pods(
    cluster: Cluster, namespace: str, selector: str, count: int, timeout: float = 120
) -> list[dict[str, Any]]:
    def running() -> list[dict[str, Any]] | None:
        found = [pod for pod in pods(cluster, namespace, selector) if pod["status"].get("phase") == "Running"]
        return found if len(found) == count else None

    return wait_until(running, f"{count} Running pods in {namespace} ({selector})", timeout=timeout)


def no_pods(cluster: Cluster, namespace: str, selector: str, timeout: float = 120) -> None:
    wait_until(
        lambda: not get_json(cluster, "pods", "-n", namespace, "-l", selector)["items"],
        f"every pod in {namespace} ({selector}) to be gone",
        timeout=timeout,
    )


def assert_placed(pod: dict[str, Any]) -> None:
    """The pod carries the flavor: its nodeSelector and the GPU toleration, and it runs on an H100 node."""
    spec = pod["spec"]
    assert spec.get("nodeSelector", {}).items() >= FLAVOR_LABELS.items(), pod["metadata"]["name"]
    assert GPU_TOLERATION in (spec.get("tolerations") or []), pod["metadata"]["name"]
    assert spec.get("nodeName", "").startswith("h100"), pod["metadata"]["name"]


def urgent_job(namespace: str, name: str, pods_count: int, gpus_per_pod: int) -> dict[str, Any]:
    """A batch/v1 Job of the urgent priority that needs the GPUs a lower-priority job holds."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": QUEUE, "kueue.x-k8s.io/priority-class": f"{namespace}-{URGENT}"},
        },
        "spec": {
            "parallelism": pods_count,
            "completions": pods_count,
            "template": {"spec": gpu_pod_spec(gpus_per_pod)},
        },
    }


def gpu_pod_spec(gpus: int, restart_policy: str = "Never") -> dict[str, Any]:
    resources = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}
    return {
        "restartPolicy": restart_policy,
        "containers": [
            {"name": "main", "image": "trainer:1", "resources": {"requests": resources, "limits": resources}}
        ],
    }
