"""The cluster facts the Job rules read, as a protocol the controller's caches implement.

Reads are synchronous and answered from memory: the webhook sits on the API server's request path and must
never make a network call per review.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class ClusterFacts(Protocol):
    def local_queue_exists(self, namespace: str, name: str) -> bool:
        """Whether LocalQueue ``namespace/name`` exists."""
        ...

    def priority_class_exists(self, name: str) -> bool:
        """Whether WorkloadPriorityClass ``name`` exists."""
        ...

    def job_workload_admitted(self, namespace: str, job_uid: str) -> bool:
        """Whether the Workload of the Job with ``job_uid`` currently holds an admission."""
        ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """The namespace's labels; at least ``kubernetes.io/metadata.name`` even before the cache has it."""
        ...
