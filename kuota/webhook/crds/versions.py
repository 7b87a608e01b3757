"""``kueue.x-k8s.io/v1beta1`` beside v1beta2: served (not stored) through kuota's conversion webhook.

Kueue 0.14 and older speak v1beta1, so their users' YAML does. Each v1beta1 schema is the v1beta2 one with
v1beta1's field names (:mod:`kuota.webhook.conversion.kinds` lists them and converts objects), so it is exactly
as strict: the API server validates a write against the schema of the version it was sent in, then stores
it converted, unvalidated again.

The conversion webhook's ``clientConfig`` here is the default install's conversion Service; the Helm chart sets
its release's, and the manager injects the CA (or, registered by URL, writes the whole ``clientConfig``). That
Service reaches the manager's pods ready or not (``publishNotReadyAddresses``): a manager becomes ready once
its caches sync, and listing objects that Kueue stored as v1beta1 needs this very conversion.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kuota.webhook.crds.schemas import Schema, array, integer, name_reference, obj, string

OLDER_VERSION = "v1beta1"
CONVERSION_PATH = "/convert"


def conversion_service_name(webhook_service: str) -> str:
    """The Service in front of the conversion webhook, beside the admission webhook's (its certificate names both)."""
    return f"{webhook_service}-conversion"


DEFAULT_CONVERSION_SERVICE = {
    "name": conversion_service_name("kuota-webhook"),
    "namespace": "kuota-system",
    "path": CONVERSION_PATH,
    "port": 443,
}
# v1beta1's deprecated spec.flavorFungibility values, each an old name for MayStopSearch.
FLAVOR_FUNGIBILITY_ALIASES = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
# v1beta1's spec.priorityClassSource values and the (group, kind) of the v1beta2 spec.priorityClassRef each means.
PRIORITY_CLASS_SOURCES = {
    "kueue.x-k8s.io/workloadpriorityclass": ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}


def conversion(client_config: dict[str, Any]) -> dict[str, Any]:
    """A CRD's ``spec.conversion`` sending ConversionReviews (v1) to ``client_config``."""
    return {
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client_config},
    }


def with_older_version(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` (v1beta2 only) serving v1beta1 too, converted by the webhook at the default Service."""
    served = copy.deepcopy(manifest)
    storage = served["spec"]["versions"][0]
    older = copy.deepcopy(storage)
    older["name"] = OLDER_VERSION
    older["storage"] = False
    reshape = _OLDER_SHAPES.get(served["spec"]["names"]["kind"])
    if reshape is not None:
        reshape(older)
    served["spec"]["versions"] = [storage, older]
    served["spec"]["conversion"] = conversion({"service": dict(DEFAULT_CONVERSION_SERVICE)})
    return served


def _properties(version: dict[str, Any], *path: str) -> dict[str, Schema]:
    schema: Schema = version["schema"]["openAPIV3Schema"]
    for name in path:
        schema = schema["properties"][name]
    properties: dict[str, Schema] = schema["properties"]
    return properties


def _replace(properties: dict[str, Schema], old: str, replacements: dict[str, Schema]) -> None:
    """Put ``replacements`` where property ``old`` was, keeping the order of the others."""
    replaced: dict[str, Schema] = {}
    for key, value in properties.items():
        replaced.update(replacements if key == old else {key: value})
    properties.clear()
    properties.update(replaced)


def _rename(properties: dict[str, Schema], old: str, new: str) -> None:
    _replace(properties, old, {new: properties[old]})


def _cluster_queue(version: dict[str, Any]) -> None:
    _rename(_properties(version, "spec"), "cohortName", "cohort")
    _replace(
        _properties(version, "spec"),
        "admissionChecksStrategy",
        {
            "admissionChecks": array(
                string(max_length=316), "the AdmissionChecks every workload admitted here must pass (deprecated)"
            ),
            "admissionChecksStrategy": _properties(version, "spec")["admissionChecksStrategy"],
        },
    )
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec.setdefault("x-kubernetes-validations", []).append(
        {
            "rule": "!has(self.admissionChecks) || !has(self.admissionChecksStrategy)",
            "message": "admissionChecks and admissionChecksStrategy cannot both be set: use admissionChecksStrategy",
        }
    )
    for rule in spec.get("x-kubernetes-validations", []):
        rule["rule"] = rule["rule"].replace("self.cohortName", "self.cohort")
    fungibility = _properties(version, "spec", "flavorFungibility")
    for field, alias in FLAVOR_FUNGIBILITY_ALIASES.items():
        fungibility[field]["enum"] = [*fungibility[field]["enum"], alias]
    for column in version.get("additionalPrinterColumns", []):
        column["jsonPath"] = column["jsonPath"].replace(".spec.cohortName", ".spec.cohort")


def _local_queue(version: dict[str, Any]) -> None:
    _rename(_properties(version, "status"), "flavorsUsage", "flavorUsage")


def _workload(version: dict[str, Any]) -> None:
    source = string(
        "what priorityClassName names: a WorkloadPriorityClass or a PriorityClass", enum=[*PRIORITY_CLASS_SOURCES, ""]
    )
    _replace(
        _properties(version, "spec"),
        "priorityClassRef",
        {"priorityClassName": name_reference("the priority class's name"), "priorityClassSource": source},
    )
    _rename(
        _properties(version, "status"), "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds"
    )
    # v1beta1's topologyAssignment lists every domain with its values and pod count (v1beta2 compacts them).
    assignment = _properties(version, "status", "admission")["podSetAssignments"]["items"]["properties"]
    domain = obj(
        {"values": array(string(max_length=63), "the domain's value per level"), "count": integer(minimum=1)},
        required=["values", "count"],
    )
    assignment["topologyAssignment"] = obj(
        {
            "levels": array(string(max_length=317), "the levels the values name", min_items=1, max_items=16),
            "domains": array(domain, "the domains and their pod counts", min_items=1),
        },
        "where the pods go: per domain its level values and pod count",
        required=["levels", "domains"],
    )


_OLDER_SHAPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "ClusterQueue": _cluster_queue,
    "LocalQueue": _local_queue,
    "Workload": _workload,
}
