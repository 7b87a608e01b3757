"""Fake /proc trees: ``<root>/<pid>/cgroup`` files in every form a node may write them."""

from __future__ import annotations

from pathlib import Path

CID = "4f1c2d3e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"


def cgroupfs_v1(uid: str, container_id: str = CID, qos: str = "burstable") -> str:
    """cgroup v1, cgroupfs driver; guaranteed pods (qos "") sit directly under /kubepods."""
    base = f"/kubepods/{qos}/pod{uid}/{container_id}" if qos else f"/kubepods/pod{uid}/{container_id}"
    return "".join(
        f"{n}:{ctrl}:{base}\n" for n, ctrl in ((12, "memory"), (11, "cpu,cpuacct"), (4, "devices"), (1, "name=systemd"))
    )


def systemd_v2(
    uid: str, container_id: str = CID, qos: str = "besteffort", runtime: str = "cri-containerd", prefix: str = ""
) -> str:
    """cgroup v2, systemd driver: kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_>.slice/..."""
    under = uid.replace("-", "_")
    slices = "/kubepods.slice"
    if qos:
        slices += f"/kubepods-{qos}.slice/kubepods-{qos}-pod{under}.slice"
    else:
        slices += f"/kubepods-pod{under}.slice"
    if prefix:  # kind nests the node's pods under kubelet.slice, with the names prefixed "kubelet-"
        slices = slices.replace("/kubepods", "/kubelet-kubepods")
        slices = f"/{prefix}{slices}"
    return f"0::{slices}/{runtime}-{container_id}.scope\n"


def namespaced_v2(uid: str, container_id: str = CID) -> str:
    """cgroup v2 seen from inside a cgroup namespace: the path climbs out with /.. first."""
    return f"0::/../../kubepods-burstable-pod{uid.replace('-', '_')}.slice/cri-containerd-{container_id}.scope\n"


def host_process() -> str:
    return "0::/system.slice/nvidia-persistenced.service\n"


def write_process(root: Path, pid: int, cgroup: str) -> None:
    folder = root / str(pid)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cgroup").write_text(cgroup)
