"""The adapters by Kueue's framework name and by GroupVersionKind, and the enabled set (pure).

``integrations.frameworks`` of a Kueue Configuration names the integrations to enable; kuota implements the
ones in :data:`ADAPTERS` (plus ``pod``, the plain Pods and pod groups of :mod:`~kuota.webhook.jobs.pod`, which
are not suspended but gated, and the pod parents of :mod:`~kuota.webhook.jobs.pod_parents`, Deployment and
StatefulSet, whose pods are gated for them). A name Kueue knows but kuota does not implement is reported and
skipped (a Kueue Configuration applies unchanged); a name nobody knows is an error.

Adding a kind: write its module (one :class:`~kuota.webhook.jobs.adapter.JobAdapter` instance, ``ADAPTER``) and
list it in :data:`ADAPTERS`; the webhook rules, RBAC rules and the controller's watches follow from the list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuota.webhook.jobs import appwrapper, batch_job, jobset, kubeflow, raycluster, rayjob, rayservice, trainjob
from kuota.webhook.jobs.adapter import GroupVersionKind, JobAdapter, ReferencingAdapter, controller_owner
from kuota.webhook.jobs.pod_parents import PARENTS, PodParent

POD_FRAMEWORK = "pod"
BUILT_IN_GROUPS = frozenset({"", "batch"})  # served by the API server itself: no CRD to wait for
DEFAULT_FRAMEWORKS = (batch_job.ADAPTER.framework,)

ADAPTERS: tuple[JobAdapter, ...] = (
    batch_job.ADAPTER,
    jobset.ADAPTER,
    rayjob.ADAPTER,
    raycluster.ADAPTER,
    rayservice.ADAPTER,
    *kubeflow.ADAPTERS,
    trainjob.ADAPTER,
    appwrapper.ADAPTER,
)

# Kueue's integration names (its Configuration API's integrations.frameworks), whether kuota implements them or not.
KUEUE_FRAMEWORKS = frozenset(
    {
        "batch/job",
        "pod",
        "deployment",
        "statefulset",
        "leaderworkerset.x-k8s.io/leaderworkerset",
        "jobset.x-k8s.io/jobset",
        "kubeflow.org/mpijob",
        "kubeflow.org/paddlejob",
        "kubeflow.org/pytorchjob",
        "kubeflow.org/tfjob",
        "kubeflow.org/xgboostjob",
        "kubeflow.org/jaxjob",
        "trainer.kubeflow.org/trainjob",
        "ray.io/rayjob",
        "ray.io/raycluster",
        "ray.io/rayservice",
        "workload.codeflare.dev/appwrapper",
        "sparkoperator.k8s.io/sparkapplication",
    }
)


@dataclass(frozen=True)
class Registry:
    """The enabled integrations: ``adapters`` (suspendable kinds), whether plain Pods are managed, and the pod
    parents (Deployment, StatefulSet) whose marked pods are gated even when plain Pods are not managed."""

    adapters: tuple[JobAdapter, ...]
    pods: bool = False
    pod_parents: tuple[PodParent, ...] = ()

    @property
    def frameworks(self) -> tuple[str, ...]:
        names = tuple(adapter.framework for adapter in self.adapters)
        parents = tuple(parent.framework for parent in self.pod_parents)
        return (*names, *parents, POD_FRAMEWORK) if self.pods else (*names, *parents)

    @property
    def gates_pods(self) -> bool:
        """Whether the Pod webhook and the managed pods' watch are needed (Kueue's implicitly enabled ``pod``)."""
        return self.pods or bool(self.pod_parents)

    def pod_parent(self, framework: str | None) -> PodParent | None:
        """The enabled pod parent named by a pod's ``kueue.x-k8s.io/pod-suspending-parent`` annotation."""
        return next((parent for parent in self.pod_parents if parent.framework == framework), None)

    def by_kind(self, kind: GroupVersionKind) -> JobAdapter | None:
        return next((adapter for adapter in self.adapters if adapter.kind == kind), None)

    def by_group_kind(self, group: str, kind: str) -> JobAdapter | None:
        """The adapter for any served version of ``group``/``kind`` (owner references name one version)."""
        return next((a for a in self.adapters if a.kind.group == group and a.kind.kind == kind), None)

    def rbac_rules(self) -> list[dict[str, list[str]]]:
        """The manager's ClusterRole rules for the enabled kinds (the chart renders the same): watch, suspend and
        start each kind; pods are also deleted (eviction) and their finalizer released. (The CRDs' names, watched
        for a kind whose CRD comes later, are the manager's own rule: it watches them for ProvisioningRequests.)"""
        rules = [
            {"apiGroups": [a.kind.group], "resources": [a.plural], "verbs": ["get", "list", "watch", "update", "patch"]}
            for a in self.adapters
        ]
        # What a kind's pod sets are made from (a TrainJob's runtime) is read when its Workload is made, and
        # watched, so a job naming one that comes later gets its Workload then.
        rules += [
            {"apiGroups": [a.kind.group], "resources": list(a.reads), "verbs": ["get", "list", "watch"]}
            for a in self.adapters
            if isinstance(a, ReferencingAdapter)
        ]
        rules += [
            {"apiGroups": [p.kind.group], "resources": [p.plural], "verbs": ["get", "list", "watch"]}
            for p in self.pod_parents
        ]
        if self.gates_pods:
            verbs = ["get", "list", "watch", "update", "patch", "delete"]
            rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": verbs})
        return rules

    def managed_owner(self, obj: Mapping[str, Any]) -> bool:
        """Whether the object's controller owner is of an enabled kind: then the owner is queued, not the object
        (a JobSet's Jobs, a RayCluster's Pods, a Job's Pods)."""
        owner = controller_owner(obj)
        return owner is not None and self.by_group_kind(owner.group, owner.kind) is not None


@dataclass(frozen=True)
class Selection:
    registry: Registry
    unimplemented: tuple[str, ...]  # Kueue's names kuota does not implement (skipped, reported)
    unknown: tuple[str, ...]  # names nobody knows (an error)


def select(frameworks: Iterable[str], adapters: Sequence[JobAdapter] = ADAPTERS) -> Selection:
    """The registry of the named integrations."""
    wanted = list(dict.fromkeys(frameworks))
    implemented = {adapter.framework for adapter in adapters} | {parent.framework for parent in PARENTS}
    # Sorted by framework name: the webhook configurations and RBAC rules (and the chart's) list kinds in this order.
    enabled = tuple(sorted((a for a in adapters if a.framework in wanted), key=lambda adapter: adapter.framework))
    unimplemented = tuple(
        name for name in wanted if name in KUEUE_FRAMEWORKS and name not in implemented and name != POD_FRAMEWORK
    )
    unknown = tuple(name for name in wanted if name not in KUEUE_FRAMEWORKS and name not in implemented)
    parents = tuple(parent for parent in PARENTS if parent.framework in wanted)
    return Selection(Registry(enabled, POD_FRAMEWORK in wanted, parents), unimplemented, unknown)


DEFAULT_REGISTRY = select(DEFAULT_FRAMEWORKS).registry
