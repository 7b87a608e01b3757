"""Fuzzing simulate's readers: the workloads file (JSON Lines, trace CSV) and the CONFIG YAML.

Whatever a file holds, ``kuota simulate`` either replays it or refuses it with a ``SimulateError`` (exit 2,
one line naming the file), and each input is decided in bounded time: the readers feed the report's what-if
as well as the command, and an input that costs seconds or loops forever is a denial of service. Accepted
inputs go all the way through: replay, summary and the output document, written as strict JSON.
"""

from __future__ import annotations

import copy
import csv
import gc
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kuota.simulator.config_reading import load_config
from kuota.simulator.errors import SimulateError
from kuota.simulator.replay import replay
from kuota.simulator.summary import output_document, summary
from kuota.simulator.workload_reading import read_workloads
from tests.examples import examples

# Generous for the pure-Python build on a busy machine: a read of one small input takes about a millisecond,
# a replay of a few workloads a few; the hostile inputs once took 51 s, or forever.
_BOUND_SECONDS = 0.05
# A read of the seven-document _CONFIG: about 3 ms on a quiet machine, so 15 of them are about the bound.
_REFERENCE_RATIO = 15
_FUZZ = settings(
    max_examples=examples(300),
    deadline=None,
    # Not the explain phase: it traces every line run, which makes a failing example slower than it is.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

_CONFIG: list[dict[str, Any]] = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}},
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team"},
        "spec": {
            "cohortName": "pool",
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}],
                }
            ],
        },
    },
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "pool"}, "spec": {}},
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "team"},
        "spec": {"clusterQueue": "team"},
    },
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 9},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"tier": "gold"}}},
    {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": {"enable": True}},
]


def _line() -> dict[str, Any]:
    return {
        "name": "a",
        "namespace": "team",
        "queue": "q",
        "priorityClass": "high",
        "submitAt": 0,
        "duration": 100,
        "maxExecutionSeconds": 50,
        "podSets": [
            {
                "name": "main",
                "count": 2,
                "minCount": 1,
                "requests": {"nvidia.com/gpu": "1", "cpu": "500m"},
                "nodeSelector": {"zone": "a"},
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}],
                "nodeAffinity": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
                },
            }
        ],
    }


# Every place of a workload line a hostile or careless writer can put a value.
_LINE_PATHS: list[tuple[str | int, ...]] = [
    *((key,) for key in _line()),
    ("colour",),
    ("podSets", 0),
    ("podSets", 1),
    *(("podSets", 0, key) for key in _line()["podSets"][0]),
    ("podSets", 0, "requests", "cpu"),
    ("podSets", 0, "requests", "nvidia.com/gpu"),
    ("podSets", 0, "requests", ""),
    ("podSets", 0, "nodeSelector", "zone"),
    ("podSets", 0, "tolerations", 0),
    *(("podSets", 0, "tolerations", 0, key) for key in ("key", "operator", "value", "effect", "tolerationSeconds")),
    ("podSets", 0, "nodeAffinity", "nodeSelectorTerms"),
    ("podSets", 0, "nodeAffinity", "nodeSelectorTerms", 0, "matchExpressions", 0, "values"),
]

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**12, 10**12 + 1, -1, 0, 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["4", "500m", "128Gi", "1e3", "1e400", "NaN", "-1", "0", "Exists", "NoSchedule", "high"])
)
_values: st.SearchStrategy[Any] = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


def _planted(base: Any, path: tuple[str | int, ...], value: object) -> Any:
    """``base`` (copied) with ``value`` at ``path``, where the path still leads anywhere."""
    planted = copy.deepcopy(base)
    parent: Any = planted
    for step in path[:-1]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return planted
    if isinstance(parent, dict):
        parent[path[-1]] = value
    elif isinstance(parent, list) and isinstance(path[-1], int):
        if path[-1] < len(parent):
            parent[path[-1]] = value
        else:
            parent.append(value)
    return planted


def _cpu_seconds(call: Callable[[], object]) -> float:
    """The CPU seconds ``call`` spends, the least of three runs where the first is over the bound: the work an
    input costs, not a garbage collection of the fuzzer's own heap that happens to fall inside, nor a moment
    the machine is busy with other work."""
    spent = float("inf")
    for _ in range(3):
        gc.disable()
        try:
            started = time.thread_time()
            call()
            spent = min(spent, time.thread_time() - started)
        finally:
            gc.enable()
        if spent <= _BOUND_SECONDS:
            break
    return spent


