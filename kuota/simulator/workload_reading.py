"""Reading simulate's workloads: a JSON Lines file, or a trace CSV, as the replay's simulated workloads.

The JSON Lines reader is strict, as the contract is stable: unknown keys, missing keys and bad quantities
are errors naming the line. Beside the contract's pod set keys, a pod set may carry ``nodeAffinity``: a
Kubernetes ``requiredDuringSchedulingIgnoredDuringExecution`` node selector (``{"nodeSelectorTerms": [...]}``),
matched against the flavors' nodeLabels as a pod template's required node affinity is. A Philly/Helios
trace CSV (recognised by its header) is converted on the fly by ``kuota.simulator.traces``, users hashed
onto the CONFIG's LocalQueues (sorted by namespace/name).

Compiled with mypyc (``setup.py``): every workload of a replay is converted here, and the replay reads each
:class:`SimulatedWorkload`'s fields.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kuota.engine import (
    ApiObject,
    InvalidObjectError,
    PodSet,
    QuantityError,
    TaintEffect,
    Toleration,
    Workload,
    parse_quantity,
    parse_required_node_affinity,
    parse_topology_request,
    pod_set_group_problem,
)
from kuota.simulator.config_reading import local_queues, priority_values
from kuota.simulator.errors import SourceSpecError, WorkloadFileError
from kuota.simulator.limits import MAX_INT32, MAX_NAME_LENGTH, MAX_POD_SETS, MAX_SECONDS, SECONDS_RANGE
from kuota.simulator.line_reading import numbered_lines
from kuota.simulator.quoting import listed, one_line, quoted

_WORKLOAD_KEYS = frozenset(
    {
        "name",
        "namespace",
        "queue",
        "priorityClass",
        "submitAt",
        "duration",
        "lifetime",
        "maxExecutionSeconds",
        "podsReadyAfter",
        "admissionChecks",
        "podSets",
    }
)
_POD_SET_KEYS = frozenset(
    {"name", "count", "requests", "nodeSelector", "tolerations", "nodeAffinity", "minCount", "topologyRequest"}
)
_CHECK_KEYS = frozenset({"after", "retries", "requeueAfter", "reject"})
_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_TAINT_EFFECTS = frozenset(effect.value for effect in TaintEffect)
_REQUIRED_KEYS = ("name", "namespace", "queue", "submitAt", "podSets")
# A plain pod set (no nodeSelector, no tolerations, requests spelled as strings), as the parsing cache keys it.
_PodSetKey = tuple[str, int, int | None, tuple[tuple[str, str], ...]]


@dataclass(frozen=True, slots=True)
class CheckBehaviour:
    """How one AdmissionCheck answers a workload in the replay (a line's ``admissionChecks``): ``after`` seconds
    from each quota reservation; its first ``retries`` answers are Retry (requeued ``requeue_after`` seconds
    later), the next Rejected if ``reject``, else Ready."""

    after: float = 0.0
    retries: int = 0
    requeue_after: float = 0.0
    reject: bool = False


class SimulatedWorkload:
    """A workload of the replay: what the engine sees, and when it arrives and how long it works. (A plain class
    equal by value, as the frozen dataclass it replaced, built per input line: see ``setup.py``.)"""

    __slots__ = (
        "admission_checks",
        "duration",
        "lifetime",
        "not_created",
        "pods_ready_after",
        "submit_at",
        "workload",
    )

    def __init__(  # noqa: PLR0917 (positional, as the dataclass it replaced was built)
        self,
        workload: Workload,
        submit_at: float,
        duration: float,
        not_created: str | None = None,
        pods_ready_after: float | None = 0.0,
        admission_checks: dict[str, CheckBehaviour] | None = None,
        lifetime: float | None = None,
    ) -> None:
        self.workload: Final = workload
        self.submit_at: Final = submit_at
        self.duration: Final = duration
        # Seconds from each admission until all its pods are ready and its work starts; None: they never are (its
        # pods cannot be placed), so only waitForPodsReady's timeout ends the admission.
        self.pods_ready_after: Final = pods_ready_after
        # Why Kueue would create no Workload for its Job (its WorkloadPriorityClass does not exist): then it never
        # reaches the engine and ends Inadmissible with this reason.
        self.not_created: Final = not_created
        # By check name; a check its ClusterQueue runs that is not named here is Ready at the reservation.
        self.admission_checks: Final[dict[str, CheckBehaviour]] = admission_checks or {}
        # A serving workload's: it never finishes its work, and is deleted this many seconds after its submission,
        # pending or admitted (its quota freed then); None for a batch workload, which ends when its work is done.
        self.lifetime: Final = lifetime

    def _fields(self) -> tuple[object, ...]:
        checks = tuple(sorted(self.admission_checks.items()))
        return (
            self.workload,
            self.submit_at,
            self.duration,
            self.not_created,
            self.pods_ready_after,
            checks,
            self.lifetime,
        )

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, SimulatedWorkload) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"SimulatedWorkload(workload={self.workload!r}, submit_at={self.submit_at!r}, "
            f"duration={self.duration!r}, not_created={self.not_created!r}, "
            f"pods_ready_after={self.pods_ready_after!r}, admission_checks={self.admission_checks!r}, "
            f"lifetime={self.lifetime!r})"
        )


def read_workloads(path: Path, objects: Sequence[ApiObject]) -> list[SimulatedWorkload]:
    """The workloads of a JSON Lines file or a trace CSV, ordered by submission time (stable); the file is
    read one bounded line at a time (:mod:`kuota.simulator.line_reading`), so it may be a pipe."""
    if path.is_dir():
        raise WorkloadFileError(f"{path}: is a folder; give the workloads file (JSON Lines or a trace CSV)")
    try:
        stream = path.open("rb")
    except OSError as error:
        raise WorkloadFileError(f"{path}: cannot read the workloads file: {error.strerror or error}") from error
    with stream:
        numbered = numbered_lines(stream, str(path))
        first = next(numbered, None)
        if first is None:
            return []
        rest = itertools.chain((first,), numbered)
        if first[1].startswith("u_id,"):
            lines: Iterable[tuple[str, Mapping[str, Any]]] = _trace_lines(path, rest, objects)
        else:
            lines = _json_lines(str(path), rest)
        workloads = list(convert_lines(lines, priority_values(objects)))
    return sorted(workloads, key=lambda w: w.submit_at)


def _json_lines(source: str, numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for number, text in numbered:
        if not text.strip():
            continue
        where = f"{source}:{number}"
        value = _json_value(where, text)
        if not isinstance(value, dict):
            raise WorkloadFileError(f"{where}: a line must be a JSON object, got {_show(value)}")
        yield where, value


@dataclass(frozen=True, slots=True)
class _NonFinite:
    """What Python's JSON reader would turn into a float NaN or infinity (``NaN``, ``Infinity``, ``-Infinity``,
    which JSON does not have), kept as written so the line can be refused naming the field."""

    text: str


# One decoder for every line (json.loads given an option builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_NonFinite)


def _json_value(where: str, text: str) -> object:
    try:
        value: object = _DECODER.decode(text)
    except json.JSONDecodeError as error:
        raise WorkloadFileError(
            f"{where}: not JSON ({error.msg} at column {error.colno}); write one workload object a line"
        ) from error
    except ValueError as error:  # an integer beyond Python's limit of 4300 digits
        raise WorkloadFileError(f"{where}: a number of thousands of digits; write numbers of ordinary size") from error
    except RecursionError as error:
        raise WorkloadFileError(
            f"{where}: arrays or objects nested hundreds deep, too deep to read; a workload nests a few levels"
        ) from error
    # Both searches walk the whole line, so they run only where the text can hold what they look for.
    if "NaN" in text or "Infinity" in text:
        found = _first_unfit(value, non_finite=True)
        if found is not None:
            raise WorkloadFileError(f"{where}: {found[0]}: {found[1]} is not a JSON number; write a finite number")
    if "\\" in text or not text.isascii():
        found = _first_unfit(value, non_finite=False)
        if found is not None:
            raise WorkloadFileError(
                f"{where}: {found[0]}: {found[1]} holds a control character or a lone surrogate; "
                "a workload's strings are printable text"
            )
    return value


def _first_unfit(value: object, *, non_finite: bool) -> tuple[str, str] | None:
    """Where (``podSets[0].requests.cpu``) and what the first NaN or Infinity (``non_finite``) or unprintable
    string (otherwise) in ``value`` is, keys included; None where there is none. Iterative: any depth is safe."""
    pending: list[tuple[object, str]] = [(value, "the line")]
    while pending:
        item, path = pending.pop()
        if non_finite and isinstance(item, _NonFinite):
            return path, item.text
        if not non_finite and isinstance(item, str) and not item.isprintable():
            return path, _show(item)
        if isinstance(item, dict):
            entries: list[tuple[object, object]] = list(item.items())
            for key, inner in entries[::-1]:  # the stack pops them back in file order
                if not non_finite and not str(key).isprintable():
                    return f"{path}: a key", _show(key)
                pending.append((inner, _key(key) if path == "the line" else f"{path}.{_key(key)}"))
        elif isinstance(item, list):
            elements: list[object] = item
            for index in range(len(elements) - 1, -1, -1):
                pending.append((elements[index], f"{path}[{index}]"))
    return None


def _trace_lines(
    path: Path, numbered: Iterable[tuple[int, str]], objects: Sequence[ApiObject]
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    from kuota.simulator.queue_mapping import QueueTarget
    from kuota.simulator.traces import read_trace_lines, trace_workloads

    queues = [QueueTarget(namespace, name) for namespace, name in local_queues(objects)]
    if not queues:
        raise WorkloadFileError(f"{path}: a trace needs LocalQueues in the CONFIG to map its users onto; add some")
    try:
        for line in trace_workloads(read_trace_lines(numbered, str(path)), queues, source=str(path)):
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
        unknown = sorted(_key(key) for key in set(line) - _WORKLOAD_KEYS)
        raise WorkloadFileError(
            f"{where}: unknown key(s) {listed(unknown, 6, ', ')}; "
            f"the contract's keys are {', '.join(sorted(_WORKLOAD_KEYS))}"
        )
    for key in _REQUIRED_KEYS:
        if key not in line:
            raise WorkloadFileError(f"{where}: missing key {key!r}")
    name = _text(f"{where}: name", line["name"])
    namespace = _text(f"{where}: namespace", line["namespace"])
    queue = _text(f"{where}: queue", line["queue"])
    submit_at = _seconds(where, "submitAt", line["submitAt"])
    if ("duration" in line) == ("lifetime" in line):
        raise WorkloadFileError(
            f"{where}: give exactly one of 'duration' (the seconds of work of a batch workload) and 'lifetime' (the "
            "seconds a serving workload lives before it is deleted)"
        )
    lifetime = _seconds(where, "lifetime", line["lifetime"]) if "lifetime" in line else None
    duration = lifetime if lifetime is not None else _seconds(where, "duration", line["duration"])
    priority_class = line.get("priorityClass")
    not_created: str | None = None
    if priority_class is None:
        priority = priorities.get("default", 0)
        priority_class = "default" if "default" in priorities else None
    elif not isinstance(priority_class, str):
        raise WorkloadFileError(f"{where}: priorityClass must be a string or null, got {_show(priority_class)}")
    elif priority_class in priorities:
        priority = priorities[priority_class]
    else:
        # Kueue records an event on the Job and creates no Workload for it; every other Job goes on.
        priority = 0
        not_created = (
            f"WorkloadPriorityClass {_show(priority_class)} not found, so no Workload is created for it: "
            "add the class to the CONFIG or fix the name"
        )
    max_exec = line.get("maxExecutionSeconds")
    if max_exec is not None and not _is_whole(max_exec, 1, MAX_INT32):
        raise WorkloadFileError(
            f"{where}: maxExecutionSeconds must be null or a whole number from 1 to {MAX_INT32}, got {_show(max_exec)}"
        )
    ready_after = line.get("podsReadyAfter", 0)
    pods_ready_after = None if ready_after is None else _seconds(where, "podsReadyAfter", ready_after)
    admission_checks = _check_behaviours(where, line.get("admissionChecks"))
    raw_sets = line["podSets"]
    if not isinstance(raw_sets, list) or not 1 <= len(raw_sets) <= MAX_POD_SETS:
        raise WorkloadFileError(f"{where}: podSets must be a list of 1 to {MAX_POD_SETS} pod sets")
    pod_sets = tuple(_cached_pod_set(where, i, raw, amounts, parsed_pod_sets) for i, raw in enumerate(raw_sets))
    group_problem = pod_set_group_problem(pod_sets)
    if group_problem is not None:
        raise WorkloadFileError(f"{where}: podSets: {group_problem}")
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
    return SimulatedWorkload(workload, submit_at, duration, not_created, pods_ready_after, admission_checks, lifetime)


def _check_behaviours(where: str, raw: object) -> dict[str, CheckBehaviour]:
    """A line's ``admissionChecks``: check name to how it answers (each key optional)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise WorkloadFileError(
            f"{where}: admissionChecks must be an object of check names to behaviours, got {_show(raw)}"
        )
    behaviours: dict[str, CheckBehaviour] = {}
    for name, spec in raw.items():
        label = f"{where}: admissionChecks.{_key(name)}"
        _text(f"{where}: an admissionChecks name", name)
        if not isinstance(spec, dict) or not spec.keys() <= _CHECK_KEYS:
            raise WorkloadFileError(
                f"{label} must be an object with keys among {', '.join(sorted(_CHECK_KEYS))}, got {_show(spec)}"
            )
        retries = spec.get("retries", 0)
        if not _is_whole(retries, 0, MAX_INT32):
            raise WorkloadFileError(
                f"{label}.retries must be a whole number from 0 to {MAX_INT32}, got {_show(retries)}"
            )
        reject = spec.get("reject", False)
        if not isinstance(reject, bool):
            raise WorkloadFileError(f"{label}.reject must be true or false, got {_show(reject)}")
        behaviours[name] = CheckBehaviour(
            after=_seconds(label, "after", spec.get("after", 0)),
            retries=retries,
            requeue_after=_seconds(label, "requeueAfter", spec.get("requeueAfter", 0)),
            reject=reject,
        )
    return behaviours


