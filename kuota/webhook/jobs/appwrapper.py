"""AppWrapper (``workload.codeflare.dev/v1beta2``, framework ``workload.codeflare.dev/appwrapper``) behind the job
adapter interface.

As Kueue has it: an AppWrapper wraps components (any objects, ``spec.components[].template``), and each component
declares its pod sets (``podSets[]``: a ``path`` to a pod template inside the component, ``template`` first, e.g.
``template.spec.template`` for a Job, and ``replicas``, default 1). The Workload has one pod set per declared pod
set, in order, named ``<appwrapper name>-<index over all components>``. ``spec.suspend`` holds it (the AppWrapper
controller creates no component until it is unset, and deletes them when it is set again). An admission writes
each pod set's placement into its component's ``podSetInfos`` (nodeSelector, tolerations, and the labels and
annotations of AdmissionChecks), which the controller applies as it creates the components; a restore clears them.
Finished in phase ``Succeeded``, or ``Failed`` once its resources are gone; its pods are ready with its ``PodsReady``
condition. Pod sets the AppWrapper's own webhook would infer are not inferred here: an AppWrapper that declares
none makes no Workload (:class:`~kuota.webhook.controller.errors.InvalidJobError`), saying so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from kuota.webhook.controller.errors import InvalidJobError
from kuota.webhook.jobs.adapter import (
    Finished,
    GroupVersionKind,
    PodSet,
    PodSetPlacement,
    SuspendFieldAdapter,
    by_name,
    placed_pod_spec,
)

_PATH_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _components(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((job.get("spec") or {}).get("components") or [])


def _at_path(component: Mapping[str, Any], path: str, where: str) -> Mapping[str, Any]:
    """The pod template at an AppWrapper pod-set ``path`` (``template``, then ``.field`` and ``[index]`` steps)."""
    if not path.startswith("template"):
        raise InvalidJobError(f"{where}: path {path!r} must start with 'template'")
    cursor: Any = component.get("template")
    position = len("template")
    while position < len(path):
        step = _PATH_STEP.match(path, position)
        if step is None:
            raise InvalidJobError(f"{where}: path {path!r} cannot be read at {path[position:]!r}")
        field, index = step.groups()
        if field is not None and isinstance(cursor, Mapping) and field in cursor:
            cursor = cursor[field]
        elif index is not None and isinstance(cursor, list) and int(index) < len(cursor):
            cursor = cursor[int(index)]
        else:
            raise InvalidJobError(f"{where}: path {path!r} names nothing in the component at {path[: step.end()]!r}")
        position = step.end()
    if not isinstance(cursor, Mapping):
        raise InvalidJobError(f"{where}: path {path!r} does not name a pod template")
    return cursor


class AppWrapperAdapter(SuspendFieldAdapter):
    framework = "workload.codeflare.dev/appwrapper"
    kind = GroupVersionKind("workload.codeflare.dev", "v1beta2", "AppWrapper")
    plural = "appwrappers"

    def pod_sets(self, job: Mapping[str, Any]) -> list[PodSet]:
        metadata = job.get("metadata") or {}
        name = str(metadata.get("name", ""))
        where = f"AppWrapper {metadata.get('namespace', '')}/{name}"
        pod_sets: list[PodSet] = []
        for number, component in enumerate(_components(job)):
            declared = component.get("podSets") or []
            if not declared:
                raise InvalidJobError(
                    f"{where}: spec.components[{number}] declares no podSets; declare each pod template's path and "
                    "replicas (the AppWrapper webhook that would infer them does not run with kuota)"
                )
            for pod_set in declared:
                template = _at_path(component, str(pod_set.get("path", "")), f"{where} spec.components[{number}]")
                count = int(pod_set.get("replicas", 1))
                pod_sets.append(PodSet(f"{name}-{len(pod_sets)}".lower(), count, template))
        return pod_sets

    def run_patch(
        self, job: Mapping[str, Any], placements: Sequence[PodSetPlacement], originals: Sequence[PodSet]
    ) -> dict[str, Any]:
        metadata = job["metadata"]
        placed = by_name(placements)
        originals_in_order = iter(originals)
        components = []
        for component in _components(job):
            infos = []
            for _ in component.get("podSets") or []:
                original = next(originals_in_order)
                placement = placed.get(original.name)
                where = f"AppWrapper {metadata['namespace']}/{metadata['name']} (pod set {original.name})"
                placed_pod_spec(where, original.template, placement)  # a contradicting selector is a conflict
                infos.append(_pod_set_info(placement))
            components.append({**component, "podSetInfos": infos})
        return {"spec": {"suspend": False, "components": components}}

    def restore_patch(self, job: Mapping[str, Any], originals: Sequence[PodSet]) -> dict[str, Any] | None:
        components = _components(job)
        if not any(component.get("podSetInfos") for component in components):
            return None
        cleared = [{key: value for key, value in c.items() if key != "podSetInfos"} for c in components]
        return {"spec": {"components": cleared}}

    def has_active_pods(self, job: Mapping[str, Any]) -> bool:
        """Its ``QuotaReserved`` condition, which the AppWrapper controller clears once its components are gone."""
        return _condition(job, "QuotaReserved")

    def finished(self, job: Mapping[str, Any]) -> Finished | None:
        phase = (job.get("status") or {}).get("phase")
        if phase == "Succeeded":
            return Finished(True, "AppWrapper finished successfully")
        if phase == "Failed" and not _condition(job, "ResourcesDeployed"):
            return Finished(False, "AppWrapper failed")
        return None

    def pods_ready(self, job: Mapping[str, Any]) -> bool:
        return _condition(job, "PodsReady")


def _pod_set_info(placement: PodSetPlacement | None) -> dict[str, Any]:
    if placement is None:
        return {}
    info: dict[str, Any] = {}
    for key, value in (
        ("nodeSelector", dict(placement.node_selector)),
        ("tolerations", [dict(t) for t in placement.tolerations]),
        ("labels", dict(placement.labels)),
        ("annotations", dict(placement.annotations)),
    ):
        if value:
            info[key] = value
    return info


def _condition(job: Mapping[str, Any], kind: str) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


ADAPTER = AppWrapperAdapter()
