"""Parse, default and validate decoded ``kueue.x-k8s.io/v1beta2`` objects into the engine's models.

Every ``validate_<kind>(obj)`` returns the full list of ``FieldError`` (empty when valid) so the webhook can
reject an object with all its problems at once; every ``parse_<kind>(obj)`` returns the model or raises
``InvalidObjectError``. Unknown fields are errors: a misspelt ``borowingLimit`` silently dropped would give a
team unlimited borrowing. ``status`` is written by controllers and is not validated here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import StrEnum
from fractions import Fraction
from typing import Any, TypeVar

from kuota.durations import DurationError, parse_duration
from kuota.engine.errors import FieldError, InvalidObjectError, QuantityError, show_value
from kuota.engine.model import (
    ApiObject,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    Cohort,
    Configuration,
    FairSharing,
    FairSharingStrategy,
    FlavorFungibility,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    Namespace,
    PodSet,
    Preemption,
    QueueingStrategy,
    ReclaimPolicy,
    Requirement,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    Taint,
    TaintEffect,
    Toleration,
    WaitForPodsReady,
    WhenCanBorrow,
    WhenCanPreempt,
    WithinClusterQueuePolicy,
    Workload,
    WorkloadPriorityClass,
)
from kuota.engine.quantities import parse_amount, to_units

KUEUE_API = "kueue.x-k8s.io/v1beta2"
CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_METADATA_FIELDS = frozenset(
    {
        "name",
        "namespace",
        "labels",
        "annotations",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "managedFields",
        "ownerReferences",
        "finalizers",
        "generateName",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    }
)
_MAX_ITEMS = 16
_E = TypeVar("_E", bound=StrEnum)
_T = TypeVar("_T")


_NODE_AFFINITY = frozenset(
    {"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"}
)
_NODE_SELECTOR = frozenset({"nodeSelectorTerms"})
_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")
_NODE_SELECTOR_TERM = frozenset({"matchExpressions", "matchFields"})
_INTEGER = re.compile(r"[+-]?[0-9]+")
_RESOURCE_REQUIREMENTS = frozenset({"limits", "requests", "claims"})


class _Reader:
    """Reads one object, accumulating API-server-style errors; readers return None where a field is bad."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, path: str, detail: str) -> None:
        self.errors.append(FieldError(path, detail))

    def invalid(self, path: str, value: object, detail: str) -> None:
        self.fail(path, f"Invalid value: {show_value(value)}: {detail}")

    def fields(self, value: object, path: str, allowed: frozenset[str]) -> dict[str, Any] | None:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.invalid(path, type(value).__name__, "must be an object")
            return None
        for key in value:
            if key not in allowed:
                shown = key if isinstance(key, str) and key.isprintable() else show_value(key)
                where = f"{path}.{shown}" if path else shown
                self.fail(where, "unknown field: remove it, or check its spelling and indentation")
        return dict(value)

    def items(self, value: object, path: str, max_items: int | None = _MAX_ITEMS) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.invalid(path, type(value).__name__, "must be a list")
            return []
        if max_items is not None and len(value) > max_items:
            self.fail(path, f"Too many: {len(value)}: must have at most {max_items} items")
        return value

    def string(self, value: object, path: str, *, required: bool = False) -> str | None:
        if value is None:
            if required:
                self.fail(path, "Required value")
            return None
        if not isinstance(value, str):
            self.invalid(path, value, "must be a string")
            return None
        if required and value == "":
            self.fail(path, "Required value")
            return None
        return value

    def name(self, value: object, path: str, *, required: bool = True, label: bool = False) -> str | None:
        text = self.string(value, path, required=required)
        if text is None:
            return None
        pattern, limit = (_DNS_LABEL, 63) if label else (_DNS_SUBDOMAIN, 253)
        if len(text) > limit or not pattern.match(text):
            kind = "DNS-1123 label" if label else "DNS-1123 subdomain"
            self.invalid(
                path,
                text,
                f"a lowercase {kind} must consist of lower case alphanumeric characters, "
                f"'-' or '.', start and end with an alphanumeric character, at most {limit} characters",
            )
            return None
        return text

    def integer(self, value: object, path: str, *, minimum: int | None = None, required: bool = False) -> int | None:
        if value is None:
            if required:
                self.fail(path, "Required value")
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.invalid(path, value, "must be an integer")
            return None
        if minimum is not None and value < minimum:
            self.invalid(path, value, f"must be greater than or equal to {minimum}")
            return None
        return value

    def boolean(self, value: object, path: str, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.invalid(path, value, "must be true or false")
            return default
        return value

    def choice(self, value: object, path: str, enum: type[_E], default: _E) -> _E:
        if value is None:
            return default
        try:
            if not isinstance(value, str):
                raise ValueError(value)
            return enum(value)
        except ValueError:
            supported = ", ".join(show_value(member.value) for member in enum)
            self.fail(path, f"Unsupported value: {show_value(value)}: supported values: {supported}")
            return default

    def amount(self, value: object, path: str, *, required: bool = False) -> Fraction | None:
        if value is None:
            if required:
                self.fail(path, "Required value")
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, str | int) or isinstance(value, bool):
            self.invalid(path, value, "must be a quantity such as 4, 500m or 128Gi")
            return None
        try:
            amount = parse_amount(value)
        except QuantityError as error:
            self.invalid(path, value, str(error))
            return None
        if amount < 0:
            self.invalid(path, value, "must be greater than or equal to 0")
            return None
        return amount

    def resource_amounts(self, value: object, path: str) -> dict[str, Fraction]:
        """A ResourceList (``{"cpu": "500m", "nvidia.com/gpu": 1}``): each resource's amount, bad ones reported."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.invalid(path, type(value).__name__, "must be an object of quantities")
            return {}
        return {
            str(name): amount
            for name, raw in value.items()
            if (amount := self.amount(raw, f"{path}.{name}")) is not None
        }

    def string_map(self, value: object, path: str, max_items: int | None = None) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.invalid(path, type(value).__name__, "must be an object of strings")
            return {}
        if max_items is not None and len(value) > max_items:
            self.fail(path, f"Too many: {len(value)}: must have at most {max_items} items")
        result: dict[str, str] = {}
        for key, item in value.items():
            if not isinstance(item, str):
                self.invalid(f"{path}.{key}", item, "must be a string")
            else:
                result[str(key)] = item
        return result

    def selector(self, value: object, path: str) -> LabelSelector | None:
        spec = self.fields(value, path, frozenset({"matchLabels", "matchExpressions"}))
        if spec is None:
            return None
        labels = self.string_map(spec.get("matchLabels"), f"{path}.matchLabels")
        expressions = self.items(spec.get("matchExpressions"), f"{path}.matchExpressions", None)
        requirements = [
            requirement
            for index, raw in enumerate(expressions)
            if (requirement := self.requirement(raw, f"{path}.matchExpressions[{index}]", _LABEL_OPERATORS))
        ]
        return LabelSelector(tuple(sorted(labels.items())), tuple(requirements))

    def node_affinity(self, affinity: object, path: str) -> tuple[tuple[Requirement, ...], ...]:
        """A pod's required node affinity, the terms of ``affinity.nodeAffinity.requiredDuringScheduling
        IgnoredDuringExecution``; preferred terms and pod (anti-)affinity do not bear on admission."""
        if not isinstance(affinity, Mapping) or affinity.get("nodeAffinity") is None:
            return ()
        node_path = f"{path}.nodeAffinity"
        node = self.fields(affinity["nodeAffinity"], node_path, _NODE_AFFINITY) or {}
        return self.required_node_terms(
            node.get("requiredDuringSchedulingIgnoredDuringExecution"),
            f"{node_path}.requiredDuringSchedulingIgnoredDuringExecution",
        )

    def required_node_terms(self, required: object, path: str) -> tuple[tuple[Requirement, ...], ...]:
        """A NodeSelector (``nodeSelectorTerms``, ORed; each term's matchExpressions ANDed), as the API server
        validates it. matchFields select nodes by name, which no flavor has: they are not read."""
        spec = self.fields(required, path, _NODE_SELECTOR)
        if not spec:
            return ()
        raw_terms = self.items(spec.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms", None)
        if not raw_terms:
            self.fail(f"{path}.nodeSelectorTerms", "Required value: must have at least one node selector term")
        terms: list[tuple[Requirement, ...]] = []
        for index, raw in enumerate(raw_terms):
            where = f"{path}.nodeSelectorTerms[{index}]"
            term = self.fields(raw, where, _NODE_SELECTOR_TERM) or {}
            expressions = self.items(term.get("matchExpressions"), f"{where}.matchExpressions", None)
            terms.append(
                tuple(
                    requirement
                    for number, expression in enumerate(expressions)
                    if (
                        requirement := self.requirement(
                            expression, f"{where}.matchExpressions[{number}]", _NODE_OPERATORS
                        )
                    )
                )
            )
        return tuple(terms)

    def requirement(self, raw: object, where: str, operators: tuple[str, ...]) -> Requirement | None:
        """One matchExpressions entry of a label selector or a node selector (which adds Gt and Lt)."""
        expression = self.fields(raw, where, frozenset({"key", "operator", "values"}))
        if expression is None:
            return None
        key = self.string(expression.get("key"), f"{where}.key", required=True)
        operator = self.string(expression.get("operator"), f"{where}.operator", required=True)
        values = tuple(str(v) for v in self.items(expression.get("values"), f"{where}.values", None))
        if operator is None or key is None:
            return None
        if operator not in operators:
            supported = ", ".join(show_value(name) for name in operators)
            self.fail(f"{where}.operator", f"Unsupported value: {show_value(operator)}: supported values: {supported}")
            return None
        if operator in ("In", "NotIn") and not values:
            self.fail(f"{where}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
        elif operator in ("Exists", "DoesNotExist") and values:
            self.fail(
                f"{where}.values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
        elif operator in ("Gt", "Lt"):
            if len(values) != 1:
                self.fail(
                    f"{where}.values", "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
                )
            elif not _INTEGER.fullmatch(values[0]):
                self.invalid(f"{where}.values[0]", values[0], "must be an integer")
        return Requirement(key, operator, values)

    def tolerations(self, value: object, path: str, max_items: int | None) -> tuple[Toleration, ...]:
        result: list[Toleration] = []
        allowed = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
        for index, raw in enumerate(self.items(value, path, max_items)):
            where = f"{path}[{index}]"
            spec = self.fields(raw, where, allowed)
            if spec is None:
                continue
            key = self.string(spec.get("key"), f"{where}.key") or ""
            operator = self.string(spec.get("operator"), f"{where}.operator") or "Equal"
            if operator not in ("Equal", "Exists"):
                self.fail(
                    f"{where}.operator",
                    f'Unsupported value: {show_value(operator)}: supported values: "Equal", "Exists"',
                )
                continue
            toleration_value = self.string(spec.get("value"), f"{where}.value") or ""
            if operator == "Exists" and toleration_value:
                self.invalid(f"{where}.operator", operator, "value must be empty when `operator` is 'Exists'")
            if key == "" and operator != "Exists":
                self.invalid(
                    f"{where}.operator",
                    operator,
                    'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                )
            effect = spec.get("effect")
            parsed = (
                None
                if effect in (None, "")
                else self.choice(effect, f"{where}.effect", TaintEffect, TaintEffect.NO_SCHEDULE)
            )
            result.append(Toleration(key, operator, toleration_value, parsed))
        return tuple(result)

    def metadata(self, obj: Mapping[str, Any], *, namespaced: bool) -> tuple[str, str]:
        meta = self.fields(obj.get("metadata"), "metadata", _METADATA_FIELDS) or {}
        name = self.name(meta.get("name"), "metadata.name") or ""
        namespace = ""
        if namespaced:
            namespace = self.name(meta.get("namespace"), "metadata.namespace", label=True) or ""
        elif meta.get("namespace") not in (None, ""):
            self.fail("metadata.namespace", "Forbidden: not allowed on this type: the object is cluster-scoped")
        if "labels" in meta:
            self.string_map(meta["labels"], "metadata.labels")
        return name, namespace

    def header(self, obj: object, api_version: str, kind: str, extra: frozenset[str]) -> dict[str, Any] | None:
        top = self.fields(obj, "", frozenset({"apiVersion", "kind", "metadata"}) | extra)
        if top is None:
            return None
        if top.get("apiVersion") != api_version:
            self.fail(
                "apiVersion",
                f"Unsupported value: {show_value(top.get('apiVersion'))}: supported values: {show_value(api_version)}",
            )
        if top.get("kind") != kind:
            self.fail("kind", f"Unsupported value: {show_value(top.get('kind'))}: supported values: {show_value(kind)}")
        return top


def _quota_units(resource: str, amount: Fraction | None) -> int | None:
    return None if amount is None else to_units(resource, amount)


def _resource_groups(reader: _Reader, value: object, path: str, *, has_parent: bool) -> tuple[ResourceGroup, ...]:
    groups: list[ResourceGroup] = []
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for g_index, raw_group in enumerate(reader.items(value, path)):
        g_path = f"{path}[{g_index}]"
        group = reader.fields(raw_group, g_path, frozenset({"coveredResources", "flavors"}))
        if group is None:
            continue
        covered: list[str] = []
        raw_covered = reader.items(group.get("coveredResources"), f"{g_path}.coveredResources", 64)
        if not raw_covered:
            reader.fail(f"{g_path}.coveredResources", "Required value")
        for r_index, raw_name in enumerate(raw_covered):
            name = reader.string(raw_name, f"{g_path}.coveredResources[{r_index}]", required=True)
            if name is None:
                continue
            if name in seen_resources:
                reader.fail(
                    f"{g_path}.coveredResources[{r_index}]",
                    f"Duplicate value: {show_value(name)}: a resource may be covered by one resource group only",
                )
            seen_resources.add(name)
            covered.append(name)
        flavors: list[FlavorQuotas] = []
        raw_flavors = reader.items(group.get("flavors"), f"{g_path}.flavors", 64)
        if not raw_flavors:
            reader.fail(f"{g_path}.flavors", "Required value")
        for f_index, raw_flavor in enumerate(raw_flavors):
            f_path = f"{g_path}.flavors[{f_index}]"
            flavor = reader.fields(raw_flavor, f_path, frozenset({"name", "resources"}))
            if flavor is None:
                continue
            flavor_name = reader.name(flavor.get("name"), f"{f_path}.name")
            if flavor_name is not None:
                if flavor_name in seen_flavors:
                    reader.fail(
                        f"{f_path}.name",
                        f"Duplicate value: {show_value(flavor_name)}: a flavor may appear in one resource group only",
                    )
                seen_flavors.add(flavor_name)
            quotas = _flavor_resources(reader, flavor.get("resources"), f"{f_path}.resources", has_parent=has_parent)
            if [quota.name for quota in quotas] != covered and len(quotas) == len(
                reader.items(flavor.get("resources"), f"{f_path}.resources", 64)
            ):
                reader.invalid(
                    f"{f_path}.resources",
                    [quota.name for quota in quotas],
                    f"must list the covered resources {covered}, in the same order",
                )
            flavors.append(FlavorQuotas(flavor_name or "", tuple(quotas)))
        groups.append(ResourceGroup(tuple(covered), tuple(flavors)))
    return tuple(groups)


def _flavor_resources(reader: _Reader, value: object, path: str, *, has_parent: bool) -> list[ResourceQuota]:
    quotas: list[ResourceQuota] = []
    for index, raw in enumerate(reader.items(value, path, 64)):
        where = f"{path}[{index}]"
        spec = reader.fields(raw, where, frozenset({"name", "nominalQuota", "borrowingLimit", "lendingLimit"}))
        if spec is None:
            continue
        name = reader.string(spec.get("name"), f"{where}.name", required=True)
        nominal = reader.amount(spec.get("nominalQuota"), f"{where}.nominalQuota", required=True)
        borrowing = reader.amount(spec.get("borrowingLimit"), f"{where}.borrowingLimit")
        lending = reader.amount(spec.get("lendingLimit"), f"{where}.lendingLimit")
        for field_name, limit in (("borrowingLimit", borrowing), ("lendingLimit", lending)):
            if limit is not None and not has_parent:
                reader.fail(f"{where}.{field_name}", "must be unset when cohortName is empty")
        if lending is not None and nominal is not None and lending > nominal:
            reader.invalid(
                f"{where}.lendingLimit", spec.get("lendingLimit"), "must be less than or equal to nominalQuota"
            )
        if name is None or nominal is None:
            continue
        quotas.append(
            ResourceQuota(name, to_units(name, nominal), _quota_units(name, borrowing), _quota_units(name, lending))
        )
    return quotas


def _fair_weight(reader: _Reader, value: object, path: str) -> Fraction:
    spec = reader.fields(value, path, frozenset({"weight"}))
    if spec is None:
        return Fraction(1)
    weight = reader.amount(spec.get("weight"), f"{path}.weight")
    return Fraction(1) if weight is None else weight


def _finish(reader: _Reader, kind: str, name: str, result: _T) -> _T:
    if reader.errors:
        raise InvalidObjectError(kind, name, reader.errors)
    return result


def _collect(parse: Callable[[_Reader, object], object]) -> Callable[[object], list[FieldError]]:
    def validate(obj: object) -> list[FieldError]:
        reader = _Reader()
        parse(reader, obj)
        return reader.errors

    return validate


def _read_resource_flavor(reader: _Reader, obj: object) -> ResourceFlavor:
    top = reader.header(obj, KUEUE_API, "ResourceFlavor", frozenset({"spec"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    spec = (
        reader.fields(top.get("spec"), "spec", frozenset({"nodeLabels", "nodeTaints", "tolerations", "topologyName"}))
        or {}
    )
    labels = reader.string_map(spec.get("nodeLabels"), "spec.nodeLabels", 8)
    taints: list[Taint] = []
    for index, raw in enumerate(reader.items(spec.get("nodeTaints"), "spec.nodeTaints", 8)):
        where = f"spec.nodeTaints[{index}]"
        taint = reader.fields(raw, where, frozenset({"key", "value", "effect", "timeAdded"}))
        if taint is None:
            continue
        key = reader.string(taint.get("key"), f"{where}.key", required=True)
        effect = reader.choice(taint.get("effect"), f"{where}.effect", TaintEffect, TaintEffect.NO_SCHEDULE)
        if taint.get("effect") is None:
            reader.fail(f"{where}.effect", "Required value")
        if key is not None:
            taints.append(Taint(key, reader.string(taint.get("value"), f"{where}.value") or "", effect))
    tolerations = reader.tolerations(spec.get("tolerations"), "spec.tolerations", 8)
    topology = reader.string(spec.get("topologyName"), "spec.topologyName")
    return ResourceFlavor(name, labels, tuple(taints), tolerations, topology)


def _read_cluster_queue(reader: _Reader, obj: object) -> ClusterQueue:
    top = reader.header(obj, KUEUE_API, "ClusterQueue", frozenset({"spec", "status"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    spec = (
        reader.fields(
            top.get("spec"),
            "spec",
            frozenset(
                {
                    "resourceGroups",
                    "cohortName",
                    "namespaceSelector",
                    "queueingStrategy",
                    "stopPolicy",
                    "flavorFungibility",
                    "preemption",
                    "fairSharing",
                    "admissionChecksStrategy",
                    "admissionScope",
                }
            ),
        )
        or {}
    )
    cohort = reader.name(spec.get("cohortName"), "spec.cohortName", required=False)
    groups = _resource_groups(reader, spec.get("resourceGroups"), "spec.resourceGroups", has_parent=cohort is not None)
    selector = (
        None
        if spec.get("namespaceSelector") is None
        else reader.selector(spec["namespaceSelector"], "spec.namespaceSelector")
    )
    fungibility_spec = (
        reader.fields(
            spec.get("flavorFungibility"), "spec.flavorFungibility", frozenset({"whenCanBorrow", "whenCanPreempt"})
        )
        or {}
    )
    fungibility = FlavorFungibility(
        reader.choice(
            fungibility_spec.get("whenCanBorrow"),
            "spec.flavorFungibility.whenCanBorrow",
            WhenCanBorrow,
            WhenCanBorrow.MAY_STOP_SEARCH,
        ),
        reader.choice(
            fungibility_spec.get("whenCanPreempt"),
            "spec.flavorFungibility.whenCanPreempt",
            WhenCanPreempt,
            WhenCanPreempt.TRY_NEXT_FLAVOR,
        ),
    )
    preemption = _preemption(reader, spec.get("preemption"))
    return ClusterQueue(
        name=name,
        resource_groups=groups,
        cohort=cohort,
        namespace_selector=selector,
        queueing_strategy=reader.choice(
            spec.get("queueingStrategy"), "spec.queueingStrategy", QueueingStrategy, QueueingStrategy.BEST_EFFORT_FIFO
        ),
        stop_policy=reader.choice(spec.get("stopPolicy"), "spec.stopPolicy", StopPolicy, StopPolicy.NONE),
        flavor_fungibility=fungibility,
        preemption=preemption,
        fair_weight=_fair_weight(reader, spec.get("fairSharing"), "spec.fairSharing"),
    )


def _preemption(reader: _Reader, value: object) -> Preemption:
    spec = (
        reader.fields(
            value, "spec.preemption", frozenset({"reclaimWithinCohort", "withinClusterQueue", "borrowWithinCohort"})
        )
        or {}
    )
    reclaim = reader.choice(
        spec.get("reclaimWithinCohort"), "spec.preemption.reclaimWithinCohort", ReclaimPolicy, ReclaimPolicy.NEVER
    )
    within = reader.choice(
        spec.get("withinClusterQueue"),
        "spec.preemption.withinClusterQueue",
        WithinClusterQueuePolicy,
        WithinClusterQueuePolicy.NEVER,
    )
    borrow = (
        reader.fields(
            spec.get("borrowWithinCohort"),
            "spec.preemption.borrowWithinCohort",
            frozenset({"policy", "maxPriorityThreshold"}),
        )
        or {}
    )
    policy = reader.choice(
        borrow.get("policy"),
        "spec.preemption.borrowWithinCohort.policy",
        BorrowWithinCohortPolicy,
        BorrowWithinCohortPolicy.NEVER,
    )
    threshold = reader.integer(
        borrow.get("maxPriorityThreshold"), "spec.preemption.borrowWithinCohort.maxPriorityThreshold"
    )
    if policy is not BorrowWithinCohortPolicy.NEVER and reclaim is ReclaimPolicy.NEVER:
        reader.invalid(
            "spec.preemption",
            "object",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never: "
            "enable reclaimWithinCohort to preempt while borrowing",
        )
    return Preemption(reclaim, within, policy, threshold)


def _read_local_queue(reader: _Reader, obj: object) -> LocalQueue:
    top = reader.header(obj, KUEUE_API, "LocalQueue", frozenset({"spec", "status"})) or {}
    name, namespace = reader.metadata(top, namespaced=True)
    spec = reader.fields(top.get("spec"), "spec", frozenset({"clusterQueue", "stopPolicy", "fairSharing"})) or {}
    cluster_queue = reader.name(spec.get("clusterQueue"), "spec.clusterQueue") or ""
    _fair_weight(reader, spec.get("fairSharing"), "spec.fairSharing")
    stop = reader.choice(spec.get("stopPolicy"), "spec.stopPolicy", StopPolicy, StopPolicy.NONE)
    return LocalQueue(namespace, name, cluster_queue, stop)


def _read_cohort(reader: _Reader, obj: object) -> Cohort:
    top = reader.header(obj, KUEUE_API, "Cohort", frozenset({"spec", "status"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    spec = reader.fields(top.get("spec"), "spec", frozenset({"parentName", "resourceGroups", "fairSharing"})) or {}
    parent = reader.name(spec.get("parentName"), "spec.parentName", required=False)
    if parent is not None and parent == name:
        reader.invalid("spec.parentName", parent, "a Cohort cannot be its own parent")
    groups = _resource_groups(reader, spec.get("resourceGroups"), "spec.resourceGroups", has_parent=parent is not None)
    return Cohort(name, parent, groups, _fair_weight(reader, spec.get("fairSharing"), "spec.fairSharing"))


def _read_priority_class(reader: _Reader, obj: object) -> WorkloadPriorityClass:
    top = reader.header(obj, KUEUE_API, "WorkloadPriorityClass", frozenset({"value", "description"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    value = reader.integer(top.get("value"), "value", required=True)
    if value is not None and not -(2**31) <= value < 2**31:
        reader.invalid("value", value, "must be a 32-bit integer")
    return WorkloadPriorityClass(name, value or 0, reader.string(top.get("description"), "description") or "")


def _read_namespace(reader: _Reader, obj: object) -> Namespace:
    top = reader.header(obj, "v1", "Namespace", frozenset({"spec", "status"})) or {}
    name, _ = reader.metadata(top, namespaced=False)
    meta = top.get("metadata") if isinstance(top.get("metadata"), Mapping) else {}
    labels = reader.string_map((meta or {}).get("labels"), "metadata.labels")
    labels["kubernetes.io/metadata.name"] = name
    return Namespace(name, labels)


def _read_configuration(reader: _Reader, obj: object) -> Configuration:
    known = frozenset(
        {
            "namespace",
            "manageJobsWithoutQueueName",
            "managedJobsNamespaceSelector",
            "waitForPodsReady",
            "fairSharing",
            "health",
            "metrics",
            "webhook",
            "leaderElection",
            "controller",
            "clientConnection",
            "integrations",
            "queueVisibility",
            "internalCertManagement",
            "multiKueue",
            "resources",
            "featureGates",
            "objectRetentionPolicies",
            "admissionFairSharing",
        }
    )
    top = reader.header(obj, CONFIG_API, "Configuration", known) or {}
    manage = reader.boolean(top.get("manageJobsWithoutQueueName"), "manageJobsWithoutQueueName", False)
    selector = None
    if top.get("managedJobsNamespaceSelector") is not None:
        selector = reader.selector(top["managedJobsNamespaceSelector"], "managedJobsNamespaceSelector")
    wait: WaitForPodsReady | None = None
    if top.get("waitForPodsReady") is not None:
        wait = _wait_for_pods_ready(reader, top["waitForPodsReady"])
    fair: FairSharing | None = None
    if top.get("fairSharing") is not None:
        spec = reader.fields(top["fairSharing"], "fairSharing", frozenset({"preemptionStrategies", "enable"})) or {}
        strategies = tuple(
            reader.choice(
                raw,
                f"fairSharing.preemptionStrategies[{index}]",
                FairSharingStrategy,
                FairSharingStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
            )
            for index, raw in enumerate(
                reader.items(spec.get("preemptionStrategies"), "fairSharing.preemptionStrategies", 2)
            )
        )
        fair = FairSharing(strategies) if strategies else FairSharing()
    return Configuration(manage, selector, wait, fair)


def _wait_for_pods_ready(reader: _Reader, value: object) -> WaitForPodsReady:
    spec = (
        reader.fields(
            value,
            "waitForPodsReady",
            frozenset({"enable", "timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"}),
        )
        or {}
    )
    timeout = 1800
    if spec.get("timeout") is not None:
        timeout = _duration_seconds(reader, spec["timeout"], "waitForPodsReady.timeout") or timeout
    recovery: int | None = timeout  # as Kueue: the timeout's value when absent; "0s" turns it off
    if spec.get("recoveryTimeout") is not None:
        recovery = _duration_seconds(reader, spec["recoveryTimeout"], "waitForPodsReady.recoveryTimeout") or None
    block = reader.boolean(spec.get("blockAdmission"), "waitForPodsReady.blockAdmission", False)
    requeuing = (
        reader.fields(
            spec.get("requeuingStrategy"),
            "waitForPodsReady.requeuingStrategy",
            frozenset({"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}),
        )
        or {}
    )
    where = "waitForPodsReady.requeuingStrategy"
    base = reader.integer(requeuing.get("backoffBaseSeconds"), f"{where}.backoffBaseSeconds", minimum=1)
    maximum = reader.integer(requeuing.get("backoffMaxSeconds"), f"{where}.backoffMaxSeconds", minimum=1)
    limit = reader.integer(requeuing.get("backoffLimitCount"), f"{where}.backoffLimitCount", minimum=0)
    stamp = requeuing.get("timestamp", "Eviction")
    if stamp not in ("Eviction", "Creation"):
        reader.invalid(f"{where}.timestamp", stamp, 'must be "Eviction" or "Creation"')
        stamp = "Eviction"
    return WaitForPodsReady(timeout, base or 60, maximum or 3600, limit, recovery, block, str(stamp))


def _duration_seconds(reader: _Reader, value: object, path: str) -> int | None:
    """A duration (:mod:`kuota.durations`: ``"30m"``, ``"1h30m"``) in whole seconds."""
    if isinstance(value, str) and value.strip().startswith("-"):
        reader.invalid(path, value, "must not be negative")
        return None
    if isinstance(value, str):
        try:
            return int(parse_duration(value))
        except DurationError:
            pass  # worded below, as for a value that is not a string
    reader.invalid(path, value, 'must be a duration such as "30m" or "1h"')
    return None


def _read_workload(reader: _Reader, obj: object, priorities: Mapping[str, int]) -> Workload:
    top = reader.header(obj, KUEUE_API, "Workload", frozenset({"spec", "status"})) or {}
    name, namespace = reader.metadata(top, namespaced=True)
    meta = top.get("metadata") if isinstance(top.get("metadata"), Mapping) else {}
    spec = (
        reader.fields(
            top.get("spec"),
            "spec",
            frozenset(
                {
                    "podSets",
                    "queueName",
                    "priorityClassRef",
                    "priority",
                    "active",
                    "maximumExecutionTimeSeconds",
                }
            ),
        )
        or {}
    )
    queue = reader.name(spec.get("queueName"), "spec.queueName", required=False) or ""
    pod_sets = tuple(
        pod_set
        for index, raw in enumerate(reader.items(spec.get("podSets"), "spec.podSets", 8))
        if (pod_set := _pod_set(reader, raw, f"spec.podSets[{index}]")) is not None
    )
    if not pod_sets:
        reader.fail("spec.podSets", "Required value")
    priority_class = None
    if spec.get("priorityClassRef") is not None:
        ref = reader.fields(spec["priorityClassRef"], "spec.priorityClassRef", frozenset({"group", "kind", "name"}))
        priority_class = reader.name((ref or {}).get("name"), "spec.priorityClassRef.name")
    priority = reader.integer(spec.get("priority"), "spec.priority")
    if priority is None:
        priority = priorities.get(priority_class, 0) if priority_class is not None else 0
    max_exec = reader.integer(spec.get("maximumExecutionTimeSeconds"), "spec.maximumExecutionTimeSeconds", minimum=1)
    created = 0.0
    stamp = (meta or {}).get("creationTimestamp")
    if isinstance(stamp, str):
        try:
            created = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            reader.invalid("metadata.creationTimestamp", stamp, "must be an RFC 3339 time")
    return Workload(
        namespace=namespace,
        name=name,
        queue_name=queue,
        pod_sets=pod_sets,
        created=created,
        uid=str((meta or {}).get("uid") or ""),
        priority=priority,
        priority_class=priority_class,
        active=reader.boolean(spec.get("active"), "spec.active", True),
        max_execution_seconds=max_exec,
    )


def _pod_set(reader: _Reader, raw: object, path: str) -> PodSet | None:
    spec = reader.fields(raw, path, frozenset({"name", "count", "minCount", "template", "topologyRequest"}))
    if spec is None:
        return None
    name = reader.name(spec.get("name"), f"{path}.name", label=True) or "main"
    count = reader.integer(spec.get("count"), f"{path}.count", minimum=0)
    count = 1 if count is None else count
    min_count = reader.integer(spec.get("minCount"), f"{path}.minCount", minimum=1)
    if min_count is not None and min_count > count:
        reader.invalid(f"{path}.minCount", min_count, "must be less than or equal to count")
    template = spec.get("template") if isinstance(spec.get("template"), Mapping) else {}
    pod_spec = (template or {}).get("spec") if isinstance((template or {}).get("spec"), Mapping) else {}
    requests = pod_requests(reader, pod_spec or {}, f"{path}.template.spec")
    selector = reader.string_map((pod_spec or {}).get("nodeSelector"), f"{path}.template.spec.nodeSelector")
    tolerations = reader.tolerations((pod_spec or {}).get("tolerations"), f"{path}.template.spec.tolerations", None)
    affinity = reader.node_affinity((pod_spec or {}).get("affinity"), f"{path}.template.spec.affinity")
    return PodSet(name, count, requests, min_count, selector, tolerations, affinity)


def pod_requests(reader: _Reader, pod_spec: Mapping[str, Any], path: str) -> dict[str, int]:
    """A pod's effective requests: the larger of the containers' sum and any init container, plus overhead."""

    def container_requests(field_name: str) -> list[dict[str, Fraction]]:
        found: list[dict[str, Fraction]] = []
        for index, container in enumerate(reader.items(pod_spec.get(field_name), f"{path}.{field_name}", None)):
            where = f"{path}.{field_name}[{index}].resources"
            resources = container.get("resources") if isinstance(container, Mapping) else None
            fields = reader.fields(resources, where, _RESOURCE_REQUIREMENTS) or {}
            # Kubernetes defaults a missing request to the limit, so a GPU given only as a limit still counts.
            merged = reader.resource_amounts(fields.get("limits"), f"{where}.limits") | reader.resource_amounts(
                fields.get("requests"), f"{where}.requests"
            )
            found.append(merged)
        return found

    total: dict[str, Fraction] = {}
    for container in container_requests("containers"):
        for name, amount in container.items():
            total[name] = total.get(name, Fraction(0)) + amount
    for init in container_requests("initContainers"):
        for name, amount in init.items():
            total[name] = max(total.get(name, Fraction(0)), amount)
    for name, overhead in reader.resource_amounts(pod_spec.get("overhead"), f"{path}.overhead").items():
        total[name] = total.get(name, Fraction(0)) + overhead
    return {name: to_units(name, amount) for name, amount in sorted(total.items()) if amount > 0}


def _object_name(obj: object) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not name:
        return "<unnamed>"
    return name if isinstance(name, str) and len(name) <= 253 and name.isprintable() else show_value(name)


def _parser(kind: str, read: Callable[[_Reader, object], _T]) -> Callable[[object], _T]:
    def parse(obj: object) -> _T:
        reader = _Reader()
        result = read(reader, obj)
        return _finish(reader, kind, _object_name(obj), result)

    parse.__doc__ = f"Parse and default a {kind}; raise InvalidObjectError listing every bad field."
    return parse


parse_resource_flavor = _parser("ResourceFlavor", _read_resource_flavor)
parse_cluster_queue = _parser("ClusterQueue", _read_cluster_queue)
parse_local_queue = _parser("LocalQueue", _read_local_queue)
parse_cohort = _parser("Cohort", _read_cohort)
parse_workload_priority_class = _parser("WorkloadPriorityClass", _read_priority_class)
parse_namespace = _parser("Namespace", _read_namespace)
parse_configuration = _parser("Configuration", _read_configuration)

validate_resource_flavor = _collect(_read_resource_flavor)
validate_cluster_queue = _collect(_read_cluster_queue)
validate_local_queue = _collect(_read_local_queue)
validate_cohort = _collect(_read_cohort)
validate_workload_priority_class = _collect(_read_priority_class)
validate_namespace = _collect(_read_namespace)
validate_configuration = _collect(_read_configuration)


def parse_required_node_affinity(raw: object, path: str) -> tuple[tuple[Requirement, ...], ...]:
    """A ``requiredDuringSchedulingIgnoredDuringExecution`` node selector given outside a pod spec (the
    simulator's workloads); raise InvalidObjectError listing every bad field under ``path``."""
    reader = _Reader()
    terms = reader.required_node_terms(raw, path)
    return _finish(reader, "node affinity", path, terms)


def parse_workload(obj: object, priorities: Mapping[str, int] | None = None) -> Workload:
    """Parse a Workload; ``priorities`` maps WorkloadPriorityClass names to values for ``priorityClassRef``."""
    reader = _Reader()
    workload = _read_workload(reader, obj, priorities or {})
    return _finish(reader, "Workload", _object_name(obj), workload)


def validate_workload(obj: object) -> list[FieldError]:
    reader = _Reader()
    _read_workload(reader, obj, {})
    return reader.errors


_READERS: dict[tuple[str, str], Callable[[_Reader, object], ApiObject]] = {
    (KUEUE_API, "ResourceFlavor"): _read_resource_flavor,
    (KUEUE_API, "ClusterQueue"): _read_cluster_queue,
    (KUEUE_API, "LocalQueue"): _read_local_queue,
    (KUEUE_API, "Cohort"): _read_cohort,
    (KUEUE_API, "WorkloadPriorityClass"): _read_priority_class,
    ("v1", "Namespace"): _read_namespace,
    (CONFIG_API, "Configuration"): _read_configuration,
}


def parse_object(obj: object) -> ApiObject:
    """Parse any configuration object the engine understands, dispatching on apiVersion and kind."""
    api_version = obj.get("apiVersion") if isinstance(obj, Mapping) else None
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    # Only strings name a kind: anything else (a list nested 5,000 deep, an aliased YAML bomb) is shown, not str()-ed.
    if isinstance(api_version, str) and isinstance(kind, str) and (read := _READERS.get((api_version, kind))):
        reader = _Reader()
        result = read(reader, obj)
        return _finish(reader, kind, _object_name(obj), result)
    known = ", ".join(f"{api} {k}" for api, k in _READERS)
    raise InvalidObjectError(
        kind if isinstance(kind, str) and kind.isprintable() else show_value(kind),
        _object_name(obj),
        [
            FieldError(
                "kind", f"Unsupported value: {show_value(kind)} ({show_value(api_version)}): the engine reads {known}"
            )
        ],
    )
