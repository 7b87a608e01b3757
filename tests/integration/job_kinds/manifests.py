"""The job objects of the job-kind tests, in the LocalQueue ``team-queue``: each kind's spec written out where the
kind's own webhook (not registered here) would default it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kuota.webhook.jobs.pod import GROUP_NAME_LABEL, GROUP_TOTAL_COUNT_ANNOTATION
from tests.cluster import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION
from tests.integration.job_kinds.queueing import QUEUE, gpu_pod_spec


def jobset(namespace: str, name: str, workers: int, gpus: int, run_seconds: int | None = None) -> dict[str, Any]:
    """A driver (one pod, no GPU) and ``workers`` Jobs of 2 pods with ``gpus`` each; the fields JobSet's own
    (unregistered) webhook would default written out."""
    annotations = {RUN_SECONDS_ANNOTATION: str(run_seconds)} if run_seconds is not None else {}

    def replicated(job_name: str, replicas: int, parallelism: int, gpus_per_pod: int) -> dict[str, Any]:
        template = {"metadata": {"annotations": annotations}, "spec": gpu_pod_spec(gpus_per_pod)}
        job_spec = {
            "parallelism": parallelism,
            "completions": parallelism,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": template,
        }
        return {"name": job_name, "replicas": replicas, "template": {"spec": job_spec}}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {
            "successPolicy": {"operator": "All"},
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
            "network": {"enableDNSHostnames": False},
            "replicatedJobs": [replicated("driver", 1, 1, 0), replicated("workers", workers, 2, gpus)],
        },
    }


OWNER_LABEL = "kuota.test/owner"  # on every pod template, so a test finds the pods of one Ray object


def _template(owner: str, gpus: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec = gpu_pod_spec(gpus, restart_policy="Always")
    return {"metadata": {"labels": {OWNER_LABEL: owner}, "annotations": annotations or {}}, "spec": spec}


def cluster_spec(owner: str, workers: int, gpus: int) -> dict[str, Any]:
    return {
        "rayVersion": "2.41.0",
        "headGroupSpec": {"rayStartParams": {}, "template": _template(owner, 0)},
        "workerGroupSpecs": [
            {
                "groupName": "gpu",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": _template(owner, gpus),
            }
        ],
    }


def rayjob(namespace: str, name: str, workers: int, gpus: int, submitter_fails: bool = False) -> dict[str, Any]:
    """A RayJob in K8sJobMode with a submitter template of its own (so the flavor places it too); a failing
    submitter (exit 1, no retry) is how a RayJob finishes here, where no Ray dashboard answers."""
    annotations = {RUN_SECONDS_ANNOTATION: "2", EXIT_CODE_ANNOTATION: "1"} if submitter_fails else {}
    submitter = _template(name, 0, annotations)
    submitter["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {
            "entrypoint": "python tune.py",
            "submissionMode": "K8sJobMode",
            "shutdownAfterJobFinishes": True,
            "submitterConfig": {"backoffLimit": 0},
            "submitterPodTemplate": submitter,
            "rayClusterSpec": cluster_spec(name, workers, gpus),
        },
    }


def raycluster(namespace: str, name: str, workers: int, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": cluster_spec(name, workers, gpus),
    }


def rayservice(namespace: str, name: str, workers: int, gpus: int) -> dict[str, Any]:
    """A RayService serving nothing: KubeRay makes its RayCluster, but without a Ray dashboard never marks it Ready."""
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {"rayClusterConfig": cluster_spec(name, workers, gpus)},
    }


def pytorchjob(namespace: str, name: str, workers: int, gpus: int, run_seconds: int | None = None) -> dict[str, Any]:
    annotations = {RUN_SECONDS_ANNOTATION: str(run_seconds)} if run_seconds is not None else {}

    def replica(replicas: int) -> dict[str, Any]:
        spec = gpu_pod_spec(gpus)
        spec["containers"][0]["name"] = "pytorch"  # the container the operator configures
        return {
            "replicas": replicas,
            "restartPolicy": "Never",
            "template": {"metadata": {"annotations": annotations}, "spec": spec},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(workers)}},
    }


@dataclass(frozen=True)
class KubeflowKind:
    """A training-operator kind as its CRD spells it: the field of its replica specs and the name of the container
    the operator configures."""

    kind: str
    replica_specs_field: str
    container: str


def kubeflow_job(namespace: str, kind: KubeflowKind, name: str, replicas: dict[str, int], gpus: int) -> dict[str, Any]:
    """A training-operator job with the given replica types and counts, ``gpus`` per pod."""
    spec = gpu_pod_spec(gpus)
    spec["containers"][0]["name"] = kind.container
    replica_specs = {
        replica_type: {"replicas": count, "restartPolicy": "Never", "template": {"spec": spec}}
        for replica_type, count in replicas.items()
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind.kind,
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {kind.replica_specs_field: replica_specs},
    }


def mpijob(namespace: str, name: str, workers: int, gpus: int, launcher: bool = True) -> dict[str, Any]:
    """An MPIJob (v2beta1): a launcher without GPUs (left out with ``launcher=False``) and ``workers`` of ``gpus``."""

    def replica(replicas: int, gpus_per_pod: int) -> dict[str, Any]:
        return {"replicas": replicas, "template": {"spec": gpu_pod_spec(gpus_per_pod)}}

    specs = (
        {"Launcher": replica(1, 0), "Worker": replica(workers, gpus)}
        if launcher
        else {"Worker": replica(workers, gpus)}
    )
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": specs},
    }


def cluster_training_runtime(name: str, gpus: int) -> dict[str, Any]:
    """A ClusterTrainingRuntime of one trainer step, ``node``, whose pods ask for ``gpus`` each; its JobSet's fields
    written out where JobSet's own (unregistered) webhook would default them."""
    spec = gpu_pod_spec(gpus)
    spec["containers"][0]["name"] = "node"  # the trainer step's container, as the trainer names it
    node = {
        "name": "node",
        "replicas": 1,
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"completionMode": "Indexed", "backoffLimit": 0, "template": {"spec": spec}},
        },
    }
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": 1},
            "template": {
                "spec": {
                    "successPolicy": {"operator": "All"},
                    "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
                    "network": {"enableDNSHostnames": False},
                    "replicatedJobs": [node],
                }
            },
        },
    }


