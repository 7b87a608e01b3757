"""Building blocks of structural OpenAPI v3 schemas, shared by the kuota CRDs.

Each function returns a fresh dict so that callers may extend what they get without aliasing.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
INT32_MAX = 2**31 - 1


def string(
    description: str = "",
    *,
    pattern: str | None = None,
    max_length: int | None = None,
    min_length: int | None = None,
    enum: list[str] | None = None,
    default: str | None = None,
) -> Schema:
    schema: Schema = {"type": "string"}
    if description:
        schema["description"] = description
    if pattern is not None:
        schema["pattern"] = pattern
    if max_length is not None:
        schema["maxLength"] = max_length
    if min_length is not None:
        schema["minLength"] = min_length
    if enum is not None:
        schema["enum"] = enum
    if default is not None:
        schema["default"] = default
    return schema


def name_reference(description: str) -> Schema:
    return string(description, pattern=DNS_SUBDOMAIN, max_length=253)


def integer(
    description: str = "",
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    default: int | None = None,
    int64: bool = False,
) -> Schema:
    schema: Schema = {"type": "integer", "format": "int64" if int64 else "int32"}
    if description:
        schema["description"] = description
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    if default is not None:
        schema["default"] = default
    return schema


def boolean(description: str = "", *, default: bool | None = None) -> Schema:
    schema: Schema = {"type": "boolean"}
    if description:
        schema["description"] = description
    if default is not None:
        schema["default"] = default
    return schema


def quantity(description: str = "", *, default: int | str | None = None) -> Schema:
    """A resource.Quantity: ``8``, ``180``, ``1800Gi``, ``500m``."""
    schema: Schema = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY,
        "x-kubernetes-int-or-string": True,
    }
    if description:
        schema["description"] = description
    if default is not None:
        schema["default"] = default
    return schema


def non_negative_quantity(description: str = "") -> Schema:
    """A quantity that cannot be negative: no leading ``-`` in the string form, ``minimum: 0`` in the integer."""
    schema = quantity(description)
    schema["pattern"] = "^\\+?" + QUANTITY.removeprefix("^(\\+|-)?")
    schema["minimum"] = 0
    return schema


def date_time(description: str = "") -> Schema:
    schema = string(description)
    schema["format"] = "date-time"
    return schema


def obj(
    properties: dict[str, Schema],
    description: str = "",
    *,
    required: list[str] | None = None,
    default: dict[str, Any] | None = None,
    rules: list[tuple[str, str]] | None = None,
    atomic: bool = False,
) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if description:
        schema["description"] = description
    if required:
        schema["required"] = required
    if default is not None:
        schema["default"] = default
    if rules:
        schema["x-kubernetes-validations"] = [{"rule": rule, "message": message} for rule, message in rules]
    if atomic:
        schema["x-kubernetes-map-type"] = "atomic"
    return schema


def string_map(description: str = "", *, max_properties: int | None = None) -> Schema:
    schema: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
    if description:
        schema["description"] = description
    if max_properties is not None:
        schema["maxProperties"] = max_properties
    return schema


def array(
    items: Schema,
    description: str = "",
    *,
    max_items: int | None = None,
    min_items: int | None = None,
    list_type: str = "atomic",
    map_keys: list[str] | None = None,
    rules: list[tuple[str, str]] | None = None,
) -> Schema:
    schema: Schema = {"type": "array", "items": items, "x-kubernetes-list-type": list_type}
    if description:
        schema["description"] = description
    if max_items is not None:
        schema["maxItems"] = max_items
    if min_items is not None:
        schema["minItems"] = min_items
    if map_keys is not None:
        schema["x-kubernetes-list-map-keys"] = map_keys
    if rules:
        schema["x-kubernetes-validations"] = [{"rule": rule, "message": message} for rule, message in rules]
    return schema


def label_selector(description: str) -> Schema:
    requirement = obj(
        {
            "key": string("the label key the selector applies to"),
            "operator": string(
                "a key's relationship to a set of values", enum=["In", "NotIn", "Exists", "DoesNotExist"]
            ),
            "values": array(string(), "values for In and NotIn; empty for Exists and DoesNotExist"),
        },
        required=["key", "operator"],
    )
    return obj(
        {
            "matchLabels": string_map("{key: value} pairs, ANDed"),
            "matchExpressions": array(requirement, "label selector requirements, ANDed"),
        },
        description,
        atomic=True,
    )


TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def taint() -> Schema:
    return obj(
        {
            "key": string("the taint key", min_length=1),
            "value": string("the taint value"),
            "effect": string("the taint effect", enum=TAINT_EFFECTS),
            "timeAdded": date_time("when a NoExecute taint was added"),
        },
        required=["key", "effect"],
    )


def toleration() -> Schema:
    return obj(
        {
            "key": string("the taint key the toleration applies to; empty matches all keys"),
            "operator": string("Equal (default) or Exists", enum=["Equal", "Exists"]),
            "value": string("the taint value the toleration matches"),
            "effect": string("the taint effect to match; empty matches all effects", enum=TAINT_EFFECTS),
            "tolerationSeconds": integer("for NoExecute: how long the pod stays bound after the taint", int64=True),
        },
    )


def condition() -> Schema:
    """metav1.Condition."""
    return obj(
        {
            "type": string("condition type in CamelCase", max_length=316),
            "status": string("True, False or Unknown", enum=["True", "False", "Unknown"]),
            "observedGeneration": integer("the generation the condition was set for", minimum=0, int64=True),
            "lastTransitionTime": date_time("when the condition last changed status"),
            "reason": string("a CamelCase reason for the last transition", max_length=1024, min_length=1),
            "message": string("a human-readable message about the transition", max_length=32768),
        },
        required=["type", "status", "lastTransitionTime", "reason", "message"],
    )


def conditions(description: str, max_items: int = 16) -> Schema:
    return array(condition(), description, max_items=max_items, list_type="map", map_keys=["type"])


def preserved_object(description: str) -> Schema:
    """An embedded object validated elsewhere (a pod template is checked by the API server with its Job)."""
    return {"type": "object", "description": description, "x-kubernetes-preserve-unknown-fields": True}
