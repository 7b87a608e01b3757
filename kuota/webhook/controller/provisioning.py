"""Kueue's built-in AdmissionCheck controller ``kueue.x-k8s.io/provisioning-request``, its pure part: what a
gated Workload's ``autoscaling.x-k8s.io/v1`` ProvisioningRequest and PodTemplates are, and what the request's
conditions make of the check (Kueue v0.20, ``pkg/controller/admissionchecks/provisioning``; docs/architecture.md,
"ProvisioningRequest").

- A request is named ``WORKLOAD-CHECK-ATTEMPT``, its PodTemplates ``ppt-REQUEST-PODSET``; a name over 252
  characters is cut to 247 and given ``-`` and the first 5 hex digits of the full name's sha1.
- A request is needed when a pod set with pods left after admission uses a resource the config manages (any
  resource when it names none); otherwise the check is Ready at once ("the provisioning request is not needed").
- ``Failed`` is Retry (requeued after ``min(base * 2^retryCount, max)`` seconds) while the attempt is within
  ``backoffLimitCount``, else Rejected; ``BookingExpired`` likewise, before the Workload is admitted;
  ``CapacityRevoked`` is Rejected; ``Provisioned`` is Ready, with each pod set's consume and class annotations.

Every function here is pure (JSON in, JSON out); :mod:`kuota.webhook.controller.provisioning_controller` is the
shell that watches and writes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.admission_checks import PENDING, READY, REJECTED, RETRY, Check
from kuota.webhook.jobs.adapter import PROVISIONING_PARAMETER_PREFIX, PodSetPlacement, placed_pod_spec

CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"
CONFIG_GROUP, CONFIG_KIND, CONFIG_PLURAL = "kueue.x-k8s.io", "ProvisioningRequestConfig", "provisioningrequestconfigs"
REQUEST_API_VERSION = "autoscaling.x-k8s.io/v1"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
CHECK_INACTIVE_MESSAGE = "the check is not active"
NO_REQUEST_NEEDED = "the provisioning request is not needed"
ACTIVE = ("True", "Active", "The admission check is active")

_NAME_HASH_LENGTH = 5
_NAME_MAX_PREFIX = 252 - _NAME_HASH_LENGTH  # 253 characters at most, with "-" and the hash


@dataclass(frozen=True)
class RetryStrategy:
    """Kueue's defaults: 3 retries, 60 s doubling up to 1800 s."""

    limit: int = 3
    base_seconds: int = 60
    max_seconds: int = 1800


@dataclass(frozen=True)
class ProvisioningConfig:
    """A ProvisioningRequestConfig's spec."""

    name: str
    class_name: str
    parameters: Mapping[str, str]
    managed_resources: frozenset[str]
    retry: RetryStrategy
    node_selector_details: tuple[tuple[str, str], ...]  # (nodeSelector key, provisioningClassDetails key)
    merge_policy: str | None


def parse_config(obj: Mapping[str, Any]) -> ProvisioningConfig:
    """A ProvisioningRequestConfig as the API serves it (its CRD validated and defaulted it); the CRD's defaults
    again where a field is missing."""
    spec = obj.get("spec") or {}
    retry = spec.get("retryStrategy") or {}
    defaults = RetryStrategy()
    return ProvisioningConfig(
        name=str(obj["metadata"]["name"]),
        class_name=str(spec.get("provisioningClassName", "")),
        parameters={str(key): str(value) for key, value in (spec.get("parameters") or {}).items()},
        managed_resources=frozenset(str(name) for name in spec.get("managedResources") or []),
        retry=RetryStrategy(
            int(retry.get("backoffLimitCount", defaults.limit)),
            int(retry.get("backoffBaseSeconds", defaults.base_seconds)),
            int(retry.get("backoffMaxSeconds", defaults.max_seconds)),
        ),
        node_selector_details=tuple(
            (str(entry["key"]), str(entry["valueFromProvisioningClassDetail"]))
            for entry in (spec.get("podSetUpdates") or {}).get("nodeSelector") or []
        ),
        merge_policy=spec.get("podSetMergePolicy"),
    )


