"""Validation of Kueue's objects (ResourceFlavor, ClusterQueue, LocalQueue, Cohort, Workload) beyond what the
CRD schema can say.

The rules are the quota engine's own validators: what the webhook accepts is exactly what the engine (and so
``kuota simulate``) can parse, with the same field paths and wording. Workloads matter most: their pod
templates are free-form in the CRD, so without this anyone allowed to create a Workload could hand the
controller an object it cannot read. kuota's own Workloads (made from Jobs it parsed already) skip the review.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kuota.engine import (
    FieldError,
    validate_cluster_queue,
    validate_cohort,
    validate_local_queue,
    validate_resource_flavor,
    validate_workload,
)
from kuota.webhook.admission.errors import MalformedObjectError
from kuota.webhook.admission.job_policy import KuotaIdentity
from kuota.webhook.admission.reviews import AdmissionRequest, Verdict
from kuota.webhook.jobs.adapter import GroupVersionKind

Validator = Callable[[object], Sequence[FieldError]]


@dataclass(frozen=True)
class KueueObjectKind:
    kind: GroupVersionKind
    path: str
    validate: Validator
    # Reviewed only when someone other than kuota writes it (the webhook's matchConditions say who kuota is).
    others_only: bool = False


def _kind(name: str, validate: Validator, *, others_only: bool = False) -> KueueObjectKind:
    return KueueObjectKind(
        kind=GroupVersionKind("kueue.x-k8s.io", "v1beta2", name),
        path=f"/validate-kueue-x-k8s-io-v1beta2-{name.lower()}",
        validate=validate,
        others_only=others_only,
    )


KUEUE_OBJECT_KINDS = (
    _kind("ResourceFlavor", validate_resource_flavor),
    _kind("ClusterQueue", validate_cluster_queue),
    _kind("LocalQueue", validate_local_queue),
    _kind("Cohort", validate_cohort),
    _kind("Workload", validate_workload, others_only=True),
)


def review_kueue_object(target: KueueObjectKind, request: AdmissionRequest, kuota: KuotaIdentity) -> Verdict:
    if request.operation not in ("CREATE", "UPDATE"):
        return Verdict.allow()
    if target.others_only and kuota.made(request.user):
        return Verdict.allow()
    if request.kind != target.kind:
        raise MalformedObjectError(f"this endpoint reviews {target.kind}, got {request.kind}; fix the webhook's rules")
    if request.object is None:
        raise MalformedObjectError(f"request.object is required for {request.operation} of a {target.kind.kind}")
    errors = target.validate(request.object)
    if not errors:
        return Verdict.allow()
    where = f"{request.namespace}/{request.name}" if request.namespace else request.name
    listed = "; ".join(str(error) for error in errors)
    return Verdict.deny(f"{target.kind.kind} {where} is invalid: {listed}", code=422)
