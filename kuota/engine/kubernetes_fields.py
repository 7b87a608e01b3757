"""Readers of the Kubernetes structures that Kueue's objects embed: label selectors, node selectors (a pod's
required node affinity), tolerations, and a pod's effective resource requests.

Each takes the ``FieldReader`` of the object being read and the structure's path in it, and validates as the
API server does, with its wording.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kuota.engine.errors import show_value
from kuota.engine.field_reader import FieldReader
from kuota.engine.model import LabelSelector, Requirement, TaintEffect, Toleration
from kuota.engine.quantities import to_units

_NODE_AFFINITY = frozenset(
    {"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"}
)
_NODE_SELECTOR = frozenset({"nodeSelectorTerms"})
_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")
_NODE_SELECTOR_TERM = frozenset({"matchExpressions", "matchFields"})
_INTEGER = re.compile(r"[+-]?[0-9]+")
_RESOURCE_REQUIREMENTS = frozenset({"limits", "requests", "claims"})


def read_label_selector(reader: FieldReader, value: object, path: str) -> LabelSelector | None:
    """A LabelSelector (``matchLabels`` and ``matchExpressions``, ANDed)."""
    spec = reader.fields(value, path, frozenset({"matchLabels", "matchExpressions"}))
    if spec is None:
        return None
    labels = reader.string_map(spec.get("matchLabels"), f"{path}.matchLabels")
    expressions = reader.items(spec.get("matchExpressions"), f"{path}.matchExpressions", None)
    requirements = [
        requirement
        for index, raw in enumerate(expressions)
        if (requirement := read_requirement(reader, raw, f"{path}.matchExpressions[{index}]", _LABEL_OPERATORS))
    ]
    return LabelSelector(tuple(sorted(labels.items())), tuple(requirements))


def read_node_affinity(reader: FieldReader, affinity: object, path: str) -> tuple[tuple[Requirement, ...], ...]:
    """A pod's required node affinity, the terms of ``affinity.nodeAffinity.requiredDuringScheduling
    IgnoredDuringExecution``; preferred terms and pod (anti-)affinity do not bear on admission."""
    if not isinstance(affinity, Mapping) or affinity.get("nodeAffinity") is None:
        return ()
    node_path = f"{path}.nodeAffinity"
    node = reader.fields(affinity["nodeAffinity"], node_path, _NODE_AFFINITY) or {}
    return read_node_selector(
        reader,
        node.get("requiredDuringSchedulingIgnoredDuringExecution"),
        f"{node_path}.requiredDuringSchedulingIgnoredDuringExecution",
    )


def read_node_selector(reader: FieldReader, required: object, path: str) -> tuple[tuple[Requirement, ...], ...]:
    """A NodeSelector (``nodeSelectorTerms``, ORed; each term's matchExpressions ANDed), as the API server
    validates it. matchFields select nodes by name, which no flavor has: they are not read."""
    spec = reader.fields(required, path, _NODE_SELECTOR)
    if not spec:
        return ()
    raw_terms = reader.items(spec.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms", None)
    if not raw_terms:
        reader.fail(f"{path}.nodeSelectorTerms", "Required value: must have at least one node selector term")
    terms: list[tuple[Requirement, ...]] = []
    for index, raw in enumerate(raw_terms):
        where = f"{path}.nodeSelectorTerms[{index}]"
        term = reader.fields(raw, where, _NODE_SELECTOR_TERM) or {}
        expressions = reader.items(term.get("matchExpressions"), f"{where}.matchExpressions", None)
        terms.append(
            tuple(
                requirement
                for number, expression in enumerate(expressions)
                if (
                    requirement := read_requirement(
                        reader, expression, f"{where}.matchExpressions[{number}]", _NODE_OPERATORS
                    )
                )
            )
        )
    return tuple(terms)


def read_requirement(reader: FieldReader, raw: object, where: str, operators: tuple[str, ...]) -> Requirement | None:
    """One matchExpressions entry of a label selector or a node selector (which adds Gt and Lt)."""
    expression = reader.fields(raw, where, frozenset({"key", "operator", "values"}))
    if expression is None:
        return None
    key = reader.string(expression.get("key"), f"{where}.key", required=True)
    operator = reader.string(expression.get("operator"), f"{where}.operator", required=True)
    values = tuple(str(v) for v in reader.items(expression.get("values"), f"{where}.values", None))
    if operator is None or key is None:
        return None
    if operator not in operators:
        supported = ", ".join(show_value(name) for name in operators)
        reader.fail(f"{where}.operator", f"Unsupported value: {show_value(operator)}: supported values: {supported}")
        return None
    if operator in ("In", "NotIn") and not values:
        reader.fail(f"{where}.values", "Required value: must be specified when `operator` is 'In' or 'NotIn'")
    elif operator in ("Exists", "DoesNotExist") and values:
        reader.fail(f"{where}.values", "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            reader.fail(
                f"{where}.values", "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
            )
        elif not _INTEGER.fullmatch(values[0]):
            reader.invalid(f"{where}.values[0]", values[0], "must be an integer")
    return Requirement(key, operator, values)


def read_tolerations(reader: FieldReader, value: object, path: str, max_items: int | None) -> tuple[Toleration, ...]:
    """A list of tolerations (of a pod, or that a ResourceFlavor adds to its pods)."""
    result: list[Toleration] = []
    allowed = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
    for index, raw in enumerate(reader.items(value, path, max_items)):
        where = f"{path}[{index}]"
        spec = reader.fields(raw, where, allowed)
        if spec is None:
            continue
        key = reader.string(spec.get("key"), f"{where}.key") or ""
        operator = reader.string(spec.get("operator"), f"{where}.operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            reader.fail(
                f"{where}.operator",
                f'Unsupported value: {show_value(operator)}: supported values: "Equal", "Exists"',
            )
            continue
        toleration_value = reader.string(spec.get("value"), f"{where}.value") or ""
        if operator == "Exists" and toleration_value:
            reader.invalid(f"{where}.operator", operator, "value must be empty when `operator` is 'Exists'")
        if key == "" and operator != "Exists":
            reader.invalid(
                f"{where}.operator",
                operator,
                'operator must be Exists when `key` is empty, which means "match all values and all keys"',
            )
        effect = spec.get("effect")
        parsed = (
            None
            if effect in (None, "")
            else reader.choice(effect, f"{where}.effect", TaintEffect, TaintEffect.NO_SCHEDULE)
        )
        seconds = reader.integer(spec.get("tolerationSeconds"), f"{where}.tolerationSeconds")
        result.append(Toleration(key, operator, toleration_value, parsed, seconds))
    return tuple(result)


def read_pod_requests(reader: FieldReader, pod_spec: Mapping[str, Any], path: str) -> dict[str, int]:
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