def _assert_bounded(call: Callable[[], object], shown: object, folder: Path) -> None:
    """``call`` takes at most ``_BOUND_SECONDS``, or, on a machine slowed down by its neighbours (a shared VM's
    CPU time runs slow in bursts), at most ``_REFERENCE_RATIO`` times a plain CONFIG read measured then."""
    spent = _cpu_seconds(call)
    if spent <= _BOUND_SECONDS:
        return
    reference = _cpu_seconds(lambda: load_config(folder / "reference.yaml"))
    assert spent <= _REFERENCE_RATIO * reference, (
        f"{spent:.3f} s ({spent / reference:.0f} plain CONFIG reads) for {str(shown)[:300]!r}"
    )


def _refused_or_replayed(read: Callable[[], tuple[list[Any], list[Any]]]) -> None:
    """Read an input; a refusal is a SimulateError of one line; what is accepted replays to strict JSON."""
    try:
        objects, workloads = read()
    except SimulateError as error:
        assert "\n" not in str(error), "the command prints one line"
        return
    result = replay(objects, workloads)
    summary(result)
    json.dumps(output_document(result), allow_nan=False)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each input is written, beside the plain CONFIG the inputs' times are compared with."""
    path = tmp_path_factory.mktemp("fuzz")
    (path / "reference.yaml").write_text(yaml.safe_dump_all(_CONFIG))
    return path


@pytest.fixture(scope="module")
def config(folder: Path) -> list[Any]:
    return load_config(folder / "reference.yaml")


def _workloads_file(folder: Path, data: bytes) -> Path:
    path = folder / "workloads.jsonl"
    path.write_bytes(data)
    return path


def _check_workloads(folder: Path, config: list[Any], data: bytes) -> None:
    path = _workloads_file(folder, data)
    _assert_bounded(lambda: _refused_or_replayed(lambda: (config, read_workloads(path, config))), data, folder)


def _json(value: object) -> bytes:
    return json.dumps(value).encode()  # NaN and Infinity are written as Python's reader would read them


@_FUZZ
@given(st.sampled_from(_LINE_PATHS), _values, st.integers(1, 3))
def test_a_workload_line_with_any_value_anywhere_is_replayed_or_refused_in_bounded_time(
    folder: Path, config: list[Any], path: tuple[str | int, ...], value: object, copies: int
) -> None:
    lines = [_planted(_line(), path, value) for _ in range(copies)]
    for index, line in enumerate(lines[1:], start=1):
        if isinstance(line, dict) and isinstance(line.get("name"), str):
            line["name"] += f"-{index}"
    _check_workloads(folder, config, b"\n".join(_json(line) for line in lines))


_seconds = st.integers(0, 10**12) | st.floats(0, 1e12)
_extreme_lines = st.lists(
    st.fixed_dictionaries(
        {
            "namespace": st.just("team"),
            "queue": st.sampled_from(["q", "missing"]),
            "priorityClass": st.sampled_from([None, "high"]),
            "submitAt": _seconds,
            "duration": _seconds,
            "maxExecutionSeconds": st.none() | st.integers(1, 2**31 - 1),
            "podSets": st.lists(
                st.fixed_dictionaries(
                    {
                        "count": st.integers(1, 2**31 - 1),
                        "requests": st.dictionaries(
                            st.sampled_from(["nvidia.com/gpu", "cpu", "memory"]),
                            st.sampled_from(["0", "1", "4", "500m", "1e18", "7Ei", "9223372036854775807"])
                            | st.integers(0, 2**63 - 1),
                        ),
                    }
                ),
                min_size=1,
                max_size=8,
            ),
        }
    ),
    min_size=1,
    max_size=4,
)


@_FUZZ
@given(_extreme_lines)
def test_valid_lines_of_extreme_values_replay_to_strict_json_in_bounded_time(
    folder: Path, config: list[Any], lines: list[dict[str, Any]]
) -> None:
    for index, line in enumerate(lines):
        line["name"] = f"w{index}"
        for number, pod_set in enumerate(line["podSets"]):
            pod_set["name"] = f"p{number}"
    path = _workloads_file(folder, b"\n".join(_json(line) for line in lines))
    read_workloads(path, config)  # every line is within the contract: none is refused
    _check_workloads(folder, config, path.read_bytes())


