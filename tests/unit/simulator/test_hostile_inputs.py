"""What ``kuota simulate`` does with broken and hostile inputs: refuse each with one line naming the file, the
line or document and the field (exit 2), within bounded time and memory, and never write half an output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kuota.cli import main
from kuota.engine.model import ClusterQueue
from kuota.simulator.config_reading import config_from_dicts, load_config, read_yaml_documents
from kuota.simulator.errors import ConfigFileError, SourceSpecError, TraceFormatError, WorkloadFileError
from kuota.simulator.limits import MAX_CONFIG_BYTES, MAX_LINE_BYTES, MAX_YAML_DEPTH
from kuota.simulator.replay import replay
from kuota.simulator.simulation import simulate
from kuota.simulator.summary import summary
from kuota.simulator.traces import read_trace
from kuota.simulator.workload_reading import read_workloads

CONFIG = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team}
spec:
  cohortName: pool
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: team}
spec: {clusterQueue: team}
"""
TRACE_HEADER = "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status\n"


def _line(**changes: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "name": "a",
        "namespace": "team",
        "queue": "q",
        "submitAt": 0,
        "duration": 10,
        "podSets": [{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": "1"}}],
    }
    line.update(changes)
    return line


def _pod_set(**changes: Any) -> dict[str, Any]:
    return _line(podSets=[{"name": "main", "count": 1, "requests": {"nvidia.com/gpu": "1"}, **changes}])


def _config(tmp_path: Path, text: str = CONFIG) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def _workloads(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "workloads.jsonl"
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    return path


def _refused(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    """Run ``kuota simulate`` in this process; it must exit 2 with one line on stderr, which is returned."""
    assert main(["simulate", *map(str, args)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kuota simulate: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def _refused_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes) -> str:
    workloads = _workloads(tmp_path, text)
    return _refused(capsys, "--config", _config(tmp_path), "--workloads", workloads)


def _cpu_seconds(call: Callable[[], object]) -> float:
    started = time.thread_time()
    call()
    return time.thread_time() - started


def _peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _raises(error: type[Exception], call: Callable[[], object]) -> Callable[[], None]:
    def expecting() -> None:
        with pytest.raises(error):
            call()

    return expecting


# JSON Lines


def test_a_nan_submit_at_is_refused_at_once_instead_of_looping_forever(tmp_path: Path) -> None:
    text = json.dumps(_line()).replace('"submitAt": 0', '"submitAt": NaN')
    workloads = _workloads(tmp_path, text + "\n")
    command = [sys.executable, "-m", "kuota", "simulate", "--config", str(_config(tmp_path)), "--workloads"]
    done = subprocess.run([*command, str(workloads)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr == f"kuota simulate: {workloads}:1: submitAt: NaN is not a JSON number; write a finite number\n"


@pytest.mark.parametrize(
    ("spelled", "field"),
    [
        ('"submitAt": 0', '"submitAt": NaN'),
        ('"submitAt": 0', '"submitAt": -Infinity'),
        ('"duration": 10', '"duration": Infinity'),
        ('"count": 1', '"count": NaN'),
        ('"nvidia.com/gpu": "1"', '"nvidia.com/gpu": NaN'),
    ],
)
def test_nan_and_infinity_are_refused_in_every_field_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spelled: str, field: str
) -> None:
    text = json.dumps(_line()).replace(spelled, field)
    err = _refused_line(tmp_path, capsys, text)
    name = field.split('"')[1]
    assert f"workloads.jsonl:1: {'podSets[0].requests.' if name == 'nvidia.com/gpu' else ''}" in err
    assert "is not a JSON number" in err and (name in err)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (_line(submitAt="1e400"), "submitAt must be a number of seconds from 0 to 1e12, got inf"),
        (_line(duration=10**13), "duration must be a number of seconds from 0 to 1e12"),
        (_line(duration=10**400), "duration must be a number of seconds from 0 to 1e12, got an integer of 1329 bits"),
        (_line(submitAt="5"), "submitAt must be a number of seconds from 0 to 1e12, got '5'"),
        (_line(submitAt=-1), "submitAt must be a number of seconds from 0 to 1e12, got -1"),
        (_line(maxExecutionSeconds=2**31), "maxExecutionSeconds must be null or a whole number from 1 to 2147483647"),
        (_line(maxExecutionSeconds="1e400"), "maxExecutionSeconds must be null or a whole number"),
        (_pod_set(count=2**31), "podSets[0].count: must be a whole number from 1 to 2147483647"),
        (_pod_set(count=1.5), "podSets[0].count: must be a whole number"),
        (_pod_set(minCount=True), "podSets[0].minCount: must be a whole number from 1 to count, got true"),
    ],
)
def test_numbers_out_of_range_or_of_the_wrong_kind_are_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: dict[str, Any], says: str
) -> None:
    text = json.dumps(line).replace('"1e400"', "1e400")  # a JSON number Python reads as infinity
    assert says in _refused_line(tmp_path, capsys, text)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (_pod_set(requests="abc"), "podSets[0].requests: must be an object of resource names to quantities, got 'abc'"),
        (_pod_set(requests=[1]), "podSets[0].requests: must be an object of resource names to quantities, got a list"),
        (_pod_set(requests={"nvidia.com/gpu": 1.5}), "podSets[0].requests.nvidia.com/gpu: 1.5 is not a quantity"),
        (_line(priorityClass=["high"]), "priorityClass must be a string or null, got a list"),
        (_line(priorityClass=7), "priorityClass must be a string or null, got 7"),
        (_line(podSets={"name": "main"}), "podSets must be a list of 1 to 8 pod sets"),
        (_line(podSets=[{}] * 9), "podSets must be a list of 1 to 8 pod sets"),
        (_line(name=["a"]), "name must be a non-empty string of at most 253 printable characters, got a list"),
        (_line(queue="q" * 254), "queue must be a non-empty string of at most 253 printable characters"),
        (_pod_set(name={"a": 1}), "podSets[0].name: must be a non-empty string"),
        (_pod_set(nodeSelector=["zone"]), "podSets[0].nodeSelector: must be an object of strings, got a list"),
        (_pod_set(tolerations=5), "podSets[0].tolerations: must be a list, got 5"),
        (_pod_set(tolerations=[{"key": ["k"]}]), "podSets[0].tolerations[0].key: must be a string, got a list"),
        (_pod_set(tolerations=[{"effect": ["NoSchedule"]}]), "podSets[0].tolerations[0].effect: a list is not"),
        (_pod_set(tolerations=[{"tolerationSeconds": "5"}]), "tolerations[0].tolerationSeconds: must be null or"),
        ([_line()], "a line must be a JSON object, got a list"),
    ],
)
def test_values_of_the_wrong_type_are_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: object, says: str
) -> None:
    assert says in _refused_line(tmp_path, capsys, json.dumps(line))