def config_error(check: Mapping[str, Any], configs: Mapping[str, ProvisioningConfig]) -> str | None:
    """Why an AdmissionCheck's ``parameters`` name no ProvisioningRequestConfig, in Kueue's words (its
    ``ConfigFromRef``); None when they do."""
    reference = (check.get("spec") or {}).get("parameters")
    if reference is None:
        return "missing parameters reference"
    if not reference.get("name"):
        return "empty name: bad parameters reference"
    if reference.get("apiGroup") != CONFIG_GROUP:
        return f'wrong group "{reference.get("apiGroup", "")}", expecting "{CONFIG_GROUP}": bad parameters reference'
    if reference.get("kind") != CONFIG_KIND:
        return f'wrong kind "{reference.get("kind", "")}", expecting "{CONFIG_KIND}": bad parameters reference'
    if reference["name"] not in configs:
        return f'{CONFIG_PLURAL}.{CONFIG_GROUP} "{reference["name"]}" not found'
    return None


def active_condition(check: Mapping[str, Any], configs: Mapping[str, ProvisioningConfig]) -> tuple[str, str, str]:
    """The ``Active`` condition Kueue gives a check of this controller: (status, reason, message)."""
    error = config_error(check, configs)
    return ACTIVE if error is None else ("False", "BadParametersRef", error)


def config_of(check: Mapping[str, Any], configs: Mapping[str, ProvisioningConfig]) -> ProvisioningConfig | None:
    if config_error(check, configs) is not None:
        return None
    return configs[check["spec"]["parameters"]["name"]]


def limit_object_name(full_name: str) -> str:
    """Kueue's ``limitObjectName``."""
    if len(full_name) <= _NAME_MAX_PREFIX:
        return full_name
    digest = hashlib.sha1(full_name.encode(), usedforsecurity=False).hexdigest()
    return f"{full_name[:_NAME_MAX_PREFIX]}-{digest[:_NAME_HASH_LENGTH]}"


def request_name(workload: str, check: str, attempt: int) -> str:
    return limit_object_name(f"{workload}-{check}-{attempt}")


def pod_template_name(request: str, pod_set: str) -> str:
    return limit_object_name(f"ppt-{request}-{pod_set}")


def attempt_of(request: str, workload: str, check: str) -> int | None:
    """The attempt number a request's name carries, or None when it is not one of this Workload's and check's."""
    found = re.fullmatch(re.escape(limit_object_name(f"{workload}-{check}-")) + "([0-9]+)", request)
    return int(found.group(1)) if found else None


def backoff_seconds(retry_count: int, retry: RetryStrategy) -> int:
    """``requeueAfterSeconds`` of a check's ``retry_count + 1``-th Retry (Kueue's
    ``UpdateAdmissionCheckRequeueState``): ``base * 2^retry_count``, at most ``max``. Kueue's jitter (at most a
    ten-thousandth) is cut by its own truncation to whole seconds below 10,000 s."""
    return min(retry.base_seconds << retry_count, retry.max_seconds)


def _uses(pod_spec: Mapping[str, Any], resources: frozenset[str]) -> bool:
    containers = [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]
    return any(
        name in resources
        for container in containers
        for field in ("requests", "limits")
        for name in ((container.get("resources") or {}).get(field) or {})
    )


