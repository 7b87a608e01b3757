"""Kubeflow jobs, one adapter class behind the job adapter interface: the training-operator's (``kubeflow.org/v1``)
PyTorchJob, TFJob, XGBoostJob, PaddleJob and JAXJob, as Kueue's kubeflowjob package has them, and the
mpi-operator's MPIJob (``kubeflow.org/v2beta1``), as Kueue's mpijob package has it.

Each kind keeps its replicas in a map of its own (``pytorchReplicaSpecs``, ``tfReplicaSpecs``, ...), keyed by
replica type. The Workload has one pod set per replica type present, in the kind's order (Kueue's
``OrderedReplicaTypes``: TFJob ``Chief``, ``Master``, ``PS``, ``Worker``, ``Evaluator``; PyTorchJob, XGBoostJob and
PaddleJob ``Master``, ``Worker``; JAXJob ``Worker``; MPIJob ``Launcher``, ``Worker``), named lower-case, whose
count is the type's ``replicas`` (default 1). ``spec.runPolicy.suspend`` holds a job back (the operator deletes its
pods). Finished when the ``Succeeded`` or ``Failed`` condition is True; its pods are ready once the ``Running``
condition is True.

An MPIJob without a ``Launcher`` makes no Workload (:class:`~kuota.webhook.controller.errors.InvalidJobError`):
the mpi-operator never runs one, so admitting its workers would hold their quota for nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kuota.webhook.controller.errors import InvalidJobError
from kuota.webhook.jobs.adapter import (
    Finished,
    GroupVersionKind,
    PodSet,
    PodSetPlacement,
    SuspendFieldAdapter,
    by_name,
    placed_template,
    restored_template,
)

_GROUP = "kubeflow.org"


class KubeflowJobAdapter(SuspendFieldAdapter):
    """One Kubeflow kind: its name and version, the field of its replica specs, its replica types in order, and
    the replica type it cannot run without (if any)."""

    suspend_path = ("spec", "runPolicy", "suspend")

    def __init__(
        self,
        kind: str,
        replica_specs_field: str,
        replica_types: Sequence[str],
        version: str = "v1",
        required: str | None = None,
    ) -> None:
        self.kind = GroupVersionKind(_GROUP, version, kind)
        self.framework = f"{_GROUP}/{kind.lower()}"
        self.plural = f"{kind.lower()}s"
        self.replica_specs_field = replica_specs_field
        self.replica_types = tuple(replica_types)
        self.required = required

    def _replica_specs(self, job: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
        specs = (job.get("spec") or {}).get(self.replica_specs_field) or {}
        return [(replica_type, specs[replica_type]) for replica_type in self.replica_types if specs.get(replica_type)]

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        specs = (job.get("spec") or {}).get(self.replica_specs_field) or {}
        if self.required is not None and not specs.get(self.required):
            metadata = job.get("metadata") or {}
            raise InvalidJobError(
                f"{self.kind.kind} {metadata.get('namespace', '')}/{metadata.get('name', '')} has no {self.required} "
                f"in spec.{self.replica_specs_field}: the operator never runs it without one; add "
                f"spec.{self.replica_specs_field}.{self.required}"
            )
        return [
            PodSet(replica_type.lower(), int(spec.get("replicas", 1)), spec.get("template") or {})
            for replica_type, spec in self._replica_specs(job)
        ]

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        metadata = job["metadata"]
        placed = by_name(placements)
        original = {pod_set.name: pod_set.template for pod_set in originals}
        replicas: dict[str, Any] = {}
        for replica_type, spec in self._replica_specs(job):
            name = replica_type.lower()
            where = f"{self.kind.kind} {metadata['namespace']}/{metadata['name']} ({replica_type})"
            template = placed_template(where, original.get(name, spec.get("template") or {}), placed.get(name))
            replicas[replica_type] = {"template": template}
        return {"spec": {"runPolicy": {"suspend": False}, self.replica_specs_field: replicas}}

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        original = {pod_set.name: pod_set.template for pod_set in originals}
        replicas: dict[str, Any] = {}
        for replica_type, spec in self._replica_specs(job):
            wanted = original.get(replica_type.lower())
            restored = None if wanted is None else restored_template(spec.get("template") or {}, wanted)
            if restored is not None:
                replicas[replica_type] = {"template": restored}
        return {"spec": {self.replica_specs_field: replicas}} if replicas else None

    def has_active_pods(self, job: Mapping[str, Any]) -> bool:
        statuses = (job.get("status") or {}).get("replicaStatuses") or {}
        return any(int((status or {}).get("active") or 0) > 0 for status in statuses.values())

    def finished(self, job: Mapping[str, Any]) -> Finished | None:
        for condition in (job.get("status") or {}).get("conditions") or []:
            if condition.get("type") in ("Succeeded", "Failed") and condition.get("status") == "True":
                message = str(condition.get("message") or condition.get("reason") or "")
                return Finished(condition["type"] == "Succeeded", message)
        return None

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        """The ``Running`` condition True (Kueue's PodsReady for Kubeflow jobs)."""
        conditions = (job.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Running" and c.get("status") == "True" for c in conditions)


PYTORCHJOB = KubeflowJobAdapter("PyTorchJob", "pytorchReplicaSpecs", ("Master", "Worker"))
TFJOB = KubeflowJobAdapter("TFJob", "tfReplicaSpecs", ("Chief", "Master", "PS", "Worker", "Evaluator"))
XGBOOSTJOB = KubeflowJobAdapter("XGBoostJob", "xgbReplicaSpecs", ("Master", "Worker"))
PADDLEJOB = KubeflowJobAdapter("PaddleJob", "paddleReplicaSpecs", ("Master", "Worker"))
JAXJOB = KubeflowJobAdapter("JAXJob", "jaxReplicaSpecs", ("Worker",))
MPIJOB = KubeflowJobAdapter("MPIJob", "mpiReplicaSpecs", ("Launcher", "Worker"), version="v2beta1", required="Launcher")
ADAPTERS = (PYTORCHJOB, TFJOB, XGBOOSTJOB, PADDLEJOB, JAXJOB, MPIJOB)