def test_a_line_nested_100000_deep_is_refused_without_a_recursion_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused_line(tmp_path, capsys, "[" * 100_000)
    assert "workloads.jsonl:1: arrays or objects nested hundreds deep" in err


def test_strings_holding_control_characters_or_lone_surrogates_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _refused_line(tmp_path, capsys, json.dumps(_line(name="a\nb")))
    assert r"workloads.jsonl:1: name: 'a\nb' holds a control character" in err
    err = _refused_line(tmp_path, capsys, json.dumps(_pod_set(nodeSelector={"zone": "\ud800"})))
    assert r"podSets[0].nodeSelector.zone: '\ud800' holds a control character or a lone surrogate" in err


def test_a_number_of_thousands_of_digits_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = json.dumps(_line()).replace('"duration": 10', f'"duration": {"9" * 5000}')
    assert "workloads.jsonl:1: a number of thousands of digits" in _refused_line(tmp_path, capsys, text)


def test_a_workloads_file_that_is_not_utf8_is_refused_naming_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = json.dumps(_line()).encode()
    err = _refused_line(tmp_path, capsys, good + b'\n{"name": "\xff"}\n')
    assert "workloads.jsonl:2: not UTF-8 text (byte 0xff at column 11); save the file as UTF-8" in err


def test_a_folder_given_as_the_workloads_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, "--config", _config(tmp_path), "--workloads", tmp_path)
    assert f"{tmp_path}: is a folder; give the workloads file" in err


