"""Workload status as the API shows it, built from the engine's decisions (pure).

Every write is a JSON merge patch that carries the ``resourceVersion`` the decision was made from, so the API
server refuses it (409) if the Workload changed meanwhile: kuota never admits from a stale snapshot.
Conditions are written as a whole list, merged here by type, the way ``meta.SetStatusCondition`` does.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from kuota.engine import (
    Admission,
    Eviction,
    EvictionReason,
    FieldError,
    InvalidObjectError,
    PodSetAssignment,
    format_quantity,
    parse_quantity,
)
from kuota.webhook import topology_assignment

Condition = dict[str, Any]


def rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(stamp: str | None) -> float | None:
    if not stamp:
        return None
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def condition(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def is_true(workload: Mapping[str, Any], kind: str) -> bool:
    found = condition(workload.get("status", {}).get("conditions") or [], kind)
    return found is not None and found.get("status") == "True"


def set_conditions(
    conditions: Sequence[Mapping[str, Any]], updates: Sequence[tuple[str, bool, str, str]], at: float
) -> list[Condition]:
    """Merge ``(type, status, reason, message)`` updates into ``conditions``; a transition time moves only
    when the status flips."""
    merged = [dict(c) for c in conditions]
    for kind, status, reason, message in updates:
        text = "True" if status else "False"
        existing = next((c for c in merged if c.get("type") == kind), None)
        if existing is None:
            merged.append(
                {"type": kind, "status": text, "reason": reason, "message": message, "lastTransitionTime": rfc3339(at)}
            )
            continue
        if existing.get("status") != text:
            existing["lastTransitionTime"] = rfc3339(at)
        existing.update(status=text, reason=reason, message=message)
    return merged


def _patch(workload: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]}, "status": dict(status)}


def status_patch(workload: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch of ``fields`` of the status, refused if ``workload`` changed since it was read."""
    return _patch(workload, fields)


def admission_patch(
    workload: Mapping[str, Any], admission: Admission, checks: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """Quota reserved; admitted too unless one of ``checks`` (its AdmissionChecks, synced to its flavors) is not
    Ready yet, as Kueue's ``SyncAdmittedCondition``."""
    conditions = workload.get("status", {}).get("conditions") or []
    ready = all(check.get("state") == "Ready" for check in checks)
    updates = [
        ("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {admission.cluster_queue}"),
        ("Admitted", True, "Admitted", "The workload is admitted")
        if ready
        else ("Admitted", False, "UnsatisfiedAdmissionChecks", "The workload has not all checks ready"),
    ]
    # A requeued workload admitted again: its earlier eviction no longer holds.
    updates += [
        (kind, False, "QuotaReserved", "The workload holds quota again")
        for kind in ("Evicted", "Preempted", "Requeued")
        if condition(conditions, kind) is not None
    ]
    written: dict[str, Any] = {
        "admission": {
            "clusterQueue": admission.cluster_queue,
            "podSetAssignments": [_assignment(pod_set) for pod_set in admission.pod_sets],
        },
        "conditions": set_conditions(conditions, updates, admission.at),
    }
    if checks or workload.get("status", {}).get("admissionChecks"):
        written["admissionChecks"] = [dict(check) for check in checks] or None
    return _patch(workload, written)


def _assignment(pod_set: PodSetAssignment) -> dict[str, Any]:
    written: dict[str, Any] = {
        "name": pod_set.name,
        "flavors": dict(pod_set.flavors),
        "resourceUsage": {resource: format_quantity(resource, amount) for resource, amount in pod_set.usage.items()},
        "count": pod_set.count,
    }
    if pod_set.topology is not None:
        written["topologyAssignment"] = topology_assignment.encode(pod_set.topology)
    return written


# Kueue's words for each preemption reason, as its Preempted and Evicted conditions say them.
_PREEMPTION_CAUSES = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def preemption_message(
    preemptor: Mapping[str, Any] | None, cause: str, preemptor_path: str, preemptee_path: str
) -> str:
    """Kueue's message on a preempted Workload: who preempted it (by UID), why, and both queues' cohort paths."""
    metadata = (preemptor or {}).get("metadata") or {}
    uid = metadata.get("uid") or "UNKNOWN"
    job_uid = (metadata.get("labels") or {}).get("kueue.x-k8s.io/job-uid") or "UNKNOWN"
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to "
        f"{_PREEMPTION_CAUSES.get(cause, 'UNKNOWN')}; preemptor path: {preemptor_path or 'UNKNOWN'}; "
        f"preemptee path: {preemptee_path or 'UNKNOWN'}"
    )


