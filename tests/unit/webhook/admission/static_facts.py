"""In-memory cluster facts and a JSON Patch applier for the admission tests."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kuota.webhook.admission.json_patch import PatchOperation


@dataclass
class StaticClusterFacts:
    local_queues: set[tuple[str, str]] = field(default_factory=set)
    priority_classes: set[str] = field(default_factory=set)
    admitted_jobs: set[tuple[str, str]] = field(default_factory=set)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)

    def local_queue_exists(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.local_queues

    def priority_class_exists(self, name: str) -> bool:
        return name in self.priority_classes

    def job_workload_admitted(self, namespace: str, job_uid: str) -> bool:
        return (namespace, job_uid) in self.admitted_jobs

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return {"kubernetes.io/metadata.name": namespace, **self.namespaces.get(namespace, {})}


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(document: Mapping[str, Any], operations: list[PatchOperation]) -> dict[str, Any]:
    """RFC 6902 ``add`` into objects, enough to check what the webhook emits."""
    result = copy.deepcopy(dict(document))
    for operation in operations:
        assert operation["op"] == "add", operation
        tokens = [_unescape(token) for token in operation["path"].split("/")[1:]]
        target: Any = result
        for token in tokens[:-1]:
            target = target[token]
        target[tokens[-1]] = copy.deepcopy(operation["value"])
    return result