def _assignments(workload: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    admission = (workload.get("status") or {}).get("admission") or {}
    return {str(a.get("name")): a for a in admission.get("podSetAssignments") or []}


def _admitted_count(pod_set: Mapping[str, Any], assignment: Mapping[str, Any]) -> int:
    count = assignment.get("count")
    return int(count if count is not None else pod_set.get("count", 1))


def _required_pod_sets(workload: Mapping[str, Any], config: ProvisioningConfig) -> list[Mapping[str, Any]]:
    """The pod sets the autoscaler is asked about (Kueue's ``requiredPodSets``)."""
    return [
        pod_set
        for pod_set in (workload.get("spec") or {}).get("podSets") or []
        if int(pod_set.get("count", 1)) > 0
        and (
            not config.managed_resources
            or _uses((pod_set.get("template") or {}).get("spec") or {}, config.managed_resources)
        )
    ]


def request_needed(workload: Mapping[str, Any], config: ProvisioningConfig) -> bool:
    """Kueue's ``reqIsNeeded``. A required pod set without an assignment raises ValueError."""
    assignments = _assignments(workload)
    for pod_set in _required_pod_sets(workload, config):
        assignment = assignments.get(str(pod_set.get("name")))
        if assignment is None:
            raise ValueError(f"inconsistent podSet assignments: missing assignment for PodSet {pod_set.get('name')!r}")
        if _admitted_count(pod_set, assignment) > 0:
            return True
    return False


@dataclass(frozen=True)
class MergedPodSet:
    """One entry of a request's ``podSets``: the first pod set of those merged, and their pods together."""

    name: str
    pod_set: Mapping[str, Any]
    count: int


def _scheduling_essence(template: Mapping[str, Any]) -> tuple[Any, ...]:
    """What ``IdenticalWorkloadSchedulingRequirements`` compares (Kueue's ``arePodSetsSimilar``)."""
    spec = template.get("spec") or {}

    def requests(field: str) -> list[Any]:
        return [(c.get("resources") or {}).get("requests") or {} for c in spec.get(field) or []]

    return (
        requests("containers"),
        requests("initContainers"),
        *(spec.get(field) or None for field in ("resources", "nodeSelector", "tolerations", "affinity")),
        spec.get("resourceClaims") or None,
    )


def _mergeable(first: Mapping[str, Any], second: Mapping[str, Any], policy: str | None) -> bool:
    if policy == "IdenticalPodTemplates":
        return first.get("template") == second.get("template")
    if policy == "IdenticalWorkloadSchedulingRequirements":
        return _scheduling_essence(first.get("template") or {}) == _scheduling_essence(second.get("template") or {})
    return False


def merged_pod_sets(workload: Mapping[str, Any], config: ProvisioningConfig) -> list[MergedPodSet]:
    """The request's pod sets (Kueue's ``mergePodSets``): each required pod set with pods, counted as admitted,
    merged into an earlier one when the config's ``podSetMergePolicy`` allows."""
    assignments = _assignments(workload)
    merged: list[MergedPodSet] = []
    for pod_set in _required_pod_sets(workload, config):
        assignment = assignments.get(str(pod_set.get("name")))
        if assignment is None:
            raise ValueError("inconsistent podSet assignments")
        count = _admitted_count(pod_set, assignment)
        if count <= 0:
            continue
        into = next((i for i, m in enumerate(merged) if _mergeable(m.pod_set, pod_set, config.merge_policy)), None)
        if into is None:
            merged.append(MergedPodSet(str(pod_set.get("name")), pod_set, count))
        else:
            merged[into] = MergedPodSet(merged[into].name, merged[into].pod_set, merged[into].count + count)
    return merged


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """A controller owner reference to ``owner`` (its ``apiVersion`` and ``kind`` as served)."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_template(
    workload: Mapping[str, Any], name: str, pod_set: Mapping[str, Any], placement: PodSetPlacement | None
) -> dict[str, Any]:
    """A request's PodTemplate (Kueue's ``createPodTemplate``): the pod set's template with its flavors' nodeLabels
    and tolerations, limits standing in for missing requests, owned by the Workload until the request is created.
    A template whose nodeSelector contradicts a flavor raises JobConflictError."""
    template: dict[str, Any] = dict(pod_set.get("template") or {})
    spec = dict(template.get("spec") or {})
    metadata = workload["metadata"]
    placed = placed_pod_spec(f"Workload {metadata['namespace']}/{metadata['name']} pod set {name}", template, placement)
    spec.update({key: value for key, value in placed.items() if value is not None})
    for field in ("initContainers", "containers"):
        if field in spec:
            spec[field] = [_limits_as_missing_requests(container) for container in spec[field]]
    template["spec"] = spec
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {
            "name": name,
            "namespace": metadata["namespace"],
            "labels": {MANAGED_LABEL: "true"},
            "ownerReferences": [owner_reference(workload)],
        },
        "template": template,
    }


def _limits_as_missing_requests(container: Mapping[str, Any]) -> dict[str, Any]:
    resources = dict(container.get("resources") or {})
    limits = resources.get("limits") or {}
    if limits:
        resources["requests"] = {**limits, **(resources.get("requests") or {})}
    return {**container, "resources": resources} if resources else dict(container)


def request_manifest(
    workload: Mapping[str, Any], name: str, config: ProvisioningConfig, pod_sets: Sequence[MergedPodSet]
) -> dict[str, Any]:
    """The ProvisioningRequest of one attempt: the config's class and parameters, then the Workload's
    ``provreq.kueue.x-k8s.io/`` annotations as parameters, one entry per merged pod set, owned by the Workload."""
    metadata = workload["metadata"]
    return {
        "apiVersion": REQUEST_API_VERSION,
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": name,
            "namespace": metadata["namespace"],
            "labels": {MANAGED_LABEL: "true"},
            "ownerReferences": [owner_reference(workload)],
        },
        "spec": {
            "provisioningClassName": config.class_name,
            "parameters": request_parameters(workload, config),
            "podSets": [
                {"podTemplateRef": {"name": pod_template_name(name, merged.name)}, "count": merged.count}
                for merged in pod_sets
            ],
        },
    }


def request_parameters(workload: Mapping[str, Any], config: ProvisioningConfig) -> dict[str, str]:
    """A request's parameters: the config's, then the Workload's ``provreq.kueue.x-k8s.io/`` annotations."""
    parameters = dict(config.parameters)
    for key, value in (workload["metadata"].get("annotations") or {}).items():
        if key.startswith(PROVISIONING_PARAMETER_PREFIX):
            parameters[key.removeprefix(PROVISIONING_PARAMETER_PREFIX)] = str(value)
    return parameters