def eviction_cause(workload: Mapping[str, Any], eviction: Eviction) -> tuple[str, str]:
    """The Evicted condition's reason and message, in Kueue's words (a deactivation names its cause)."""
    reason = eviction.reason
    if reason is EvictionReason.DEACTIVATED:
        if workload.get("spec", {}).get("active", True) is False:
            return "Deactivated", "The workload is deactivated"
        return (
            "DeactivatedDueToMaximumExecutionTimeExceeded",
            "The workload is deactivated due to exceeding the maximum execution time",
        )
    if reason is EvictionReason.PODS_READY_TIMEOUT and eviction.deactivated:
        return (
            "DeactivatedDueToRequeuingLimitExceeded",
            "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
        )
    if reason is EvictionReason.NODE_FAILURES:
        nodes = unhealthy_nodes(workload)
        # Several recorded nodes: one failed before the other was replaced (Kueue's node controller evicts then).
        if len(nodes) > 1:
            return reason.value, (
                "Workload eviction triggered due to multiple TAS assigned node failures, including: " + ", ".join(nodes)
            )
        return reason.value, "Workload was evicted as there was no replacement for unhealthy node(s): " + ",".join(
            nodes
        )
    messages = {
        EvictionReason.CLUSTER_QUEUE_STOPPED: "The ClusterQueue is stopped",
        EvictionReason.LOCAL_QUEUE_STOPPED: "The LocalQueue is stopped",
        EvictionReason.PODS_READY_TIMEOUT: f"Exceeded the PodsReady timeout {eviction.workload}",
    }
    return reason.value, messages.get(reason, f"The workload was evicted: {reason.value}")


def unhealthy_nodes(workload: Mapping[str, Any]) -> list[str]:
    """``status.unhealthyNodes``: the failed nodes whose pods are being replaced, by name."""
    return [str(node.get("name")) for node in workload.get("status", {}).get("unhealthyNodes") or []]


def requeue_state(workload: Mapping[str, Any]) -> tuple[int, float | None]:
    """``status.requeueState``: the PodsReady timeouts counted so far, and when the backoff ends (None: none)."""
    state = workload.get("status", {}).get("requeueState") or {}
    count = state.get("count") if isinstance(state, Mapping) else None
    requeue_at = state.get("requeueAt") if isinstance(state, Mapping) else None
    try:
        return int(count or 0), parse_time(requeue_at) if isinstance(requeue_at, str) else None
    except (TypeError, ValueError):
        return 0, None


# The Evicted reason of a deactivation names its cause ("DeactivatedDueToRequeuingLimitExceeded"): Kueue counts
# it as reason "Deactivated" with that cause.
_DEACTIVATED_DUE_TO = "DeactivatedDueTo"


def counted_as(workload: Mapping[str, Any], evicted_reason: str) -> tuple[str, str]:
    """An eviction's reason and underlying cause as Kueue counts and labels them (``schedulingStats.evictions``
    and ``kueue_evicted_workloads_total``), from the Evicted reason written and the Workload as it was before
    the eviction: a PodsReady timeout's cause is the PodsReady condition's reason (WaitForStart or
    WaitForRecovery), a deactivation's what deactivated it, any other's ``""``."""
    if evicted_reason.startswith(_DEACTIVATED_DUE_TO):
        return "Deactivated", evicted_reason.removeprefix(_DEACTIVATED_DUE_TO)
    if evicted_reason == EvictionReason.PODS_READY_TIMEOUT.value:
        conditions = (workload.get("status") or {}).get("conditions") or []
        ready = [c.get("reason") for c in conditions if c.get("type") == "PodsReady"]
        return evicted_reason, "WaitForRecovery" if ready == ["WaitForRecovery"] else "WaitForStart"
    return evicted_reason, ""


