"""The generic field reader the decoders (``decoding``, ``kubernetes_fields``) are written with.

``FieldReader`` reads the fields of one decoded YAML/JSON object: typed accessors (string, DNS name, integer,
boolean, enum choice, quantity, string map, list, nested object) that check a field and record a
``FieldError`` with its path (``spec.resourceGroups[0].flavors[1].name``) instead of raising, so that one
pass reports every bad field at once, in the API server's wording. Unknown fields are errors (``fields``).
It knows no kind: ``header`` and ``metadata`` read what every API object has.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from fractions import Fraction
from typing import Any, TypeVar

from kuota.durations import DurationError, parse_duration
from kuota.engine.errors import FieldError, InvalidObjectError, QuantityError, show_value
from kuota.engine.quantities import parse_amount

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
# The most items a list field may have where ``items`` is given no other bound.
MAX_ITEMS = 16
_E = TypeVar("_E", bound=StrEnum)
_T = TypeVar("_T")


class FieldReader:
    """Reads the fields of one decoded object, accumulating API-server-style errors (``errors``): each accessor
    takes a field's raw value and its path, checks its type and bounds, and returns it typed (None, or the
    default, where it is bad)."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, path: str, detail: str) -> None:
        self.errors.append(FieldError(path, detail))

    def invalid(self, path: str, value: object, detail: str) -> None:
        self.fail(path, f"Invalid value: {show_value(value)}: {detail}")

    def fields(self, value: object, path: str, allowed: frozenset[str]) -> dict[str, Any] | None:
        """An object's fields ({} when unset), each one not in ``allowed`` reported as unknown."""
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

    def items(self, value: object, path: str, max_items: int | None = MAX_ITEMS) -> list[Any]:
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

    def metadata(self, obj: Mapping[str, Any], *, namespaced: bool) -> tuple[str, str]:
        """The object's name and namespace ("" for a cluster-scoped one, where a namespace is an error)."""
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
        """The object's top-level fields, checking apiVersion and kind; ``extra`` are those besides metadata."""
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

    def duration(self, value: object, path: str) -> int | None:
        """A duration (:mod:`kuota.durations`: ``"30m"``, ``"1h30m"``) in whole seconds; a negative one is named."""
        if isinstance(value, str) and value.strip().startswith("-"):
            self.invalid(path, value, "must not be negative")
            return None
        if isinstance(value, str):
            try:
                return int(parse_duration(value))
            except DurationError:
                pass  # worded below, as for a value that is not a string
        self.invalid(path, value, 'must be a duration such as "30m" or "1h"')
        return None


def finish(reader: FieldReader, kind: str, name: str, result: _T) -> _T:
    """``result``, or InvalidObjectError listing every error ``reader`` found in the object."""
    if reader.errors:
        raise InvalidObjectError(kind, name, reader.errors)
    return result


def object_name(obj: object) -> str:
    """A decoded object's ``metadata.name`` as an error may quote it."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not name:
        return "<unnamed>"
    return name if isinstance(name, str) and len(name) <= 253 and name.isprintable() else show_value(name)
