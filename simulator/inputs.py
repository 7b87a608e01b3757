"""Reading simulate's inputs: CONFIG (YAML file or folder) and workloads (JSON Lines, or a trace CSV).

The JSON Lines reader is strict, as the contract is stable: unknown keys, missing keys and bad quantities
are errors naming the line. Beside the contract's pod set keys, a pod set may carry ``nodeAffinity``: a
Kubernetes ``requiredDuringSchedulingIgnoredDuringExecution`` node selector (``{"nodeSelectorTerms": [...]}``),
matched against the flavors' nodeLabels as a pod template's required node affinity is. A Philly/Helios
trace CSV (recognised by its header) is converted on the fly by ``kuota.simulator.traces``, users hashed
onto the CONFIG's LocalQueues (sorted by namespace/name).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from kuota.engine.decoding import parse_object, parse_required_node_affinity
from kuota.engine.errors import InvalidObjectError, QuantityError
from kuota.engine.model import ApiObject, LocalQueue, PodSet, TaintEffect, Toleration, Workload, WorkloadPriorityClass
from kuota.engine.quantities import parse_quantity
from kuota.simulator.errors import ConfigFileError, SourceSpecError, WorkloadFileError

_WORKLOAD_KEYS = frozenset(
    {"name", "namespace", "queue", "priorityClass", "submitAt", "duration", "maxExecutionSeconds", "podSets"}
)
_POD_SET_KEYS = frozenset({"name", "count", "requests", "nodeSelector", "tolerations", "nodeAffinity", "minCount"})
_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_REQUIRED_KEYS = ("name", "namespace", "queue", "submitAt", "duration", "podSets")
# A plain pod set (no nodeSelector, no tolerations, requests spelled as strings), as the parsing cache keys it.
_PodSetKey = tuple[str, int, int | None, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class SimulatedWorkload:
    """A workload of the replay: what the engine sees, and when it arrives and how long it works."""

    workload: Workload
    submit_at: float
    duration: float


def seed_directory() -> Path:
    """The embedded copy of ``examples/seed`` that ``kuota simulate`` runs without arguments."""
    return Path(str(resources.files("kuota.simulator") / "seed"))


def read_yaml_documents(path: Path) -> list[tuple[str, Any]]:
    """Every YAML document of a file, or of the ``*.yaml``/``*.yml`` files of a folder (in name order), each
    with where it came from (``FILE (document N)``); empty documents are skipped. The one reader of queue
    config files: ``kuota simulate --config`` and ``kuota report --config`` both read through it."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if not files:
            raise ConfigFileError(f"{path}: the folder has no .yaml files; give a CONFIG file or folder of them")
    elif path.is_file():
        files = [path]
    else:
        raise ConfigFileError(f"{path}: no such file or folder; give the CONFIG YAML or a folder of them")
    documents: list[tuple[str, Any]] = []
    for file in files:
        try:
            loaded = list(yaml.safe_load_all(file.read_text(encoding="utf-8")))
        except yaml.YAMLError as unreadable:
            raise ConfigFileError(f"{file}: not valid YAML: {unreadable}") from unreadable
        except (OSError, UnicodeDecodeError) as unreadable:
            raise ConfigFileError(f"{file}: cannot be read: {unreadable}") from unreadable
        documents += [(f"{file} (document {i + 1})", doc) for i, doc in enumerate(loaded) if doc is not None]
    return documents


def load_config(path: Path) -> list[ApiObject]:
    """Every object of a YAML file, or of the ``*.yaml``/``*.yml`` files of a folder (in name order)."""
    return _parse_objects(read_yaml_documents(path))


def config_from_dicts(documents: Iterable[Mapping[str, Any]]) -> list[ApiObject]:
    """Parse already-decoded objects (generated configs); errors name the object's position."""
    return _parse_objects((f"object {index + 1}", document) for index, document in enumerate(documents))


def _parse_objects(documents: Iterable[tuple[str, object]]) -> list[ApiObject]:
    objects: list[ApiObject] = []
    for where, document in documents:
        try:
            objects.append(parse_object(document))
        except InvalidObjectError as error:
            raise ConfigFileError(f"{where}: {error}") from error
    return objects


def priority_values(objects: Iterable[ApiObject]) -> dict[str, int]:
    return {obj.name: obj.value for obj in objects if isinstance(obj, WorkloadPriorityClass)}


def local_queues(objects: Iterable[ApiObject]) -> list[tuple[str, str]]:
    return sorted((obj.namespace, obj.name) for obj in objects if isinstance(obj, LocalQueue))