_NUMBER_TEXTS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "0.5",
    "9" * 4300,
    "9" * 4301,
    "9" * 100_000,
    "1" + "0" * 12,
    "1" + "0" * 13,
    "2147483648",
    '"1"',
    "[]",
    "{}",
    "true",
    "null",
]
# Each numeric field of _line() as json.dumps spells it.
_NUMERIC_FIELDS = {
    "submitAt": '"submitAt": 0',
    "duration": '"duration": 100',
    "maxExecutionSeconds": '"maxExecutionSeconds": 50',
    "count": '"count": 2',
    "minCount": '"minCount": 1',
    "tolerationSeconds": '"tolerationSeconds": 5',
}


@_FUZZ
@given(st.sampled_from(sorted(_NUMERIC_FIELDS)), st.sampled_from(_NUMBER_TEXTS))
def test_any_number_text_in_any_numeric_field_is_replayed_or_refused_in_bounded_time(
    folder: Path, config: list[Any], field: str, number: str
) -> None:
    text = json.dumps(_line())
    assert _NUMERIC_FIELDS[field] in text
    _check_workloads(folder, config, text.replace(_NUMERIC_FIELDS[field], f'"{field}": {number}').encode())


@_FUZZ
@given(
    st.one_of(
        st.binary(max_size=2000),
        st.text(max_size=500).map(str.encode),
        st.lists(_values.map(_json), max_size=4).map(b"\n".join),
        st.tuples(st.sampled_from(["[", '{"a":', '[{"b":']), st.integers(1, 100_000)).map(
            lambda pair: (pair[0] * pair[1]).encode()
        ),
        st.integers(1, 3 << 20).map(lambda size: b" " * size),
        st.sampled_from([b"\xef\xbb\xbf{}", b"\xff\xfe{\x00}\x00", b"{}\r\n{}", b"\x00", b"u_id,\n"]),
    )
)
def test_any_bytes_as_a_workloads_file_are_replayed_or_refused_in_bounded_time(
    folder: Path, config: list[Any], data: bytes
) -> None:
    _check_workloads(folder, config, data)


_TRACE_HEADER = "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status"
_cells = st.one_of(
    st.integers(0, 20).map(str),
    st.sampled_from(
        ["nan", "inf", "-1", "1e3", "\u00b2", "\u0661", "9" * 19, "9" * 5000, "1" + "0" * 12, " 4 ", "", "0x10"]
    ),
    st.text(max_size=12),
)


@_FUZZ
@given(st.lists(st.lists(_cells, min_size=0, max_size=11), max_size=5), st.booleans())
def test_a_trace_with_any_cells_is_replayed_or_refused_in_bounded_time(
    folder: Path, config: list[Any], rows: list[list[str]], valid_first: bool
) -> None:
    text = io.StringIO()
    writer = csv.writer(text)
    if valid_first:
        writer.writerow(["0", "7", "2", "0", "1", "0", "100", "0", "Pass"])
    writer.writerows(rows)
    _check_workloads(folder, config, f"{_TRACE_HEADER}\n{text.getvalue()}".encode())


@_FUZZ
@given(st.binary(max_size=2000) | st.text(max_size=500).map(str.encode))
def test_a_trace_of_any_bytes_is_replayed_or_refused_in_bounded_time(
    folder: Path, config: list[Any], body: bytes
) -> None:
    _check_workloads(folder, config, f"{_TRACE_HEADER}\n".encode() + body)


