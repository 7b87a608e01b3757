"""What a batch/v1 Job means to the queue, as pure functions over the Job's JSON.

The batch/v1 Job adapter (:mod:`kuota.webhook.jobs.batch_job`) reads a Job through these: its single pod set
``main`` carries the Job's pod template *as submitted*, which is also what an eviction restores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

POD_SET_NAME = "main"


def pod_count(job: Mapping[str, Any]) -> int:
    """Pods the Job runs at once: parallelism (default 1), capped by completions when set."""
    spec = job.get("spec", {})
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int(parallelism)
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, int(completions))


def finished_condition(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(type, message)`` of the Job's Complete or Failed condition, if it has finished."""
    for condition in job.get("status", {}).get("conditions") or []:
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"]), str(condition.get("message") or condition.get("reason") or "")
    return None


def has_active_pods(job: Mapping[str, Any]) -> bool:
    status = job.get("status", {})
    return bool(status.get("active")) or bool(status.get("terminating"))
