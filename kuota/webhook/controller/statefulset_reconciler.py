"""A queued StatefulSet's Workload (:mod:`kuota.webhook.jobs.pod_parents`): made from the StatefulSet as soon as it
has replicas (Kueue's prebuilt Workload, admitted before its pods exist), deleted when it is scaled to zero or
deleted, so its quota is freed at once. Its pods are the pod reconciler's group, driven after each step here.

Keys: ``("StatefulSet.apps", namespace/name)``.
"""

from __future__ import annotations

from typing import Any

from kuota.webhook.controller.pod_reconciler import STATEFULSET, PodReconciler
from kuota.webhook.controller.state import POD_GROUP, ControllerState, NewestCopies
from kuota.webhook.jobs import pod_parents


class StatefulSetReconciler:
    def __init__(self, state: ControllerState, pods: PodReconciler) -> None:
        self._state = state
        self._pods = pods
        self._view = state.jobs.setdefault(STATEFULSET, NewestCopies())
        self._deleted: dict[str, dict[str, Any]] = {}  # last copies, until their Workloads are deleted

    def job_deleted(self, key: str, last_copy: dict[str, Any]) -> None:
        self._deleted[key] = last_copy

    async def reconcile(self, key: str) -> None:
        state = self._state
        sts = self._view.get(key)
        last = sts or self._deleted.get(key)
        if last is None or not pod_parents.is_marked(pod_parents.STATEFULSET, last):
            self._deleted.pop(key, None)
            return  # not queued in kuota
        namespace = last["metadata"]["namespace"]
        workload_key = f"{namespace}/{pod_parents.statefulset_workload_name(last)}"
        workload = state.workloads.get(workload_key)
        if sts is None or sts["metadata"].get("deletionTimestamp") or pod_parents.replicas(sts) == 0:
            why = f"StatefulSet {key} was {'scaled to 0' if sts is not None else 'deleted'}"
            if workload is None or await self._pods.delete_workload(workload, why):
                self._deleted.pop(key, None)
            else:
                state.dirty_jobs.add((STATEFULSET, key))  # again, from the fresh copy
            return
        if workload is None:
            await self._pods.create_workload(pod_parents.statefulset_workload(sts), sts)
        state.dirty_jobs.add((POD_GROUP, workload_key))
