"""batch/v1 Job behind :class:`~kuota.webhook.jobs.adapter.JobAdapter` (framework ``batch/job``).

The Job's own rules are :mod:`kuota.webhook.controller.job_workloads` (one pod set ``main``, ``count`` =
parallelism capped by completions); this module puts them behind the interface. Jobs that a CronJob creates are
plain Jobs carrying the CronJob's ``jobTemplate`` labels, so a labelled CronJob is governed through them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kuota.webhook.controller import job_workloads
from kuota.webhook.jobs.adapter import (
    Finished,
    GroupVersionKind,
    PodSet,
    PodSetPlacement,
    SuspendFieldAdapter,
    by_name,
    placed_template,
    restored_template,
)


class BatchJobAdapter(SuspendFieldAdapter):
    framework = "batch/job"
    kind = GroupVersionKind("batch", "v1", "Job")
    plural = "jobs"

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        return [PodSet(job_workloads.POD_SET_NAME, job_workloads.pod_count(job), job["spec"]["template"])]

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        metadata = job["metadata"]
        placement = by_name(placements).get(job_workloads.POD_SET_NAME)
        where = f"Job {metadata['namespace']}/{metadata['name']}"
        return {"spec": {"suspend": False, "template": placed_template(where, originals[0].template, placement)}}

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        restored = restored_template(job.get("spec", {}).get("template", {}), originals[0].template)
        return None if restored is None else {"spec": {"template": restored}}

    def has_active_pods(self, job: Mapping[str, Any]) -> bool:
        return job_workloads.has_active_pods(job)

    def finished(self, job: Mapping[str, Any]) -> Finished | None:
        found = job_workloads.finished_condition(job)
        return None if found is None else Finished(found[0] == "Complete", found[1])

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        status = job.get("status") or {}
        return int(status.get("ready") or 0) + int(status.get("succeeded") or 0) >= job_workloads.pod_count(job)


ADAPTER = BatchJobAdapter()
