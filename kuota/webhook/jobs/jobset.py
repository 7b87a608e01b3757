"""JobSet (``jobset.x-k8s.io/v1alpha2``, framework ``jobset.x-k8s.io/jobset``) behind the job adapter interface.

As Kueue has it: one Workload per JobSet, one pod set per replicated job, named after it, whose count is the
replicated job's ``replicas`` times the pods each of its Jobs runs at once (``parallelism``, capped by
``completions``); ``spec.suspend`` holds it back (the JobSet controller suspends its Jobs, whose pods go), and the
flavors are injected into each replicated job's pod template (the JobSet controller copies them into its Jobs when
it resumes them). Finished when the JobSet's ``Completed`` or ``Failed`` condition is True.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
from kuota.webhook.jobs.pod_templates import patched_template


def _replicated_jobs(jobset: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((jobset.get("spec") or {}).get("replicatedJobs") or [])


def _pod_template(replicated_job: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((replicated_job.get("template") or {}).get("spec") or {}).get("template") or {}


def pods_per_job(replicated_job: Mapping[str, Any]) -> int:
    """Pods one Job of the replicated job runs at once: parallelism (default 1), capped by completions."""
    job_spec = (replicated_job.get("template") or {}).get("spec") or {}
    parallelism = job_spec.get("parallelism")
    pods = 1 if parallelism is None else int(parallelism)
    completions = job_spec.get("completions")
    return pods if completions is None else min(pods, int(completions))


def _replicas(replicated_job: Mapping[str, Any]) -> int:
    replicas = replicated_job.get("replicas")
    return 1 if replicas is None else int(replicas)


def _with_template(replicated_job: Mapping[str, Any], template_patch: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the replicated job whose pod template has ``template_patch`` applied."""
    copied = dict(replicated_job)
    job_template = dict(copied.get("template") or {})
    job_spec = dict(job_template.get("spec") or {})
    job_spec["template"] = patched_template(_pod_template(replicated_job), template_patch)
    job_template["spec"] = job_spec
    copied["template"] = job_template
    return copied


class JobSetAdapter(SuspendFieldAdapter):
    framework = "jobset.x-k8s.io/jobset"
    kind = GroupVersionKind("jobset.x-k8s.io", "v1alpha2", "JobSet")
    plural = "jobsets"

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        return [
            PodSet(
                str(replicated["name"]).lower(),
                _replicas(replicated) * pods_per_job(replicated),
                _pod_template(replicated),
            )
            for replicated in _replicated_jobs(job)
        ]

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        metadata = job["metadata"]
        placed = by_name(placements)
        original = {pod_set.name: pod_set.template for pod_set in originals}
        replicated_jobs = []
        for replicated in _replicated_jobs(job):
            name = str(replicated["name"]).lower()
            where = f"JobSet {metadata['namespace']}/{metadata['name']} (replicated job {name})"
            template = placed_template(where, original.get(name, _pod_template(replicated)), placed.get(name))
            replicated_jobs.append(_with_template(replicated, template))
        return {"spec": {"suspend": False, "replicatedJobs": replicated_jobs}}

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        original = {pod_set.name: pod_set.template for pod_set in originals}
        replicated_jobs = _replicated_jobs(job)
        wanted = [original.get(str(replicated["name"]).lower()) for replicated in replicated_jobs]
        patches = [
            None if w is None else restored_template(_pod_template(r), w)
            for r, w in zip(replicated_jobs, wanted, strict=True)
        ]
        if all(patch is None for patch in patches):
            return None
        restored = [
            dict(replicated) if patch is None else _with_template(replicated, patch)
            for replicated, patch in zip(replicated_jobs, patches, strict=True)
        ]
        return {"spec": {"replicatedJobs": restored}}

    def has_active_pods(self, job: Mapping[str, Any]) -> bool:
        statuses = (job.get("status") or {}).get("replicatedJobsStatus") or []
        return any(int(status.get("active") or 0) > 0 for status in statuses)

    def finished(self, job: Mapping[str, Any]) -> Finished | None:
        for condition in (job.get("status") or {}).get("conditions") or []:
            if condition.get("type") in ("Completed", "Failed") and condition.get("status") == "True":
                message = str(condition.get("message") or condition.get("reason") or "")
                return Finished(condition["type"] == "Completed", message)
        return None

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        """Every Job of every replicated job ready or succeeded (Kueue's PodsReady for a JobSet)."""
        statuses = {
            str(status.get("name")): status for status in (job.get("status") or {}).get("replicatedJobsStatus") or []
        }
        for replicated in _replicated_jobs(job):
            status = statuses.get(str(replicated["name"])) or {}
            if int(status.get("ready") or 0) + int(status.get("succeeded") or 0) < _replicas(replicated):
                return False
        return True


ADAPTER = JobSetAdapter()
