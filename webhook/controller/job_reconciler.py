"""Driving each managed Job to match its Workload: create the Workload, keep the Job suspended until it is
admitted, start it with its flavor's placement, restore its template after an eviction, finish the Workload
with the Job, and give the quota back when the Job is deleted (docs/architecture.md, "A Job's life").

It is the only part of the controller that writes Jobs, so the rule "a managed Job runs only while its Workload
holds an admission written to the API" is kept here, in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kuota.kube.reflector import Reflector
from kuota.webhook.controller import job_workloads as jobs
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import JOBS, WORKLOADS, ApiWriter
from kuota.webhook.controller.decision_writer import DecisionWriter
from kuota.webhook.controller.errors import ApiWriteError, JobConflictError, StaleObjectError
from kuota.webhook.controller.event_recorder import EventRecorder
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.controller.state import ControllerState, key_of, owner_job
from kuota.webhook.controller.workload_sync import WorkloadSync

log = logging.getLogger(__name__)


class JobReconciler:
    def __init__(
        self,
        state: ControllerState,
        writer: ApiWriter,
        *,
        sync: WorkloadSync,
        decisions: DecisionWriter,
        events: EventRecorder,
        flavors: Reflector[dict[str, Any]],
        metrics: ControllerMetrics,
    ) -> None:
        self._state = state
        self._metrics = metrics
        self._writer = writer
        self._sync = sync
        self._decisions = decisions
        self._events = events
        self._flavors = flavors
        self._deleted_jobs: dict[str, dict[str, Any]] = {}  # last copies, until their Workloads are deleted

    def job_deleted(self, key: str, last_copy: dict[str, Any]) -> None:
        """Keep a deleted Job's last copy until its Workload is deleted too."""
        self._deleted_jobs[key] = last_copy

    def _managed(self, job: Mapping[str, Any]) -> bool:
        if jobs.queue_name(job) is not None:
            return True
        configuration = self._state.configuration
        if not configuration.manage_jobs_without_queue_name:
            return False
        namespace = job["metadata"]["namespace"]
        engine = self._state.engine
        labels = dict(engine.namespaces[namespace].labels) if namespace in engine.namespaces else {}
        labels.setdefault("kubernetes.io/metadata.name", namespace)
        selector = configuration.managed_jobs_namespace_selector
        return selector is None or selector.matches(labels)

    async def reconcile(self, key: str) -> None:
        """Take the one step that brings the Job ``key`` closer to what its Workload says."""
        state = self._state
        job = state.jobs.get(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            gone = job or self._deleted_jobs.pop(key, None)
            if gone is not None and self._managed(gone):
                await self._delete_workload_of(key, gone)
            return
        if not self._managed(job):
            return
        metadata = job["metadata"]
        workload_key = f"{metadata['namespace']}/{jobs.workload_name(metadata['name'], metadata['uid'])}"
        workload = state.workloads.get(workload_key)
        finished = jobs.finished_condition(job)
        try:
            if workload is None:
                if finished is None:
                    await self._create_workload(job)
                    if not jobs.is_suspended(job):
                        await self._suspend(job, None)
                return
            if finished is not None:
                if not status.is_true(workload, "Finished"):
                    await self._finish_workload(workload, finished)
                return
            if status.admitted_pod_sets(workload) is not None:
                if jobs.is_suspended(job):
                    await self._start_job(job, workload)
            elif not jobs.is_suspended(job):
                await self._suspend(job, workload)
            elif not jobs.has_active_pods(job):
                original = workload["spec"]["podSets"][0]["template"]
                if not jobs.template_matches(job, original):
                    await self._patch_job(job, jobs.restore_template_patch(original))
        except StaleObjectError:
            state.dirty_jobs.add(key)  # re-read by the watch; decided again next cycle
        except ApiWriteError as error:
            log.warning("Job %s: %s", key, error)
            state.dirty_jobs.add(key)

    async def _delete_workload_of(self, key: str, job: dict[str, Any]) -> None:
        """A deleted Job gives its quota back at once: its Workload is deleted now, not when the garbage
        collector gets to it (never, when the Job was deleted with ``--cascade=orphan``)."""
        state = self._state
        metadata = job["metadata"]
        workload_key = f"{metadata['namespace']}/{jobs.workload_name(metadata['name'], metadata['uid'])}"
        workload = state.workloads.get(workload_key)
        if workload is None or workload["metadata"].get("deletionTimestamp"):
            return
        try:
            answer = await self._writer.delete(
                WORKLOADS, metadata["namespace"], workload["metadata"]["name"], workload["metadata"]["resourceVersion"]
            )
            log.info("Job %s was deleted; deleting its Workload %s", key, workload_key)
            state.take_fresh(workload_key, answer if answer.get("kind") == "Workload" else None)
        except ApiWriteError as error:  # changed meanwhile (stale) or unreachable: again from a fresh copy
            log.info("Workload %s of deleted Job %s not deleted yet: %s", workload_key, key, error)
            await self._decisions.refresh_workload(workload_key)
            if state.jobs.get(key) is None:
                self._deleted_jobs[key] = job
            state.dirty_jobs.add(key)

    async def _patch_job(self, job: Mapping[str, Any], patch: dict[str, Any]) -> None:
        patch = {**patch, "metadata": {"resourceVersion": job["metadata"]["resourceVersion"]}}
        written = await self._writer.merge_patch(JOBS, job["metadata"]["namespace"], job["metadata"]["name"], patch)
        self._state.jobs.wrote(written)

    async def _create_workload(self, job: Mapping[str, Any]) -> None:
        state = self._state
        manifest = jobs.workload_manifest(job)
        priority_class = manifest["spec"].get("priorityClassRef", {}).get("name")
        if priority_class is not None:
            if priority_class not in state.engine.priority_classes:
                # As Kueue: no Workload for this Job until the class exists (its creation reconciles every Job).
                self._events.record(
                    job,
                    "Warning",
                    "ErrWorkloadCompose",
                    f'workloadPriorityClass "{priority_class}" not found: create it or fix the Job\'s '
                    f"{jobs.PRIORITY_CLASS_LABEL} label",
                )
                return
            manifest["spec"]["priority"] = state.engine.priority_classes[priority_class].value
        namespace = job["metadata"]["namespace"]
        try:
            created = await self._writer.create(WORKLOADS, namespace, manifest)
        except StaleObjectError:
            await self._decisions.refresh_workload(f"{namespace}/{manifest['metadata']['name']}")
            return
        state.workloads.wrote(created)
        self._sync.sync(key_of(created))
        self._events.record(job, "Normal", "CreatedWorkload", f"Created Workload: {key_of(created)}")

    async def _finish_workload(self, workload: Mapping[str, Any], finished: tuple[str, str]) -> None:
        state = self._state
        kind, message = finished
        patch = status.finished_patch(workload, kind == "Complete", message, state.clock())
        try:
            written = await self._writer.merge_patch(
                WORKLOADS, workload["metadata"]["namespace"], workload["metadata"]["name"], patch, "status"
            )
        except StaleObjectError:
            await self._decisions.refresh_workload(key_of(workload))
            state.dirty_jobs.add(owner_job(workload) or "")
            return
        state.workloads.wrote(written)
        cluster_queue = status.admitted_cluster_queue(written)
        if cluster_queue is not None:
            self._metrics.record_finish(written, cluster_queue)
        self._sync.sync(key_of(written))
        job = state.jobs.get(owner_job(written) or "")
        if job is not None:
            self._events.record(job, "Normal", "FinishedWorkload", f"Workload '{key_of(written)}' is declared finished")
        await self._decisions.release_finalizer(state.workloads.get(key_of(written)) or written)

    async def _suspend(self, job: Mapping[str, Any], workload: Mapping[str, Any] | None) -> None:
        """Suspend a Job running without an admission; the event says why as Kueue's does: the eviction's
        message, or that it is not admitted."""
        await self._patch_job(job, {"spec": {"suspend": True}})
        evicted = status.condition((workload or {}).get("status", {}).get("conditions") or [], "Evicted")
        if evicted is not None and evicted.get("status") == "True":
            why = str(evicted.get("message", ""))
        else:
            why = "Not admitted by cluster queue"
        self._events.record(job, "Normal", "Stopped", why)

    async def _start_job(self, job: Mapping[str, Any], workload: Mapping[str, Any]) -> None:
        admission = workload["status"]["admission"]
        flavor_names: list[str] = []
        for assignment in admission.get("podSetAssignments") or []:
            for flavor in (assignment.get("flavors") or {}).values():
                if flavor not in flavor_names:
                    flavor_names.append(flavor)
        # The flavor's own JSON, so tolerations reach the pods exactly as written (tolerationSeconds too).
        flavors = [self._flavors.get(name) for name in flavor_names]
        placements = [
            jobs.FlavorPlacement(
                node_labels=flavor.get("spec", {}).get("nodeLabels") or {},
                tolerations=flavor.get("spec", {}).get("tolerations") or [],
            )
            for flavor in flavors
            if flavor is not None
        ]
        original = workload["spec"]["podSets"][0]["template"]
        try:
            patch = jobs.admitted_template_patch(job, placements, original)
        except JobConflictError as error:
            self._events.record(job, "Warning", "FlavorConflict", str(error))
            self._events.record(workload, "Warning", "FlavorConflict", str(error))
            await self._deactivate(workload, str(error))
            return
        await self._patch_job(job, patch)
        selector = ",".join(f"{k}={v}" for placement in placements for k, v in placement.node_labels.items())
        self._events.record(
            job,
            "Normal",
            "Started",
            f"Admitted by clusterQueue {admission.get('clusterQueue')}; flavor {', '.join(flavor_names)}, "
            f"its pods get nodeSelector {selector or '(none)'}",
        )

    async def _deactivate(self, workload: Mapping[str, Any], why: str) -> None:
        """A permanent conflict: turn the Workload off (its quota returns) and say why."""
        written = await self._writer.merge_patch(
            WORKLOADS,
            workload["metadata"]["namespace"],
            workload["metadata"]["name"],
            {"metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]}, "spec": {"active": False}},
        )
        self._state.workloads.wrote(written)
        self._state.dirty_workloads.add(key_of(written))
        log.warning("Workload %s deactivated: %s", key_of(written), why)
