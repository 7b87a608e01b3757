"""Kueue's AdmissionChecks on a Workload (docs/architecture.md, "AdmissionChecks"): quota first, then every
check its ClusterQueue names for the admitted flavors, each decided by the check's own controller.

- At the reservation the Workload gets ``status.admissionChecks``, one ``Pending`` entry per check that applies to
  its flavors (Kueue's ``AdmissionChecksForWorkload``), and ``Admitted`` False, ``UnsatisfiedAdmissionChecks``.
- Once every check is ``Ready`` it is ``Admitted`` (event ``Admitted``), and its job starts with each check's
  ``podSetUpdates`` merged into its pod sets.
- A check in ``Retry`` evicts it (reason ``AdmissionCheck``): its quota is freed, its checks reset to ``Pending``
  (``retryCount`` + 1), and it is queued again once the latest ``lastTransitionTime + requeueAfterSeconds`` of its
  Retry checks has passed. A check ``Rejected`` deactivates it (Warning event ``AdmissionCheckRejected``).

A check whose controller is someone else's waits for that controller, as in Kueue; the one kuota runs itself,
Kueue's ProvisioningRequest controller (:mod:`provisioning_controller`), writes the same entries.

The functions here are pure (Workload JSON in, status out); :class:`AdmissionCheckGate` applies them in the
controller's cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kuota.engine import EngineError, Eviction, EvictionReason, WorkloadState
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import WORKLOADS, ApiWriter
from kuota.webhook.controller.errors import ApiWriteError, StaleObjectError
from kuota.webhook.controller.event_recorder import EventRecorder
from kuota.webhook.controller.pods_ready import PodsReadyClock
from kuota.webhook.controller.state import ControllerState, owner_job

log = logging.getLogger(__name__)

PENDING, READY, RETRY, REJECTED = "Pending", "Ready", "Retry", "Rejected"
UNSATISFIED = ("Admitted", False, "UnsatisfiedAdmissionChecks", "The workload has not all checks ready")
ADMITTED = ("Admitted", True, "Admitted", "The workload is admitted")

Check = dict[str, Any]


def workload_checks(workload: Mapping[str, Any]) -> list[Check]:
    return [dict(check) for check in workload.get("status", {}).get("admissionChecks") or []]


def synced_checks(current: Sequence[Mapping[str, Any]], wanted: Sequence[str], at: float) -> list[Check]:
    """``current`` with a ``Pending`` entry for each wanted check it lacks and without the others, by name (Kueue's
    ``syncAdmissionCheckConditions``)."""
    kept = {str(check.get("name")): dict(check) for check in current if check.get("name") in wanted}
    for name in wanted:
        kept.setdefault(name, {"name": name, "state": PENDING, "lastTransitionTime": status.rfc3339(at), "message": ""})
    return [kept[name] for name in sorted(kept)]


def in_state(checks: Sequence[Mapping[str, Any]], state: str) -> list[Mapping[str, Any]]:
    return [check for check in checks if check.get("state") == state]


def all_ready(checks: Sequence[Mapping[str, Any]]) -> bool:
    return all(check.get("state") == READY for check in checks)


def checks_message(checks: Sequence[Mapping[str, Any]], state: str) -> str:
    """Kueue's ``buildAdmissionChecksMessage``: ``AdmissionCheck in Retry state: "a" (why); "b"``."""
    parts = [
        f'"{check.get("name")}" ({check["message"]})' if check.get("message") else f'"{check.get("name")}"'
        for check in sorted(checks, key=lambda check: str(check.get("name")))
    ]
    noun = "AdmissionChecks" if len(checks) > 1 else "AdmissionCheck"
    return f"{noun} in {state} state: {'; '.join(parts)}"


def retry_until(checks: Sequence[Mapping[str, Any]]) -> float | None:
    """The latest ``lastTransitionTime + requeueAfterSeconds`` of the Retry checks (Kueue's ``GetMaxRetryTime``);
    None when none asks for a delay."""
    times = [
        since + int(check["requeueAfterSeconds"])
        for check in in_state(checks, RETRY)
        if check.get("requeueAfterSeconds") is not None
        and (since := status.parse_time(check.get("lastTransitionTime"))) is not None
    ]
    return max(times, default=None)


def reset_on_eviction(checks: Sequence[Mapping[str, Any]], at: float) -> list[Check]:
    """Every check back to ``Pending`` after an eviction, a Retry one counted in ``retryCount`` (Kueue's
    ``resetChecksOnEviction``); its podSetUpdates go."""
    reset: list[Check] = []
    for check in checks:
        if check.get("state") == PENDING:
            reset.append(dict(check))
            continue
        entry: Check = {
            "name": check.get("name"),
            "state": PENDING,
            "lastTransitionTime": status.rfc3339(at),
            "message": f"Reset to Pending after eviction. Previously: {check.get('state')}",
        }
        if check.get("requeueAfterSeconds") is not None:
            entry["requeueAfterSeconds"] = check["requeueAfterSeconds"]
        if check.get("state") == RETRY:
            entry["retryCount"] = int(check.get("retryCount") or 0) + 1
        reset.append(entry)
    return reset