def _text(label: str, value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_LENGTH or not value.isprintable():
        raise WorkloadFileError(
            f"{label} must be a non-empty string of at most {MAX_NAME_LENGTH} printable characters, got {_show(value)}"
        )
    return value


def _seconds(where: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_SECONDS:
        # NaN fails every comparison, so it lands here with the infinities
        raise WorkloadFileError(f"{where}: {key} must be a number of seconds {SECONDS_RANGE}, got {_show(value)}")
    return float(value)


def _is_whole(value: object, lowest: int, highest: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and lowest <= value <= highest


def _show(value: object) -> str:
    """``value`` quoted for a message: a NaN or an Infinity as written, anything else by :func:`quoted`."""
    if isinstance(value, _NonFinite):
        return value.text
    return quoted(value)


def _key(key: object) -> str:
    """A key as a message names it: as written where it is short printable text, else quoted."""
    text = str(key)
    return text if text.isprintable() and len(text) <= 60 else _show(text)


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
    if raw.get("nodeSelector") or raw.get("tolerations") or raw.get("nodeAffinity") or raw.get("topologyRequest"):
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
        raise WorkloadFileError(f"{where}: must be an object, got {_show(raw)}")
    unknown = sorted(_key(key) for key in set(raw) - _POD_SET_KEYS)
    if unknown:
        raise WorkloadFileError(f"{where}: unknown key(s) {listed(unknown, 6, ', ')}")
    name = _text(f"{where}.name:", raw.get("name", "main"))
    count = raw.get("count", 1)
    if not _is_whole(count, 1, MAX_INT32):
        raise WorkloadFileError(f"{where}.count: must be a whole number from 1 to {MAX_INT32}, got {_show(count)}")
    min_count = raw.get("minCount")
    if min_count is not None and not _is_whole(min_count, 1, count):
        raise WorkloadFileError(f"{where}.minCount: must be a whole number from 1 to count, got {_show(min_count)}")
    raw_requests = raw.get("requests")
    if raw_requests is None:
        raw_requests = {}
    elif not isinstance(raw_requests, dict):
        raise WorkloadFileError(
            f"{where}.requests: must be an object of resource names to quantities, got {_show(raw_requests)}"
        )
    requests: dict[str, int] = {}
    for resource, text in raw_requests.items():
        _text(f"{where}.requests: a resource name", resource)
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
    selector = raw.get("nodeSelector")
    if selector is None:
        selector = {}
    elif not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values()):
        raise WorkloadFileError(f"{where}.nodeSelector: must be an object of strings, got {_show(selector)}")
    raw_tolerations = raw.get("tolerations")
    if raw_tolerations is None:
        raw_tolerations = []
    elif not isinstance(raw_tolerations, list):
        raise WorkloadFileError(f"{where}.tolerations: must be a list, got {_show(raw_tolerations)}")
    tolerations = tuple(_toleration(f"{where}.tolerations[{i}]", t) for i, t in enumerate(raw_tolerations))
    try:
        affinity = parse_required_node_affinity(raw.get("nodeAffinity"), "nodeAffinity")
    except InvalidObjectError as invalid:  # not "error": compiled, one name keeps one exception type
        raise WorkloadFileError(f"{where}: {one_line('; '.join(str(e) for e in invalid.errors))}") from invalid
    try:
        topology = parse_topology_request(raw.get("topologyRequest"), "topologyRequest")
    except InvalidObjectError as invalid:
        raise WorkloadFileError(f"{where}: {one_line('; '.join(str(e) for e in invalid.errors))}") from invalid
    return PodSet(name, count, requests, min_count, dict(selector), tolerations, affinity, topology)


def _toleration(where: str, raw: object) -> Toleration:
    if not isinstance(raw, dict) or set(raw) - _TOLERATION_KEYS:
        raise WorkloadFileError(f"{where}: must be an object with keys among {', '.join(sorted(_TOLERATION_KEYS))}")
    key, value = raw.get("key", ""), raw.get("value", "")
    for field, text in (("key", key), ("value", value)):
        if not isinstance(text, str):
            raise WorkloadFileError(f"{where}.{field}: must be a string, got {_show(text)}")
    seconds = raw.get("tolerationSeconds")
    if seconds is not None and not _is_whole(seconds, -(2**63), 2**63 - 1):
        raise WorkloadFileError(f"{where}.tolerationSeconds: must be null or a whole number, got {_show(seconds)}")
    effect = raw.get("effect")
    if effect is None or effect == "":
        parsed = None
    elif isinstance(effect, str) and effect in _TAINT_EFFECTS:
        parsed = TaintEffect(effect)
    else:
        raise WorkloadFileError(f"{where}.effect: {_show(effect)} is not NoSchedule, PreferNoSchedule or NoExecute")
    operator = raw.get("operator", "Equal")
    if operator not in ("Equal", "Exists"):
        raise WorkloadFileError(f"{where}.operator: {_show(operator)} is not Equal or Exists")
    return Toleration(key, operator, value, parsed)
