"""Nothing labelled slips through: an object that carries the queue-name label but whose kind kuota does not
manage is admitted with a warning naming the kind (``/warn-unmanaged``, a catch-all rule whose objectSelector
picks labelled objects only; its failurePolicy is Ignore, as a warning is all it can add).

Not warned: the managed kinds; kuota's and Kueue's own objects; an object whose controller owner is of a
managed kind (its owner is queued); a CronJob whose ``spec.jobTemplate`` carries the label too (its Jobs are).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kuota.webhook.admission.job_policy import QUEUE_NAME_LABEL, JobPolicy
from kuota.webhook.admission.reviews import AdmissionRequest, Verdict
from kuota.webhook.jobs.adapter import GroupVersionKind
from kuota.webhook.jobs.pod import POD_KIND

WARN_UNMANAGED_PATH = "/warn-unmanaged"
CRON_JOB_KIND = GroupVersionKind("batch", "v1", "CronJob")
_KUEUE_GROUP = "kueue.x-k8s.io"


def _labels(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    metadata = (obj or {}).get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def _managed(kind: GroupVersionKind, policy: JobPolicy) -> bool:
    integrations = policy.integrations
    if kind.group == _KUEUE_GROUP or integrations.by_group_kind(kind.group, kind.kind) is not None:
        return True
    if any(parent.kind == kind for parent in integrations.pod_parents):
        return True
    return kind.group == POD_KIND.group and kind.kind == POD_KIND.kind and integrations.pods


def warn_unmanaged(request: AdmissionRequest, policy: JobPolicy) -> Verdict:
    obj = request.object
    if request.operation != "CREATE" or obj is None or QUEUE_NAME_LABEL not in _labels(obj):
        return Verdict.allow()
    kind = request.kind
    if _managed(kind, policy) or policy.integrations.managed_owner(obj):
        return Verdict.allow()
    enabled = ", ".join(policy.integrations.frameworks) or "none"
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    name = request.name or str((metadata or {}).get("generateName") or "")
    reference = f"{kind.kind} {request.namespace}/{name}" if request.namespace else f"{kind.kind} {name}"
    if kind == CRON_JOB_KIND and policy.integrations.by_kind(GroupVersionKind("batch", "v1", "Job")) is not None:
        spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
        template = (spec or {}).get("jobTemplate")
        if QUEUE_NAME_LABEL in _labels(template if isinstance(template, Mapping) else None):
            return Verdict.allow()
        return Verdict.allow(
            warnings=[
                f"{reference} has label {QUEUE_NAME_LABEL} but its spec.jobTemplate.metadata.labels does not: kuota "
                "queues the Jobs a CronJob creates, by their own labels; put the label in the jobTemplate"
            ]
        )
    return Verdict.allow(
        warnings=[
            f"{reference} has label {QUEUE_NAME_LABEL} but kuota does not manage {kind} (enabled integrations: "
            f"{enabled}): it is not queued and counts against no quota; enable its integration in the "
            "Configuration's integrations.frameworks, or remove the label"
        ]
    )