def rejection(workload: Mapping[str, Any]) -> str:
    return checks_message(in_state(workload_checks(workload), REJECTED), REJECTED)


def eviction_cause(workload: Mapping[str, Any], deactivated: bool) -> tuple[str, str]:
    """The Evicted condition's reason and message for an AdmissionCheck eviction, in Kueue's words."""
    if deactivated:
        return "DeactivatedDueToAdmissionCheck", f"The workload is deactivated due to {rejection(workload)}"
    return "AdmissionCheck", f"Evicted due to {checks_message(in_state(workload_checks(workload), RETRY), RETRY)}"


def admitted_patch(workload: Mapping[str, Any], at: float) -> dict[str, Any]:
    conditions = status.set_conditions(workload.get("status", {}).get("conditions") or [], [ADMITTED], at)
    return {
        "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
        "status": {"conditions": conditions},
    }


def pod_set_updates(workload: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every Ready check's ``podSetUpdates`` merged per pod set name: labels, annotations, nodeSelector and
    tolerations. Two checks giving one key two values is Kueue's ``BadPodSetsUpdate``: ValueError names both."""
    merged: dict[str, dict[str, Any]] = {}
    for check in in_state(workload_checks(workload), READY):
        for update in check.get("podSetUpdates") or []:
            into = merged.setdefault(
                str(update.get("name")), {"labels": {}, "annotations": {}, "nodeSelector": {}, "tolerations": []}
            )
            for field in ("labels", "annotations", "nodeSelector"):
                for key, value in (update.get(field) or {}).items():
                    if into[field].get(key, value) != value:
                        raise ValueError(
                            f"AdmissionCheck {check.get('name')} sets {field} {key}={value} on pod set "
                            f"{update.get('name')}, which another check sets to {into[field][key]}"
                        )
                    into[field][key] = value
            into["tolerations"] += [t for t in update.get("tolerations") or [] if t not in into["tolerations"]]
    return merged


class AdmissionCheckGate:
    """Looks at each Workload that holds quota whenever it changes: a Retry or Rejected check is an eviction the
    engine makes now; all checks Ready is the ``Admitted`` condition, written here."""

    def __init__(
        self,
        state: ControllerState,
        writer: ApiWriter,
        events: EventRecorder,
        *,
        pods_ready: PodsReadyClock | None = None,
    ) -> None:
        self._state = state
        self._writer = writer
        self._events = events
        self._pods_ready = pods_ready  # None: waitForPodsReady is off

    def evictions(self, keys: Iterable[str], now: float) -> list[Eviction]:
        """The evictions that the checks of these (changed) Workloads ask for; starts the ``Admitted`` writes of
        those whose checks are all Ready."""
        state = self._state
        evictions: list[Eviction] = []
        for key in keys:
            workload = state.workloads.get(key)
            if workload is None or key in state.writing or not status.is_true(workload, "QuotaReserved"):
                continue
            checks = workload_checks(workload)
            if not checks or status.is_true(workload, "Evicted"):
                continue
            rejected, retry = in_state(checks, REJECTED), in_state(checks, RETRY)
            if rejected or retry:
                try:
                    if state.engine.status(key).state is not WorkloadState.ADMITTED:
                        continue
                    until = retry_until(checks)
                    evictions.append(
                        state.engine.evict(
                            key,
                            EvictionReason.ADMISSION_CHECK,
                            now,
                            requeue_at=until if until is not None and until > now else None,
                            deactivate=bool(rejected),
                        )
                    )
                except EngineError as error:
                    log.warning("AdmissionCheck eviction of %s not acted on: %s", key, error)
                    continue
                log.info("Workload %s: %s", key, checks_message(rejected or retry, REJECTED if rejected else RETRY))
            elif all_ready(checks) and not status.is_true(workload, "Admitted"):
                state.spawn(self._write_admitted(key, workload))
        return evictions

    async def _write_admitted(self, key: str, workload: Mapping[str, Any]) -> None:
        state = self._state
        metadata = workload["metadata"]
        at = state.clock()
        try:
            written = await self._writer.merge_patch(
                WORKLOADS, metadata["namespace"], metadata["name"], admitted_patch(workload, at), "status"
            )
        except StaleObjectError:
            return  # the watch brings the newer copy, and this is decided again
        except ApiWriteError as error:
            log.warning("Admitted of %s not written: %s", key, error)
            state.dirty_workloads.add(key)
            return
        state.workloads.wrote(written)
        if self._pods_ready is not None:  # the start clock runs from now, whoever owns the Workload
            self._pods_ready.track(key, written)
        reserved = status.quota_reserved_at(written) or at
        cluster_queue = status.admitted_cluster_queue(written)
        self._events.record(
            written,
            "Normal",
            "Admitted",
            f"Admitted by ClusterQueue {cluster_queue}, wait time since reservation was {max(0.0, at - reserved):.0f}s",
        )
        owner = owner_job(written)
        if owner is not None:
            state.dirty_jobs.add(owner)
        state.wake.set()