def read_workloads(path: Path, objects: Sequence[ApiObject]) -> list[SimulatedWorkload]:
    """The workloads of a JSON Lines file or a trace CSV, ordered by submission time (stable)."""
    try:
        with path.open() as stream:
            first = stream.readline()
    except OSError as error:
        raise WorkloadFileError(f"{path}: cannot read the workloads file: {error}") from error
    if first.startswith("u_id,"):
        lines: Iterable[tuple[str, Mapping[str, Any]]] = _trace_lines(path, objects)
    else:
        lines = _json_lines(path)
    workloads = convert_lines(lines, priority_values(objects))
    return sorted(workloads, key=lambda w: w.submit_at)


def _json_lines(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    with path.open() as stream:
        for number, text in enumerate(stream, start=1):
            if not text.strip():
                continue
            where = f"{path}:{number}"
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                raise WorkloadFileError(f"{where}: not JSON ({error.msg}); write one workload object a line") from error
            if not isinstance(value, dict):
                raise WorkloadFileError(f"{where}: a line must be a JSON object, got {type(value).__name__}")
            yield where, value


def _trace_lines(path: Path, objects: Sequence[ApiObject]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    from kuota.simulator.queue_mapping import QueueTarget
    from kuota.simulator.traces import read_trace, trace_workloads

    queues = [QueueTarget(namespace, name) for namespace, name in local_queues(objects)]
    if not queues:
        raise WorkloadFileError(f"{path}: a trace needs LocalQueues in the CONFIG to map its users onto; add some")
    try:
        for line in trace_workloads(read_trace(path), queues):
            yield f"{path} ({line['name']})", dict(line)
    except SourceSpecError as error:
        raise WorkloadFileError(f"{path}: {error}") from error


def convert_lines(
    lines: Iterable[tuple[str, Mapping[str, Any]]], priorities: Mapping[str, int]
) -> Iterator[SimulatedWorkload]:
    """Contract dicts (each with where it came from, for messages) as replayable workloads."""
    seen: dict[str, str] = {}
    # Streams repeat a few request spellings and pod sets; parsing each once keeps the conversion off a long
    # replay's profile (and workloads of one shape share one PodSet).
    amounts: dict[tuple[str, str], int] = {}
    pod_sets: dict[_PodSetKey, PodSet] = {}
    for index, (where, line) in enumerate(lines):
        workload = _workload(where, index, line, priorities, amounts=amounts, parsed_pod_sets=pod_sets)
        if workload.workload.key in seen:
            raise WorkloadFileError(
                f"{where}: workload {workload.workload.key} repeats {seen[workload.workload.key]};"
                " names must be unique per namespace"
            )
        seen[workload.workload.key] = where
        yield workload


def _workload(
    where: str,
    index: int,
    line: Mapping[str, Any],
    priorities: Mapping[str, int],
    *,
    amounts: dict[tuple[str, str], int],
    parsed_pod_sets: dict[_PodSetKey, PodSet],
) -> SimulatedWorkload:
    if not line.keys() <= _WORKLOAD_KEYS:
        unknown = sorted(set(line) - _WORKLOAD_KEYS)
        raise WorkloadFileError(
            f"{where}: unknown key(s) {', '.join(unknown)}; the contract's keys are {', '.join(sorted(_WORKLOAD_KEYS))}"
        )
    for key in _REQUIRED_KEYS:
        if key not in line:
            raise WorkloadFileError(f"{where}: missing key {key!r}")
    name, namespace, queue = line["name"], line["namespace"], line["queue"]
    for value in (name, namespace, queue):
        if not isinstance(value, str) or not value:
            raise WorkloadFileError(f"{where}: name, namespace and queue must be non-empty strings")
    submit_at = _number(where, "submitAt", line["submitAt"])
    duration = _number(where, "duration", line["duration"])
    priority_class = line.get("priorityClass")
    if priority_class is None:
        priority = priorities.get("default", 0)
        priority_class = "default" if "default" in priorities else None
    elif priority_class in priorities:
        priority = priorities[priority_class]
    else:
        raise WorkloadFileError(
            f"{where}: priorityClass {priority_class!r} is not a WorkloadPriorityClass of the "
            "CONFIG; add it or fix the name"
        )
    max_exec = line.get("maxExecutionSeconds")
    if max_exec is not None and (isinstance(max_exec, bool) or not isinstance(max_exec, int) or max_exec < 1):
        raise WorkloadFileError(f"{where}: maxExecutionSeconds must be null or a whole number >= 1")
    raw_sets = line["podSets"]
    if not isinstance(raw_sets, list) or not raw_sets:
        raise WorkloadFileError(f"{where}: podSets must be a non-empty list")
    pod_sets = tuple(_cached_pod_set(where, i, raw, amounts, parsed_pod_sets) for i, raw in enumerate(raw_sets))
    workload = Workload(
        namespace=namespace,
        name=name,
        queue_name=queue,
        pod_sets=pod_sets,
        created=submit_at,
        uid=f"{index:012d}",
        priority=priority,
        priority_class=priority_class,
        max_execution_seconds=max_exec,
    )
    return SimulatedWorkload(workload, submit_at, duration)


def _number(where: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise WorkloadFileError(f"{where}: {key} must be a number of seconds >= 0, got {value!r}")
    return float(value)


def _cached_pod_set(
    where: str, index: int, raw: object, amounts: dict[tuple[str, str], int], parsed: dict[_PodSetKey, PodSet]
) -> PodSet:
    key = _pod_set_key(raw)
    if key is None:
        return _pod_set(f"{where}: podSets[{index}]", raw, amounts)
    pod_set = parsed.get(key)
    if pod_set is None:
        pod_set = parsed[key] = _pod_set(f"{where}: podSets[{index}]", raw, amounts)
    return pod_set


def _pod_set_key(raw: object) -> _PodSetKey | None:
    """The cache key of a plain pod set whose every field is of the type it must be, else None (parsed
    every time, so that errors name their line)."""
    if type(raw) is not dict or not raw.keys() <= _POD_SET_KEYS:
        return None
    if raw.get("nodeSelector") or raw.get("tolerations") or raw.get("nodeAffinity"):
        return None
    name = raw.get("name", "main")
    count = raw.get("count", 1)
    min_count = raw.get("minCount")
    requests = raw.get("requests")
    if type(name) is not str or type(count) is not int or type(requests) is not dict:
        return None
    if min_count is not None and type(min_count) is not int:
        return None
    items = tuple(requests.items())
    for _, text in items:
        if type(text) is not str:
            return None
    return name, count, min_count, items


def _pod_set(where: str, raw: object, amounts: dict[tuple[str, str], int]) -> PodSet:
    if not isinstance(raw, dict):
        raise WorkloadFileError(f"{where}: must be an object")
    unknown = sorted(set(raw) - _POD_SET_KEYS)
    if unknown:
        raise WorkloadFileError(f"{where}: unknown key(s) {', '.join(unknown)}")
    count = raw.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise WorkloadFileError(f"{where}.count: must be a whole number >= 1")
    min_count = raw.get("minCount")
    if min_count is not None and (not isinstance(min_count, int) or not 1 <= min_count <= count):
        raise WorkloadFileError(f"{where}.minCount: must be between 1 and count")
    requests: dict[str, int] = {}
    for resource, text in (raw.get("requests") or {}).items():
        amount = amounts.get((resource, text)) if isinstance(text, str) else None
        if amount is None:
            try:
                amount = parse_quantity(resource, text)
            except QuantityError as error:
                raise WorkloadFileError(f"{where}.requests.{resource}: {error}") from error
            if isinstance(text, str):
                amounts[resource, text] = amount
        if amount < 0:
            raise WorkloadFileError(f"{where}.requests.{resource}: must not be negative")
        if amount:
            requests[resource] = amount
    selector = raw.get("nodeSelector") or {}
    if not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values()):
        raise WorkloadFileError(f"{where}.nodeSelector: must be an object of strings")
    tolerations = tuple(_toleration(f"{where}.tolerations[{i}]", t) for i, t in enumerate(raw.get("tolerations") or []))
    try:
        affinity = parse_required_node_affinity(raw.get("nodeAffinity"), "nodeAffinity")
    except InvalidObjectError as invalid:  # not "error": compiled, one name keeps one exception type
        raise WorkloadFileError(f"{where}: {'; '.join(str(e) for e in invalid.errors)}") from invalid
    return PodSet(str(raw.get("name", "main")), count, requests, min_count, dict(selector), tolerations, affinity)


def _toleration(where: str, raw: object) -> Toleration:
    if not isinstance(raw, dict) or set(raw) - _TOLERATION_KEYS:
        raise WorkloadFileError(f"{where}: must be an object with keys among {', '.join(sorted(_TOLERATION_KEYS))}")
    effect = raw.get("effect")
    try:
        parsed = TaintEffect(effect) if effect else None
    except ValueError as error:
        raise WorkloadFileError(
            f"{where}.effect: {effect!r} is not NoSchedule, PreferNoSchedule or NoExecute"
        ) from error
    operator = raw.get("operator", "Equal")
    if operator not in ("Equal", "Exists"):
        raise WorkloadFileError(f"{where}.operator: {operator!r} is not Equal or Exists")
    return Toleration(str(raw.get("key", "")), operator, str(raw.get("value", "")), parsed)
