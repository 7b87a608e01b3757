"""Kubeflow training-operator v1 PyTorchJob (``kubeflow.org/v1``, framework ``kubeflow.org/pytorchjob``) behind
the job adapter interface.

As Kueue has it: one pod set per replica type present, in the order ``Master``, ``Worker``, named lower-case
(``master``, ``worker``), whose count is the type's ``replicas`` (default 1); ``spec.runPolicy.suspend`` holds
it back (the training-operator deletes the pods). Finished when the ``Succeeded`` or ``Failed`` condition is True.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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

REPLICA_TYPES = ("Master", "Worker")
_REPLICA_SPECS = "pytorchReplicaSpecs"


def _replica_specs(job: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    specs = (job.get("spec") or {}).get(_REPLICA_SPECS) or {}
    return [(replica_type, specs[replica_type]) for replica_type in REPLICA_TYPES if specs.get(replica_type)]


class PyTorchJobAdapter(SuspendFieldAdapter):
    framework = "kubeflow.org/pytorchjob"
    kind = GroupVersionKind("kubeflow.org", "v1", "PyTorchJob")
    plural = "pytorchjobs"
    suspend_path = ("spec", "runPolicy", "suspend")

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        return [
            PodSet(replica_type.lower(), int(spec.get("replicas", 1)), spec.get("template") or {})
            for replica_type, spec in _replica_specs(job)
        ]

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        metadata = job["metadata"]
        placed = by_name(placements)
        original = {pod_set.name: pod_set.template for pod_set in originals}
        replicas: dict[str, Any] = {}
        for replica_type, spec in _replica_specs(job):
            name = replica_type.lower()
            where = f"PyTorchJob {metadata['namespace']}/{metadata['name']} ({replica_type})"
            template = placed_template(where, original.get(name, spec.get("template") or {}), placed.get(name))
            replicas[replica_type] = {"template": template}
        return {"spec": {"runPolicy": {"suspend": False}, _REPLICA_SPECS: replicas}}

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        original = {pod_set.name: pod_set.template for pod_set in originals}
        replicas: dict[str, Any] = {}
        for replica_type, spec in _replica_specs(job):
            wanted = original.get(replica_type.lower())
            restored = None if wanted is None else restored_template(spec.get("template") or {}, wanted)
            if restored is not None:
                replicas[replica_type] = {"template": restored}
        return {"spec": {_REPLICA_SPECS: replicas}} if replicas else None

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


ADAPTER = PyTorchJobAdapter()
