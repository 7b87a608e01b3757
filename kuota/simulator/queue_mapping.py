"""Which LocalQueue a trace user's jobs go to: a stable hash of the user id (rendezvous hashing).

Real traces name users but not teams. Each user is sent to the queue whose score
``sha256(user + "\\0" + namespace + "/" + queue)`` (first 8 bytes, big-endian) is the highest; ties, which
need a 64-bit collision, go to the greater (namespace, queue). So a user's queue depends only on the user id
and the set of queues: not on row order, on the file, on the order the queues are listed, on other users, or
on Python's per-process ``hash()`` salt. Adding a queue moves only the users who now score highest on it
(about 1/n of them); removing one moves only that queue's users.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from kuota.simulator.errors import SourceSpecError


@dataclass(frozen=True, slots=True, order=True)
class QueueTarget:
    """A LocalQueue, by namespace and name: where a workload is submitted."""

    namespace: str
    queue: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.queue}"


def check_queues(queues: Sequence[QueueTarget]) -> None:
    """Raise unless ``queues`` is a non-empty list without repeats."""
    if not queues:
        raise SourceSpecError("no LocalQueues to send workloads to: give at least one (namespace, queue)")
    seen: set[QueueTarget] = set()
    for target in queues:
        if target in seen:
            raise SourceSpecError(f"LocalQueue {target} is listed twice: list each queue once")
        seen.add(target)


def queue_for_user(user: str, queues: Sequence[QueueTarget]) -> QueueTarget:
    """The queue a trace user's jobs go to (see the module docstring for the rule)."""
    check_queues(queues)
    return max(queues, key=lambda target: (_score(user, target), target))


def _score(user: str, target: QueueTarget) -> int:
    digest = hashlib.sha256(f"{user}\0{target.namespace}/{target.queue}".encode()).digest()
    return int.from_bytes(digest[:8], "big")
