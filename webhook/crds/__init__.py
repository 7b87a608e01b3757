"""The ``kueue.x-k8s.io/v1beta2`` CRDs kuota serves: one Python source of truth, rendered on demand.

``crd_manifests()`` returns the CustomResourceDefinition objects (tests install them; the Helm chart is
rendered from ``python -m kuota.webhook.crds --out DIR``). :mod:`kuota.webhook.crds.definitions` holds the kinds,
:mod:`kuota.webhook.crds.schemas` the schema building blocks.
"""

from __future__ import annotations

import copy
from typing import Any

from kuota.webhook.crds.definitions import DEFINITIONS


def crd_manifests() -> list[dict[str, Any]]:
    """The CRDs in install order, as plain dicts (fresh copies: callers may modify them)."""
    return [copy.deepcopy(definition.manifest()) for definition in DEFINITIONS]


__all__ = ["crd_manifests"]