def test_the_workloads_file_is_read_a_line_at_a_time_in_bounded_memory(tmp_path: Path) -> None:
    objects = load_config(_config(tmp_path))
    blank = (" " * 1023 + "\n").encode()
    padded = _workloads(tmp_path, blank * (32 << 10) + b"{oops}\n")  # 32 MiB of blank lines, then a bad one
    peak = _peak_bytes(_raises(WorkloadFileError, lambda: read_workloads(padded, objects)))
    assert peak < 2 << 20
    endless = _workloads(tmp_path, b"[" * (64 << 20))  # 64 MiB and no newline: the line is refused unread
    with pytest.raises(WorkloadFileError, match=rf"workloads.jsonl:1: longer than {MAX_LINE_BYTES} bytes"):
        read_workloads(endless, objects)
    assert _peak_bytes(_raises(WorkloadFileError, lambda: read_workloads(endless, objects))) < 4 * MAX_LINE_BYTES


def test_a_workloads_stream_may_be_a_pipe(tmp_path: Path) -> None:
    objects = load_config(_config(tmp_path))
    fifo = tmp_path / "workloads.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"cat > {fifo}"], stdin=subprocess.PIPE)
    assert writer.stdin is not None
    writer.stdin.write((json.dumps(_line()) + "\n").encode())
    writer.stdin.close()
    (workload,) = read_workloads(fifo, objects)
    assert writer.wait(timeout=30) == 0
    assert workload.workload.key == "team/a"


# --until


@pytest.mark.parametrize("until", ["nan", "inf", "-inf", "-1", "1e13", "1e400"])
def test_until_must_be_a_finite_number_of_seconds_within_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], until: str
) -> None:
    workloads = _workloads(tmp_path, json.dumps(_line()))
    err = _refused(capsys, "--config", _config(tmp_path), "--workloads", workloads, f"--until={until}")
    assert "--until must be a number of seconds from 0 to 1e12, got " in err


def test_the_simulate_and_replay_functions_refuse_a_non_finite_until_too(tmp_path: Path) -> None:
    import yaml

    workloads = _workloads(tmp_path, json.dumps(_line()))
    with pytest.raises(SourceSpecError, match="until must be a number of seconds from 0 to 1e12, got nan"):
        simulate(list(yaml.safe_load_all(CONFIG)), workloads, until=float("nan"))
    with pytest.raises(SourceSpecError, match="until must be a number of seconds from 0 to 1e12, got inf"):
        replay(load_config(_config(tmp_path)), [], until=float("inf"))


# Trace CSV


@pytest.mark.parametrize(
    ("column", "value"),
    [("interval", "nan"), ("run_time", "inf"), ("gpu_num", "1e3"), ("cpu_num", "\u00b2"), ("u_id", "9" * 19)],
)
def test_trace_numeric_columns_take_ascii_whole_numbers_only(tmp_path: Path, column: str, value: str) -> None:
    cells = dict(zip(TRACE_HEADER.strip().split(","), ["0", "7", "2", "0", "1", "0", "100", "0", "Pass"], strict=True))
    cells[column] = value
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE_HEADER + ",".join(cells.values()) + "\n")
    with pytest.raises(TraceFormatError, match=rf"trace.csv:2: column {column} is .*; it must be a whole number >= 0"):
        list(read_trace(trace))


def test_trace_columns_beyond_any_job_or_the_replays_span_are_refused(tmp_path: Path) -> None:
    objects = load_config(_config(tmp_path))
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE_HEADER + "0,7,2,0,2000000,0,100,0,Pass\n")
    with pytest.raises(TraceFormatError, match=r"trace.csv:2: column node_num is 2000000; a job runs on at most"):
        read_workloads(trace, objects)
    trace.write_text(TRACE_HEADER + "0,7,2,0,1,999999999999,100,0,Pass\n1,7,2,0,1,999999999999,100,0,Pass\n")
    with pytest.raises(TraceFormatError, match=r"trace.csv:3: the intervals add up to 1999999999998 seconds"):
        read_workloads(trace, objects)


