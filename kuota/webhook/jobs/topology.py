"""Topology-aware scheduling on the pods' side: a pod template's topology annotations (the Workload pod set's
``topologyRequest`` and the webhook's checks), and the gate, label and annotation a TAS-admitted pod starts with.

Kueue's ``podSetTopologyRequestBuilder``, ``ValidateTASPodSetRequest`` and ``ValidatePodSetGroupingTopology``
(pkg/controller/jobframework/tas.go, tas_validation.go): at most one of the required, preferred and unconstrained
annotations; a slice level only with a slice size and the other way round, or instead layers of slices; a pod set
group only beside a required or preferred level, of 2 pod sets asking the same level, one of them of 1 pod. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
GROUP_NAME = "kueue.x-k8s.io/podset-group-name"
# A TAS-admitted pod is created gated, labelled with its pod set and annotated with its Workload (Kueue's
# TopologySchedulingGate, PodSetLabel, WorkloadAnnotation); kuota lifts the gate once it knows its domain.
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
POD_SET_LABEL = "kueue.x-k8s.io/podset"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
# The annotations that make a pod a TAS pod (Kueue's utiltas.IsTAS).
TAS_POD_ANNOTATIONS = (REQUIRED, PREFERRED, UNCONSTRAINED, SLICE_REQUIRED, SLICE_CONSTRAINTS)

# A qualified label name, as metav1validation.ValidateLabelName checks it.
_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT32_MAX = 2**31 - 1
_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def topology_request(annotations: Mapping[str, str]) -> dict[str, Any] | None:
    """The ``topologyRequest`` a pod template's annotations ask for, or None (assumes ``annotation_errors``
    found none)."""
    request: dict[str, Any] = {}
    if REQUIRED in annotations:
        request["required"] = annotations[REQUIRED]
    elif PREFERRED in annotations:
        request["preferred"] = annotations[PREFERRED]
    elif UNCONSTRAINED in annotations:
        request["unconstrained"] = annotations[UNCONSTRAINED] in _GO_TRUE
    elif not (SLICE_REQUIRED in annotations and SLICE_SIZE in annotations) and SLICE_CONSTRAINTS not in annotations:
        return None
    if SLICE_CONSTRAINTS in annotations:
        request["podsetSliceRequiredTopologyConstraints"] = json.loads(annotations[SLICE_CONSTRAINTS])
    elif SLICE_REQUIRED in annotations and SLICE_SIZE in annotations:
        request["podSetSliceRequiredTopology"] = annotations[SLICE_REQUIRED]
        request["podSetSliceSize"] = int(annotations[SLICE_SIZE])
    if GROUP_NAME in annotations and (REQUIRED in annotations or PREFERRED in annotations):
        request["podSetGroupName"] = annotations[GROUP_NAME]
    return request


def annotation_errors(annotations: Mapping[str, str], path: str) -> list[str]:
    """What is wrong with a pod template's topology annotations (``path``: its metadata), in Kueue's words."""
    where = f"{path}.annotations"
    errors: list[str] = []
    if sum(key in annotations for key in (REQUIRED, PREFERRED, UNCONSTRAINED)) > 1:
        errors.append(
            f'{where}: Invalid value: must not contain more than one topology annotation: ["{REQUIRED}", '
            f'"{PREFERRED}", "{UNCONSTRAINED}"]'
        )
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in annotations:
            problem = _label_name_problem(annotations[key])
            if problem is not None:
                errors.append(f"{where}[{key}]: Invalid value: {annotations[key]!r}: {problem}")
    if GROUP_NAME in annotations:
        group = annotations[GROUP_NAME]
        if group.isdigit():
            errors.append(f"{where}[{GROUP_NAME}]: Invalid value: {group!r}: must not be a number")
        for key in (SLICE_SIZE, SLICE_REQUIRED):
            if key in annotations:
                errors.append(f"{where}[{GROUP_NAME}]: Forbidden: may not be set when '{key}' is specified")
        if REQUIRED not in annotations and PREFERRED not in annotations:
            errors.append(
                f"{where}[{GROUP_NAME}]: Forbidden: may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is "
                "specified"
            )
    unconstrained = annotations.get(UNCONSTRAINED)
    if unconstrained is not None and unconstrained not in _GO_TRUE | _GO_FALSE:
        errors.append(f"{where}[{UNCONSTRAINED}]: Invalid value: {unconstrained!r}: must be a boolean value")
    size = annotations.get(SLICE_SIZE)
    if size is not None:
        if not re.fullmatch(r"[+-]?[0-9]+", size) or abs(int(size)) > _INT32_MAX:
            errors.append(f"{where}[{SLICE_SIZE}]: Invalid value: {size!r}: must be a numeric value")
        elif int(size) < 1:
            errors.append(f"{where}[{SLICE_SIZE}]: Invalid value: {size!r}: must be greater than or equal to 1")
    if SLICE_REQUIRED in annotations and size is None:
        errors.append(f"{where}[{SLICE_SIZE}]: Required value: must be set when '{SLICE_REQUIRED}' is specified")
    if SLICE_REQUIRED not in annotations and size is not None:
        errors.append(f"{where}[{SLICE_SIZE}]: Forbidden: may not be set when '{SLICE_REQUIRED}' is not specified")
    if SLICE_CONSTRAINTS in annotations:
        errors += _slice_layer_errors(annotations, where)
    return errors


def _slice_layer_errors(annotations: Mapping[str, str], where: str) -> list[str]:
    """Kueue's ``validateSliceRequiredTopologyConstraintsAnnotation`` (TASMultiLayerTopology, on by default since
    v0.19): a JSON list of 1 to 3 layers ``{"topology": <level>, "size": <pods>}``, the widest first, instead of the
    single slice annotations; each level named once, each size dividing the one before."""
    key = f"{where}[{SLICE_CONSTRAINTS}]"
    errors = [
        f"{key}: Forbidden: may not be set when '{other}' is specified"
        for other in (SLICE_REQUIRED, SLICE_SIZE)
        if other in annotations
    ]
    if GROUP_NAME in annotations:
        errors.append(f"{where}[{GROUP_NAME}]: Forbidden: may not be set when '{SLICE_CONSTRAINTS}' is specified")
    text = annotations[SLICE_CONSTRAINTS]
    try:
        layers = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:  # nested past Python's stack: no layer list either
        return [*errors, f"{key}: Invalid value: {text!r}: must be a valid JSON array: {error}"]
    if not isinstance(layers, list) or not all(
        isinstance(layer, dict)
        and isinstance(layer.get("topology", ""), str)
        and isinstance(layer.get("size", 0), int)
        and not isinstance(layer.get("size", 0), bool)
        for layer in layers
    ):
        return [*errors, f"{key}: Invalid value: {text!r}: must be a valid JSON array of {{topology, size}} objects"]
    if not 1 <= len(layers) <= 3:
        return [*errors, f"{key}: Invalid value: {text!r}: topology constraints must contain between 1 and 3 entries"]
    seen: dict[str, int] = {}
    for index, layer in enumerate(layers):
        level, size = layer.get("topology", ""), layer.get("size", 0)
        problem = _label_name_problem(level)
        if problem is not None:
            errors.append(f"{key}[{index}].topology: Invalid value: {level!r}: {problem}")
        if size < 1:
            errors.append(f"{key}[{index}].size: Invalid value: {size}: must be greater than or equal to 1")
        if level in seen:
            errors.append(f'{key}[{index}].topology: Duplicate value: "{level} (also at index {seen[level]})"')
        else:
            seen[level] = index
    for index in range(len(layers) - 1):
        outer, inner = layers[index].get("size", 0), layers[index + 1].get("size", 0)
        if inner > 0 and outer % inner != 0:
            errors.append(
                f"{key}[{index + 1}].size: Invalid value: {inner}: must evenly divide the parent layer size {outer}"
            )
    return errors


def pod_set_errors(pod_sets: Sequence[tuple[str, int, Mapping[str, str]]]) -> list[str]:
    """What is wrong with a job's pod sets' topology (each: its template metadata's path, its count and its
    annotations), once each one's annotations are sound: a slice (the outermost layer's) larger than its pod set
    (``ValidateSliceSizeAnnotationUpperBound``), and its pod set groups (:func:`group_errors`)."""
    errors: list[str] = []
    for path, count, asked in pod_sets:
        where = f"{path}.annotations"
        if SLICE_SIZE in asked and int(asked[SLICE_SIZE]) > count:
            errors.append(
                f"{where}[{SLICE_SIZE}]: Invalid value: {asked[SLICE_SIZE]!r}: must not be greater than pod set "
                f"count {count}"
            )
        outer = json.loads(asked[SLICE_CONSTRAINTS])[0]["size"] if SLICE_CONSTRAINTS in asked else 0
        if outer > count:
            errors.append(
                f"{where}[{SLICE_CONSTRAINTS}]: Invalid value: {outer}: must not be greater than pod set count {count}"
            )
    return errors + group_errors(pod_sets)


def group_errors(pod_sets: Sequence[tuple[str, int, Mapping[str, str]]]) -> list[str]:
    """What is wrong with a job's pod set groups (each pod set: its template metadata's path, its count and its
    annotations), in Kueue's words (``ValidatePodSetGroupingTopology``): a group is exactly 2 pod sets, one of
    them of 1 pod, both asking for the same required or preferred level."""
    groups: dict[str, list[tuple[str, int, Mapping[str, str]]]] = {}
    for pod_set in pod_sets:
        group = pod_set[2].get(GROUP_NAME)
        if group is not None:
            groups.setdefault(group, []).append(pod_set)
    errors: list[str] = []
    for group, members in groups.items():
        if len(members) != 2:
            errors.extend(
                f"{path}.annotations[{GROUP_NAME}]: Invalid value: {group!r}: can only define groups of exactly 2 "
                f"pod sets, got: {len(members)} pod set(s)"
                for path, _, _ in members
            )
            continue
        (first, first_count, first_annotations), (second, second_count, second_annotations) = members
        if first_count != 1 and second_count != 1:
            errors.extend(
                f"{path}.annotations[{GROUP_NAME}]: Invalid value: {group!r}: can only define groups where at least "
                f"one pod set has only 1 replica, got: {first_count} replica(s) and {second_count} replica(s) in the "
                "group"
                for path in (first, second)
            )
        if not _same_level(first_annotations, second_annotations):
            errors.extend(
                f"{path}.annotations: Invalid value: must specify '{REQUIRED}' or '{PREFERRED}' topology consistent "
                f"with '{other}.annotations' in group '{group}'"
                for path, other in ((first, second), (second, first))
            )
    return errors


def _same_level(first: Mapping[str, str], second: Mapping[str, str]) -> bool:
    """Kueue's ``topologyRequestsValid``: both ask for a required or preferred level, the same."""
    levels = [topology_request(annotations) or {} for annotations in (first, second)]
    if any("required" not in level and "preferred" not in level for level in levels):
        return False
    return all(levels[0].get(key) == levels[1].get(key) for key in ("required", "preferred"))