def counted_eviction(workload: Mapping[str, Any], evicted_reason: str) -> list[dict[str, Any]]:
    """``status.schedulingStats.evictions`` with this eviction counted, as Kueue counts them: by reason and
    underlying cause (``counted_as``), so a tool reading the Workload knows how often, and why, it lost its
    quota."""
    status = workload.get("status") or {}
    reason, cause = counted_as(workload, evicted_reason)
    counts = [dict(entry) for entry in (status.get("schedulingStats") or {}).get("evictions") or []]
    for entry in counts:
        if entry.get("reason") == reason and entry.get("underlyingCause", "") == cause:
            entry["count"] = int(entry.get("count") or 0) + 1
            return counts
    return [*counts, {"reason": reason, "underlyingCause": cause, "count": 1}]


def eviction_patch(
    workload: Mapping[str, Any],
    eviction: Eviction,
    preempted_message: str | None = None,
    *,
    cause: tuple[str, str] | None = None,
    checks: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Evicted, quota released at once, and requeued, or deactivated (not requeued: ``Requeued`` False with the
    cause, until ``spec.active`` is true again). ``preempted_message`` says who preempted it; ``cause`` is the
    Evicted reason and message where the caller words them (an AdmissionCheck's), ``checks`` its AdmissionChecks
    as they are to be after the eviction."""
    if cause is not None:
        reason, message = cause
    elif eviction.preemption_reason is not None and preempted_message is not None:
        reason, message = eviction.reason.value, preempted_message
    else:
        reason, message = eviction_cause(workload, eviction)
    updates = [
        ("Evicted", True, reason, message),
        ("QuotaReserved", False, "Pending", message),
        ("Admitted", False, "NoReservation", "The workload has no reservation"),
    ]
    if eviction.preemption_reason is not None:
        updates.append(("Preempted", True, eviction.preemption_reason.value, message))
    # Not requeued while deactivated, nor while backing off (Requeued True, BackoffFinished, when that ends).
    updates.append(
        ("Requeued", False, reason, message)
        if eviction.deactivated or eviction.requeue_at is not None
        else ("Requeued", True, reason, "The workload is back in its queue")
    )
    status: dict[str, Any] = {
        "admission": None,
        "conditions": set_conditions(workload.get("status", {}).get("conditions") or [], updates, eviction.at),
    }
    if eviction.requeue_at is not None and eviction.reason is EvictionReason.ADMISSION_CHECK:
        status["requeueState"] = {"requeueAt": rfc3339(eviction.requeue_at)}  # Kueue counts no retry here
    elif eviction.requeue_at is not None:
        status["requeueState"] = {"count": requeue_state(workload)[0] + 1, "requeueAt": rfc3339(eviction.requeue_at)}
    elif eviction.deactivated:
        status["requeueState"] = None  # as Kueue: a deactivated workload starts afresh when reactivated
    if checks is not None:
        status["admissionChecks"] = [dict(check) for check in checks] or None
    if unhealthy_nodes(workload):
        status["unhealthyNodes"] = None  # as Kueue's eviction: a requeued workload is placed afresh
    status["schedulingStats"] = {"evictions": counted_eviction(workload, reason)}
    patch = _patch(workload, status)
    if eviction.deactivated:
        patch["spec"] = {"active": False}
    return patch


def reactivated_patch(workload: Mapping[str, Any], at: float) -> dict[str, Any]:
    """``spec.active`` true again after a deactivation: back in its queue, ``Requeued`` True (Kueue's words)."""
    conditions = set_conditions(
        workload.get("status", {}).get("conditions") or [],
        [("Requeued", True, "Reactivated", "The workload was reactivated")],
        at,
    )
    return _patch(workload, {"conditions": conditions})


def was_deactivated(workload: Mapping[str, Any]) -> bool:
    """Whether the Workload's last eviction deactivated it (its ``Requeued`` condition is False for that)."""
    requeued = condition(workload.get("status", {}).get("conditions") or [], "Requeued")
    return (
        requeued is not None
        and requeued.get("status") == "False"
        and str(requeued.get("reason", "")).startswith("Deactivated")
    )


def pending_patch(workload: Mapping[str, Any], message: str, at: float, reason: str = "Pending") -> dict[str, Any]:
    """QuotaReserved=False with the engine's reason, so ``kubectl describe workload`` says why it waits."""
    conditions = set_conditions(
        workload.get("status", {}).get("conditions") or [], [("QuotaReserved", False, reason, message)], at
    )
    return _patch(workload, {"conditions": conditions})


def finished_patch(workload: Mapping[str, Any], succeeded: bool, message: str, at: float) -> dict[str, Any]:
    reason = "Succeeded" if succeeded else "Failed"
    conditions = set_conditions(
        workload.get("status", {}).get("conditions") or [],
        [("Finished", True, reason, message or f"Job finished: {reason}")],
        at,
    )
    return _patch(workload, {"conditions": conditions})


def admitted_pod_sets(workload: Mapping[str, Any]) -> tuple[PodSetAssignment, ...] | None:
    """The admission a Workload's status records (what a restarting controller restores), or None; raises
    InvalidObjectError when the status is not one kuota (or Kueue) could have written."""
    admission = workload.get("status", {}).get("admission")
    if not admission or not is_true(workload, "QuotaReserved"):
        return None
    assignments = []
    for index, entry in enumerate(admission.get("podSetAssignments") or [] if isinstance(admission, Mapping) else ()):
        path = f"status.admission.podSetAssignments[{index}]"
        try:
            assignments.append(
                PodSetAssignment(
                    name=str(entry["name"]),
                    flavors={str(resource): str(flavor) for resource, flavor in (entry.get("flavors") or {}).items()},
                    count=int(entry.get("count") or 0),
                    usage={
                        str(resource): parse_quantity(str(resource), amount)
                        for resource, amount in (entry.get("resourceUsage") or {}).items()
                    },
                    topology=None
                    if entry.get("topologyAssignment") is None
                    else topology_assignment.decode(entry["topologyAssignment"]),
                )
            )
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:  # QuantityError: ValueError
            detail = f"Invalid value: {type(error).__name__}: {error}"
            raise InvalidObjectError(
                "Workload", str(workload["metadata"].get("name")), [FieldError(path, detail)]
            ) from None
    return tuple(assignments)


def admitted_cluster_queue(workload: Mapping[str, Any]) -> str | None:
    admission = workload.get("status", {}).get("admission")
    return str(admission["clusterQueue"]) if admission and admission.get("clusterQueue") else None


def quota_reserved_at(workload: Mapping[str, Any]) -> float | None:
    found = condition(workload.get("status", {}).get("conditions") or [], "QuotaReserved")
    if found is None or found.get("status") != "True":
        return None
    return parse_time(found.get("lastTransitionTime"))


def requeuing_eviction(workload: Mapping[str, Any]) -> tuple[EvictionReason, float] | None:
    """The eviction a pending Workload was requeued after, where it can order the Workload in its queue (Kueue's
    ``GetQueueOrderTimestamp``): its ``Evicted`` condition while True, for a PodsReady timeout or an AdmissionCheck."""
    evicted = condition(workload.get("status", {}).get("conditions") or [], "Evicted")
    if evicted is None or evicted.get("status") != "True":
        return None
    reason = evicted.get("reason")
    at = parse_time(evicted.get("lastTransitionTime"))
    if at is None or reason not in (EvictionReason.PODS_READY_TIMEOUT.value, EvictionReason.ADMISSION_CHECK.value):
        return None
    return EvictionReason(reason), at


def queued_since(workload: Mapping[str, Any]) -> float:
    """When a Workload joined its queue: its last requeue, else its creation."""
    requeued = condition(workload.get("status", {}).get("conditions") or [], "Requeued")
    if requeued is not None and requeued.get("status") == "True":
        return parse_time(requeued.get("lastTransitionTime")) or 0.0
    return parse_time(workload["metadata"].get("creationTimestamp")) or 0.0
