"""The pods on this node, by UID: names, namespaces and container ids, kept current from a pod watch.

Pure: :func:`pod_info` parses one Pod object, :func:`apply_event` folds a watch event into a directory
mapping. The watching itself lives in :mod:`kuota.exporter.pod_watch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict


class ContainerStatusPayload(TypedDict, total=False):
    name: str
    containerID: str


@dataclass(frozen=True)
class PodInfo:
    uid: str
    namespace: str
    name: str
    containers: Mapping[str, str]  # runtime container id -> container name

    def container_name(self, container_id: str) -> str:
        return self.containers.get(container_id, "")


def _runtime_id(container_id: str) -> str:
    """``containerd://abc`` -> ``abc`` (the id the cgroup path carries)."""
    return container_id.partition("://")[2] or container_id


def pod_info(pod: Mapping[str, Any]) -> PodInfo:
    """Parse a Pod (the API's JSON shape, camelCase) into :class:`PodInfo`."""
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    containers: dict[str, str] = {}
    for key in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        statuses: list[ContainerStatusPayload] = status.get(key) or []
        for entry in statuses:
            if entry.get("containerID") and entry.get("name"):
                containers[_runtime_id(entry["containerID"])] = entry["name"]
    return PodInfo(
        uid=str(metadata.get("uid", "")),
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        containers=containers,
    )


def apply_event(directory: Mapping[str, PodInfo], kind: str, pod: Mapping[str, Any]) -> dict[str, PodInfo]:
    """A new directory after a watch event (``ADDED``, ``MODIFIED``, ``DELETED``)."""
    info = pod_info(pod)
    updated = dict(directory)
    if not info.uid:
        return updated
    if kind == "DELETED":
        updated.pop(info.uid, None)
    else:
        updated[info.uid] = info
    return updated
