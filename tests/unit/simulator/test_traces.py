from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from kuota.simulator.errors import SourceSpecError, TraceFormatError
from kuota.simulator.lines import WorkloadLine
from kuota.simulator.queue_mapping import QueueTarget, queue_for_user
from kuota.simulator.traces import CpuOnlyRows, TraceOptions, TraceRow, convert_trace, read_trace, trace_workloads
from tests.unit.benchmarks.workloads.simulate_contract import stream_problems

DATA = Path(__file__).parents[2] / "data" / "traces"
PHILLY = DATA / "philly-head.csv"
HELIOS = DATA / "helios-head.csv"
TEAMS = tuple(QueueTarget(f"team-{i:02d}", f"team-{i:02d}-queue") for i in range(1, 15))
HEADER = "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"


def row(job_id: int, *, user: str = "7", gpus: int = 1, cpus: int = 0, nodes: int = 1, interval: int = 0) -> TraceRow:
    return TraceRow(
        line=job_id + 2,
        job_id=job_id,
        user=user,
        gpus=gpus,
        cpus=cpus,
        nodes=nodes,
        interval=interval,
        run_time=100,
        status="Pass",
    )


def by_name(workloads: Iterable[WorkloadLine]) -> dict[str, WorkloadLine]:
    return {workload["name"]: workload for workload in workloads}


def test_submit_times_accumulate_the_interval_since_the_previous_row() -> None:
    rows = [row(0, interval=5), row(1, interval=0), row(2, interval=7), row(3, interval=100)]
    assert [w["submitAt"] for w in trace_workloads(rows, TEAMS)] == [5, 5, 12, 112]


def test_skipped_cpu_only_rows_still_advance_the_clock() -> None:
    rows = [row(0, interval=10), row(1, gpus=0, cpus=2, interval=20), row(2, interval=30)]
    workloads = list(trace_workloads(rows, TEAMS))
    assert [(w["name"], w["submitAt"]) for w in workloads] == [("job-0", 10), ("job-2", 60)]


def test_cpu_only_rows_kept_ask_cpu_and_memory_but_no_gpu() -> None:
    rows = [row(0, gpus=0, cpus=2), row(1, gpus=0, cpus=0)]
    workloads = list(trace_workloads(rows, TEAMS, TraceOptions(cpu_only_rows=CpuOnlyRows.KEEP)))
    assert [w["podSets"][0]["requests"] for w in workloads] == [
        {"cpu": "2", "memory": "16Gi"},
        {"cpu": "1", "memory": "8Gi"},
    ]


def test_gpus_spread_evenly_over_node_num_pods() -> None:
    [workload] = trace_workloads([row(0, gpus=16, cpus=0, nodes=2)], TEAMS)
    assert workload["podSets"][0]["count"] == 2
    assert workload["podSets"][0]["requests"] == {"nvidia.com/gpu": "8", "cpu": "32", "memory": "256Gi"}


def test_recorded_cpus_are_split_over_pods_rounding_up() -> None:
    [workload] = trace_workloads([row(0, gpus=3, cpus=7, nodes=3)], TEAMS)
    assert workload["podSets"][0]["requests"] == {"nvidia.com/gpu": "1", "cpu": "3", "memory": "32Gi"}


def test_philly_rows_convert_to_the_hand_checked_workloads() -> None:
    converted = convert_trace(PHILLY, TEAMS)
    workloads = by_name(converted.workloads)
    assert converted.rows == 40
    assert len(converted.workloads) == 40
    assert converted.cpu_only_rows_skipped == 0
    # line 2: 0,1,1,0,1,0,1389243,0,Killed
    first = workloads["job-0"]
    assert (first["submitAt"], first["duration"], first["priorityClass"], first["maxExecutionSeconds"]) == (
        0,
        1389243,
        None,
        None,
    )
    assert first["podSets"] == [
        {
            "name": "main",
            "count": 1,
            "requests": {"nvidia.com/gpu": "1", "cpu": "4", "memory": "32Gi"},
            "nodeSelector": {},
            "tolerations": [],
        }
    ]
    # line 3: 1,2,8,0,4,395146,14405,0,Failed -- 8 GPUs over 4 nodes
    second = workloads["job-1"]
    assert (second["submitAt"], second["duration"]) == (395146, 14405)
    assert second["podSets"][0]["count"] == 4
    assert second["podSets"][0]["requests"] == {"nvidia.com/gpu": "2", "cpu": "8", "memory": "64Gi"}
    # line 7: 5,2,8,0,1,195071,100547,0,Failed -- 395146 + 257893 + 0 + 0 + 195071
    assert workloads["job-5"]["submitAt"] == 848110
    assert workloads["job-5"]["podSets"][0]["requests"] == {"nvidia.com/gpu": "8", "cpu": "32", "memory": "256Gi"}
    assert converted.workloads[-1]["submitAt"] == 1936720  # sum of the 40 intervals


