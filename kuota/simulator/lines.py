"""The JSON Lines workload record of ``kuota simulate`` (``docs/simulate.md``).

Every source in this package yields these dicts and nothing else, so the simulator, the benchmarks and a
live driver read one shape. A record carries exactly the contract's keys, never more: the contract is
stable and a strict reader must accept every line we write.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TypedDict

# The annotation on a Workload the manager makes for a serving kind (a Deployment's pod, a StatefulSet): it never
# finishes its work, so the report counts it as serving and replays it with a ``lifetime``.
SERVING_ANNOTATION = "kuota.dev/serving"


class Toleration(TypedDict, total=False):
    key: str
    operator: str
    value: str
    effect: str
    tolerationSeconds: int


class PodSetLine(TypedDict):
    name: str
    count: int
    requests: dict[str, str]  # per pod, as Kubernetes quantities ("4", "128Gi")
    nodeSelector: dict[str, str]
    tolerations: list[Toleration]


class WorkloadLine(TypedDict):
    name: str
    namespace: str
    queue: str
    # a WorkloadPriorityClass of the config; None means the class named default if the config has one, else 0
    priorityClass: str | None
    submitAt: float  # seconds from the start of the run
    duration: float  # seconds of work; after an eviction the rest resumes when admitted again
    maxExecutionSeconds: int | None
    podSets: list[PodSetLine]


def to_json_line(workload: WorkloadLine) -> str:
    """One workload as one compact JSON line, without the newline."""
    return json.dumps(workload, separators=(",", ":"))


def to_jsonl(workloads: Iterable[WorkloadLine]) -> Iterator[str]:
    """Lines (newline included) ready to write, produced lazily so a million workloads never sit in memory."""
    for workload in workloads:
        yield to_json_line(workload) + "\n"
