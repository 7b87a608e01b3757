"""Kubernetes Events on Jobs and Workloads, where people look first: every part of the controller tells what it
did through one recorder, so that together they stay within one budget and never hold a decision up.

Events share the API server with decisions, so they get a budget (a burst of ``_EVENT_BURST``, then
``_EVENTS_PER_SECOND``) and a backlog; beyond it an Event is dropped and counted in
``kuota_events_dropped_total``, as Kubernetes' own event recorders do under load. The Workload's conditions still
say everything an Event would.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from kuota.webhook.controller import workload_status as status
from kuota.webhook.controller.api_writes import EVENTS, ApiWriter
from kuota.webhook.controller.errors import ApiWriteError
from kuota.webhook.controller.metrics import ControllerMetrics
from kuota.webhook.controller.state import key_of

log = logging.getLogger(__name__)

_EVENT_BACKLOG = 1000
_EVENTS_PER_SECOND = 10.0
_EVENT_BURST = 200.0


class EventRecorder:
    def __init__(
        self,
        reporter: ApiWriter,
        metrics: ControllerMetrics,
        clock: Callable[[], float],
        spawn: Callable[[Coroutine[Any, Any, Any]], None],
    ) -> None:
        self._reporter = reporter
        self._metrics = metrics
        self._clock = clock
        self._spawn = spawn
        self._waiting = 0
        self._tokens = _EVENT_BURST
        self._tokens_at = time.monotonic()

    def record(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        """Record an Event without waiting for it, or drop it when over budget."""
        clock = time.monotonic()
        refill = (clock - self._tokens_at) * _EVENTS_PER_SECOND
        self._tokens = min(_EVENT_BURST, self._tokens + refill)
        self._tokens_at = clock
        if self._tokens < 1 or self._waiting >= _EVENT_BACKLOG:
            self._metrics.events_dropped.inc()
            log.debug("event %s on %s dropped: over budget, %d waiting", reason, key_of(obj), self._waiting)
            return
        self._tokens -= 1
        metadata = obj["metadata"]
        now = status.rfc3339(self._clock())
        involved = obj.get("kind") or ("Workload" if "podSets" in obj.get("spec", {}) else "Job")
        api_version = obj.get("apiVersion") or ("kueue.x-k8s.io/v1beta2" if involved == "Workload" else "batch/v1")
        event = {
            "metadata": {"generateName": f"{metadata['name']}.", "namespace": metadata["namespace"]},
            "involvedObject": {
                "kind": involved,
                "apiVersion": api_version,
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata.get("uid"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": "kuota-manager"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self._waiting += 1
        self._spawn(self._write(metadata["namespace"], event))

    async def _write(self, namespace: str, event: dict[str, Any]) -> None:
        try:
            await self._reporter.create(EVENTS, namespace, event)
        except ApiWriteError as error:
            log.info("event not recorded: %s", error)
        finally:
            self._waiting -= 1
