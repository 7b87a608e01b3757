"""The shell of Kueue's ``kueue.x-k8s.io/provisioning-request`` check controller, run by kuota's controller
(docs/architecture.md, "ProvisioningRequest"; the rules are :mod:`kuota.webhook.controller.provisioning`'s).

- Each AdmissionCheck of this controller gets its ``Active`` condition: True while its parameters name an existing
  ProvisioningRequestConfig, else False, ``BadParametersRef``, with Kueue's message (logged once per change).
- Each Workload holding quota with such a check gets, per attempt, a ProvisioningRequest and its PodTemplates
  (created owned by the Workload, then handed to the request), Event ``ProvisioningRequestCreated``; the
  request's conditions become the check's state (Event ``AdmissionCheckUpdated``). An evicted or finished
  Workload's requests are deleted (Kueue's ``CleanupProvisioningRequestsOnEviction``, on by default).

As in Kueue, nothing runs while the ProvisioningRequest CRD (``provisioningrequests.autoscaling.x-k8s.io``) is not
installed: the checks stay without ``Active``, so their ClusterQueues admit nothing. The controller watches the CRDs'
names and starts once it appears.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from kuota.kube.reflector import Event, EventType, Reflector
from kuota.webhook.controller import provisioning as rules
from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import WORKLOADS, ApiWriter, Resource
from kuota.webhook.controller.errors import ApiWriteError, JobConflictError, StaleObjectError
from kuota.webhook.controller.event_recorder import EventRecorder
from kuota.webhook.controller.job_reconciler import placements_of
from kuota.webhook.controller.state import CompactCopy, ControllerState, gather, key_of
from kuota.webhook.jobs.adapter import by_name

log = logging.getLogger(__name__)

PROVISIONING_REQUESTS = Resource("autoscaling.x-k8s.io", "v1", "provisioningrequests")
POD_TEMPLATES = Resource("", "v1", "podtemplates")
ADMISSION_CHECKS = Resource("kueue.x-k8s.io", "v1beta2", "admissionchecks")
_RETRY_SECONDS = 5.0


class ProvisioningController:
    """Reconciles the checks of this controller and the Workloads that carry them, one Workload at a time each,
    whenever a Workload, a ProvisioningRequest, an AdmissionCheck or a ProvisioningRequestConfig changes."""

    def __init__(
        self,
        state: ControllerState,
        writer: ApiWriter,
        events: EventRecorder,
        *,
        checks: Reflector[dict[str, Any]],
        configs: Reflector[dict[str, Any]],
        flavors: Reflector[dict[str, Any]],
    ) -> None:
        self._state = state
        self._writer = writer
        self._events = events
        self._checks = checks
        self._configs = configs
        self._flavors = flavors
        self._requests: Reflector[dict[str, Any]] | None = None
        self._dirty_checks: set[str] = set()
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        checks.subscribe(self._on_check)
        configs.subscribe(self._on_config)

    def watch_requests(self, requests: Reflector[dict[str, Any]]) -> None:
        """The ProvisioningRequest CRD is installed: every check and Workload is looked at once ``requests`` syncs."""
        self._requests = requests
        requests.subscribe(self._on_request)
        self._everything_dirty()

    def on_workload(self, event: Event[CompactCopy]) -> None:
        if event.type is not EventType.DELETED and b'"admissionChecks"' in event.value.json:
            self._mark(event.key)

    def _on_request(self, event: Event[dict[str, Any]]) -> None:
        namespace = event.value["metadata"].get("namespace")
        for owner in event.value["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == "Workload":
                self._mark(f"{namespace}/{owner['name']}")

    def _on_check(self, event: Event[dict[str, Any]]) -> None:
        del event
        self._everything_dirty()

    def _on_config(self, event: Event[dict[str, Any]]) -> None:
        del event
        self._everything_dirty()

    def _everything_dirty(self) -> None:
        self._dirty_checks.update(self._checks_of_ours())
        self._dirty.update(self._state.workloads)
        self._wake.set()

    def _mark(self, key: str) -> None:
        self._dirty.add(key)
        self._wake.set()

    def _checks_of_ours(self) -> dict[str, dict[str, Any]]:
        return {
            key_of(check): check
            for check in self._checks.values()
            if (check.get("spec") or {}).get("controllerName") == rules.CONTROLLER_NAME
        }

    def _parsed_configs(self) -> dict[str, rules.ProvisioningConfig]:
        return {key_of(config): rules.parse_config(config) for config in self._configs.values()}

    async def run(self) -> None:
        """Reconcile what changed, until cancelled; nothing before the ProvisioningRequests are watched."""
        self._everything_dirty()
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._requests is None:
                continue
            await self._requests.synced.wait()
            configs = self._parsed_configs()
            checks, self._dirty_checks = self._dirty_checks, set()
            ours = self._checks_of_ours()
            await gather(self._contained(self._reconcile_check(ours[name], configs)) for name in checks if name in ours)
            keys, self._dirty = self._dirty, set()
            await gather(self._contained(self._reconcile(key, ours, configs), key) for key in sorted(keys))

    async def _contained(self, reconcile: Any, key: str | None = None) -> None:
        """One reconcile; a failed write is tried again a little later, a fault costs only that object."""
        try:
            await reconcile
        except ApiWriteError as error:
            log.warning("ProvisioningRequest check of %s not synced, retrying in %.0fs: %s", key, _RETRY_SECONDS, error)
            if key is not None:
                asyncio.get_running_loop().call_later(_RETRY_SECONDS, self._mark, key)
        except (ValueError, JobConflictError) as error:
            log.warning("Workload %s: no ProvisioningRequest can be made: %s", key, error)
        except Exception:
            log.exception("ProvisioningRequest check of %s failed; every other object is served", key)

    async def _reconcile_check(self, check: Mapping[str, Any], configs: Mapping[str, rules.ProvisioningConfig]) -> None:
        """Kueue's ``acReconciler``: the Active condition, written when its status changes."""
        wanted, reason, message = rules.active_condition(check, configs)
        current = status.condition((check.get("status") or {}).get("conditions") or [], "Active")
        if current is not None and current.get("status") == wanted:
            return
        name = check["metadata"]["name"]
        conditions = status.set_conditions(
            (check.get("status") or {}).get("conditions") or [],
            [("Active", wanted == "True", reason, message)],
            self._state.clock(),
        )
        for condition in conditions:
            if condition["type"] == "Active":
                condition["observedGeneration"] = check["metadata"].get("generation", 0)
        patch = {
            "metadata": {"resourceVersion": check["metadata"]["resourceVersion"]},
            "status": {"conditions": conditions},
        }
        try:
            await self._writer.merge_patch(ADMISSION_CHECKS, None, name, patch, "status")
        except StaleObjectError:
            return  # the watch brings the newer copy, and this is decided again
        if wanted != "True":  # said once, when written
            log.warning("AdmissionCheck %s is inactive: %s", name, message)

    async def _reconcile(
        self, key: str, checks: Mapping[str, Mapping[str, Any]], configs: Mapping[str, rules.ProvisioningConfig]
    ) -> None:
        """Kueue's ``Controller.Reconcile`` for one Workload."""
        workload = self._state.workloads.get(key)
        requests = self._requests
        if workload is None or requests is None:
            return
        finished, evicted = status.is_true(workload, "Finished"), status.is_true(workload, "Evicted")
        if not status.is_true(workload, "QuotaReserved") and not finished and not evicted:
            return
        namespace, name = key.split("/", 1)
        owned = [
            request
            for request in requests.values()
            if request["metadata"].get("namespace") == namespace
            and any(
                owner.get("kind") == "Workload" and owner.get("name") == name
                for owner in request["metadata"].get("ownerReferences") or []
            )
        ]
        if finished or evicted:
            await gather(self._delete(request) for request in owned)
            return
        entries = (workload.get("status") or {}).get("admissionChecks") or []
        check_configs = {
            str(entry["name"]): rules.config_of(checks[entry["name"]], configs)
            for entry in entries
            if entry.get("name") in checks
        }
        if not check_configs:
            return
        current = {
            check: request
            for check, config in check_configs.items()
            if config is not None and (request := rules.current_request(workload, check, config, owned)) is not None
        }
        synced = rules.synced_entries(workload, check_configs, current, self._state.clock())
        if synced is not None:
            written = await self._write_checks(key, workload, synced[0])
            if written is None:
                return
            for message in synced[1]:
                self._events.record(written, "Normal", "AdmissionCheckUpdated", message)
            workload = written
        kept = {request["metadata"]["name"] for request in current.values()}
        await gather(self._delete(request) for request in owned if request["metadata"]["name"] not in kept)
        by_check = {entry["name"]: entry for entry in (workload.get("status") or {}).get("admissionChecks") or []}
        for check, config in check_configs.items():
            if config is None or not rules.request_needed(workload, config):
                continue
            attempt = rules.next_attempt(workload, by_check.get(check), current.get(check))
            if attempt is not None:
                await self._create(key, check, config, attempt)

    async def _write_checks(
        self, key: str, workload: Mapping[str, Any], entries: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        namespace, name = key.split("/", 1)
        patch = {
            "metadata": {"resourceVersion": workload["metadata"]["resourceVersion"]},
            "status": {"admissionChecks": entries},
        }
        try:
            written = await self._writer.merge_patch(WORKLOADS, namespace, name, patch, "status")
        except StaleObjectError:
            return None  # the watch brings the newer copy, and this is decided again
        state = self._state
        state.workloads.wrote(written)
        state.dirty_workloads.add(key)  # the quota controller acts on the new states (admits, evicts)
        state.wake.set()
        return written

    async def _delete(self, request: Mapping[str, Any]) -> None:
        metadata = request["metadata"]
        try:
            await self._writer.delete(
                PROVISIONING_REQUESTS, metadata["namespace"], metadata["name"], metadata["resourceVersion"]
            )
        except StaleObjectError:
            return  # gone already, or changed: its watch event brings it back here
        log.info("ProvisioningRequest %s/%s deleted", metadata["namespace"], metadata["name"])

    async def _create(self, key: str, check: str, config: rules.ProvisioningConfig, attempt: int) -> None:
        """One attempt's PodTemplates and ProvisioningRequest (Kueue's ``syncOwnedProvisionRequest``)."""
        namespace, workload_name = key.split("/", 1)
        # The full pod templates: the controller's copy of a Workload keeps only what admission reads of them.
        workload = await self._writer.get(WORKLOADS, namespace, workload_name)
        if workload is None:
            return
        name = rules.request_name(workload_name, check, attempt)
        merged = rules.merged_pod_sets(workload, config)
        placements = by_name(placements_of((workload.get("status") or {}).get("admission") or {}, self._flavors, {})[0])
        templates = [rules.pod_template_name(name, pod_set.name) for pod_set in merged]
        for template, pod_set in zip(templates, merged, strict=True):
            manifest = rules.pod_template(workload, template, pod_set.pod_set, placements.get(pod_set.name))
            try:
                await self._writer.create(POD_TEMPLATES, namespace, manifest)
            except StaleObjectError:
                pass  # made by an attempt cut short: used as it is, as Kueue does
            except ApiWriteError as error:
                await self._failed_create(key, check, f'Error creating PodTemplate "{template}": {error}')
                return
        try:
            created = await self._writer.create(
                PROVISIONING_REQUESTS, namespace, rules.request_manifest(workload, name, config, merged)
            )
        except StaleObjectError:
            return  # created by an earlier round whose watch event is still on its way
        except ApiWriteError as error:
            await self._failed_create(key, check, f'Error creating ProvisioningRequest "{name}": {error}')
            return
        log.info("Workload %s: ProvisioningRequest %s created (check %s, attempt %d)", key, name, check, attempt)
        self._events.record(workload, "Normal", "ProvisioningRequestCreated", f'Created ProvisioningRequest: "{name}"')
        # The templates go with the request from now on (they were the Workload's in case creating it failed).
        owner = {"metadata": {"ownerReferences": [rules.owner_reference(created)]}}
        await gather(self._hand_over(namespace, template, owner) for template in templates)

    async def _hand_over(self, namespace: str, template: str, owner: Mapping[str, Any]) -> None:
        with contextlib.suppress(StaleObjectError):  # deleted meanwhile, with its request
            await self._writer.merge_patch(POD_TEMPLATES, namespace, template, owner)

    async def _failed_create(self, key: str, check: str, message: str) -> None:
        """Kueue's ``handleError``: a Warning ``FailedCreate`` and the reason in the check's message."""
        workload = self._state.workloads.get(key)
        if workload is None:
            return
        log.warning("Workload %s: %s", key, message)
        self._events.record(workload, "Warning", "FailedCreate", message)
        entries = [
            {**entry, "message": message[:32768]} if entry.get("name") == check else dict(entry)
            for entry in (workload.get("status") or {}).get("admissionChecks") or []
        ]
        await self._write_checks(key, workload, entries)
