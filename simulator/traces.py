"""Philly and Helios job traces (``../shared/traces``) as ``kuota simulate`` workloads.

Input: the CSV columns ``u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status``, one
job a row, in submission order. How each row becomes a workload:

- submission time: ``interval`` is the gap since the previous row's submission, so ``submitAt`` is the
  running sum of ``interval`` over the file, the first row counted from time 0. Rows left out (below) still
  advance the clock, so the kept rows arrive exactly when they did in the trace.
- name ``<prefix>-<u_id>``; queue: the user id hashed onto the given LocalQueues
  (:mod:`kuota.simulator.queue_mapping`); ``duration`` = ``run_time``; no priority class unless one is
  given; no maximum execution time; one pod set ``main``.
- pods: ``gpu_num`` spread evenly over ``node_num`` pods (``count = node_num``, each asks
  ``gpu_num / node_num`` ``nvidia.com/gpu``); a row whose GPUs do not divide evenly is an error, since
  GPUs cannot be split.
- cpu per pod: the recorded ``cpu_num / node_num``, rounded up to whole cores so the pods together ask at
  least what the job asked. Where the trace records no cpu (Philly's ``cpu_num`` is always 0), 4 cores per
  GPU, the ratio of the guide's fine-tune (16 cpu for 4 H100).
- memory per pod: 32Gi per GPU (the guide's 128Gi for 4 GPUs); a pod without GPUs gets 8Gi per core.
- rows with 0 GPUs (28% of Helios; none in Philly) are CPU jobs. By default they are left out
  (``CpuOnlyRows.SKIP``): kuota queues GPU jobs, and those jobs ran beside the GPU queues, not in them. With
  ``CpuOnlyRows.KEEP`` they become cpu+memory workloads (at least 1 core), for configs whose queues meet
  CPU jobs too.
- ``new_status`` (Pass/Failed/Killed) is not carried: the contract has no field for it, and a failed job
  held its GPUs for its ``run_time`` all the same. :class:`TraceRow` keeps it for callers that need it.
  ``wall_time`` is always 0 in these files and is ignored.

Nothing is read here but the file a caller names.
"""

from __future__ import annotations

import csv
import enum
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kuota.simulator.errors import SourceSpecError, TraceFormatError
from kuota.simulator.lines import WorkloadLine
from kuota.simulator.queue_mapping import QueueTarget, check_queues, queue_for_user

