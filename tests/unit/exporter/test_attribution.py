from hypothesis import given, settings
from hypothesis import strategies as st

from kuota.exporter.allocation import DeviceAllocation, Holder
from kuota.exporter.attribution import attribute
from kuota.exporter.cgroup_pod_uid import ContainerRef
from kuota.exporter.pod_directory import PodInfo
from kuota.exporter.readings import GpuProcess
from tests.examples import examples

GPU = "GPU-aaaa"
MIG = "MIG-bbbb"
ALICE = PodInfo(uid="uid-a", namespace="team-a", name="notebook", containers={"ca": "main"})
BOB = PodInfo(uid="uid-b", namespace="team-b", name="trainer", containers={"cb": "worker"})
PODS = {p.uid: p for p in (ALICE, BOB)}
A = Holder("team-a", "notebook", "main")
B = Holder("team-b", "trainer", "worker")


def held(holder: Holder, uuid: str = GPU, replica: int | None = None) -> DeviceAllocation:
    return DeviceAllocation(holder=holder, resource="nvidia.com/gpu", device_uuid=uuid, replica=replica)


def test_two_time_sliced_pods_on_one_gpu_each_get_their_own_processes_figures() -> None:
    result = attribute(
        allocations=[held(A, replica=0), held(B, replica=1)],
        processes=[GpuProcess(GPU, 10, 2 << 30), GpuProcess(GPU, 20, 6 << 30), GpuProcess(GPU, 21, 1 << 30)],
        sm_means={GPU: {10: 12.0, 20: 40.0, 21: 30.0}},
        containers={10: ContainerRef("uid-a", "ca"), 20: ContainerRef("uid-b", "cb"), 21: ContainerRef("uid-b", "cb")},
        pods=PODS,
    )
    assert result.holders[GPU] == (A, B)
    figures = {f.holder: f for f in result.figures}
    assert (figures[A].sm_percent, figures[A].memory_bytes, figures[A].allocated) == (12.0, 2 << 30, True)
    assert (figures[B].sm_percent, figures[B].memory_bytes, figures[B].allocated) == (70.0, 7 << 30, True)


def test_an_allocated_gpu_with_no_process_reports_zero_use_not_nothing() -> None:
    result = attribute(allocations=[held(A)], processes=[], sm_means={GPU: {}}, containers={}, pods=PODS)
    (figure,) = result.figures
    assert (figure.holder, figure.sm_percent, figure.memory_bytes, figure.allocated) == (A, 0.0, 0, True)


def test_without_per_process_utilization_sm_is_absent_rather_than_zero() -> None:
    result = attribute(
        allocations=[held(A, uuid=MIG)],
        processes=[GpuProcess(MIG, 10, 1 << 30)],
        sm_means={},
        containers={10: ContainerRef("uid-a", "ca")},
        pods=PODS,
    )
    (figure,) = result.figures
    assert figure.sm_percent is None
    assert figure.memory_bytes == 1 << 30


def test_a_pod_computing_on_a_gpu_it_was_not_allocated_shows_up_unallocated() -> None:
    result = attribute(
        allocations=[held(A)],
        processes=[GpuProcess(GPU, 20, None)],
        sm_means={GPU: {20: 55.0}},
        containers={20: ContainerRef("uid-b", "cb")},
        pods=PODS,
    )
    figures = {f.holder: f for f in result.figures}
    assert figures[B].allocated is False
    assert figures[B].sm_percent == 55.0
    assert figures[B].memory_bytes is None  # NVML could not tell: absent, not 0
    assert result.holders[GPU] == (A,)


def test_host_processes_and_pods_unknown_to_the_watch_are_counted_unattributed() -> None:
    result = attribute(
        allocations=[],
        processes=[GpuProcess(GPU, 1, 1), GpuProcess(GPU, 2, 1)],
        sm_means={GPU: {1: 5.0, 2: 5.0}},
        containers={2: ContainerRef("uid-unknown", "x")},
        pods=PODS,
    )
    assert result.figures == ()
    assert result.unattributed == {GPU: 2}


def test_an_unknown_container_id_falls_back_to_the_only_container_holding_the_gpu() -> None:
    result = attribute(
        allocations=[held(A)],
        processes=[GpuProcess(GPU, 10, 1)],
        sm_means={GPU: {10: 20.0}},
        containers={10: ContainerRef("uid-a", "restarted-container-id")},
        pods=PODS,
    )
    (figure,) = result.figures
    assert figure.holder == A
    assert figure.sm_percent == 20.0


def test_exited_processes_still_count_within_the_window() -> None:
    result = attribute(
        allocations=[held(A)],
        processes=[],
        sm_means={GPU: {10: 33.0}},
        containers={10: ContainerRef("uid-a", "ca")},
        pods=PODS,
    )
    (figure,) = result.figures
    assert figure.sm_percent == 33.0


@settings(max_examples=examples(60), deadline=None)
@given(
    loads=st.lists(st.tuples(st.sampled_from(["uid-a", "uid-b"]), st.floats(0, 100)), min_size=0, max_size=12),
    allocated=st.sets(st.sampled_from([A, B])),
)
def test_every_allocation_has_one_figure_and_no_pod_exceeds_100_percent(
    loads: list[tuple[str, float]], allocated: set[Holder]
) -> None:
    pids = {100 + i: load for i, load in enumerate(loads)}
    containers = {pid: ContainerRef(uid, "ca" if uid == "uid-a" else "cb") for pid, (uid, _) in pids.items()}
    result = attribute(
        allocations=[held(h) for h in allocated],
        processes=[GpuProcess(GPU, pid, 1) for pid in pids],
        sm_means={GPU: {pid: load for pid, (_, load) in pids.items()}},
        containers=containers,
        pods=PODS,
    )
    assert {f.holder for f in result.figures if f.allocated} == allocated
    assert len({f.holder for f in result.figures}) == len(result.figures)
    for figure in result.figures:
        assert figure.sm_percent is not None
        assert 0.0 <= figure.sm_percent <= 100.0