def _label_name_problem(value: str) -> str | None:
    prefix, _, name = value.rpartition("/")
    if "/" in value and (not prefix or len(prefix) > 253 or not _PREFIX.fullmatch(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character, at most 63 characters"
        )
    return None


# The label that ranks a Job's pods (its completion index), Kueue's podIndexLabel for batch/Job and JobSet.
JOB_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


def ungating_plan(
    levels: Sequence[str],
    domains: Sequence[tuple[Sequence[str], int]],
    pods: Sequence[Mapping[str, Any]],
    index_label: str | None,
    offset: int = 0,
) -> list[tuple[Mapping[str, Any], dict[str, str]]]:
    """Which gated pods of one pod set go to which domain of its topology assignment, as each one's nodeSelector
    (Kueue's topology ungater). Pods ranked by their ``index_label`` (the pod set's ``podIndexLabel``) less
    ``offset`` (the pods of a group's leader pod set before them), when every gated one has a distinct rank within
    the pod count, go to the domain of their rank (domains in order, each taking as many ranks as its count);
    otherwise each domain takes, in order, as many gated pods as it still lacks after those already sent there."""
    gated = [pod for pod in pods if _gated(pod)]
    if not gated:
        return []
    total = sum(count for _, count in domains)
    ranks = [None if index_label is None else _rank(pod, index_label, offset, total) for pod in gated]
    # Ranks only when they tell the pods apart (a JobSet's child Jobs each count their own completion indexes).
    if all(rank is not None for rank in ranks) and len(set(ranks)) == len(ranks):
        by_rank = [values for values, count in domains for _ in range(count)]
        return [
            (pod, dict(zip(levels, by_rank[rank], strict=True)))
            for pod, rank in zip(gated, ranks, strict=True)
            if rank is not None
        ]
    sent: dict[tuple[str, ...], int] = {}
    for pod in pods:
        if not _gated(pod):
            selector = (pod.get("spec") or {}).get("nodeSelector") or {}
            on = tuple(str(selector.get(level, "")) for level in levels)
            sent[on] = sent.get(on, 0) + 1
    plan: list[tuple[Mapping[str, Any], dict[str, str]]] = []
    waiting = sorted(gated, key=lambda pod: str(pod["metadata"]["name"]))
    for domain, count in domains:
        for _ in range(max(count - sent.get(tuple(domain), 0), 0)):
            if len(plan) == len(waiting):
                return plan
            plan.append((waiting[len(plan)], dict(zip(levels, domain, strict=True))))
    return plan


def ungate_patch(pod: Mapping[str, Any], node_labels: Mapping[str, str]) -> dict[str, Any]:
    """The merge patch that sends a gated pod to its domain: the topology gate removed and the domain's level
    labels added to its nodeSelector, in one write (a pod's nodeSelector may only grow while it is gated)."""
    spec = pod.get("spec") or {}
    gates = [gate for gate in spec.get("schedulingGates") or [] if gate.get("name") != TOPOLOGY_GATE]
    return {
        "spec": {"schedulingGates": gates or None, "nodeSelector": {**(spec.get("nodeSelector") or {}), **node_labels}}
    }


def _gated(pod: Mapping[str, Any]) -> bool:
    return any(gate.get("name") == TOPOLOGY_GATE for gate in (pod.get("spec") or {}).get("schedulingGates") or [])


def _rank(pod: Mapping[str, Any], index_label: str, offset: int, total: int) -> int | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(index_label)
    if value is None or not str(value).isdigit() or not 0 <= int(value) - offset < total:
        return None
    return int(value) - offset
