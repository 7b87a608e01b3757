from pathlib import Path

import pytest

from kuota.exporter.cgroup_pod_uid import ContainerRef, container_of, read_container
from tests.fakes import proc_tree
from tests.fakes.proc_tree import CID

UID = "8e4c3a1b-2d5f-4a6e-9b7c-0d1e2f3a4b5c"
EXPECTED = ContainerRef(pod_uid=UID, container_id=CID)


@pytest.mark.parametrize(
    "cgroup",
    [
        proc_tree.cgroupfs_v1(UID, qos="burstable"),
        proc_tree.cgroupfs_v1(UID, qos="besteffort"),
        proc_tree.cgroupfs_v1(UID, qos=""),
        f"0::/kubepods/burstable/pod{UID}/{CID}\n",
        proc_tree.systemd_v2(UID, qos="besteffort"),
        proc_tree.systemd_v2(UID, qos="burstable", runtime="crio"),
        proc_tree.systemd_v2(UID, qos="", runtime="docker"),
        proc_tree.systemd_v2(UID, prefix="kubelet.slice"),
        proc_tree.namespaced_v2(UID),
    ],
    ids=[
        "v1-cgroupfs-burstable",
        "v1-cgroupfs-besteffort",
        "v1-cgroupfs-guaranteed",
        "v2-cgroupfs",
        "v2-systemd-containerd",
        "v2-systemd-crio",
        "v2-systemd-docker-guaranteed",
        "v2-kind-kubelet-slice",
        "v2-relative-in-cgroup-namespace",
    ],
)
def test_every_cgroup_form_names_the_pod_uid_with_dashes_and_the_container_id(cgroup: str) -> None:
    assert container_of(cgroup) == EXPECTED


def test_a_process_outside_kubepods_belongs_to_no_pod() -> None:
    assert container_of(proc_tree.host_process()) is None
    assert container_of("12:memory:/user.slice/pod-lookalike\n") is None


def test_the_v2_line_wins_over_v1_lines_on_a_hybrid_host() -> None:
    other = "11111111-2222-3333-4444-555555555555"
    hybrid = proc_tree.cgroupfs_v1(other) + f"0::/kubepods/pod{UID}/{CID}\n"
    assert container_of(hybrid) == EXPECTED


def test_a_path_that_stops_at_the_pod_still_names_the_pod() -> None:
    assert container_of(f"0::/kubepods/besteffort/pod{UID}\n") == ContainerRef(pod_uid=UID, container_id="")


def test_static_pod_uids_without_dashes_are_recognised() -> None:
    uid = "6d2ac2a4d0b1e0b7c2f05e2c4a1b3d3e"
    assert container_of(f"0::/kubepods/pod{uid}/{CID}\n") == ContainerRef(pod_uid=uid, container_id=CID)


def test_read_container_reads_a_fake_proc_tree_and_treats_a_vanished_pid_as_no_pod(tmp_path: Path) -> None:
    proc_tree.write_process(tmp_path, 4242, proc_tree.systemd_v2(UID))
    assert read_container(tmp_path, 4242) == EXPECTED
    assert read_container(tmp_path, 4243) is None