def test_a_trace_that_is_not_utf8_is_refused_naming_the_line(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_bytes(TRACE_HEADER.encode() + b"0,7,2,0,1,0,100,0,Pass\n1,\xe9,2,0,1,0,100,0,Pass\n")
    with pytest.raises(WorkloadFileError, match=r"trace.csv:3: not UTF-8 text \(byte 0xe9 at column 3\)"):
        read_workloads(trace, load_config(_config(tmp_path)))


def test_a_quoted_field_cannot_gather_the_rest_of_a_trace_into_one_row(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE_HEADER + '0,"' + 'a","b\n' * 300_000)  # short quoted fields, each over a newline
    with pytest.raises(TraceFormatError, match=rf"a row longer than {MAX_LINE_BYTES} characters"):
        read_workloads(trace, load_config(_config(tmp_path)))


def test_a_repeated_u_id_names_the_trace_file_and_both_lines(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text(TRACE_HEADER + "0,7,2,0,1,0,100,0,Pass\n0,8,2,0,1,0,100,0,Pass\n")
    with pytest.raises(TraceFormatError, match=r"trace.csv:3: u_id 0 repeats line 2"):
        read_workloads(trace, load_config(_config(tmp_path)))


# CONFIG YAML


def _billion_laughs(levels: int) -> str:
    anchors = ["  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    anchors += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "apiVersion: v1\nlaughs:\n" + "\n".join(anchors) + f"\nkind: *l{levels - 1}\n"


@pytest.mark.parametrize("levels", [7, 9])
def test_a_billion_laughs_config_is_refused_in_bounded_time_and_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], levels: int
) -> None:
    config = _config(tmp_path, _billion_laughs(levels))
    assert len(config.read_bytes()) < 710  # 9**9 strings in 705 bytes once cost 2.2 GB and 51 s
    refusing = _raises(ConfigFileError, lambda: load_config(config))
    assert _cpu_seconds(refusing) < 0.5
    assert _peak_bytes(refusing) < 4 << 20
    with pytest.raises(ConfigFileError, match=r"config.yaml \(document 1\) line \d+: the CONFIG comes to more than"):
        read_yaml_documents(config)  # the reader `kuota report --config` shares
    err = _refused(capsys, "--config", config, "--workloads", _workloads(tmp_path, ""))
    assert "with its aliases (*name) expanded" in err


def test_aliases_a_config_really_uses_are_still_read(tmp_path: Path) -> None:
    shared = CONFIG.replace(
        "flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}]",
        "flavors:\n    - {name: gpu, resources: &quota [{name: nvidia.com/gpu, nominalQuota: 4}]}\n"
        "    - {name: spare, resources: *quota}",
    )
    assert "*quota" in shared
    team = load_config(_config(tmp_path, shared))[1]
    assert isinstance(team, ClusterQueue)
    assert [flavor.name for flavor in team.resource_groups[0].flavors] == ["gpu", "spare"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 100_000, f"line 1: flow collections ([ or {{) nested deeper than {MAX_YAML_DEPTH} levels"),
        ("a:\n" + "".join(f"{'  ' * i}- \n" for i in range(1, 200)), f"nested deeper than {MAX_YAML_DEPTH} levels"),
        ("a: &a [*a]\n", "an alias refers to a node it is inside of"),
        ("kind: Cohort\nkind: ClusterQueue\n", "line 2: the key 'kind' is given twice in one mapping"),
        ("value: .nan\n", "'.nan' is not a finite number"),
        ("value: -.inf\n", "'-.inf' is not a finite number"),
        ("value: 1.0e+99999\n", "is not a finite number"),
        (f"value: {'9' * 5000}\n", "an integer of more than 64 characters at line 1, column 8"),
        (f"value: {':'.join(['1'] * 5000)}\n", "an integer of more than 64 characters"),
        ("value: !!int abc\n", "cannot read 'abc' as tag:yaml.org,2002:int"),
        ("value: !!timestamp never\n", "cannot read 'never' as tag:yaml.org,2002:timestamp"),
        ("value: 2001-13-45\n", "cannot read '2001-13-45' as tag:yaml.org,2002:timestamp"),
        ("value: !!python/object:os.system {}\n", "could not determine a constructor"),
        ("kind: ClusterQueue\nspec: [unclosed\n", "not valid YAML: expected ',' or ']', but got '<stream end>'"),
        ("kind: \x00\n", "not valid YAML: character '\\x00' at line 1: special characters are not allowed"),
    ],
)
def test_hostile_yaml_is_refused_in_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    config = _config(tmp_path, text)
    refusing = _raises(ConfigFileError, lambda: load_config(config))
    assert _cpu_seconds(refusing) < 0.5
    err = _refused(capsys, "--config", config, "--workloads", _workloads(tmp_path, ""))
    assert f"kuota simulate: {config}" in err and says in err


