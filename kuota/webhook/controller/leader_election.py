"""Leader election on a coordination.k8s.io Lease, so that exactly one manager replica admits.

Expiry is judged the way client-go judges it: by when *this* replica last saw the Lease record change
(local monotonic clock), never by comparing the holder's timestamps with ours, so clock skew between
nodes cannot make two leaders. Leadership ends when a renewal has not succeeded within ``renew_deadline``;
a graceful stop releases the Lease (empty holder, 1 s duration) so a successor takes over in seconds.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from kuota.webhook.controller.api_writes import LEASES, ApiWriter
from kuota.webhook.controller.errors import ApiWriteError, ControllerError, StaleObjectError

log = logging.getLogger(__name__)


class LostLeadershipError(ControllerError):
    """The Lease could not be renewed in time; the leader's work was stopped."""


def _micro_time() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElector:
    writer: ApiWriter
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.leading = asyncio.Event()

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Wait to become leader, then run ``lead`` while renewing; raise LostLeadershipError if renewal fails."""
        while not await self._try_acquire_or_renew():  # noqa: ASYNC110 - polling the API, not a local flag
            await asyncio.sleep(self.retry_period)
        log.info("%s became the leader (Lease %s/%s)", self.identity, self.namespace, self.name)
        self.leading.set()
        try:
            async with asyncio.TaskGroup() as group:
                work = group.create_task(lead(), name="leader work")
                group.create_task(self._renew_until_lost(work), name="lease renewal")
        finally:
            self.leading.clear()

    async def _renew_until_lost(self, work: asyncio.Task[None]) -> None:
        last_renewed = time.monotonic()
        while not work.done():
            await asyncio.sleep(self.retry_period)
            if await self._try_acquire_or_renew():
                last_renewed = time.monotonic()
            elif time.monotonic() - last_renewed > self.renew_deadline:
                raise LostLeadershipError(f"{self.identity} could not renew Lease {self.namespace}/{self.name}")

    async def release(self) -> None:
        """Give the Lease up if we hold it, so a successor need not wait out its duration."""
        try:
            lease = await self.writer.get(LEASES, self.namespace, self.name)
            if lease is None or lease.get("spec", {}).get("holderIdentity") != self.identity:
                return
            await self.writer.merge_patch(
                LEASES,
                self.namespace,
                self.name,
                {
                    "metadata": {"resourceVersion": lease["metadata"]["resourceVersion"]},
                    "spec": {"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": _micro_time()},
                },
            )
            log.info("%s released Lease %s/%s", self.identity, self.namespace, self.name)
        except ApiWriteError as error:
            log.warning("could not release Lease %s/%s: %s", self.namespace, self.name, error)

    async def _try_acquire_or_renew(self) -> bool:
        try:
            lease = await self.writer.get(LEASES, self.namespace, self.name)
            now = _micro_time()
            if lease is None:
                await self.writer.create(LEASES, self.namespace, self._lease_body(now, transitions=0))
                return True
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"))
            if record != self._observed:
                self._observed, self._observed_at = record, time.monotonic()
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            held_by_other = holder not in (None, "", self.identity)
            if held_by_other and time.monotonic() < self._observed_at + duration:
                return False
            transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
            body = self._lease_body(now, transitions, acquire=holder != self.identity)
            body["metadata"] = {"resourceVersion": lease["metadata"]["resourceVersion"]}
            written = await self.writer.merge_patch(LEASES, self.namespace, self.name, body)
            written_spec = written.get("spec") or {}
            self._observed = (self.identity, written_spec.get("renewTime"), written_spec.get("leaseDurationSeconds"))
            self._observed_at = time.monotonic()
            return True
        except StaleObjectError:
            return False  # another replica wrote first
        except ApiWriteError as error:
            log.warning("Lease %s/%s: %s", self.namespace, self.name, error)
            return False

    def _lease_body(self, now: str, transitions: int, acquire: bool = True) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "renewTime": now,
            "leaseTransitions": transitions,
        }
        if acquire:
            spec["acquireTime"] = now
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }
