"""``status.admission.podSetAssignments[].topologyAssignment``: v1beta2's compact form, written and read.

Kueue v1beta2 (pkg/util/tas/tas_assignment.go) writes an assignment as slices of domains; per level, one
``universal`` value shared by every domain of the slice, or ``individual`` values as ``roots`` between a common
``prefix`` and ``suffix``; pod counts likewise ``universal`` or ``individual``. kuota writes one slice (Kueue's
single-slice encoding; Kueue v0.19+ may split hostnames into runs by prefix, and reads either), and reads any
number of slices; v1beta1's form, every domain listed, is read too (:func:`decode_domains`). Pure: JSON in and
out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kuota.engine import TopologyAssignment


def encode(assignment: TopologyAssignment) -> dict[str, Any]:
    """The v1beta2 form of ``assignment``."""
    levels = list(assignment.levels)
    domains = assignment.domains
    if not domains:
        return {"levels": levels, "slices": []}
    values_per_level = [_compact([values[index] for values, _ in domains]) for index in range(len(levels))]
    counts = [count for _, count in domains]
    pod_counts: dict[str, Any] = (
        {"universal": counts[0]} if all(count == counts[0] for count in counts) else {"individual": counts}
    )
    piece = {"domainCount": len(domains), "valuesPerLevel": values_per_level, "podCounts": pod_counts}
    return {"levels": levels, "slices": [piece]}


def _compact(values: Sequence[str]) -> dict[str, Any]:
    """One level's values: the common value, or the roots between the longest common prefix and suffix (the
    prefix shortened where the two would overlap)."""
    prefix = suffix = values[0]
    for value in values[1:]:
        prefix = prefix[: _common_length(prefix, value)]
        suffix = suffix[len(suffix) - _common_length(suffix[::-1], value[::-1]) :]
    longest = max(len(value) for value in values)
    if len(prefix) == longest:
        return {"universal": prefix}
    shortest = min(len(value) for value in values)
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[: shortest - len(suffix)]
    individual: dict[str, Any] = {}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = [value[len(prefix) : len(value) - len(suffix)] for value in values]
    return {"individual": individual}


def _common_length(left: str, right: str) -> int:
    length = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        length += 1
    return length


def decode(raw: Mapping[str, Any]) -> TopologyAssignment:
    """The assignment a v1beta2 ``topologyAssignment`` says, slices in order (Kueue's ``InternalFrom``)."""
    levels = tuple(str(level) for level in raw.get("levels") or ())
    domains: list[tuple[tuple[str, ...], int]] = []
    for piece in raw.get("slices") or ():
        count = int(piece.get("domainCount") or 0)
        per_level = piece.get("valuesPerLevel") or []
        pod_counts = piece.get("podCounts") or {}
        for index in range(count):
            values = tuple(_value_at(per_level[level], index) for level in range(len(levels)))
            universal = pod_counts.get("universal")
            domains.append((values, int(universal if universal is not None else pod_counts["individual"][index])))
    return TopologyAssignment(levels, tuple(domains))


def decode_domains(raw: Mapping[str, Any]) -> TopologyAssignment:
    """The assignment v1beta1's form says (``levels`` and every domain's ``values`` and pod ``count``), as Kueue
    writes it before v1beta2 and serves it in v1beta1."""
    domains = tuple(
        (tuple(str(value) for value in domain["values"]), int(domain["count"])) for domain in raw.get("domains") or ()
    )
    return TopologyAssignment(tuple(str(level) for level in raw.get("levels") or ()), domains)


def _value_at(values: Mapping[str, Any], index: int) -> str:
    universal = values.get("universal")
    if universal is not None:
        return str(universal)
    individual = values["individual"]
    return f"{individual.get('prefix', '')}{individual['roots'][index]}{individual.get('suffix', '')}"
