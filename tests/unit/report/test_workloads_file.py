"""``--workloads FILE``: read and checked before any query; a bad item is left out with a counted warning
naming it, a file that is no Workload List is exit 2; read a chunk at a time, in memory bounded by what
the history keeps, not by the file's size."""

from __future__ import annotations

import io
import json
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kuota.report.errors import ReportInputError
from kuota.report.sources.workload_dump import read_dump, read_stream
from kuota.report.sources.workload_history import NOT_A_WORKLOAD, job_history, read_workloads
from tests.unit.report.conftest import END, every_series_present, run_report, serving

START = END - 3 * 3600


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).isoformat().replace("+00:00", "Z")


def _workload(name: str, *, gpus: object = "8", count: object = 1, created: object = None) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "creationTimestamp": _iso(START + 60) if created is None else created,
            "managedFields": [{"manager": "kueue", "fieldsV1": {"f:status": {}}}],
        },
        "spec": {
            "queueName": "default",
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": gpus}}}]}
                    },
                }
            ],
        },
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": _iso(START + 120)},
                {"type": "Finished", "status": "True", "reason": "Failed", "lastTransitionTime": _iso(START + 3720)},
            ]
        },
    }


def _dump(path: Path, items: list[Any]) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}), encoding="utf-8")
    return path


def test_bad_records_are_left_out_with_a_counted_warning_before_any_query(tmp_path: Path) -> None:
    metadata_as_list = _workload("listed")
    metadata_as_list["metadata"] = [{"name": "listed"}]
    items = [
        _workload("good"),
        _workload("yesterday", created="yesterday"),
        _workload("half-a-pod", count="500m"),
        metadata_as_list,
        _workload("also-half", count="500m"),
        _workload("milli-gpus", gpus="500m"),  # a quantity: rounded up to one GPU, as Kueue counts it
    ]
    with serving(every_series_present) as prometheus:
        run = run_report(
            "--prometheus", prometheus.url, "--workloads", str(_dump(tmp_path / "w.json", items)), out=tmp_path / "out"
        )
    assert run.exit_code == 0, run.stderr
    lines = run.stderr.splitlines()
    warnings = [line for line in lines if "warning:" in line]
    assert warnings == [
        f"kuota report: warning: --workloads {tmp_path / 'w.json'}: left out 1 of 6 item(s): "
        "metadata.creationTimestamp is not an RFC 3339 time with a zone "
        "(first: items[1] 'ml'/'yesterday': metadata.creationTimestamp is 'yesterday')",
        f"kuota report: warning: --workloads {tmp_path / 'w.json'}: left out 2 of 6 item(s): "
        "spec.podSets[].count is not a whole number from 1 to 2147483647 "
        "(first: items[2] 'ml'/'half-a-pod': spec.podSets[0].count is '500m')",
        f"kuota report: warning: --workloads {tmp_path / 'w.json'}: left out 1 of 6 item(s): "
        "metadata is not an object (first: items[3]: metadata is [{'name': 'listed'}])",
    ]
    first_query = next(i for i, line in enumerate(lines) if "looking for GPU and queue series" in line)
    assert max(lines.index(w) for w in warnings) < first_query
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["cluster"]["failed_gpu_hours"] == pytest.approx(8 + 1)
    assert (
        "2 item(s) left out of the job history: spec.podSets[].count is not a whole number from 1 to 2147483647."
        in (report["notes"])
    )


@pytest.mark.parametrize(
    ("content", "fault"),
    [
        ("[]", "the file is not a JSON object"),
        ('{"kind": "List"}', "no 'items' list"),
        ('{"items": {"a": 1}}', "'items' is not a list"),
        ('{"items": [], "items": []}', "'items' is given twice"),
        ('{"items": [{"a": 1},]}', "not JSON (Expecting value)"),
        ('{"items": [NaN]}', "not JSON (NaN is not JSON)"),
        ('{"items": [' + "[" * 100_000 + "]}", "a value nested too deeply"),
        ('{"items": []} {"items": []}', "more after the List's closing '}'"),
        ("", "the file is not a JSON object"),
    ],
)
def test_a_file_that_is_not_a_workload_list_is_exit_2_before_any_query(
    content: str, fault: str, tmp_path: Path
) -> None:
    dump = tmp_path / "w.json"
    dump.write_text(content, encoding="utf-8")
    with serving(every_series_present) as prometheus:
        run = run_report("--prometheus", prometheus.url, "--workloads", str(dump), out=tmp_path / "out")
        assert prometheus.queries == []
    assert run.exit_code == 2
    line = run.assert_one_error_line()
    assert f"--workloads {dump} is not kubectl's JSON List output: {fault}" in line
    assert "kubectl get workloads.kueue.x-k8s.io -A -o json" in line


def test_a_list_of_other_kinds_is_exit_2_and_other_kinds_among_workloads_are_counted_out(tmp_path: Path) -> None:
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}} for i in range(3)]
    with pytest.raises(ReportInputError, match=r"holds no kueue\.x-k8s\.io Workload among its 3 items"):
        read_dump(_dump(tmp_path / "pods.json", pods))
    mixed = read_dump(_dump(tmp_path / "mixed.json", [*pods, _workload("w")]))
    assert [w.name for w in mixed.workloads] == ["w"]
    assert mixed.skipped == {NOT_A_WORKLOAD: 3}


