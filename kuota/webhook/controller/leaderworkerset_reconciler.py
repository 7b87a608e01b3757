"""A queued LeaderWorkerSet's Workloads (:mod:`kuota.webhook.jobs.leaderworkerset`): one per group index below
``replicas`` (and the surge groups' during a rolling update with ``maxSurge``), made from the LeaderWorkerSet
before the group's pods exist (Kueue's prebuilt Workloads), those of the other groups deleted (scaled down, a
rolling update's surge over, or the LeaderWorkerSet deleted), so their quota is freed at once. Its pods are put
in their groups here, then followed by the pod reconciler as serving pod groups.

Keys: ``("LeaderWorkerSet.leaderworkerset.x-k8s.io", namespace/name)``; the pod reconciler files a
LeaderWorkerSet's pods not yet in a group under the same key.
"""

from __future__ import annotations

import logging
from typing import Any

from kuota.webhook.controller.errors import ApiWriteError
from kuota.webhook.controller.pod_reconciler import LEADERWORKERSET, PodReconciler
from kuota.webhook.controller.state import POD_GROUP, ControllerState, NewestCopies, owner_job
from kuota.webhook.jobs import leaderworkerset, pod_parents

log = logging.getLogger(__name__)


class LeaderWorkerSetReconciler:
    def __init__(self, state: ControllerState, pods: PodReconciler) -> None:
        self._state = state
        self._pods = pods
        self._view = state.jobs.setdefault(LEADERWORKERSET, NewestCopies())
        self._deleted: dict[str, dict[str, Any]] = {}  # last copies, until their Workloads are deleted

    def job_deleted(self, key: str, last_copy: dict[str, Any]) -> None:
        self._deleted[key] = last_copy

    def _workloads_of(self, key: str) -> list[dict[str, Any]]:
        """The Workloads the LeaderWorkerSet ``key`` owns (every group's, whatever ``replicas`` was then)."""
        namespace = key.split("/", 1)[0]
        found = []
        for workload_key in list(self._state.workloads):
            if workload_key.startswith(f"{namespace}/"):
                workload = self._state.workloads.get(workload_key)
                if workload is not None and owner_job(workload) == (LEADERWORKERSET, key):
                    found.append(workload)
        return found

    async def reconcile(self, key: str) -> None:
        state = self._state
        lws = self._view.get(key)
        last = lws or self._deleted.get(key)
        if last is None or not pod_parents.is_marked(pod_parents.LEADERWORKERSET, last):
            self._deleted.pop(key, None)
            return  # not queued in kuota
        live = lws is not None and not lws["metadata"].get("deletionTimestamp")
        wanted = set(leaderworkerset.group_workload_names(lws)) if lws is not None and live else set()
        namespace = last["metadata"]["namespace"]
        pending_deletes = False
        for workload in self._workloads_of(key):
            if workload["metadata"]["name"] in wanted:
                continue
            why = f"LeaderWorkerSet {key} {'has fewer groups' if live else 'was deleted'}"
            if not await self._pods.delete_workload(workload, why):
                pending_deletes = True
        if pending_deletes:
            state.dirty_jobs.add((LEADERWORKERSET, key))  # again, from the fresh copies
        if lws is None or not live:
            if not pending_deletes:
                self._deleted.pop(key, None)
            return
        for index in range(leaderworkerset.governed_groups(lws)):
            name = leaderworkerset.group_workload_name(lws, index)
            if state.workloads.get(f"{namespace}/{name}") is None:
                await self._pods.create_workload(leaderworkerset.group_workload(lws, index), lws)
            state.dirty_jobs.add((POD_GROUP, f"{namespace}/{name}"))
        for pod in self._pods.ungrouped(key):
            patch = leaderworkerset.group_patch(lws, pod)
            if patch is None:
                continue  # its group index is not written yet: its next change brings it back here
            try:
                state.dirty_jobs.add(await self._pods.join_group(pod, patch))
            except ApiWriteError as error:  # changed meanwhile (stale) or unreachable: again from a fresh copy
                log.info("LeaderWorkerSet %s: pod %s not put in its group yet: %s", key, pod["metadata"]["name"], error)
                state.dirty_jobs.add((LEADERWORKERSET, key))
