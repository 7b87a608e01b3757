"""Pod templates kept in lists (a JobSet's replicated jobs, a RayCluster's worker groups), placed and restored.

A merge patch replaces a list whole, so an adapter sends the job's current list with each template's
``nodeSelector`` and ``tolerations`` set; a field left empty is dropped from the copy, as a merge patch's ``null``
would drop it from an object.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def with_scheduling(template: Mapping[str, Any], scheduling: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a pod template whose ``spec`` has ``scheduling``'s ``nodeSelector`` and ``tolerations``."""
    placed = copy.deepcopy(dict(template))
    spec = dict(placed.get("spec") or {})
    for key, value in scheduling.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    placed["spec"] = spec
    return placed
