"""What the controller's parts share, so that none of them reaches into another: the newest known copy of every
Workload and job (of every managed kind), the work still to do (dirty keys, a rebuild), and the engine they all
feed.

A job is named by a :data:`JobKey`: its kind (``Kind.group``, e.g. ``Job.batch``, ``JobSet.jobset.x-k8s.io``,
``Pod``) and its ``namespace/name``; a pod group by :data:`POD_GROUP` and ``namespace/<group name>``.

The engine is replaced whole when it is rebuilt from the API's truth, so every part reads ``state.engine`` when
it needs it and never keeps its own reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kuota import strict_json
from kuota.engine import Configuration, QuotaEngine, Workload
from kuota.simulator.runtimes import EXPECTED_RUNTIME_ANNOTATION

_SHARED_STRING_LENGTH = 256
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_KEPT_POD_SPEC = ("nodeSelector", "affinity", "tolerations", "overhead")
_KEPT_CONTAINER = ("name", "resources")


def compact_config(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The copy the controller keeps of a configuration object: without what it never reads (managedFields,
    kubectl's last-applied copy), with keys and short strings shared. Every watch event is decoded on its own,
    so without sharing, a thousand ClusterQueues hold a thousand copies of "metadata", "nominalQuota"..."""
    shared: dict[str, Any] = _shared(_without_bookkeeping(obj))
    return shared


def _without_bookkeeping(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = {key: value for key, value in (obj.get("metadata") or {}).items() if key != "managedFields"}
    annotations = metadata.get("annotations")
    if annotations and _LAST_APPLIED in annotations:
        metadata["annotations"] = {key: value for key, value in annotations.items() if key != _LAST_APPLIED}
    return {**obj, "metadata": metadata}


@dataclass(frozen=True, slots=True)
class CompactCopy:
    """The copy the controller keeps of a Workload or a job: its resourceVersion, whether it is a finished
    Workload (what the periodic scans look for), its ``kuota.dev/expected-runtime`` annotation (what every ETA
    recomputation reads of every Workload), and the object as compact JSON. Held as Python dicts, a queued
    Workload costs about 3 KB (a dict or a list at every level); as JSON, a few hundred bytes, so ten thousand
    Workloads, their jobs and their pods fit the manager's memory. :meth:`load` decodes a fresh copy each time,
    which a caller may change without touching the cache."""

    version: int
    finished: bool
    expected_runtime: str | None
    json: bytes

    def load(self) -> dict[str, Any]:
        loaded: dict[str, Any] = strict_json.loads(self.json)
        return loaded


def compact_job(obj: Mapping[str, Any]) -> CompactCopy:
    """A job's compact copy: all of it but the API's bookkeeping (managedFields, kubectl's last-applied copy)."""
    return _compact(_without_bookkeeping(obj))


def compact_workload(obj: Mapping[str, Any]) -> CompactCopy:
    """A Workload's compact copy: :func:`compact_job`'s, with each pod set's template cut to what kuota reads of it
    (the containers' resources, which admission sums; nodeSelector, affinity and tolerations, which flavors match
    and job restores write back; overhead). The rest of a template is the job's own, held by the API server; kuota
    only ever patches Workloads, so nothing cut is written back."""
    cut = _without_bookkeeping(obj)
    spec = cut.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("podSets"), list):
        cut["spec"] = {**spec, "podSets": [_kept_pod_set(pod_set) for pod_set in spec["podSets"]]}
    return _compact(cut)


def _compact(obj: Mapping[str, Any]) -> CompactCopy:
    conditions = (obj.get("status") or {}).get("conditions") or []
    finished = any(
        isinstance(c, Mapping) and c.get("type") == "Finished" and c.get("status") == "True" for c in conditions
    )
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    expected_runtime = annotations.get(EXPECTED_RUNTIME_ANNOTATION)
    return CompactCopy(
        _version(obj),
        finished,
        None if expected_runtime is None else str(expected_runtime),
        strict_json.dumps_to_keep(obj),
    )