# Every place of the CONFIG a hostile or careless writer can put a value.
_CONFIG_PATHS: list[tuple[str | int, ...]] = [
    (0,),
    (0, "kind"),
    (0, "apiVersion"),
    (0, "metadata"),
    (0, "metadata", "name"),
    (0, "spec"),
    (0, "spec", "nodeLabels"),
    (1, "metadata", "name"),
    (1, "spec", "cohortName"),
    (1, "spec", "namespaceSelector"),
    (1, "spec", "preemption"),
    (1, "spec", "resourceGroups"),
    (1, "spec", "resourceGroups", 0),
    (1, "spec", "resourceGroups", 0, "coveredResources"),
    (1, "spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"),
    (1, "spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "borrowingLimit"),
    (1, "status"),
    (2, "spec", "parentName"),
    (2, "metadata", "name"),
    (3, "metadata", "namespace"),
    (3, "spec", "clusterQueue"),
    (4, "value"),
    (5, "metadata", "labels"),
    (5, "metadata", "labels", "tier"),
    (6, "fairSharing"),
    (6, "waitForPodsReady"),
    (7,),
]


def _check_config(folder: Path, text: str | bytes) -> None:
    path = folder / "config.yaml"
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
    else:
        path.write_bytes(text)

    def read() -> tuple[list[Any], list[Any]]:
        return load_config(path), []

    _assert_bounded(lambda: _refused_or_replayed(read), text, folder)


def _dumped(documents: Any) -> str:
    if isinstance(documents, list):
        return yaml.safe_dump_all(documents)
    return yaml.safe_dump(documents)


@_FUZZ
@given(st.sampled_from(_CONFIG_PATHS), _values.filter(lambda v: not (isinstance(v, int) and abs(v) > 10**300)))
def test_a_config_with_any_value_anywhere_is_read_or_refused_in_bounded_time(
    folder: Path, path: tuple[str | int, ...], value: object
) -> None:
    _check_config(folder, _dumped(_planted(_CONFIG, path, value)))


def _alias_bomb(levels: int, width: int, where: str) -> str:
    """A billion laughs: ``levels`` anchors, each ``width`` aliases of the one before, the last one used at
    ``where``."""
    anchors = "\n".join(
        [f"  x0: &x0 [{', '.join(['lol'] * width)}]"]
        + [f"  x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * width)}]" for i in range(1, levels)]
    )
    top = f"*x{levels - 1}"
    flavor = f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nhide:\n{anchors}\nmetadata:\n  name: gpu\n"
    merges = "".join(
        f"m{i}: &m{i} {{<<: [{', '.join(['*a' if i == 0 else f'*m{i - 1}'] * width)}], k{i}: 1}}\n"
        for i in range(levels)
    )
    return {
        "kind": f"apiVersion: v1\nhide:\n{anchors}\nkind: {top}\n",
        "labels": f"{flavor}  labels: {{a: {top}}}\n",
        "managedFields": f"{flavor}  managedFields: {top}\n",
        "configuration": f"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmetrics:\n{anchors}\n",
        "merge": f"a: &a {{k0: 1, k1: 2}}\n{merges}",
    }[where]


_YAML_SNIPPETS = [
    "!!int abc",
    "!!float abc",
    "!!bool maybe",
    "!!timestamp never",
    "2001-13-45",
    "2001-02-30 25:61:61",
    "!!binary '@@@'",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!omap [a: 1, b: 2]",
    "!!omap [1, 2]",
    "!!pairs [a: 1]",
    "!!python/object:os.system {}",
    "!!str [a]",
    ".nan",
    ".inf",
    "-.inf",
    "1.0e+99999",
    "0b" + "1" * 10_000,
    "0x" + "f" * 10_000,
    "0" + "7" * 10_000,
    "9" * 5000,
    ":".join(["1"] * 5000),
    ":".join(["1"] * 5000) + ".5",
    "*undefined",
    "&a [*a]",
    "&a {k: *a}",
    "{? [a, b] : c}",
    "{a: 1, a: 2}",
    "{<<: 5}",
    "{<<: [1]}",
    "\x00",
    '"\\ud800"',
    "'\u2028'",
    "[" * 100_000,
    "{a: " * 10_000,
    "- " * 5_000 + "x",
    "%YAML 1.1\n---\nx",
    "%TAG ! tag:x,2000:\n---\n!y z",
    "--- |\n  text\n...\n--- >-\n folded",
]


@_FUZZ
@given(
    st.one_of(
        st.builds(
            _alias_bomb,
            st.integers(1, 12),
            st.integers(1, 12),
            st.sampled_from(["kind", "labels", "managedFields", "configuration", "merge"]),
        ),
        st.tuples(st.sampled_from(_CONFIG_PATHS), st.sampled_from(_YAML_SNIPPETS)).map(
            lambda pair: _dumped(_planted(_CONFIG, pair[0], "PLANT")).replace("PLANT", pair[1].replace("\n", " "), 1)
        ),
        st.sampled_from(_YAML_SNIPPETS),
        st.text(max_size=500),
        st.binary(max_size=2000),
    )
)
def test_any_yaml_as_a_config_is_read_or_refused_in_bounded_time(folder: Path, text: str | bytes) -> None:
    _check_config(folder, text)
