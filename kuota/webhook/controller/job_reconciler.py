"""Driving each managed job of one suspendable kind to match its Workload, through the kind's
:class:`~kuota.webhook.jobs.adapter.JobAdapter`: create the Workload, keep the job suspended until it is admitted,
start it with its flavors' placement, restore its templates after an eviction, finish the Workload with the job,
and give the quota back when the job is deleted (docs/architecture.md, "A job's life").

One instance per enabled kind; it is the only part of the controller that writes that kind, so the rule "a managed
job runs only while its Workload holds an admission written to the API" is kept here, in one place.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kuota.kube.reflector import Reflector
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.admission_checks import pod_set_updates
from kuota.webhook.controller.api_writes import WORKLOADS, ApiWriter, Resource
from kuota.webhook.controller.decision_writer import DecisionWriter
from kuota.webhook.controller.errors import ApiWriteError, InvalidJobError, JobConflictError, StaleObjectError
from kuota.webhook.controller.event_recorder import EventRecorder
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.controller.pods_ready import PodsReadyClock, follow_pods_ready
from kuota.webhook.controller.state import ControllerState, JobKey, NewestCopies, key_of, owner_job
from kuota.webhook.controller.workload_sync import WorkloadSync
from kuota.webhook.jobs import adapter as jobs
from kuota.webhook.jobs.adapter import JobAdapter, PodSetPlacement
from kuota.webhook.jobs.registry import Registry
from kuota.webhook.jobs.topology import POD_SET_LABEL, TOPOLOGY_GATE, UNCONSTRAINED, WORKLOAD_ANNOTATION

log = logging.getLogger(__name__)


class JobReconciler:
    def __init__(
        self,
        adapter: JobAdapter,
        registry: Registry,
        state: ControllerState,
        writer: ApiWriter,
        *,
        sync: WorkloadSync,
        decisions: DecisionWriter,
        events: EventRecorder,
        flavors: Reflector[dict[str, Any]],
        metrics: ControllerMetrics,
        pods_ready: PodsReadyClock | None = None,
    ) -> None:
        self._adapter = adapter
        self._pods_ready = pods_ready  # None: waitForPodsReady is off
        self._registry = registry
        self._kind = f"{adapter.kind.kind}.{adapter.kind.group}" if adapter.kind.group else adapter.kind.kind
        self._resource = Resource(adapter.kind.group, adapter.kind.version, adapter.plural)
        self._state = state
        self._view = state.jobs.setdefault(self._kind, NewestCopies())
        state.remade_when_gone.add(self._kind)
        self._metrics = metrics
        self._writer = writer
        self._sync = sync
        self._decisions = decisions
        self._events = events
        self._flavors = flavors
        self._deleted_jobs: dict[str, dict[str, Any]] = {}  # last copies, until their Workloads are deleted

    def job_deleted(self, key: str, last_copy: dict[str, Any]) -> None:
        """Keep a deleted job's last copy until its Workload is deleted too."""
        self._deleted_jobs[key] = last_copy

    def _workload_key(self, job: Mapping[str, Any]) -> str:
        metadata = job["metadata"]
        return f"{metadata['namespace']}/{jobs.workload_name(metadata['name'], metadata['uid'], self._adapter.kind)}"

    def _managed(self, job: Mapping[str, Any]) -> bool:
        if self._registry.managed_owner(job):
            return False  # its owner (a JobSet's Jobs, ...) is queued, not the job itself
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
        """Take the one step that brings the job ``key`` (``namespace/name``) closer to what its Workload says."""
        state = self._state
        adapter = self._adapter
        dirty: JobKey = (self._kind, key)
        job = self._view.get(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            gone = job or self._deleted_jobs.pop(key, None)
            if gone is not None and self._managed(gone):
                await self._delete_workload_of(key, gone)
            return
        if not self._managed(job):
            return
        workload = state.workloads.get(self._workload_key(job))
        finished = adapter.finished(job)
        try:
            if workload is None:
                if finished is None:
                    await self._create_workload(job)
                    if not adapter.is_suspended(job):
                        await self._suspend(job, None)
                return
            if finished is not None:
                if not status.is_true(workload, "Finished"):
                    await self._finish_workload(workload, finished)
                return
            if adapter.serving and not jobs.matches_workload(adapter.pod_sets(job), workload):
                await self._replace_workload(job, workload)
                return
            if status.admitted_pod_sets(workload) is not None and status.is_true(workload, "Admitted"):
                if adapter.is_suspended(job):
                    await self._start_job(job, workload)
                else:
                    await self._pods_ready_step(job, workload)
            elif status.admitted_pod_sets(workload) is not None and adapter.is_suspended(job):
                return  # quota reserved, AdmissionChecks not all Ready: the job waits, suspended
            elif not adapter.is_suspended(job):
                await self._suspend(job, workload)
            else:
                if not adapter.has_active_pods(job):
                    restore = adapter.restore_patch(job, jobs.workload_pod_sets(workload))
                    if restore is not None:
                        await self._patch_job(job, restore)
                await self._pods_ready_step(job, workload)
        except StaleObjectError:
            state.dirty_jobs.add(dirty)  # re-read by the watch; decided again next cycle
        except ApiWriteError as error:
            log.warning("%s %s: %s", adapter.kind.kind, key, error)
            state.dirty_jobs.add(dirty)

    async def _pods_ready_step(self, job: Mapping[str, Any], workload: Mapping[str, Any]) -> None:
        """waitForPodsReady: the Workload's PodsReady condition from the job's pods, and its clocks."""
        if self._pods_ready is not None:
            ready = self._adapter.pods_ready(job)
            await follow_pods_ready(
                self._pods_ready, self._writer, self._metrics, workload, ready, refresh=self._decisions.refresh_workload
            )

    async def _delete_workload_of(self, key: str, job: dict[str, Any]) -> None:
        """A deleted job gives its quota back at once: its Workload is deleted now, not when the garbage
        collector gets to it (never, when the job was deleted with ``--cascade=orphan``)."""
        state = self._state
        metadata = job["metadata"]
        workload_key = self._workload_key(job)
        workload = state.workloads.get(workload_key)
        if workload is None or workload["metadata"].get("deletionTimestamp"):
            return
        try:
            answer = await self._writer.delete(
                WORKLOADS, metadata["namespace"], workload["metadata"]["name"], workload["metadata"]["resourceVersion"]
            )
            log.info("%s %s was deleted; deleting its Workload %s", self._adapter.kind.kind, key, workload_key)
            state.take_fresh(workload_key, answer if answer.get("kind") == "Workload" else None)
        except ApiWriteError as error:  # changed meanwhile (stale) or unreachable: again from a fresh copy
            log.info("Workload %s of deleted %s %s not deleted yet: %s", workload_key, self._kind, key, error)
            await self._decisions.refresh_workload(workload_key)
            if self._view.get(key) is None:
                self._deleted_jobs[key] = job
            state.dirty_jobs.add((self._kind, key))

    async def _patch_job(self, job: Mapping[str, Any], patch: dict[str, Any]) -> None:
        patch = {**patch, "metadata": {"resourceVersion": job["metadata"]["resourceVersion"]}}
        written = await self._writer.merge_patch(
            self._resource, job["metadata"]["namespace"], job["metadata"]["name"], patch
        )
        self._view.wrote(written)

    async def _replace_workload(self, job: Mapping[str, Any], workload: Mapping[str, Any]) -> None:
        """A serving job whose pod sets are no longer its Workload's (a RayService's rayClusterConfig scaled or
        reshaped, which KubeRay applies to the running cluster), as Kueue's job framework answers it: a running
        job is stopped, its templates put back as the Workload has them, and that Workload deleted, so a new one
        made from the job queues; a suspended job's Workload without quota is updated in place (it keeps its
        place in the queue); one with quota is deleted."""
        if workload["metadata"].get("deletionTimestamp"):
            return  # going: its deletion brings the job back here, to get a new Workload
        adapter = self._adapter
        metadata = workload["metadata"]
        key = key_of(workload)
        job_name = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
        log.info("%s %s no longer matches its Workload %s: replacing it", adapter.kind.kind, job_name, key)
        if not adapter.is_suspended(job):
            # One write, as Kueue's stopJob: a new Workload is made from the templates as they are after it.
            stop = adapter.suspend_patch(job)
            restore = adapter.restore_patch(job, jobs.workload_pod_sets(workload))
            await self._patch_job(job, stop if restore is None else jobs.merged_patches(stop, restore))
            why = "No matching Workload; restoring pod templates according to existent Workload"
            self._events.record(job, "Normal", "Stopped", why)
        elif status.admitted_pod_sets(workload) is None:
            pod_sets = [pod_set.manifest() for pod_set in adapter.pod_sets(job)]
            patch = {"metadata": {"resourceVersion": metadata["resourceVersion"]}, "spec": {"podSets": pod_sets}}
            written = await self._writer.merge_patch(WORKLOADS, metadata["namespace"], metadata["name"], patch)
            self._state.workloads.wrote(written)
            self._sync.sync(key)
            self._events.record(
                job, "Normal", "UpdatedWorkload", f"Updated not matching Workload for suspended job: {key}"
            )
            return
        answer = await self._writer.delete(
            WORKLOADS, metadata["namespace"], metadata["name"], metadata["resourceVersion"]
        )
        self._state.take_fresh(key, answer if answer.get("kind") == "Workload" else None)
        self._events.record(job, "Normal", "DeletedWorkload", f"Deleted not matching Workload: {key}")

    async def _create_workload(self, job: Mapping[str, Any]) -> None:
        state = self._state
        adapter = self._adapter
        if isinstance(adapter, jobs.ReferencingAdapter):
            reference = adapter.reference(job)
            resource = Resource(reference.group, reference.version, reference.plural)
            job = adapter.with_referenced(job, await self._writer.get(resource, reference.namespace, reference.name))
        try:
            manifest = jobs.workload_manifest(job, adapter)
        except InvalidJobError as error:
            # As Kueue when a job's pod sets cannot be made: no Workload, the reason on the job, nothing else stops.
            self._events.record(job, "Warning", "ErrWorkloadCompose", str(error))
            return
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

    async def _finish_workload(self, workload: Mapping[str, Any], finished: jobs.Finished) -> None:
        state = self._state
        patch = status.finished_patch(workload, finished.succeeded, finished.message, state.clock())
        try:
            written = await self._writer.merge_patch(
                WORKLOADS, workload["metadata"]["namespace"], workload["metadata"]["name"], patch, "status"
            )
        except StaleObjectError:
            await self._decisions.refresh_workload(key_of(workload))
            owner = owner_job(workload)
            if owner is not None:
                state.dirty_jobs.add(owner)
            return
        state.workloads.wrote(written)
        cluster_queue = status.admitted_cluster_queue(written)
        if cluster_queue is not None:
            self._metrics.record_finish(written, cluster_queue)
        self._sync.sync(key_of(written))
        owner = owner_job(written)
        job = self._view.get(owner[1]) if owner is not None else None
        if job is not None:
            self._events.record(job, "Normal", "FinishedWorkload", f"Workload '{key_of(written)}' is declared finished")
        await self._decisions.release_finalizer(state.workloads.get(key_of(written)) or written)

    async def _suspend(self, job: Mapping[str, Any], workload: Mapping[str, Any] | None) -> None:
        """Suspend a job running without an admission; the event says why as Kueue's does: the eviction's
        message, or that it is not admitted."""
        await self._patch_job(job, self._adapter.suspend_patch(job))
        evicted = status.condition((workload or {}).get("status", {}).get("conditions") or [], "Evicted")
        if evicted is not None and evicted.get("status") == "True":
            why = str(evicted.get("message", ""))
        else:
            why = "Not admitted by cluster queue"
        self._events.record(job, "Normal", "Stopped", why)

    async def _start_job(self, job: Mapping[str, Any], workload: Mapping[str, Any]) -> None:
        admission = workload["status"]["admission"]
        try:
            placements, flavor_names = placements_of(
                admission, self._flavors, pod_set_updates(workload), workload=workload
            )
            patch = self._adapter.run_patch(job, placements, jobs.workload_pod_sets(workload))
        except (JobConflictError, ValueError) as error:
            self._events.record(job, "Warning", "FlavorConflict", str(error))
            self._events.record(workload, "Warning", "FlavorConflict", str(error))
            await self._deactivate(workload, str(error))
            return
        await self._patch_job(job, patch)
        selector = ",".join(
            dict.fromkeys(f"{k}={v}" for placement in placements for k, v in placement.node_selector.items())
        )
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


def placements_of(
    admission: Mapping[str, Any],
    flavors: Reflector[dict[str, Any]],
    updates: Mapping[str, Mapping[str, Any]],
    *,
    workload: Mapping[str, Any] | None = None,
) -> tuple[list[PodSetPlacement], list[str]]:
    """Each admitted pod set's placement (its flavors' nodeLabels and tolerations, read from the flavors' own JSON
    so tolerations reach the pods exactly as written, tolerationSeconds too; then its AdmissionChecks'
    ``podSetUpdates``), and every flavor's name in order. An update that gives a flavor's label another value
    raises ValueError, as Kueue refuses it. A pod set placed by topology (``workload``: its Workload)
    starts with its pods gated by ``kueue.x-k8s.io/topology``, labelled with their pod set and annotated with
    their Workload, as Kueue starts them, until the topology ungater sends each to its domain; one placed without
    asking (implied by a queue whose every flavor is a TAS flavor) is annotated unconstrained, as Kueue's
    ``FromAssignment`` does."""
    placements: list[PodSetPlacement] = []
    names: list[str] = []
    for assignment in admission.get("podSetAssignments") or []:
        node_selector: dict[str, str] = {}
        tolerations: list[Mapping[str, Any]] = []
        for name in dict.fromkeys((assignment.get("flavors") or {}).values()):
            if name not in names:
                names.append(name)
            flavor = flavors.get(name)
            if flavor is None:
                continue
            node_selector.update(flavor.get("spec", {}).get("nodeLabels") or {})
            tolerations += [t for t in flavor.get("spec", {}).get("tolerations") or [] if t not in tolerations]
        count = assignment.get("count")
        name = str(assignment.get("name", ""))
        update = updates.get(name) or {}
        for key, value in (update.get("nodeSelector") or {}).items():
            if node_selector.get(key, value) != value:
                raise ValueError(
                    f"an AdmissionCheck sets nodeSelector {key}={value} on pod set {name}, whose flavor sets "
                    f"{key}={node_selector[key]}"
                )
            node_selector[key] = value
        tolerations += [t for t in update.get("tolerations") or [] if t not in tolerations]
        labels = dict(update.get("labels") or {})
        annotations = dict(update.get("annotations") or {})
        gates: tuple[str, ...] = ()
        if assignment.get("topologyAssignment") is not None and workload is not None:
            labels[POD_SET_LABEL] = name
            annotations[WORKLOAD_ANNOTATION] = workload["metadata"]["name"]
            if _asks_no_level(workload, name):
                annotations[UNCONSTRAINED] = "true"
            gates = (TOPOLOGY_GATE,)
        placements.append(
            PodSetPlacement(
                name,
                node_selector,
                tolerations,
                int(count) if count else None,
                labels=labels,
                annotations=annotations,
                scheduling_gates=gates,
            )
        )
    return placements, names


def _asks_no_level(workload: Mapping[str, Any], pod_set: str) -> bool:
    """Whether the Workload's pod set ``pod_set`` names no required, preferred or unconstrained topology."""
    for entry in workload.get("spec", {}).get("podSets") or []:
        if entry.get("name") == pod_set:
            request = entry.get("topologyRequest") or {}
            return not any(key in request for key in ("required", "preferred", "unconstrained"))
    return False
