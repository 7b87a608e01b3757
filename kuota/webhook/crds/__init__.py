"""The ``kueue.x-k8s.io`` CRDs kuota serves: one Python source of truth, rendered on demand.

``crd_manifests()`` returns the CustomResourceDefinition objects (tests install them; the Helm chart is
rendered from ``python -m kuota.webhook.crds --out DIR``). :mod:`kuota.webhook.crds.definitions` holds the kinds,
:mod:`kuota.webhook.crds.schemas` the schema building blocks, :mod:`kuota.webhook.crds.versions` the v1beta1
version served beside the stored v1beta2 through the conversion webhook.
"""

from __future__ import annotations

import copy
from typing import Any

from kuota.webhook.crds.definitions import DEFINITIONS
from kuota.webhook.crds.versions import with_older_version


def crd_manifests() -> list[dict[str, Any]]:
    """The CRDs in install order, as plain dicts (fresh copies: callers may modify them)."""
    return [with_older_version(copy.deepcopy(definition.manifest())) for definition in DEFINITIONS]


__all__ = ["crd_manifests"]
