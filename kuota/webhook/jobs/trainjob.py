"""Kubeflow Trainer v2 TrainJob (``trainer.kubeflow.org/v1alpha1``, framework ``trainer.kubeflow.org/trainjob``)
behind the job adapter interface.

A TrainJob's pods are the JobSet its runtime describes: the TrainingRuntime (in its namespace) or
ClusterTrainingRuntime that ``spec.runtimeRef`` names. So, as Kueue has it, its pod sets are that JobSet's: one per
replicated job of the runtime's template, named after it, of ``replicas`` times the pods of each Job, where the
trainer step (the replicated job labelled ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``) runs
``spec.trainer.numNodes`` pods (else the runtime's ``mlPolicy.numNodes``, default 1) and its ``node`` container
asks for ``spec.trainer.resourcesPerNode`` when the TrainJob sets it. The controller reads the runtime
(:meth:`TrainJobAdapter.reference`) and puts it beside the job (:meth:`TrainJobAdapter.with_referenced`); a
TrainJob whose runtime does not exist makes no Workload (:class:`~kuota.webhook.controller.errors.InvalidJobError`).
The runtime's other plugins (initializer overrides, environment) change no pod's count or requests and are left
out.

``spec.suspend`` holds it back (the trainer suspends its JobSet). An admission is written as Kueue writes it: the
``spec.runtimePatches`` entry of manager ``kueue.x-k8s.io/manager`` gets each pod set's nodeSelector and
tolerations, which the trainer merges into the JobSet's templates as it resumes it; a restore empties that entry.
Finished with the ``Complete`` or ``Failed`` condition; its pods are ready when every child Job is.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from kuota.webhook.controller.errors import InvalidJobError
from kuota.webhook.jobs.adapter import (
    Finished,
    GroupVersionKind,
    ObjectReference,
    PodSet,
    PodSetPlacement,
    SuspendFieldAdapter,
    by_name,
    placed_template,
)
from kuota.webhook.jobs.jobset import pods_per_job

GROUP = "trainer.kubeflow.org"
RUNTIME_VERSION = "v1alpha1"
CLUSTER_RUNTIME_KIND = "ClusterTrainingRuntime"
PATCH_MANAGER = "kueue.x-k8s.io/manager"  # Kueue's, so the trainer and users' tools read kuota's patch as Kueue's
_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
_TRAINER_STEP = "trainer"
_NODE_CONTAINER = "node"
# Where the controller puts the runtime it read beside the job; never written to the API server.
_RUNTIME_KEY = "kuota.runtime"


def _missing_runtime(job: Mapping[str, Any]) -> InvalidJobError:
    metadata = job.get("metadata") or {}
    reference = (job.get("spec") or {}).get("runtimeRef") or {}
    kind = reference.get("kind", CLUSTER_RUNTIME_KIND)
    where = "" if kind == CLUSTER_RUNTIME_KIND else f" in namespace {metadata.get('namespace', '')}"
    return InvalidJobError(
        f"TrainJob {metadata.get('namespace', '')}/{metadata.get('name', '')} names {kind} "
        f'"{reference.get("name", "")}", which does not exist{where}: create it or fix spec.runtimeRef'
    )


def _trainer_step(replicated: Mapping[str, Any]) -> bool:
    labels = ((replicated.get("template") or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(_ANCESTOR_LABEL) == _TRAINER_STEP


class TrainJobAdapter(SuspendFieldAdapter):
    framework = "trainer.kubeflow.org/trainjob"
    kind = GroupVersionKind(GROUP, "v1alpha1", "TrainJob")
    plural = "trainjobs"
    reads = ("trainingruntimes", "clustertrainingruntimes")

    def reference(self, job: Mapping[str, Any]) -> ObjectReference:
        """The TrainingRuntime (in the job's namespace) or ClusterTrainingRuntime ``spec.runtimeRef`` names."""
        reference = (job.get("spec") or {}).get("runtimeRef") or {}
        name = str(reference.get("name", ""))
        if reference.get("kind", CLUSTER_RUNTIME_KIND) == CLUSTER_RUNTIME_KIND:
            return ObjectReference(GROUP, RUNTIME_VERSION, "clustertrainingruntimes", None, name)
        namespace = str((job.get("metadata") or {}).get("namespace", ""))
        return ObjectReference(GROUP, RUNTIME_VERSION, "trainingruntimes", namespace, name)

    def with_referenced(self, job: Mapping[str, Any], referenced: Mapping[str, Any] | None) -> dict[str, Any]:
        return {**job, _RUNTIME_KEY: referenced}

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        runtime = job.get(_RUNTIME_KEY)
        if runtime is None:
            raise _missing_runtime(job)
        runtime_spec = runtime.get("spec") or {}
        trainer = (job.get("spec") or {}).get("trainer") or {}
        pod_sets = []
        for replicated in ((runtime_spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
            job_spec = dict((replicated.get("template") or {}).get("spec") or {})
            template = copy.deepcopy(dict(job_spec.get("template") or {}))
            if _trainer_step(replicated):
                nodes = trainer.get("numNodes", (runtime_spec.get("mlPolicy") or {}).get("numNodes", 1))
                job_spec["parallelism"] = job_spec["completions"] = int(nodes)
                if trainer.get("resourcesPerNode") is not None:
                    for container in (template.get("spec") or {}).get("containers") or []:
                        if container.get("name") == _NODE_CONTAINER:
                            container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
            replicas = int(replicated.get("replicas", 1))
            count = replicas * pods_per_job({"template": {"spec": job_spec}})
            pod_sets.append(PodSet(str(replicated["name"]).lower(), count, template))
        return pod_sets

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        metadata = job["metadata"]
        original = {pod_set.name: pod_set.template for pod_set in originals}
        placed = by_name(placements)
        replicated_jobs = []
        for name, template in original.items():
            where = f"TrainJob {metadata['namespace']}/{metadata['name']} (replicated job {name})"
            pod_template = placed_template(where, template, placed.get(name))
            pod_template["spec"] = {key: value for key, value in pod_template["spec"].items() if value is not None}
            replicated_jobs.append({"name": name, "template": {"spec": {"template": pod_template}}})
        return {"spec": {"suspend": False, "runtimePatches": self._with_own_patch(job, replicated_jobs)}}

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        own = next((p for p in _runtime_patches(job) if p.get("manager") == PATCH_MANAGER), None)
        template = ((own or {}).get("trainingRuntimeSpec") or {}).get("template") or {}
        if not (template.get("spec") or {}).get("replicatedJobs"):
            return None
        return {"spec": {"runtimePatches": self._with_own_patch(job, [])}}

    @staticmethod
    def _with_own_patch(job: Mapping[str, Any], replicated_jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The job's runtime patches (a merge patch sends the list whole) with kuota's entry set to place
        ``replicated_jobs`` (none: the runtime's templates as they are)."""
        own = {
            "manager": PATCH_MANAGER,
            "trainingRuntimeSpec": {
                "template": {"spec": {"replicatedJobs": replicated_jobs} if replicated_jobs else {}}
            },
        }
        others = [dict(p) for p in _runtime_patches(job) if p.get("manager") != PATCH_MANAGER]
        return [*others, own]

    def has_active_pods(self, job: Mapping[str, Any]) -> bool:
        statuses = (job.get("status") or {}).get("jobsStatus") or []
        return any(int(s.get("active") or 0) + int(s.get("ready") or 0) > 0 for s in statuses)

    def finished(self, job: Mapping[str, Any]) -> Finished | None:
        for condition in (job.get("status") or {}).get("conditions") or []:
            if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
                message = str(condition.get("message") or condition.get("reason") or "")
                return Finished(condition["type"] == "Complete", message)
        return None

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        """Every child Job ready or succeeded (Kueue's PodsReady for a TrainJob)."""
        statuses = (job.get("status") or {}).get("jobsStatus") or []
        return bool(statuses) and all(
            int(s.get("ready") or 0) + int(s.get("succeeded") or 0) > 0
            and int(s.get("active") or 0) + int(s.get("failed") or 0) + int(s.get("suspended") or 0) == 0
            for s in statuses
        )


def _runtime_patches(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((job.get("spec") or {}).get("runtimePatches") or [])


ADAPTER = TrainJobAdapter()
