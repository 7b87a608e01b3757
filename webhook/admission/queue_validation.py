"""Validation of ResourceFlavor, ClusterQueue, LocalQueue and Cohort beyond what the CRD schema can say.

The rules are the quota engine's own validators: what the webhook accepts is exactly what the engine (and so
``kuota simulate``) can parse, with the same field paths and wording.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kuota.engine.decoding import (
    validate_cluster_queue,
    validate_cohort,
    validate_local_queue,
    validate_resource_flavor,
)
from kuota.engine.errors import FieldError
from kuota.webhook.admission.errors import MalformedObjectError
from kuota.webhook.admission.reviews import AdmissionRequest, GroupVersionKind, Verdict

Validator = Callable[[object], Sequence[FieldError]]


@dataclass(frozen=True)
class QueueObjectKind:
    kind: GroupVersionKind
    path: str
    validate: Validator


def _kind(name: str, validate: Validator) -> QueueObjectKind:
    return QueueObjectKind(
        kind=GroupVersionKind("kueue.x-k8s.io", "v1beta2", name),
        path=f"/validate-kueue-x-k8s-io-v1beta2-{name.lower()}",
        validate=validate,
    )


QUEUE_OBJECT_KINDS = (
    _kind("ResourceFlavor", validate_resource_flavor),
    _kind("ClusterQueue", validate_cluster_queue),
    _kind("LocalQueue", validate_local_queue),
    _kind("Cohort", validate_cohort),
)


def review_queue_object(target: QueueObjectKind, request: AdmissionRequest) -> Verdict:
    if request.operation not in ("CREATE", "UPDATE"):
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