TRACE_COLUMNS = (
    "u_id",
    "user",
    "gpu_num",
    "cpu_num",
    "node_num",
    "interval",
    "run_time",
    "wall_time",
    "new_status",
)
_INTEGER_COLUMNS = ("u_id", "gpu_num", "cpu_num", "node_num", "interval", "run_time")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class CpuOnlyRows(enum.StrEnum):
    """What to do with rows that ask for no GPU."""

    SKIP = "skip"
    KEEP = "keep"


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One job of a trace, as recorded."""

    line: int  # 1-based line in the file, for messages
    job_id: int  # u_id
    user: str
    gpus: int
    cpus: int
    nodes: int
    interval: int
    run_time: int
    status: str


@dataclass(frozen=True, slots=True)
class TraceOptions:
    name_prefix: str = "job"
    priority_class: str | None = None
    cpu_only_rows: CpuOnlyRows = CpuOnlyRows.SKIP
    cpu_per_gpu: int = 4
    memory_gib_per_gpu: int = 32
    memory_gib_per_cpu: int = 8

    def __post_init__(self) -> None:
        if not _DNS_LABEL.match(self.name_prefix):
            raise SourceSpecError(
                f"name_prefix {self.name_prefix!r}: use lower-case letters, digits and '-', "
                "starting and ending with a letter or digit"
            )
        for name in ("cpu_per_gpu", "memory_gib_per_gpu", "memory_gib_per_cpu"):
            if getattr(self, name) < 1:
                raise SourceSpecError(f"{name} must be at least 1, got {getattr(self, name)}")


@dataclass(frozen=True, slots=True)
class ConvertedTrace:
    """A whole trace converted: the workloads in submission order and what the conversion did."""

    workloads: tuple[WorkloadLine, ...]
    rows: int
    cpu_only_rows_skipped: int
    queue_of_user: Mapping[str, QueueTarget] = field(repr=False)


def read_trace(path: Path) -> Iterator[TraceRow]:
    """The rows of a trace CSV, checked, in file order."""
    with path.open(newline="") as stream:
        reader = csv.DictReader(stream)
        missing = [column for column in TRACE_COLUMNS if column not in (reader.fieldnames or ())]
        if missing:
            raise TraceFormatError(
                f"{path}: header lacks column(s) {', '.join(missing)}; a trace needs {','.join(TRACE_COLUMNS)}"
            )
        for record in reader:
            yield _row(path, reader.line_num, record)


def _row(path: Path, line: int, record: Mapping[str, str | None]) -> TraceRow:
    values: dict[str, int] = {}
    for column in _INTEGER_COLUMNS:
        text = (record.get(column) or "").strip()
        if not text.isdigit():
            raise TraceFormatError(f"{path}:{line}: column {column} is {text!r}; it must be a whole number >= 0")
        values[column] = int(text)
    user = (record.get("user") or "").strip()
    if not user:
        raise TraceFormatError(f"{path}:{line}: column user is empty; every job needs a user id")
    if values["node_num"] < 1:
        raise TraceFormatError(f"{path}:{line}: column node_num is 0; a job runs on at least one node")
    if values["gpu_num"] % values["node_num"]:
        raise TraceFormatError(
            f"{path}:{line}: gpu_num {values['gpu_num']} does not divide over node_num {values['node_num']} "
            "pods; fix the row or drop it (GPUs cannot be split)"
        )
    if values["run_time"] < 1:
        raise TraceFormatError(f"{path}:{line}: column run_time is 0; a job runs at least 1 second")
    return TraceRow(
        line=line,
        job_id=values["u_id"],
        user=user,
        gpus=values["gpu_num"],
        cpus=values["cpu_num"],
        nodes=values["node_num"],
        interval=values["interval"],
        run_time=values["run_time"],
        status=(record.get("new_status") or "").strip(),
    )


def trace_workloads(
    rows: Iterable[TraceRow], queues: Sequence[QueueTarget], options: TraceOptions = TraceOptions()
) -> Iterator[WorkloadLine]:
    """The workloads of ``rows``, lazily, in submission order (the rules are in the module docstring)."""
    check_queues(queues)
    queue_of_user: dict[str, QueueTarget] = {}
    seen_ids: dict[int, int] = {}
    submit_at = 0
    for row in rows:
        submit_at += row.interval
        if row.job_id in seen_ids:
            raise TraceFormatError(
                f"line {row.line}: u_id {row.job_id} repeats line {seen_ids[row.job_id]}; "
                "workload names come from u_id, so each must be unique"
            )
        seen_ids[row.job_id] = row.line
        if row.gpus == 0 and options.cpu_only_rows is CpuOnlyRows.SKIP:
            continue
        target = queue_of_user.get(row.user)
        if target is None:
            target = queue_of_user[row.user] = queue_for_user(row.user, queues)
        yield _workload(row, submit_at, target, options)


def convert_trace(path: Path, queues: Sequence[QueueTarget], options: TraceOptions = TraceOptions()) -> ConvertedTrace:
    """Read and convert a whole trace file (15k rows: a few MB of dicts)."""
    rows = list(read_trace(path))
    workloads = tuple(trace_workloads(rows, queues, options))
    skipped = sum(1 for row in rows if row.gpus == 0) if options.cpu_only_rows is CpuOnlyRows.SKIP else 0
    users = sorted({row.user for row in rows if row.gpus > 0 or options.cpu_only_rows is CpuOnlyRows.KEEP})
    return ConvertedTrace(
        workloads=workloads,
        rows=len(rows),
        cpu_only_rows_skipped=skipped,
        queue_of_user={user: queue_for_user(user, queues) for user in users},
    )


def _workload(row: TraceRow, submit_at: int, target: QueueTarget, options: TraceOptions) -> WorkloadLine:
    gpus_per_pod = row.gpus // row.nodes
    # ceiling division: the pods together ask at least the job's recorded cores
    cpus_per_pod = -(-row.cpus // row.nodes) if row.cpus else max(1, gpus_per_pod * options.cpu_per_gpu)
    requests: dict[str, str] = {}
    if gpus_per_pod:
        requests["nvidia.com/gpu"] = str(gpus_per_pod)
        memory_gib = gpus_per_pod * options.memory_gib_per_gpu
    else:
        memory_gib = cpus_per_pod * options.memory_gib_per_cpu
    requests["cpu"] = str(cpus_per_pod)
    requests["memory"] = f"{memory_gib}Gi"
    return {
        "name": f"{options.name_prefix}-{row.job_id}",
        "namespace": target.namespace,
        "queue": target.queue,
        "priorityClass": options.priority_class,
        "submitAt": submit_at,
        "duration": row.run_time,
        "maxExecutionSeconds": None,
        "podSets": [{"name": "main", "count": row.nodes, "requests": requests, "nodeSelector": {}, "tolerations": []}],
    }