def _kept_pod_set(pod_set: Any) -> Any:
    template = pod_set.get("template") if isinstance(pod_set, dict) else None
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(pod_spec, dict):
        return pod_set
    kept_spec = {key: pod_spec[key] for key in _KEPT_POD_SPEC if key in pod_spec}
    for field in ("containers", "initContainers"):
        if isinstance(pod_spec.get(field), list):
            kept_spec[field] = [
                {key: c[key] for key in _KEPT_CONTAINER if key in c} if isinstance(c, dict) else c
                for c in pod_spec[field]
            ]
    kept: dict[str, Any] = {"spec": kept_spec}
    template_metadata = template.get("metadata") if isinstance(template, dict) else None
    if isinstance(template_metadata, dict):  # labels and annotations, which a restore puts back
        kept["metadata"] = {
            key: template_metadata[key] for key in ("labels", "annotations") if key in template_metadata
        }
    return {**pod_set, "template": kept}


def _shared(value: Any) -> Any:
    if isinstance(value, dict):
        return {sys.intern(key): _shared(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shared(item) for item in value]
    if isinstance(value, str) and len(value) <= _SHARED_STRING_LENGTH:
        return sys.intern(value)
    return value


def _version(obj: Mapping[str, Any] | None) -> int:
    if obj is None:
        return -1
    return int(obj.get("metadata", {}).get("resourceVersion") or 0)


def key_of(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object: the key of the newest copies and the engine."""
    metadata = obj["metadata"]
    return f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else str(metadata["name"])


JobKey = tuple[str, str]
POD_GROUP = "pod-group"


def group_kind(api_version: str, kind: str) -> str:
    """``Kind.group`` (``Kind`` for the core group): the kind part of a :data:`JobKey`."""
    group = api_version.rpartition("/")[0]
    return f"{kind}.{group}" if group else kind


def owner_job(workload: Mapping[str, Any]) -> JobKey | None:
    """The job a Workload belongs to: its controller owner; for a pod group's Workload (owned by each of its
    pods, none of them its controller), the group; else its one owner (a StatefulSet's Workload holds a plain
    reference to it, as Kueue's does)."""
    namespace = workload["metadata"]["namespace"]
    owners = workload.get("metadata", {}).get("ownerReferences") or []
    for owner in owners:
        if owner.get("controller"):
            return group_kind(
                str(owner.get("apiVersion", "")), str(owner.get("kind", ""))
            ), f"{namespace}/{owner['name']}"
    if owners and all(owner.get("kind") == "Pod" and owner.get("apiVersion") == "v1" for owner in owners):
        return POD_GROUP, f"{namespace}/{workload['metadata']['name']}"
    if len(owners) == 1:
        return group_kind(str(owners[0].get("apiVersion", "")), str(owners[0].get("kind", ""))), (
            f"{namespace}/{owners[0]['name']}"
        )
    return None


class NewestCopies:
    """The newest known copy of each object: watch events and our own write results, whichever is newer."""

    def __init__(self, compact: Callable[[Mapping[str, Any]], CompactCopy] = compact_job) -> None:
        """``compact`` makes the copy kept of a written object: the watch's parse function for the same kind."""
        self._objects: dict[str, CompactCopy] = {}
        self._compact = compact

    def observe(self, key: str, obj: CompactCopy | None) -> bool:
        """Take a watch event; True when it is news (not an echo of our own, already applied, write)."""
        current = self._objects.get(key)
        if obj is None:
            return self._objects.pop(key, None) is not None
        if current is not None and obj.version <= current.version:
            if obj.version == current.version:
                self._objects[key] = obj  # the watch's copy of our own write: one copy, shared with the watch
            return False
        self._objects[key] = obj
        return True

    def compact_watched(self, obj: Mapping[str, Any]) -> CompactCopy:
        """A watched object's compact copy: the one kept already when the watch echoes our own write (the same
        resourceVersion), so an echo costs no second compaction."""
        current = self._objects.get(key_of(obj))
        if current is not None and current.version == _version(obj):
            return current
        return self._compact(obj)

    def wrote(self, obj: Mapping[str, Any]) -> None:
        key = key_of(obj)
        current = self._objects.get(key)
        if current is None and (obj.get("metadata") or {}).get("deletionTimestamp"):
            return  # its deletion was watched while this answer was on its way: kept, it would never go
        if current is None or _version(obj) > current.version:
            self._objects[key] = self._compact(obj)

    def get(self, key: str) -> dict[str, Any] | None:
        found = self._objects.get(key)
        return None if found is None else found.load()

    def expected_runtime(self, key: str) -> str | None:
        """The compact copy's ``kuota.dev/expected-runtime`` annotation, without decoding it (None: none)."""
        found = self._objects.get(key)
        return None if found is None else found.expected_runtime

    def __iter__(self) -> Iterator[str]:
        return iter(self._objects)

    def __len__(self) -> int:
        return len(self._objects)

    def finished(self) -> Iterator[dict[str, Any]]:
        """The finished Workloads among the compact copies, decoded (the others are not)."""
        return (found.load() for found in list(self._objects.values()) if found.finished)


class ControllerState:
    def __init__(self, configuration: Configuration, clock: Callable[[], float] = time.time) -> None:
        self.configuration = configuration
        self.clock = clock
        self.engine = QuotaEngine(configuration)
        self.workloads = NewestCopies(compact_workload)
        # The parsed Workload the engine was last given, per key: shared, so the ETAs' replay costs no copy.
        self.parsed: dict[str, Workload] = {}
        self.jobs: dict[str, NewestCopies] = {}  # per kind (the first part of a JobKey)
        self.dirty_workloads: set[str] = set()
        self.dirty_jobs: set[JobKey] = set()
        self.remade_when_gone: set[str] = set()  # the job kinds whose job gets a new Workload when its own goes
        # Decision writes in flight, per Workload (:meth:`writing_started`, :meth:`writing_done`): watch news of
        # such a Workload waits until they are done, and background writes wait for ``no_decision_writes``.
        self.writing: dict[str, int] = {}
        self.no_decision_writes = asyncio.Event()
        self.no_decision_writes.set()
        self.needs_rebuild = False
        self.wake = asyncio.Event()
        self.invalid: dict[str, str] = {}  # configuration objects the engine refused, with why
        self._tasks: set[asyncio.Task[Any]] = set()  # fire-and-forget writes, referenced until done

    def writing_started(self, keys: Iterable[str]) -> None:
        """A decision write about each of ``keys`` is in flight."""
        for key in keys:
            self.writing[key] = self.writing.get(key, 0) + 1
            self.no_decision_writes.clear()

    def writing_done(self, key: str) -> bool:
        """One decision write about ``key`` is done; True when none about it remains in flight."""
        remaining = self.writing[key] - 1
        if remaining:
            self.writing[key] = remaining
            return False
        del self.writing[key]
        if not self.writing:
            self.no_decision_writes.set()
        return True

    def take_fresh(self, key: str, fresh: dict[str, Any] | None) -> None:
        """A copy read from the API (None: gone) becomes the view, and the engine hears of it next cycle: its
        watch event, arriving later, will look like an echo (so a Workload found gone is :meth:`workload_gone`
        here)."""
        if fresh is None:
            last = self.workloads.get(key)
            if self.workloads.observe(key, None) and last is not None:
                self.workload_gone(last)
        else:
            self.workloads.wrote(fresh)
        self.dirty_workloads.add(key)
        self.wake.set()

    def workload_gone(self, last_copy: Mapping[str, Any]) -> None:
        """A Workload is gone: its job is reconciled again if its kind is one whose job then gets a new one (the
        suspendable kinds, :attr:`remade_when_gone`, as Kueue's job framework does: a job whose Workload was
        replaced, or deleted by hand); the pod-based kinds follow their own rules."""
        owner = owner_job(last_copy)
        if owner is not None and owner[0] in self.remade_when_gone:
            self.dirty_jobs.add(owner)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Run ``coroutine`` without waiting for it."""
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def gather(coroutines: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run ``coroutines`` at once and wait for all of them."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    if tasks:
        await asyncio.gather(*tasks)


async def gather_between_decisions(
    state: ControllerState, coroutines: list[Coroutine[Any, Any, None]], batch: int, longest_wait: float
) -> None:
    """Run background writes ``batch`` at a time, each batch once no decision is being written or after
    ``longest_wait`` seconds: they take the API server's time in the gaps between decision writes (a write
    that lands on a Workload being admitted makes its admission write stale, so it is read and written
    again), and under steady decisions they are slowed, never stopped."""
    started = 0
    try:
        while started < len(coroutines):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(state.no_decision_writes.wait(), longest_wait)
            await gather(coroutines[started : started + batch])
            started += batch
    finally:
        for unstarted in coroutines[started:]:  # cancelled (the manager stops): never run, closed quietly
            unstarted.close()
