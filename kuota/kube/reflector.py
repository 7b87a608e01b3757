"""A list+watch cache of one Kubernetes resource, for the controller and the webhook.

The contract, as client-go's reflector keeps it:

- The first list, and every relist, is a consistent read (no ``resourceVersion`` on the first page, so the
  API server reads from etcd with a quorum) paginated with ``limit``/``continue``; an expired continue
  token restarts the list (:func:`kuota.kube.listing.list_all`).
- The watch resumes from the list's resourceVersion with bookmarks on (the server advances our
  resourceVersion even when nothing we watch changes) and a server-side ``timeoutSeconds`` (a hung
  connection is noticed and the load spreads across API servers).
- ``410 Gone`` (as an HTTP status or as an ERROR event) means our resourceVersion is too old: relist, and
  report the difference from the previous store as events, so subscribers see deletions they missed.
- Any other failure reconnects with capped exponential backoff and jitter, from the last resourceVersion.
- ``synced`` is set once the first list is in the store and stays set.

Objects are parsed once by the caller's ``parse`` into typed values; the store keeps only those.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import aiohttp

from kuota import strict_json
from kuota.kube.client import KubeApi
from kuota.kube.errors import GoneError, KubeApiError, MalformedResponseError, error_for_status
from kuota.kube.listing import list_all

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ResourceType:
    """Where a resource lives in the API. ``namespace`` narrows a namespaced resource to one namespace,
    ``label_selector`` and ``field_selector`` to the objects they select (a list/watch ``labelSelector``,
    ``fieldSelector``: an object that stops matching is watched as deleted)."""

    group: str
    version: str
    plural: str
    namespaced: bool
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    @property
    def query(self) -> list[tuple[str, str]]:
        selectors = (("labelSelector", self.label_selector), ("fieldSelector", self.field_selector))
        return [(name, value) for name, value in selectors if value]

    @property
    def path(self) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and self.namespace is not None:
            return f"{prefix}/namespaces/{self.namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group or 'core'}/{self.version}"


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = metadata.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


class EventType(enum.Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True)
class Event(Generic[T]):
    type: EventType
    key: str
    value: T


@dataclass(frozen=True)
class _RawEvent:
    type: str
    object: Mapping[str, Any]


@dataclass(frozen=True)
class Backoff:
    initial: float = 0.2
    maximum: float = 30.0
    factor: float = 2.0

    def delay(self, attempt: int) -> float:
        ceiling = min(self.maximum, self.initial * self.factor**attempt)
        # Full jitter: replicas that lost the API server together do not come back together.
        return random.uniform(ceiling / 2, ceiling)


class Reflector(Generic[T]):
    """Keeps a typed store of one resource in step with the API server until cancelled."""

    def __init__(
        self,
        api: KubeApi,
        resource: ResourceType,
        parse: Callable[[Mapping[str, Any]], T],
        *,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
        request_timeout: float = 30.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.parse = parse
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self.request_timeout = request_timeout
        self.backoff = backoff or Backoff()
        self.synced = asyncio.Event()
        # The resourceVersion the next watch resumes from; empty until the first list.
        self.resource_version = ""
        self.relists = 0
        self._store: dict[str, T] = {}
        self._subscribers: list[Callable[[Event[T]], None]] = []

    def get(self, key: str) -> T | None:
        return self._store.get(key)

    def values(self) -> Iterable[T]:
        return self._store.values()

    def __len__(self) -> int:
        return len(self._store)

    def subscribe(self, callback: Callable[[Event[T]], None]) -> None:
        """Call ``callback`` for every change, in order, from the event loop; it must not block."""
        self._subscribers.append(callback)

    async def run(self) -> None:
        """List (unless :meth:`list_once` already did), then watch; relist on 410; reconnect on failures."""
        failures = 0
        while True:
            try:
                if not self.resource_version:
                    await self.list_once()
                await self._watch()
                failures = 0
            except GoneError as error:
                log.info("%s: %s; relisting", self.resource, error)
                self.resource_version = ""
                self.relists += 1
            except KubeApiError as error:
                delay = self.backoff.delay(failures)
                failures += 1
                log.warning("%s: %s; reconnecting in %.1fs", self.resource, error or type(error).__name__, delay)
                await asyncio.sleep(delay)

    async def list_once(self) -> None:
        """A consistent paginated list replacing the store; subscribers get the differences."""
        listing = await list_all(
            self.api,
            self.resource.path,
            page_size=self.page_size,
            client_timeout=self.request_timeout,
            query=self.resource.query,
        )
        items, resource_version = listing.items, listing.resource_version
        fresh = {object_key(item): self.parse(item) for item in items}
        previous = self._store
        self._store = fresh
        self.resource_version = resource_version
        for key, value in previous.items():
            if key not in fresh:
                self._publish(Event(EventType.DELETED, key, value))
        for key, value in fresh.items():
            if key not in previous:
                self._publish(Event(EventType.ADDED, key, value))
            elif previous[key] != value:
                self._publish(Event(EventType.MODIFIED, key, value))
        self.synced.set()

    async def _watch(self) -> None:
        query = [
            *self.resource.query,
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(self.watch_timeout_seconds)),
        ]
        # No total timeout: a watch is meant to stay open; a silent connection still trips sock_read.
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.request_timeout, sock_read=self.watch_timeout_seconds + self.request_timeout
        )
        async with self.api.stream("GET", self.resource.path, query=query, client_timeout=timeout) as stream:
            if stream.status != 200:
                (await stream.read()).raise_for_status()
            async for line in stream.lines():
                self._apply(_decode_event(line))

    def _apply(self, raw: _RawEvent) -> None:
        metadata = raw.object.get("metadata") or {}
        if raw.type == "ERROR":
            code = raw.object.get("code")
            status = code if isinstance(code, int) else 0
            reason = str(raw.object.get("reason") or "")
            raise error_for_status(
                status, reason, f"{self.resource}: watch error {code}: {raw.object.get('message', '')}"
            )
        version = str(metadata.get("resourceVersion", ""))
        if raw.type == "BOOKMARK":
            self.resource_version = version or self.resource_version
            return
        key = object_key(raw.object)
        if raw.type == "DELETED":
            gone = self._store.pop(key, None)
            if gone is not None:
                self._publish(Event(EventType.DELETED, key, gone))
        elif raw.type in ("ADDED", "MODIFIED"):
            value = self.parse(raw.object)
            existed = key in self._store
            self._store[key] = value
            self._publish(Event(EventType.MODIFIED if existed else EventType.ADDED, key, value))
        else:
            raise MalformedResponseError(f"{self.resource}: unknown watch event type {raw.type!r}", 200)
        self.resource_version = version or self.resource_version

    def _publish(self, event: Event[T]) -> None:
        for callback in self._subscribers:
            callback(event)


def _decode_event(line: bytes) -> _RawEvent:
    try:
        document = strict_json.loads(line)
    except ValueError as error:
        raise MalformedResponseError(f"watch stream carried a line that is not JSON: {error}", 200) from error
    event_type = document.get("type") if isinstance(document, dict) else None
    obj = document.get("object") if isinstance(document, dict) else None
    if not isinstance(event_type, str) or not isinstance(obj, dict):
        raise MalformedResponseError("watch stream carried an event without type and object", 200)
    return _RawEvent(event_type, obj)


@dataclass
class ReflectorSet:
    """Several reflectors run together; ``synced`` once all of them are."""

    reflectors: list[Reflector[Any]] = field(default_factory=list)

    def synced(self) -> bool:
        return all(reflector.synced.is_set() for reflector in self.reflectors)

    def unsynced(self) -> list[str]:
        return [str(reflector.resource) for reflector in self.reflectors if not reflector.synced.is_set()]

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for reflector in self.reflectors:
                group.create_task(reflector.run(), name=f"reflector {reflector.resource}")
