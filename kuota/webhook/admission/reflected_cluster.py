""":class:`~kuota.webhook.admission.cluster_facts.ClusterFacts` answered from list+watch caches.

Each cache keeps only the few fields the webhook reads, so 10,000 Workloads cost little memory; the
controller may hand in reflectors it already runs (the parse functions are public for that).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kuota.kube.client import KubeApi
from kuota.kube.reflector import Event, EventType, Reflector, ReflectorSet, ResourceType

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

LOCAL_QUEUES = ResourceType("kueue.x-k8s.io", "v1beta2", "localqueues", namespaced=True)
PRIORITY_CLASSES = ResourceType("kueue.x-k8s.io", "v1beta2", "workloadpriorityclasses", namespaced=False)
WORKLOADS = ResourceType("kueue.x-k8s.io", "v1beta2", "workloads", namespaced=True)
NAMESPACES = ResourceType("", "v1", "namespaces", namespaced=False)


@dataclass(frozen=True, slots=True)
class ObjectName:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class WorkloadAdmission:
    namespace: str
    name: str
    job_uid: str
    holds_quota: bool


@dataclass(frozen=True, slots=True)
class NamespaceLabels:
    name: str
    labels: Mapping[str, str]


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def parse_object_name(obj: Mapping[str, Any]) -> ObjectName:
    metadata = _metadata(obj)
    return ObjectName(namespace=str(metadata.get("namespace", "")), name=str(metadata.get("name", "")))


def _condition_true(status: Mapping[str, Any], condition_type: str) -> bool:
    conditions = status.get("conditions") or []
    return any(
        isinstance(condition, dict) and condition.get("type") == condition_type and condition.get("status") == "True"
        for condition in conditions
    )


def parse_workload_admission(obj: Mapping[str, Any]) -> WorkloadAdmission:
    metadata = _metadata(obj)
    labels = metadata.get("labels") or {}
    status = obj.get("status") or {}
    holds_quota = bool(status.get("admission")) and (
        _condition_true(status, "QuotaReserved") or _condition_true(status, "Admitted")
    )
    return WorkloadAdmission(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        job_uid=str(labels.get(JOB_UID_LABEL, "")),
        holds_quota=holds_quota and not _condition_true(status, "Finished"),
    )


def parse_namespace_labels(obj: Mapping[str, Any]) -> NamespaceLabels:
    metadata = _metadata(obj)
    labels = metadata.get("labels") or {}
    return NamespaceLabels(name=str(metadata.get("name", "")), labels=dict(labels))


class ReflectedClusterFacts:
    """Answers the Job rules' questions from four caches; ``synced()`` once all four have listed."""

    def __init__(
        self,
        local_queues: Reflector[ObjectName],
        priority_classes: Reflector[ObjectName],
        workloads: Reflector[WorkloadAdmission],
        namespaces: Reflector[NamespaceLabels],
    ) -> None:
        self.local_queues = local_queues
        self.priority_classes = priority_classes
        self.workloads = workloads
        self.namespaces = namespaces
        self.reflectors = ReflectorSet([local_queues, priority_classes, workloads, namespaces])
        # (namespace, job uid) -> workload key: a review must not scan every Workload.
        self._by_job: dict[tuple[str, str], str] = {}
        workloads.subscribe(self._index_workload)

    @classmethod
    def from_api(cls, api: KubeApi) -> ReflectedClusterFacts:
        return cls(
            Reflector(api, LOCAL_QUEUES, parse_object_name),
            Reflector(api, PRIORITY_CLASSES, parse_object_name),
            Reflector(api, WORKLOADS, parse_workload_admission),
            Reflector(api, NAMESPACES, parse_namespace_labels),
        )

    def _index_workload(self, event: Event[WorkloadAdmission]) -> None:
        workload = event.value
        if not workload.job_uid:
            return
        index = (workload.namespace, workload.job_uid)
        if event.type is EventType.DELETED:
            if self._by_job.get(index) == event.key:
                del self._by_job[index]
        else:
            self._by_job[index] = event.key

    def synced(self) -> bool:
        return self.reflectors.synced()

    def local_queue_exists(self, namespace: str, name: str) -> bool:
        return self.local_queues.get(f"{namespace}/{name}") is not None

    def priority_class_exists(self, name: str) -> bool:
        return self.priority_classes.get(name) is not None

    def job_workload_admitted(self, namespace: str, job_uid: str) -> bool:
        key = self._by_job.get((namespace, job_uid))
        workload = self.workloads.get(key) if key is not None else None
        return workload is not None and workload.holds_quota

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        cached = self.namespaces.get(namespace)
        # The API server sets this label on every namespace; a namespace newer than our cache still has it.
        labels = dict(cached.labels) if cached is not None else {}
        labels.setdefault(NAMESPACE_NAME_LABEL, namespace)
        return labels

    async def run(self) -> None:
        await self.reflectors.run()
