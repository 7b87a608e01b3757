"""LeaderWorkerSet (framework ``leaderworkerset.x-k8s.io/leaderworkerset``), as Kueue v0.20 governs it (pure).

A LeaderWorkerSet runs ``replicas`` groups of ``leaderWorkerTemplate.size`` pods: a leader (from ``leaderTemplate``,
or the worker template when there is none) and ``size - 1`` workers. Like a StatefulSet it cannot be suspended, so
its *pods* are gated: the webhook marks both templates (:data:`~kuota.webhook.jobs.pod_parents.LEADERWORKERSET`)
with the suspending parent, the serving-group annotation and the queue and priority-class labels.

- One Workload per group, made from the LeaderWorkerSet before the group's pods exist (Kueue's prebuilt Workload):
  ``leaderworkerset-<name>-<group index>-<hash>`` (:func:`group_workload_name`), owned by the LeaderWorkerSet
  (a plain owner reference, as Kueue's), with pod sets ``leader`` (1 pod) and ``worker`` (``size - 1``), or one
  pod set ``main`` of ``size`` pods when there is no leader template. The group is serving: it never finishes;
  scaled down, the groups beyond ``replicas`` lose their Workloads. During a rolling update with ``maxSurge``,
  the surge groups the LeaderWorkerSet controller makes beyond ``replicas`` have Workloads too
  (:func:`governed_groups`).
- Its pods are put in their group from the LeaderWorkerSet once they exist (:func:`group_patch`, as Kueue's
  reconciler does: the group index is a label the LeaderWorkerSet's own webhook and controller write), and from
  then on are a serving pod group (:mod:`~kuota.webhook.jobs.pod`): ungated once the group's Workload is admitted,
  deleted when it is evicted (the LeaderWorkerSet controller recreates the group, gated).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kuota.webhook.jobs.adapter import (
    workload_name,
)
from kuota.webhook.jobs.pod import (
    GROUP_NAME_LABEL,
    GROUP_TOTAL_COUNT_ANNOTATION,
    MANAGED_LABEL,
    ROLE_HASH_ANNOTATION,
    SINGLE_POD_SET,
)
from kuota.webhook.jobs.pod_parents import LEADERWORKERSET, replicas, serving_workload
from kuota.webhook.jobs.topology import topology_request

LEADER_POD_SET = "leader"
WORKER_POD_SET = "worker"
# The LeaderWorkerSet's own pod labels (written by its webhook and controller).
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"  # "0": the leader
_LWS_PREFIX = "leaderworkerset.sigs.k8s.io"


def _template(lws: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    value = ((lws.get("spec") or {}).get("leaderWorkerTemplate") or {}).get(name)
    return value if isinstance(value, Mapping) else None


def group_size(lws: Mapping[str, Any]) -> int:
    """``leaderWorkerTemplate.size``, 1 when absent (as the LeaderWorkerSet's webhook defaults it)."""
    value = ((lws.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size")
    return 1 if value is None else int(value)


def group_workload_name(lws: Mapping[str, Any], index: int | str) -> str:
    """Kueue's name for group ``index``'s Workload: the owner name is ``<name>-<index>``."""
    metadata = lws["metadata"]
    return workload_name(f"{metadata['name']}-{index}", metadata["uid"], LEADERWORKERSET.kind)


def _rolling_update_with_surge(lws: Mapping[str, Any]) -> bool:
    """Kueue's ``isRollingUpdateWithSurge``: ``maxSurge`` above 0 and fewer than ``replicas`` groups updated yet;
    or, beyond Kueue, the LeaderWorkerSet still saying ``UpdateInProgress``. Its controller counts the surge groups
    among the updated ones and removes them only once an old group is updated and ready, so by Kueue's rule alone a
    surge group would run on without a Workload meanwhile. A percentage above 0% counts as surge too (the
    controller surges at least one group for it; Kueue's ``IntValue`` reads it as 0, leaving those groups gated)."""
    spec = lws.get("spec") or {}
    surge = ((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration") or {}).get("maxSurge") or 0
    if isinstance(surge, str):
        # Any other string the LeaderWorkerSet controller cannot scale either: it makes no surge group.
        surge = int(surge.removesuffix("%")) if surge.removesuffix("%").isdigit() else 0
    status = lws.get("status") or {}
    updating = any(
        c.get("type") == "UpdateInProgress" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return int(surge) > 0 and (int(status.get("updatedReplicas") or 0) < replicas(lws) or updating)


def governed_groups(lws: Mapping[str, Any]) -> int:
    """How many groups (indices from 0) have a Workload: ``replicas``, or ``status.replicas`` (the groups the
    controller runs) where that is more during a rolling update with surge (Kueue's ``filterWorkloads``). Outside
    a rolling update ``status.replicas`` above ``replicas`` is a scale-down not seen through yet, whose groups lose
    their Workloads at once."""
    wanted = replicas(lws)
    current = int((lws.get("status") or {}).get("replicas") or 0)
    return current if current > wanted and _rolling_update_with_surge(lws) else wanted


def group_workload_names(lws: Mapping[str, Any]) -> list[str]:
    return [group_workload_name(lws, index) for index in range(governed_groups(lws))]


def _pod_set_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """A template as Kueue keeps it in a pod set: the LeaderWorkerSet's own labels and annotations dropped (they
    differ pod by pod), but its name label."""
    kept: dict[str, Any] = {"spec": copy.deepcopy(dict(template.get("spec") or {}))}
    metadata = template.get("metadata") or {}
    for field in ("labels", "annotations"):
        values = {
            key: value
            for key, value in (metadata.get(field) or {}).items()
            if not key.startswith(_LWS_PREFIX) or key == NAME_LABEL
        }
        if values:
            kept.setdefault("metadata", {})[field] = values
    return kept


def pod_sets(lws: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each group's pod sets: ``leader`` and ``worker`` with a leader template, else ``main`` of the whole group;
    each with the topology its template's annotations ask for (the leader and the workers as a pod set group when
    they name one)."""
    size = group_size(lws)
    worker = _template(lws, "workerTemplate") or {}
    leader = _template(lws, "leaderTemplate")
    if leader is None:
        return [_pod_set(SINGLE_POD_SET, size, worker)]
    return [_pod_set(LEADER_POD_SET, 1, leader), _pod_set(WORKER_POD_SET, size - 1, worker)]


def _pod_set(name: str, count: int, template: Mapping[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "count": count, "template": _pod_set_template(template)}
    request = topology_request((template.get("metadata") or {}).get("annotations") or {})
    if request is not None:
        entry["topologyRequest"] = request
    return entry


def group_workload(lws: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Group ``index``'s Workload, marked serving (``kuota.dev/serving``) and owned by the LeaderWorkerSet."""
    return serving_workload(lws, LEADERWORKERSET, group_workload_name(lws, index), pod_sets(lws))


def set_name(pod: Mapping[str, Any]) -> str | None:
    """The name of the LeaderWorkerSet a pod belongs to (its ``leaderworkerset.sigs.k8s.io/name`` label)."""
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(NAME_LABEL)
    return str(value) if value else None


def group_patch(lws: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that puts a LeaderWorkerSet's pod in its group (managed, the group's Workload name, the
    group's size, its pod set as role), as Kueue's reconciler does; None while the pod has no group index yet."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    index = labels.get(GROUP_INDEX_LABEL)
    if index is None:
        return None
    if _template(lws, "leaderTemplate") is None:
        role = SINGLE_POD_SET
    else:
        role = LEADER_POD_SET if labels.get(WORKER_INDEX_LABEL) == "0" else WORKER_POD_SET
    return {
        "metadata": {
            "labels": {MANAGED_LABEL: "true", GROUP_NAME_LABEL: group_workload_name(lws, index)},
            "annotations": {GROUP_TOTAL_COUNT_ANNOTATION: str(group_size(lws)), ROLE_HASH_ANNOTATION: role},
        }
    }