def synced_with_config(workload: Mapping[str, Any], request: Mapping[str, Any], config: ProvisioningConfig) -> bool:
    """Whether a request still says what its config does (Kueue's ``provReqSyncedWithConfig``): another class or
    value of a config's parameter makes it stale, and it is deleted. Unlike Kueue, a parameter the Workload's
    annotation overrides is compared with the annotation's value: Kueue compares it with the config's, deletes the
    request it has just made and makes it again, without end."""
    spec = request.get("spec") or {}
    parameters = spec.get("parameters") or {}
    wanted = request_parameters(workload, config)
    return spec.get("provisioningClassName") == config.class_name and all(
        parameters.get(key) == wanted[key] for key in config.parameters
    )


def current_request(
    workload: Mapping[str, Any], check: str, config: ProvisioningConfig, owned: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The check's request of the latest attempt, among those still in step with the config (Kueue's
    ``activeOrLastPRForChecks``); None when the Workload needs none."""
    name = workload["metadata"]["name"]
    if not request_needed(workload, config):
        return None
    found: tuple[int, Mapping[str, Any]] | None = None
    for request in owned:
        attempt = attempt_of(request["metadata"]["name"], name, check)
        if (
            attempt is not None
            and synced_with_config(workload, request, config)
            and (found is None or attempt > found[0])
        ):
            found = (attempt, request)
    return None if found is None else found[1]


def _condition(request: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return status.condition((request.get("status") or {}).get("conditions") or [], kind)


def _is_true(request: Mapping[str, Any], kind: str) -> bool:
    found = _condition(request, kind)
    return found is not None and found.get("status") == "True"


def _message(request: Mapping[str, Any], kind: str) -> str:
    return str((_condition(request, kind) or {}).get("message", ""))


def pod_set_updates(
    workload: Mapping[str, Any], request: Mapping[str, Any], config: ProvisioningConfig
) -> list[dict[str, Any]]:
    """What a Provisioned request adds to each of its pod sets' pods (Kueue's ``podSetUpdates``): the consume and
    class annotations, and the nodeSelector entries the config takes from ``provisioningClassDetails``."""
    name = request["metadata"]["name"]
    spec = request.get("spec") or {}
    by_template = {
        pod_template_name(name, str(pod_set.get("name"))): str(pod_set.get("name"))
        for pod_set in (workload.get("spec") or {}).get("podSets") or []
    }
    details = (request.get("status") or {}).get("provisioningClassDetails") or {}
    updates: list[dict[str, Any]] = []
    for pod_set in spec.get("podSets") or []:
        update: dict[str, Any] = {
            "name": by_template.get(str((pod_set.get("podTemplateRef") or {}).get("name")), ""),
            "annotations": {CONSUME_ANNOTATION: name, CLASS_ANNOTATION: spec.get("provisioningClassName", "")},
        }
        if config.node_selector_details:
            update["nodeSelector"] = {
                key: str(details[detail]) for key, detail in config.node_selector_details if detail in details
            }
        updates.append(update)
    return updates


def _retried_or_rejected(
    entry: Check, attempt: int, retry: RetryStrategy, retrying: str, rejected_message: str
) -> None:
    """Kueue's Failed and BookingExpired case: Retry with a backoff while the attempt is within the limit (once per
    attempt: a request whose attempt the check already retried stays Pending), else Rejected."""
    if attempt > retry.limit:
        entry.update(state=REJECTED, message=rejected_message)
        return
    entry["message"] = retrying
    retry_count = int(entry.get("retryCount") or 0)
    if attempt > retry_count:
        entry.update(state=RETRY, requeueAfterSeconds=backoff_seconds(retry_count, retry))


def check_entry(
    workload: Mapping[str, Any],
    entry: Mapping[str, Any],
    config: ProvisioningConfig | None,
    request: Mapping[str, Any] | None,
) -> Check | None:
    """One check's new ``status.admissionChecks`` entry (Kueue's ``syncCheckStates``), before its transition time
    is set; None when the Workload needs a request it does not have yet (nothing is written then)."""
    new: Check = dict(entry)
    if config is None:
        new["state"], new["message"] = PENDING, CHECK_INACTIVE_MESSAGE
        return new
    if not request_needed(workload, config):
        if new.get("state") != READY:
            new.update(state=READY, message=NO_REQUEST_NEEDED)
            new.pop("podSetUpdates", None)
        return new
    if request is None:
        return None
    name = workload["metadata"]["name"]
    attempt = attempt_of(request["metadata"]["name"], name, str(entry.get("name"))) or 1
    admitted = status.is_true(workload, "Admitted")
    if _is_true(request, "Failed"):
        message = _message(request, "Failed")
        _retried_or_rejected(new, attempt, config.retry, f"Retrying after failure: {message}", message)
    elif _is_true(request, "CapacityRevoked"):
        if (workload.get("spec") or {}).get("active", True) and not status.is_true(workload, "Finished"):
            new.update(state=REJECTED, message=_message(request, "CapacityRevoked"))
    elif _is_true(request, "BookingExpired"):
        if not admitted:
            message = _message(request, "BookingExpired")
            _retried_or_rejected(new, attempt, config.retry, f"Retrying after booking expired: {message}", message)
    elif _is_true(request, "Provisioned"):
        if new.get("state") != READY:
            new.update(
                state=READY,
                podSetUpdates=pod_set_updates(workload, request, config),
                message=_message(request, "Provisioned"),
            )
    elif _is_true(request, "Accepted"):
        provisioned = _condition(request, "Provisioned")
        if provisioned is not None:  # the autoscaler's ETA, in the Provisioned condition's message
            new.update(state=PENDING, message=str(provisioned.get("message", "")))
    else:
        new.update(state=PENDING, message="")
    return new


def synced_entries(
    workload: Mapping[str, Any],
    configs: Mapping[str, ProvisioningConfig | None],
    requests: Mapping[str, Mapping[str, Any]],
    at: float,
) -> tuple[list[Check], list[str]] | None:
    """The Workload's ``status.admissionChecks`` with this controller's checks (``configs``, by check name)
    brought in step with their requests, and the ``AdmissionCheckUpdated`` messages of the state changes; None
    when nothing changes (or a needed request is still to be created). A changed state moves
    ``lastTransitionTime`` to ``at``."""
    current = [dict(entry) for entry in (workload.get("status") or {}).get("admissionChecks") or []]
    messages: list[str] = []
    changed = False
    for index, entry in enumerate(current):
        name = str(entry.get("name"))
        if name not in configs:
            continue
        new = check_entry(workload, entry, configs[name], requests.get(name))
        if new is None:
            return None
        if new == entry:
            continue
        changed = True
        if new.get("state") != entry.get("state"):
            new["lastTransitionTime"] = status.rfc3339(at)
            message = f"Admission check {name} updated state from {entry.get('state')} to {new.get('state')}"
            messages.append(message + (f" with message: {new['message']}" if new.get("message") else ""))
        current[index] = new
    return (current, messages) if changed else None


def next_attempt(
    workload: Mapping[str, Any], entry: Mapping[str, Any] | None, request: Mapping[str, Any] | None
) -> int | None:
    """The attempt whose request is to be created now, or None (Kueue's ``syncOwnedProvisionRequest``): the
    first when there is none (``retryCount + 1``: an eviction deleted the earlier ones), the next when the
    current one failed (or its booking expired before admission) and the check is Pending again."""
    if entry is not None and entry.get("state") == READY:
        return None
    if request is None:
        return int((entry or {}).get("retryCount") or 0) + 1
    retried = _is_true(request, "Failed") or (
        _is_true(request, "BookingExpired") and not status.is_true(workload, "Admitted")
    )
    if retried and entry is not None and entry.get("state") == PENDING:
        name = workload["metadata"]["name"]
        return (attempt_of(request["metadata"]["name"], name, str(entry.get("name"))) or 1) + 1
    return None