def test_unreadable_bytes_and_missing_files_are_exit_2(tmp_path: Path) -> None:
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"items": [{"metadata": {"name": "caf\xe9"}}]}')
    with pytest.raises(ReportInputError, match="cannot be read: 'utf-8' codec can't decode"):
        read_dump(latin)
    with pytest.raises(ReportInputError, match="cannot be read: No such file or directory"):
        read_dump(tmp_path / "absent.json")


@pytest.mark.parametrize("chunk_chars", [1, 2, 3, 7, 64])
def test_a_dump_reads_the_same_whatever_the_chunk_boundaries(chunk_chars: int) -> None:
    text = json.dumps(
        {"apiVersion": "v1", "items": [_workload(f"w{i}", count=12345 + i) for i in range(3)], "trailing": 1.5e3},
        indent=2,
    )
    streamed = read_stream(io.StringIO(text), "test", chunk_chars=chunk_chars)
    assert streamed == read_workloads(json.loads(text)["items"])
    assert [p.count for w in streamed.workloads for p in w.pod_sets] == [12345, 12346, 12347]


def test_repeated_names_are_read_once() -> None:
    retained = read_workloads([_workload("w"), _workload("w")])
    assert len(retained.workloads) == 1
    assert retained.skipped == {"repeats an earlier item's namespace and name": 1}


def _peak_reading(dump: Path) -> int:
    tracemalloc.start()
    try:
        history = job_history(read_dump(dump), START, END)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(history.records) == 1000
    return peak


def _padded_dump(path: Path, padding: int) -> Path:
    """1000 Workloads, each with ``padding`` characters of managedFields the history does not read."""
    with path.open("w", encoding="utf-8") as out:
        out.write('{"apiVersion": "v1", "kind": "List", "items": [')
        for i in range(1000):
            item = _workload(f"w-{i}")
            item["metadata"]["managedFields"] = [{"manager": "kueue", "fieldsV1": {"f:x": "y" * padding}}]
            out.write(("," if i else "") + json.dumps(item, indent=4))
        out.write("]}")
    return path


def test_a_dump_is_read_in_memory_bounded_by_the_history_not_by_the_file(tmp_path: Path) -> None:
    small = _padded_dump(tmp_path / "small.json", 1_000)
    large = _padded_dump(tmp_path / "large.json", 40_000)
    grown = large.stat().st_size - small.stat().st_size
    assert grown > 35 * 2**20
    # what the file adds is its read window (a chunk of about 1 MiB, twice while it is joined), not the file
    assert _peak_reading(large) - _peak_reading(small) < 4 * 2**20


SEED = Path(__file__).resolve().parents[3] / "kuota" / "simulator" / "seed"


def test_queues_the_whatif_cannot_replay_fail_before_any_query(tmp_path: Path) -> None:
    config = tmp_path / "queues.yaml"
    broken = (
        (SEED / "clusterqueue-research.yaml")
        .read_text(encoding="utf-8")
        .replace("nominalQuota: 8", "nominalQuota: lots")
    )
    config.write_text(broken, encoding="utf-8")
    dump = _dump(tmp_path / "w.json", [_workload("w")])
    with serving(every_series_present) as prometheus:
        run = run_report(
            "--prometheus", prometheus.url, "--config", str(config), "--workloads", str(dump), out=tmp_path / "out"
        )
        assert prometheus.queries == []
    assert run.exit_code == 4
    assert "kuota simulate (reading the queues and the history)" in run.assert_one_error_line()


def test_a_history_with_a_non_finite_submission_fails_before_any_query(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    record = {"name": "w", "namespace": "research", "queue": "research", "submitAt": 0, "duration": 60, "podSets": []}
    history.write_text(json.dumps(record).replace('"submitAt": 0', '"submitAt": NaN') + "\n", encoding="utf-8")
    with serving(every_series_present) as prometheus:
        run = run_report(
            "--prometheus", prometheus.url, "--config", str(SEED), "--history", str(history), out=tmp_path / "out"
        )
        assert prometheus.queries == []
    assert run.exit_code == 4
    line = run.assert_one_error_line()
    assert str(history) in line and "NaN" in line


def test_a_serving_workload_is_counted_on_its_own_line_not_as_a_failed_job(tmp_path: Path) -> None:
    crashed_replica = _workload("pod-llm-7d9f-0-1a2b3")
    crashed_replica["metadata"]["annotations"] = {"kuota.dev/serving": "true"}
    items = [_workload("finetune"), crashed_replica]
    with serving(every_series_present) as prometheus:
        run = run_report(
            "--prometheus", prometheus.url, "--workloads", str(_dump(tmp_path / "w.json", items)), out=tmp_path / "out"
        )
    assert run.exit_code == 0, run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["cluster"]["failed_gpu_hours"] == pytest.approx(8)  # the batch job's hour alone
    assert report["cluster"]["serving_gpu_hours"] == pytest.approx(8)
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "| GPU-hours held by serving (Deployments, StatefulSets) | 8" in markdown