def test_helios_rows_convert_to_the_hand_checked_workloads() -> None:
    converted = convert_trace(HELIOS, TEAMS)
    workloads = by_name(converted.workloads)
    assert (converted.rows, converted.cpu_only_rows_skipped, len(converted.workloads)) == (120, 5, 115)
    # line 6: 4,3,8,40,1,28,656,0,Pass -- 0 + 94 + 151 + 107 + 28
    assert workloads["job-4"]["submitAt"] == 380
    assert workloads["job-4"]["podSets"][0]["requests"] == {"nvidia.com/gpu": "8", "cpu": "40", "memory": "256Gi"}
    assert "job-5" not in workloads  # line 7: 5,4,0,1,1,83,2,0,Failed -- no GPU
    # line 112: 110,11,16,16,2,540,194,0,Pass
    multi_node = workloads["job-110"]
    assert (multi_node["submitAt"], multi_node["duration"]) == (10337, 194)
    assert multi_node["podSets"][0]["count"] == 2
    assert multi_node["podSets"][0]["requests"] == {"nvidia.com/gpu": "8", "cpu": "8", "memory": "256Gi"}


def test_every_converted_line_satisfies_the_contract() -> None:
    for path in (PHILLY, HELIOS):
        for cpu_only_rows in CpuOnlyRows:
            converted = convert_trace(path, TEAMS, TraceOptions(cpu_only_rows=cpu_only_rows))
            assert stream_problems(converted.workloads) == []


def test_each_user_lands_on_the_queue_its_hash_picks() -> None:
    converted = convert_trace(HELIOS, TEAMS)
    rows = {r.job_id: r for r in read_trace(HELIOS)}
    for workload in converted.workloads:
        user = rows[int(str(workload["name"]).removeprefix("job-"))].user
        target = queue_for_user(user, TEAMS)
        assert (workload["namespace"], workload["queue"]) == (target.namespace, target.queue)
        assert converted.queue_of_user[user] == target


def test_conversion_is_deterministic() -> None:
    assert convert_trace(PHILLY, TEAMS) == convert_trace(PHILLY, TEAMS)


def test_priority_class_and_name_prefix_are_applied() -> None:
    options = TraceOptions(name_prefix="philly", priority_class="trace")
    workloads = list(trace_workloads([row(3)], TEAMS, options))
    assert (workloads[0]["name"], workloads[0]["priorityClass"]) == ("philly-3", "trace")


def test_a_name_prefix_that_is_not_a_dns_label_is_refused() -> None:
    with pytest.raises(SourceSpecError, match="name_prefix 'Philly_'"):
        TraceOptions(name_prefix="Philly_")


def test_gpus_that_do_not_divide_over_nodes_are_refused_with_the_line(tmp_path: Path) -> None:
    trace = tmp_path / "odd.csv"
    trace.write_text(HEADER + "0,1,3,0,2,0,10,0,Pass\n")
    with pytest.raises(TraceFormatError, match=r"odd.csv:2: gpu_num 3 does not divide over node_num 2"):
        list(read_trace(trace))


def test_a_non_numeric_field_is_refused_with_line_and_column(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text(HEADER + "0,1,1,0,1,0,10,0,Pass\n1,1,1,0,1,-4,10,0,Pass\n")
    with pytest.raises(TraceFormatError, match=r"bad.csv:3: column interval is '-4'"):
        list(read_trace(trace))


def test_a_header_without_the_trace_columns_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "other.csv"
    trace.write_text("job,gpus\n1,2\n")
    with pytest.raises(TraceFormatError, match="header lacks column"):
        list(read_trace(trace))


def test_repeated_job_ids_are_refused_because_names_would_clash() -> None:
    with pytest.raises(TraceFormatError, match="u_id 4 repeats"):
        list(trace_workloads([row(4), row(4)], TEAMS))


def test_converting_onto_no_queues_is_refused() -> None:
    with pytest.raises(SourceSpecError, match="no LocalQueues"):
        list(trace_workloads([row(0)], []))
