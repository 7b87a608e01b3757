"""Pod templates kept in lists (a JobSet's replicated jobs, a RayCluster's worker groups), placed and restored.

A merge patch replaces a list whole, so an adapter sends the job's current list with each template patched by
its :func:`~kuota.webhook.jobs.adapter.placed_template` or :func:`~kuota.webhook.jobs.adapter.restored_template`
patch, applied here as the API server applies a merge patch to an object (RFC 7386: ``null`` deletes a key).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def patched_template(template: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a pod template with a template merge patch applied."""
    patched: dict[str, Any] = copy.deepcopy(dict(template))
    for key, value in patch.items():
        if value is None:
            patched.pop(key, None)
        elif isinstance(value, Mapping):
            current = patched.get(key)
            patched[key] = patched_template(current if isinstance(current, Mapping) else {}, value)
        else:
            patched[key] = copy.deepcopy(value)
    return patched