def trainjob(namespace: str, name: str, runtime: str, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": nodes}},
    }


def appwrapper(namespace: str, name: str, pods: int, gpus: int) -> dict[str, Any]:
    """An AppWrapper of one component, a Job of ``pods`` pods of ``gpus`` each, its pod set declared (the
    AppWrapper webhook that would infer it is not registered)."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{name}-job"},
        "spec": {"parallelism": pods, "completions": pods, "template": {"spec": gpu_pod_spec(gpus)}},
    }
    component = {"podSets": [{"path": "template.spec.template", "replicas": pods}], "template": job}
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": QUEUE}},
        "spec": {"components": [component]},
    }


def pod_group(namespace: str, group: str, workers: int, gpus: int) -> list[dict[str, Any]]:
    """A pod group (Kueue's ``pod`` integration): a driver pod without GPUs and ``workers`` pods of ``gpus``
    each, all labelled with the group's name and annotated with its size; two shapes, so two roles."""
    size = workers + 1

    def member(name: str, gpus_per_pod: int) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"kueue.x-k8s.io/queue-name": QUEUE, GROUP_NAME_LABEL: group},
                "annotations": {GROUP_TOTAL_COUNT_ANNOTATION: str(size)},
            },
            "spec": gpu_pod_spec(gpus_per_pod),
        }

    return [member(f"{group}-driver", 0), *(member(f"{group}-worker-{index}", gpus) for index in range(workers))]