def test_a_config_that_is_not_utf8_is_refused_naming_the_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(CONFIG.encode() + b"---\nkind: \xff\n")
    with pytest.raises(ConfigFileError, match=r"config.yaml: not UTF-8 text \(byte 0xff on line 20\)"):
        load_config(config)


def test_a_config_larger_than_the_limit_is_refused_unread(tmp_path: Path) -> None:
    folder = tmp_path / "config"
    folder.mkdir()
    (folder / "a.yaml").write_text(CONFIG)
    (folder / "b.yaml").write_bytes(b"# " + b"x" * MAX_CONFIG_BYTES)
    refusing = _raises(ConfigFileError, lambda: load_config(folder))
    assert _peak_bytes(refusing) < 3 * MAX_CONFIG_BYTES
    with pytest.raises(ConfigFileError, match=rf"b.yaml: the CONFIG is larger than {MAX_CONFIG_BYTES} bytes"):
        load_config(folder)


def test_the_fields_an_object_is_named_by_must_be_text(tmp_path: Path) -> None:
    deep: object = "x"
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(ConfigFileError, match=r"object 1: kind must be a string, got a list"):
        config_from_dicts([{"apiVersion": "v1", "kind": deep}])
    with pytest.raises(ConfigFileError, match=r"object 1: metadata.name must be a string, got an object"):
        config_from_dicts([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": {"a": deep}}}])


# Duplicates and cycles


@pytest.mark.parametrize(
    ("document", "identity"),
    [
        ("kind: ResourceFlavor\nmetadata: {name: gpu}", "ResourceFlavor gpu"),
        (
            "kind: ClusterQueue\nmetadata: {name: team}\nspec: {namespaceSelector: {}}",
            "ClusterQueue team",
        ),
        ("kind: LocalQueue\nmetadata: {name: q, namespace: team}\nspec: {clusterQueue: team}", "LocalQueue team/q"),
        ("kind: Cohort\nmetadata: {name: pool}", "Cohort pool"),
        ("kind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: 5", "WorkloadPriorityClass high"),
    ],
)
def test_an_object_defined_twice_is_refused_naming_both_places(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: str, identity: str
) -> None:
    folder = tmp_path / "config"
    folder.mkdir()
    (folder / "a.yaml").write_text(f"apiVersion: kueue.x-k8s.io/v1beta2\n{document}\n")
    (folder / "b.yaml").write_text(f"# the same again\n---\napiVersion: kueue.x-k8s.io/v1beta2\n{document}\n")
    err = _refused(capsys, "--config", folder, "--workloads", _workloads(tmp_path, ""))
    assert err == (
        f"kuota simulate: {folder / 'b.yaml'} (document 1): {identity} is defined twice, here and in "
        f"{folder / 'a.yaml'} (document 1); keep one of them\n"
    )


def test_a_namespace_defined_twice_is_refused_and_local_queues_of_one_name_in_two_namespaces_are_not(
    tmp_path: Path,
) -> None:
    other = CONFIG.split("---")[2].replace("namespace: team", "namespace: other")
    assert len(load_config(_config(tmp_path, CONFIG + "---" + other))) == 4
    namespace = "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n"
    with pytest.raises(
        ConfigFileError, match=r"\(document 5\): Namespace team is defined twice, here and in .*\(document 4\)"
    ):
        load_config(_config(tmp_path, CONFIG + namespace + namespace))


def _cohort(name: str, parent: str) -> str:
    header = "---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\n"
    return f"{header}metadata: {{name: {name}}}\nspec: {{parentName: {parent}}}\n"


def test_a_cohort_cycle_is_refused_naming_the_cycle_and_the_cluster_queues_it_would_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, CONFIG + _cohort("pool", "outer") + _cohort("outer", "pool"))
    err = _refused(capsys, "--config", config, "--workloads", _workloads(tmp_path, json.dumps(_line())))
    assert (
        f"Cohorts pool -> outer -> pool form a parentName cycle (pool in {config} (document 4); outer in {config} "
        "(document 5)); ClusterQueue(s) team under it would admit nothing" in err
    )


def test_a_cohort_that_is_its_own_parent_or_sits_under_a_cycle_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match=r"spec.parentName: Invalid value: \"pool\": a Cohort cannot be its own"):
        load_config(_config(tmp_path, CONFIG + _cohort("pool", "pool")))  # the engine's validation refuses it
    cycle = _cohort("pool", "middle") + _cohort("middle", "a") + _cohort("a", "b") + _cohort("b", "a")
    with pytest.raises(ConfigFileError, match=r"Cohorts a -> b -> a form a parentName cycle .*ClusterQueue\(s\) team"):
        load_config(_config(tmp_path, CONFIG + cycle))


