"""Which pod and container a host process belongs to, from ``/proc/<pid>/cgroup``.

Handles cgroup v1 (``N:controllers:/path``) and v2 (``0::/path``); the cgroupfs driver
(``/kubepods/<qos>/pod<uid>/<container id>``, guaranteed pods without the qos level) and the systemd driver
(``kubepods-<qos>-pod<uid with _>.slice/<runtime>-<container id>.scope`` for containerd, CRI-O and docker);
paths made relative by a cgroup namespace (``/../..``) and nested under a prefix such as kind's
``kubelet.slice``. Parsing is pure; only :func:`read_container` touches the file system.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}|[0-9a-f]{32}"
# A pod's cgroup segment: "pod<uid>" (cgroupfs) or "...-pod<uid>.slice" (systemd).
_POD_SEGMENT = re.compile(rf"^(?:.*-)?pod(?P<uid>{_UID})(?:\.slice)?$")
# A container's segment: a bare id (cgroupfs) or "<runtime>-<id>.scope" (systemd).
_CONTAINER_SEGMENT = re.compile(r"^(?:(?:cri-containerd|crio|docker)-)?(?P<id>[0-9a-f]{12,64})(?:\.scope)?$")


@dataclass(frozen=True)
class ContainerRef:
    pod_uid: str  # with dashes, as the API server writes it
    container_id: str  # the runtime's id, without "containerd://"; empty when the path stops at the pod


def pod_of_cgroup_path(path: str) -> ContainerRef | None:
    """The pod (and container) a cgroup path names, or None for a path outside ``kubepods``."""
    if "kubepods" not in path:
        return None
    segments = [segment for segment in path.split("/") if segment not in ("", ".", "..")]
    for position, segment in enumerate(segments):
        pod = _POD_SEGMENT.match(segment)
        if pod is None:
            continue
        uid = pod["uid"].replace("_", "-")
        container_id = ""
        if position + 1 < len(segments):
            container = _CONTAINER_SEGMENT.match(segments[position + 1])
            container_id = container["id"] if container else ""
        return ContainerRef(pod_uid=uid, container_id=container_id)
    return None


def container_of(cgroup_file: str) -> ContainerRef | None:
    """The pod of a process from the text of its ``/proc/<pid>/cgroup``; the v2 line wins over v1 lines."""
    best: ContainerRef | None = None
    for line in cgroup_file.splitlines():
        hierarchy, sep, rest = line.partition(":")
        if not sep:
            continue
        _controllers, sep, path = rest.partition(":")
        if not sep:
            continue
        found = pod_of_cgroup_path(path.strip())
        if found is None:
            continue
        if hierarchy == "0" and _controllers == "":
            return found
        # Under v1 every controller names the same pod; prefer a line that also names the container.
        if best is None or (not best.container_id and found.container_id):
            best = found
    return best


def read_container(proc_root: Path, pid: int) -> ContainerRef | None:
    """Read and parse ``<proc_root>/<pid>/cgroup``; None when the process is gone or not in a pod.

    Blocking file I/O: call it from the sampler's worker thread, never on the event loop.
    """
    try:
        text = (proc_root / str(pid) / "cgroup").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return container_of(text)
