"""What differs between ``kueue.x-k8s.io/v1beta1`` and ``v1beta2`` for each kind kuota serves, converted both ways.

Learned from Kueue's own conversions (``apis/kueue/v1beta1/*_conversion.go`` and the generated
``zz_generated.conversion.go`` beside them); for the fields kuota's schemas hold, the differences are:

- ClusterQueue ``spec.cohort`` is ``spec.cohortName``, v1beta1's deprecated ``spec.flavorFungibility`` values
  ``whenCanBorrow: Borrow`` and ``whenCanPreempt: Preempt`` (Kueue 0.14's defaults) are ``MayStopSearch``, and
  v1beta1's ``spec.admissionChecks`` (names) is ``spec.admissionChecksStrategy.admissionChecks[{name}]`` (a check
  for every flavor); v1beta2 keeps ``admissionChecksStrategy`` in v1beta1 as it is;
- LocalQueue ``status.flavorUsage`` is ``status.flavorsUsage``;
- Workload ``spec.priorityClassSource`` + ``spec.priorityClassName`` is ``spec.priorityClassRef`` (group, kind,
  name), and ``status.accumulatedPastExexcutionTimeSeconds`` (v1beta1's spelling) is
  ``status.accumulatedPastExecutionTimeSeconds``;
- Workload ``status.admission.podSetAssignments[].topologyAssignment`` lists every domain in v1beta1
  (``levels``, ``domains[{values, count}]``) and compacts them into ``slices`` in v1beta2;
- Cohort (``spec.parentName`` in both: ``parent`` was v1alpha1's), ResourceFlavor, WorkloadPriorityClass,
  AdmissionCheck, ProvisioningRequestConfig and Topology only change ``apiVersion``; so do the Workload fields
  ``podSets[].minCount`` and ``topologyRequest``, the rest of ``status.admission.podSetAssignments``,
  ``status.requeueState`` and ``status.admissionChecks``, identical in both.

Every conversion is lossless but for those two aliases, which come back as the name they stand for, and v1beta1's
``admissionChecks``, which comes back as the ``admissionChecksStrategy`` it stands for. Where Kueue
drops a field, kuota keeps it: a v1beta1 ``priorityClassName`` without a source becomes a ``priorityClassRef``
with only a name, and a v1beta2 ``priorityClassRef`` whose group and kind match no v1beta1 source travels in the
:data:`PRIORITY_CLASS_REF_ANNOTATION` annotation (conversion may change labels and annotations only) and comes
back from it. Fields of one version that kuota's schemas lack (v1beta1's LocalQueue ``status.flavors``, v1beta1's
AdmissionCheck ``spec.retryDelayMinutes``, deprecated since Kueue 0.8 and dropped by Kueue's own conversion) are
pruned by the API server, as they are in v1beta2.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kuota.webhook.conversion.errors import UnconvertibleObjectError
from kuota.webhook.crds.definitions import DEFINITIONS, GROUP, VERSION
from kuota.webhook.crds.versions import FLAVOR_FUNGIBILITY_ALIASES, OLDER_VERSION, PRIORITY_CLASS_SOURCES
from kuota.webhook.topology_assignment import decode, decode_domains, encode

V1BETA1 = f"{GROUP}/{OLDER_VERSION}"
V1BETA2 = f"{GROUP}/{VERSION}"
API_VERSIONS = (V1BETA1, V1BETA2)
KINDS = tuple(definition.kind for definition in DEFINITIONS)
PRIORITY_CLASS_REF_ANNOTATION = "kuota.dev/v1beta2-priority-class-ref"

Object = dict[str, Any]
Step = Callable[[Object], None]


def convert(obj: Object, desired_api_version: str) -> Object:
    """``obj`` changed in place into ``desired_api_version`` (the API server sends each object once, freshly
    decoded: a copy would be waste on every write); UnconvertibleObjectError says which field prevents it."""
    if desired_api_version not in API_VERSIONS:
        raise UnconvertibleObjectError(
            f"desiredAPIVersion {desired_api_version!r} is not served by kuota; it serves {', '.join(API_VERSIONS)}"
        )
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version not in API_VERSIONS:
        raise UnconvertibleObjectError(
            f"object apiVersion {api_version!r} is not one of {', '.join(API_VERSIONS)}; kuota converts only those"
        )
    if kind not in KINDS:
        raise UnconvertibleObjectError(f"object kind {kind!r} is not one of kuota's kinds: {', '.join(KINDS)}")
    if api_version != desired_api_version:
        steps = _TO_V1BETA2 if desired_api_version == V1BETA2 else _TO_V1BETA1
        for step in steps.get(kind, ()):
            step(obj)
    obj["apiVersion"] = desired_api_version
    return obj


def _section(container: Object, name: str, where: str) -> Object | None:
    """``container[name]``, an object or absent; ``where`` names the field in the error."""
    value = container.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UnconvertibleObjectError(f"{where} must be an object, got {type(value).__name__}")
    return value


def _rename(section_name: str, old: str, new: str) -> Step:
    def rename(obj: Object) -> None:
        section = _section(obj, section_name, f"{obj['kind']} {section_name}")
        if section is None or old not in section:
            return
        if new in section:
            raise UnconvertibleObjectError(
                f"{obj['kind']} has both {section_name}.{old} and {section_name}.{new}; keep the one of its version"
            )
        section[new] = section.pop(old)

    return rename


def _fungibility_aliases_to_v1beta2(obj: Object) -> None:
    spec = _section(obj, "spec", "ClusterQueue spec")
    fungibility = None if spec is None else _section(spec, "flavorFungibility", "ClusterQueue spec.flavorFungibility")
    if fungibility is None:
        return
    for field, alias in FLAVOR_FUNGIBILITY_ALIASES.items():
        if fungibility.get(field) == alias:
            fungibility[field] = "MayStopSearch"


def _admission_checks_to_v1beta2(obj: Object) -> None:
    """v1beta1's list of check names becomes a strategy with a rule per name (every flavor), as Kueue converts
    it; the schema refuses a v1beta1 object with both."""
    spec = _section(obj, "spec", "ClusterQueue spec")
    names = None if spec is None else spec.pop("admissionChecks", None)
    if spec is None or not names:
        return
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise UnconvertibleObjectError(f"ClusterQueue spec.admissionChecks must be a list of names, got {names!r}")
    if spec.get("admissionChecksStrategy") is not None:
        raise UnconvertibleObjectError(
            "ClusterQueue has both spec.admissionChecks and spec.admissionChecksStrategy; keep admissionChecksStrategy"
        )
    spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in names]}


def _priority_class_to_v1beta2(obj: Object) -> None:
    spec = _section(obj, "spec", "Workload spec")
    stashed = _unstash(obj)
    if spec is None:
        return
    name = spec.pop("priorityClassName", None) or None
    source = spec.pop("priorityClassSource", None) or None
    if name is None:
        if source is not None:
            raise UnconvertibleObjectError(
                f"Workload spec.priorityClassSource is {source!r} but spec.priorityClassName is empty; name the class"
            )
        return
    if source is None:
        restored = _stashed_reference(stashed, name)
        spec["priorityClassRef"] = restored if restored is not None else {"name": name}
        return
    if source not in PRIORITY_CLASS_SOURCES:
        raise UnconvertibleObjectError(
            f"Workload spec.priorityClassSource must be one of {', '.join(PRIORITY_CLASS_SOURCES)}, got {source!r}"
        )
    group, kind = PRIORITY_CLASS_SOURCES[source]
    spec["priorityClassRef"] = {"group": group, "kind": kind, "name": name}


def _priority_class_to_v1beta1(obj: Object) -> None:
    spec = _section(obj, "spec", "Workload spec")
    reference = None if spec is None else spec.pop("priorityClassRef", None)
    if spec is None or reference is None:
        return
    if not isinstance(reference, dict):
        raise UnconvertibleObjectError(f"Workload spec.priorityClassRef must be an object, got {reference!r}")
    if reference.get("name") is not None:
        spec["priorityClassName"] = reference["name"]
    pair = (reference.get("group"), reference.get("kind"))
    sources = [source for source, meant in PRIORITY_CLASS_SOURCES.items() if meant == pair]
    if sources:
        spec["priorityClassSource"] = sources[0]
    elif set(reference) != {"name"}:
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("annotations", {})[PRIORITY_CLASS_REF_ANNOTATION] = json.dumps(reference, sort_keys=True)


def _unstash(obj: Object) -> object:
    """Remove the annotation that carries a v1beta2-only priorityClassRef; returns its value (None if absent)."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(metadata, dict) or not isinstance(annotations, dict):
        return None
    stashed = annotations.pop(PRIORITY_CLASS_REF_ANNOTATION, None)
    if stashed is not None and not annotations:
        del metadata["annotations"]
    return stashed


