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


def rayservice(name: str = "serve") -> dict[str, Any]:
    spec = {"serveConfigV2": "applications: []", "rayClusterConfig": {"suspend": True, **ray_cluster_spec()}}
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": metadata(name), "spec": spec}


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


def kubeflow_job(kind: str, replica_specs_field: str, replicas: dict[str, int | None], name: str) -> dict[str, Any]:
    """A training-operator job, suspended, with the given replica types (``None``: ``replicas`` left out)."""
    specs = {
        replica_type: {"template": pod_template(8)}
        if count is None
        else {"replicas": count, "template": pod_template(8)}
        for replica_type, count in replicas.items()
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": metadata(name),
        "spec": {"runPolicy": {"suspend": True}, replica_specs_field: specs},
    }


def pytorchjob(name: str = "ddp") -> dict[str, Any]:
    return kubeflow_job("PyTorchJob", "pytorchReplicaSpecs", {"Worker": 3, "Master": None}, name)


def tfjob(name: str = "mnist") -> dict[str, Any]:
    return kubeflow_job("TFJob", "tfReplicaSpecs", {"Evaluator": 1, "Worker": 4, "PS": 2, "Chief": None}, name)


def xgboostjob(name: str = "boost") -> dict[str, Any]:
    return kubeflow_job("XGBoostJob", "xgbReplicaSpecs", {"Worker": 2, "Master": 1}, name)


def paddlejob(name: str = "paddle") -> dict[str, Any]:
    return kubeflow_job("PaddleJob", "paddleReplicaSpecs", {"Worker": 2, "Master": 1}, name)


def jaxjob(name: str = "jax") -> dict[str, Any]:
    return kubeflow_job("JAXJob", "jaxReplicaSpecs", {"Worker": 4}, name)


def mpijob(name: str = "allreduce") -> dict[str, Any]:
    job = kubeflow_job("MPIJob", "mpiReplicaSpecs", {"Worker": 4, "Launcher": None}, name)
    job["apiVersion"] = "kubeflow.org/v2beta1"
    return job


def training_runtime(name: str = "torch-distributed", num_nodes: int = 2) -> dict[str, Any]:
    """A ClusterTrainingRuntime: a dataset initializer (one pod) and the trainer step ``node``."""

    def replicated(job_name: str, ancestor: str, gpus: int) -> dict[str, Any]:
        template = pod_template(gpus)
        template["spec"]["containers"][0]["name"] = "node" if ancestor == "trainer" else job_name
        return {
            "name": job_name,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}},
                "spec": {"template": template},
            },
        }

    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "mlPolicy": {"numNodes": num_nodes, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        replicated("dataset-initializer", "dataset-initializer", 0),
                        replicated("node", "trainer", 8),
                    ]
                }
            },
        },
    }


def trainjob(name: str = "finetune", num_nodes: int | None = None) -> dict[str, Any]:
    trainer: dict[str, Any] = {} if num_nodes is None else {"numNodes": num_nodes}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": metadata(name),
        "spec": {
            "suspend": True,
            "runtimeRef": {
                "name": "torch-distributed",
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
            },
            "trainer": trainer,
        },
    }


def appwrapper(name: str = "wrapped") -> dict[str, Any]:
    """Two components: a Job of 4 pods and a JobSet whose second replicated job is the declared pod set."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 4, "template": pod_template(8)}}
    driver = {"name": "driver", "template": {"spec": {"template": pod_template(0)}}}
    workers = {"name": "workers", "template": {"spec": {"template": pod_template(2)}}}
    replicated = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "spec": {"replicatedJobs": [driver, workers]},
    }
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": metadata(name),
        "spec": {
            "suspend": True,
            "components": [
                {"podSets": [{"path": "template.spec.template", "replicas": 4}], "template": job},
                {
                    "podSets": [
                        {"path": "template.spec.replicatedJobs[0].template.spec.template"},
                        {"path": "template.spec.replicatedJobs[1].template.spec.template", "replicas": 3},
                    ],
                    "template": replicated,
                },
            ],
        },
    }