def test_the_report_what_if_refuses_duplicates_and_cycles_too(tmp_path: Path) -> None:
    import yaml

    objects = list(yaml.safe_load_all(CONFIG + _cohort("pool", "outer") + _cohort("outer", "pool")))
    workloads = _workloads(tmp_path, json.dumps(_line()))
    with pytest.raises(
        ConfigFileError, match=r"Cohorts pool -> outer -> pool form a parentName cycle \(pool in object 4"
    ):
        simulate(objects, workloads)
    with pytest.raises(ConfigFileError, match=r"object 4: ClusterQueue team is defined twice, here and in object 2"):
        simulate([*yaml.safe_load_all(CONFIG), objects[1]], workloads)


# The output file


def _run(tmp_path: Path, output: Path, lines: str | None = None) -> int:
    workloads = _workloads(tmp_path, json.dumps(_line()) if lines is None else lines)
    return main(
        ["simulate", "--config", str(_config(tmp_path)), "--workloads", str(workloads), "--output", str(output)]
    )


def test_output_replaces_a_symlink_at_its_name_instead_of_writing_through_it(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("keep")
    output = tmp_path / "out.json"
    output.symlink_to(target)
    assert _run(tmp_path, output) == 0
    assert target.read_text() == "keep" and not output.is_symlink()
    assert json.loads(output.read_text())["workloads"][0]["name"] == "a"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "created.txt")
    assert _run(tmp_path, dangling) == 0
    assert not (tmp_path / "created.txt").exists() and not dangling.is_symlink()


def test_a_failed_write_leaves_the_previous_output_whole_and_no_temporary_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    output = tmp_path / "out" / "out.json"
    output.parent.mkdir()
    output.write_text("previous")

    def failing_fsync(descriptor: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    assert _run(tmp_path, output) == 2
    err = capsys.readouterr().err
    assert err == f"kuota simulate: cannot write {output}: Input/output error\n"
    assert output.read_text() == "previous" and [p.name for p in output.parent.iterdir()] == ["out.json"]


def test_an_invalid_input_writes_no_output_and_a_folder_is_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out.json"
    assert _run(tmp_path, output, lines="{oops}\n") == 2
    assert not output.exists()
    capsys.readouterr()
    folder = tmp_path / "folder"
    folder.mkdir()
    assert _run(tmp_path, folder) == 2
    assert capsys.readouterr().err.startswith(f"kuota simulate: cannot write {folder}: ")
    assert list(folder.iterdir()) == [] and {p.name for p in tmp_path.iterdir() if p.name.startswith(".")} == set()


def test_a_message_naming_a_file_with_a_newline_stays_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = tmp_path / "odd\nname.yaml"
    err = _refused(capsys, "--config", odd, "--workloads", _workloads(tmp_path, ""))
    assert r"odd\nname.yaml: no such file or folder" in err


# The summary


def test_the_summary_does_not_say_nobody_waited_when_workloads_never_ran(tmp_path: Path) -> None:
    objects = load_config(_config(tmp_path))
    workloads = read_workloads(_workloads(tmp_path, json.dumps(_line(queue="missing"))), objects)
    story = summary(replay(objects, workloads))
    assert "nobody waited" not in story
    assert "no admission waited, but some workloads were never admitted (below)" in story