def _stashed_reference(stashed: object, name: str) -> Object | None:
    """The v1beta2 reference kept in the annotation, if it still names the class the v1beta1 object names and
    holds only values v1beta2's schema allows (the API server validated the v1beta1 object, not this)."""
    if not isinstance(stashed, str):
        return None
    try:
        reference = json.loads(stashed)
    except ValueError:
        return None
    if not isinstance(reference, dict) or reference.get("name") != name or set(reference) - {"group", "kind", "name"}:
        return None
    groups = {group for group, _ in PRIORITY_CLASS_SOURCES.values()}
    kinds = {kind for _, kind in PRIORITY_CLASS_SOURCES.values()}
    if reference.get("group", GROUP) not in groups or reference.get("kind", "PriorityClass") not in kinds:
        return None
    return reference


def _topology_assignments(convert_one: Callable[[Object], Object]) -> Step:
    """Each admitted pod set's topologyAssignment converted by ``convert_one`` (v1beta1 lists every domain,
    v1beta2 compacts them into slices)."""

    def step(obj: Object) -> None:
        status = _section(obj, "status", "Workload status")
        admission = None if status is None else _section(status, "admission", "Workload status.admission")
        for assigned in [] if admission is None else admission.get("podSetAssignments") or []:
            if isinstance(assigned, dict) and isinstance(assigned.get("topologyAssignment"), dict):
                try:
                    assigned["topologyAssignment"] = convert_one(assigned["topologyAssignment"])
                except (KeyError, IndexError, TypeError, ValueError) as error:
                    raise UnconvertibleObjectError(
                        f"Workload status.admission.podSetAssignments[].topologyAssignment is malformed: {error!r}"
                    ) from error

    return step


def _domains_to_slices(raw: Object) -> Object:
    return encode(decode_domains(raw))


def _slices_to_domains(raw: Object) -> Object:
    assignment = decode(raw)
    domains = [{"values": list(values), "count": count} for values, count in assignment.domains]
    return {"levels": list(assignment.levels), "domains": domains}


_TO_V1BETA2: dict[str, tuple[Step, ...]] = {
    "ClusterQueue": (
        _rename("spec", "cohort", "cohortName"),
        _fungibility_aliases_to_v1beta2,
        _admission_checks_to_v1beta2,
    ),
    "LocalQueue": (_rename("status", "flavorUsage", "flavorsUsage"),),
    "Workload": (
        _priority_class_to_v1beta2,
        _rename("status", "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds"),
        _topology_assignments(_domains_to_slices),
    ),
}
_TO_V1BETA1: dict[str, tuple[Step, ...]] = {
    "ClusterQueue": (_rename("spec", "cohortName", "cohort"),),
    "LocalQueue": (_rename("status", "flavorsUsage", "flavorUsage"),),
    "Workload": (
        _priority_class_to_v1beta1,
        _rename("status", "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds"),
        _topology_assignments(_slices_to_domains),
    ),
}
