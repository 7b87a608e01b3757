"""Driving managed plain pods and pod groups to match their Workloads (integration ``pod``;
:mod:`kuota.webhook.jobs.pod` says what each pod means): create the Workload once a single pod or a whole group
exists, remove the admission gate with the flavors' placement once admitted (every pod of a group at once),
stop the running pods of an evicted Workload by deleting them, finish the Workload when the pods have finished,
delete it when its pods are gone, and release each pod's ``kueue.x-k8s.io/managed`` finalizer once its end is
accounted for.

Keys: ``("Pod", namespace/name)`` for a single pod, ``("pod-group", namespace/group)`` for a group.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kuota.kube.reflector import Reflector
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.admission_checks import pod_set_updates
from kuota.webhook.controller.api_writes import WORKLOADS, ApiWriter, Resource
from kuota.webhook.controller.decision_writer import DecisionWriter
from kuota.webhook.controller.errors import ApiWriteError, JobConflictError, StaleObjectError
from kuota.webhook.controller.event_recorder import EventRecorder
from kuota.webhook.controller.job_reconciler import placements_of
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.controller.pods_ready import PodsReadyClock, follow_pods_ready
from kuota.webhook.controller.state import (
    POD_GROUP,
    CompactCopy,
    ControllerState,
    JobKey,
    NewestCopies,
    compact_job,
    group_kind,
    key_of,
    owner_job,
)
from kuota.webhook.controller.workload_sync import WorkloadSync
from kuota.webhook.jobs import leaderworkerset, pod_parents
from kuota.webhook.jobs import pod as pods
from kuota.webhook.jobs.adapter import Finished

log = logging.getLogger(__name__)

POD = "Pod"
PODS = Resource("", "v1", "pods")
STATEFULSET = group_kind(pod_parents.STATEFULSET.kind.api_version, pod_parents.STATEFULSET.kind.kind)
LEADERWORKERSET = group_kind(pod_parents.LEADERWORKERSET.kind.api_version, pod_parents.LEADERWORKERSET.kind.kind)


def compact_pod(pod: Mapping[str, Any]) -> CompactCopy:
    """The copy of a managed pod the controller keeps (the watch's parse function and its own writes')."""
    return compact_job(pods.essence(pod))


def _serving(workload: Mapping[str, Any]) -> bool:
    owner = owner_job(workload)
    return owner is not None and owner[0] in (STATEFULSET, LEADERWORKERSET)


def pod_job_key(pod: Mapping[str, Any]) -> JobKey:
    """The key a pod is reconciled under: its group's, its LeaderWorkerSet's while it is not in a group yet (the
    LeaderWorkerSet reconciler puts it in one), or its own."""
    metadata = pod["metadata"]
    group = pods.group_name(pod)
    if group is not None:
        return POD_GROUP, f"{metadata['namespace']}/{group}"
    lws = leaderworkerset.set_name(pod)
    if lws is not None and pod_parents.suspending_parent(pod) == pod_parents.LEADERWORKERSET.framework:
        return LEADERWORKERSET, f"{metadata['namespace']}/{lws}"
    return POD, f"{metadata['namespace']}/{metadata['name']}"


class PodReconciler:
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
        pods_ready: PodsReadyClock | None = None,
    ) -> None:
        self._state = state
        self._pods_ready = pods_ready  # None: waitForPodsReady is off
        self._view = state.jobs.setdefault(POD, NewestCopies(compact_pod))
        self._writer = writer
        self._sync = sync
        self._decisions = decisions
        self._events = events
        self._flavors = flavors
        self._metrics = metrics
        self._groups: dict[str, set[str]] = {}  # namespace/group -> the keys of its pods
        self._ungrouped: dict[str, set[str]] = {}  # namespace/LeaderWorkerSet -> its pods not in a group yet
        self._deleted: dict[str, dict[str, Any]] = {}  # single pods' last copies, until their Workloads go

    def observed(self, key: str, pod: dict[str, Any] | None, last_copy: dict[str, Any]) -> JobKey:
        """Index a pod's news (``pod`` None: deleted); the key to reconcile."""
        job_key = pod_job_key(last_copy)
        if job_key[0] in (POD_GROUP, LEADERWORKERSET):
            members = (self._groups if job_key[0] == POD_GROUP else self._ungrouped).setdefault(job_key[1], set())
            if pod is None:
                members.discard(key)
            else:
                members.add(key)
        elif pod is None:
            self._deleted[key] = last_copy
        return job_key

    def ungrouped(self, lws_key: str) -> list[dict[str, Any]]:
        """The live pods of a LeaderWorkerSet (``namespace/name``) not put in a group yet."""
        found = [(key, self._view.get(key)) for key in sorted(self._ungrouped.get(lws_key, ()))]
        live = [pod for key, pod in found if pod is not None and pods.group_name(pod) is None]
        self._ungrouped[lws_key] = {key for key, pod in found if pod is not None and pods.group_name(pod) is None}
        return live

    async def join_group(self, pod: Mapping[str, Any], patch: dict[str, Any]) -> JobKey:
        """Put a pod in its group (a merge patch of its labels and annotations), indexed there at once (the watch's
        echo of our own write is no news); the group's key."""
        metadata = pod["metadata"]
        body = {**patch, "metadata": {**patch["metadata"], "resourceVersion": metadata["resourceVersion"]}}
        written = await self._writer.merge_patch(PODS, metadata["namespace"], metadata["name"], body)
        self._view.wrote(written)
        return self.observed(key_of(written), written, written)

    async def reconcile(self, job_key: JobKey) -> None:
        kind, key = job_key
        try:
            if kind == POD_GROUP:
                await self._reconcile_group(key)
            else:
                await self._reconcile_single(key)
        except StaleObjectError:
            self._state.dirty_jobs.add(job_key)
        except ApiWriteError as error:
            log.warning("%s %s: %s", kind, key, error)
            self._state.dirty_jobs.add(job_key)

    async def _reconcile_single(self, key: str) -> None:
        pod = self._view.get(key)
        last = pod or self._deleted.get(key)
        if last is None:
            return
        workload_key = f"{last['metadata']['namespace']}/{pods.single_workload_name(last)}"
        workload = self._state.workloads.get(workload_key)
        if pod is None or pods.is_deleting(pod):
            if workload is None or await self.delete_workload(workload, f"Pod {key} was deleted"):
                self._deleted.pop(key, None)
            else:
                self._state.dirty_jobs.add((POD, key))  # again, from the fresh copy
            if pod is not None:
                await self._release(pod)
            return
        finished = pods.single_finished(pod)
        if workload is None:
            if finished is None:
                await self.create_workload(pods.single_workload(pod), pod)
            else:
                await self._release(pod)
            return
        if finished is not None:
            if not status.is_true(workload, "Finished"):
                await self._finish(workload, finished, pod)
            else:
                await self._release(pod)
            return
        await self._drive([pod], workload)

    async def _reconcile_group(self, key: str) -> None:
        members = [p for k in sorted(self._groups.get(key, ())) if (p := self._view.get(k)) is not None]
        workload = self._state.workloads.get(key)
        for pod in members:
            if pods.is_deleting(pod):
                await self._release(pod)
        live = [pod for pod in members if not pods.is_deleting(pod)]
        if any(pods.is_serving(pod) for pod in members) or (workload is not None and _serving(workload)):
            # A StatefulSet's group: its Workload is the StatefulSet's (statefulset_reconciler), made, sized and
            # deleted with it, admitted before its pods exist, and never finished; here its pods follow it.
            if workload is not None:
                await self._drive([pod for pod in live if not pods.is_terminal(pod)], workload)
            return
        if not live:
            if workload is not None and not await self.delete_workload(
                workload, f"every pod of group {key} was deleted"
            ):
                self._state.dirty_jobs.add((POD_GROUP, key))
                return
            self._groups.pop(key, None)
            return
        size = pods.total_count(live[0])
        excess = pods.excess_pods(live, size)
        for extra in excess:  # a gang of more pods than its total count: the newest go, as Kueue deletes them
            metadata = extra["metadata"]
            await self._writer.delete(PODS, metadata["namespace"], metadata["name"], metadata["resourceVersion"])
            self._events.record(
                extra, "Normal", "ExcessPodDeleted", f"group {key} has more pods than its total count {size}"
            )
        live = [pod for pod in live if not any(pod is extra for extra in excess)]
        finished = pods.group_finished(live, size)
        if workload is None:
            if finished is not None:
                for pod in live:
                    await self._release(pod)
            elif len(gang := pods.members(live)) >= size:  # the whole gang exists: one Workload for all of it
                await self.create_workload(pods.group_workload(key.split("/", 1)[1], gang), gang[0])
            return
        if finished is not None:
            if not status.is_true(workload, "Finished"):
                await self._finish(workload, finished, live[0])
            else:
                for pod in live:
                    await self._release(pod)
            return
        await self._drive([pod for pod in live if not pods.is_terminal(pod)], workload)

    async def _drive(self, running: Sequence[Mapping[str, Any]], workload: Mapping[str, Any]) -> None:
        """Admitted: ungate what is gated. Not admitted: stop (delete) what runs, as Kueue stops pods."""
        if status.admitted_pod_sets(workload) is not None:
            if not status.is_true(workload, "Admitted"):
                return  # quota reserved, AdmissionChecks not all Ready: the pods stay gated
            try:
                placements, flavor_names = placements_of(
                    workload["status"]["admission"],
                    self._flavors,
                    pod_set_updates(workload),
                    workload=workload,
                )
            except ValueError as error:
                self._events.record(workload, "Warning", "FlavorConflict", str(error))
                await self._deactivate(workload)
                return
            by_role = {placement.name: placement for placement in placements}
            single = len(workload["spec"]["podSets"]) == 1 and workload["spec"]["podSets"][0]["name"] == "main"
            size = sum(int(pod_set.get("count", 1)) for pod_set in workload["spec"]["podSets"])
            # Never more pods ungated than admitted: a StatefulSet scaled through its scale subresource (which no
            # webhook reviews) makes pods its Workload does not count; they wait gated.
            room = size - sum(1 for pod in running if not pods.is_gated(pod))
            for pod in running:
                if not pods.is_gated(pod):
                    continue
                if room <= 0:
                    break
                room -= 1
                placement = by_role.get(pods.SINGLE_POD_SET if single else pods.role_hash(pod))
                try:
                    patch = pods.ungate_patch(pod, placement)
                except JobConflictError as error:
                    self._events.record(pod, "Warning", "FlavorConflict", str(error))
                    self._events.record(workload, "Warning", "FlavorConflict", str(error))
                    await self._deactivate(workload)
                    return
                await self._patch(pod, patch)
                self._events.record(
                    pod,
                    "Normal",
                    "Started",
                    f"Admitted by clusterQueue {workload['status']['admission'].get('clusterQueue')}; flavor "
                    f"{', '.join(flavor_names)}",
                )
            if self._pods_ready is not None:
                ready = pods.pods_ready([pod for pod in running if not pods.is_gated(pod)], size)
                await follow_pods_ready(
                    self._pods_ready,
                    self._writer,
                    self._metrics,
                    workload,
                    ready,
                    refresh=self._decisions.refresh_workload,
                )
            return
        evicted = status.condition((workload.get("status") or {}).get("conditions") or [], "Evicted")
        why = str(evicted.get("message", "")) if evicted and evicted.get("status") == "True" else "Not admitted"
        for pod in running:
            if pods.is_gated(pod):
                continue
            metadata = pod["metadata"]
            await self._writer.delete(PODS, metadata["namespace"], metadata["name"], metadata["resourceVersion"])
            self._events.record(pod, "Normal", "Stopped", why)

    async def _patch(self, pod: Mapping[str, Any], patch: dict[str, Any]) -> None:
        metadata = pod["metadata"]
        body = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": metadata["resourceVersion"]}}
        written = await self._writer.merge_patch(PODS, metadata["namespace"], metadata["name"], body)
        self._view.wrote(written)

    async def _release(self, pod: Mapping[str, Any]) -> None:
        if pods.has_finalizer(pod):
            await self._patch(pod, pods.without_finalizer_patch(pod))

    async def create_workload(self, manifest: dict[str, Any], pod: Mapping[str, Any]) -> None:
        """Create a Workload (a pod's, a group's, a StatefulSet's), with the Event on ``pod``, its owner."""
        state = self._state
        priority_class = manifest["spec"].get("priorityClassRef", {}).get("name")
        if priority_class is not None and priority_class in state.engine.priority_classes:
            manifest["spec"]["priority"] = state.engine.priority_classes[priority_class].value
        namespace = manifest["metadata"]["namespace"]
        try:
            created = await self._writer.create(WORKLOADS, namespace, manifest)
        except StaleObjectError:
            await self._decisions.refresh_workload(f"{namespace}/{manifest['metadata']['name']}")
            return
        state.workloads.wrote(created)
        self._sync.sync(key_of(created))
        self._events.record(pod, "Normal", "CreatedWorkload", f"Created Workload: {key_of(created)}")

    async def _finish(self, workload: Mapping[str, Any], finished: Finished, pod: Mapping[str, Any]) -> None:
        state = self._state
        patch = status.finished_patch(workload, finished.succeeded, finished.message, state.clock())
        try:
            written = await self._writer.merge_patch(
                WORKLOADS, workload["metadata"]["namespace"], workload["metadata"]["name"], patch, "status"
            )
        except StaleObjectError:
            await self._decisions.refresh_workload(key_of(workload))
            raise
        state.workloads.wrote(written)
        cluster_queue = status.admitted_cluster_queue(written)
        if cluster_queue is not None:
            self._metrics.record_finish(written, cluster_queue)
        self._sync.sync(key_of(written))
        self._events.record(pod, "Normal", "FinishedWorkload", f"Workload '{key_of(written)}' is declared finished")
        await self._decisions.release_finalizer(state.workloads.get(key_of(written)) or written)
        state.dirty_jobs.add(pod_job_key(pod))  # the pods' finalizers next

    async def delete_workload(self, workload: Mapping[str, Any], why: str) -> bool:
        """A deleted pod (or group, or a StatefulSet scaled to zero) gives its quota back at once; True once the
        Workload is gone or going."""
        metadata = workload["metadata"]
        if metadata.get("deletionTimestamp"):
            return True
        key = key_of(workload)
        try:
            answer = await self._writer.delete(
                WORKLOADS, metadata["namespace"], metadata["name"], metadata["resourceVersion"]
            )
        except ApiWriteError as error:
            log.info("Workload %s not deleted yet: %s", key, error)
            await self._decisions.refresh_workload(key)
            return False
        log.info("%s; deleting its Workload %s", why, key)
        self._state.take_fresh(key, answer if answer.get("kind") == "Workload" else None)
        return True

    async def _deactivate(self, workload: Mapping[str, Any]) -> None:
        written = await self._writer.merge_patch(
            WORKLOADS,
            workload["metadata"]["namespace"],
            workload["metadata"]["name"],
            {"metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]}, "spec": {"active": False}},
        )
        self._state.workloads.wrote(written)
        self._state.dirty_workloads.add(key_of(written))
