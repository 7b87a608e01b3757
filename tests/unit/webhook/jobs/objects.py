"""Job objects of the upstream kinds, as the API server returns them, for the adapters' unit tests."""

from __future__ import annotations

from typing import Any

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def pod_template(gpus: int, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "trainer:1", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}
        ],
        "restartPolicy": "Never",
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"metadata": {"labels": {"app": "train"}}, "spec": spec}


def metadata(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": "research", "uid": "6f1e3c2a-0000-4000-8000-000000000001", "labels": {}}


def batch_job(name: str = "finetune") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(name),
        "spec": {"suspend": True, "parallelism": 2, "completions": 2, "template": pod_template(8, {"zone": "a"})},
    }


def jobset(name: str = "train") -> dict[str, Any]:
    def replicated(
        job_name: str, replicas: int, parallelism: int, completions: int | None, gpus: int
    ) -> dict[str, Any]:
        job_spec: dict[str, Any] = {"parallelism": parallelism, "template": pod_template(gpus)}
        if completions is not None:
            job_spec["completions"] = completions
        return {"name": job_name, "replicas": replicas, "template": {"spec": job_spec}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata(name),
        "spec": {
            "suspend": True,
            "replicatedJobs": [replicated("Driver", 1, 1, None, 0), replicated("workers", 3, 4, 2, 8)],
        },
    }


def ray_cluster_spec(head_gpus: int = 0) -> dict[str, Any]:
    return {
        "headGroupSpec": {"rayStartParams": {}, "template": pod_template(head_gpus)},
        "workerGroupSpecs": [
            {"groupName": "GPU-Workers", "replicas": 2, "numOfHosts": 2, "template": pod_template(8)},
            {"groupName": "cpu", "template": pod_template(0)},
        ],
    }


def raycluster(name: str = "cluster") -> dict[str, Any]:
    spec = {"suspend": True, **ray_cluster_spec()}
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": metadata(name), "spec": spec}


def rayjob(name: str = "tune", submitter: dict[str, Any] | None = None, mode: str = "K8sJobMode") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "suspend": True,
        "entrypoint": "python tune.py",
        "submissionMode": mode,
        "rayClusterSpec": ray_cluster_spec(),
    }
    if submitter is not None:
        spec["submitterPodTemplate"] = submitter
    return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": metadata(name), "spec": spec}


def pytorchjob(name: str = "ddp") -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": metadata(name),
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Worker": {"replicas": 3, "template": pod_template(8)},
                "Master": {"template": pod_template(8)},
            },
        },
    }
