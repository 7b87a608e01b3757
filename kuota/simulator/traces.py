"""Philly and Helios job traces (``tests/data/traces``) as ``kuota simulate`` workloads.

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
from kuota.simulator.limits import MAX_LINE_BYTES, MAX_SECONDS
from kuota.simulator.line_reading import numbered_lines
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
# ASCII digits only: str.isdigit() takes "²", which int() refuses; 18 digits always fit in an int64.
_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")
# Far beyond any job, and small enough that a pod's requests (32Gi a GPU) stay within a quantity's int64.
_LARGEST_JOB = 2**20
_HIGHEST = {
    "gpu_num": (_LARGEST_JOB, f"a job asks at most {_LARGEST_JOB} GPUs here"),
    "cpu_num": (_LARGEST_JOB, f"a job asks at most {_LARGEST_JOB} cpus here"),
    "node_num": (_LARGEST_JOB, f"a job runs on at most {_LARGEST_JOB} nodes here"),
    "interval": (MAX_SECONDS, f"an interval is at most {MAX_SECONDS} seconds"),
    "run_time": (MAX_SECONDS, f"a run time is at most {MAX_SECONDS} seconds"),
}
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
    """The rows of a trace CSV, checked, in file order; read one bounded line at a time."""
    try:
        stream = path.open("rb")
    except OSError as error:
        raise TraceFormatError(f"{path}: cannot read the trace: {error.strerror or error}") from error
    with stream:
        yield from read_trace_lines(numbered_lines(stream, str(path)), str(path))


def read_trace_lines(lines: Iterable[tuple[int, str]], source: str) -> Iterator[TraceRow]:
    """The rows of a trace CSV given as numbered lines (:func:`kuota.simulator.line_reading.numbered_lines`),
    checked, in order; ``source`` names the file in errors."""
    records = _RecordLines(lines, source)
    reader = csv.DictReader(records)
    try:
        missing = [column for column in TRACE_COLUMNS if column not in (reader.fieldnames or ())]
        if missing:
            raise TraceFormatError(
                f"{source}: header lacks column(s) {', '.join(missing)}; a trace needs {','.join(TRACE_COLUMNS)}"
            )
        for record in reader:
            records.record_read()
            yield _row(source, records.line, record)
    except csv.Error as error:
        raise TraceFormatError(f"{source}:{records.line}: not CSV: {error}") from error


class _RecordLines:
    """The lines the CSV reader reads, refusing a record (one row, with any quoted newlines in it) longer than
    ``MAX_LINE_BYTES``, so a quoted field cannot gather the rest of the file into one row."""

    def __init__(self, lines: Iterable[tuple[int, str]], source: str) -> None:
        self._lines = iter(lines)
        self._source = source
        self._pending = 0
        self.line = 0

    def __iter__(self) -> _RecordLines:
        return self

    def __next__(self) -> str:
        self.line, text = next(self._lines)
        self._pending += len(text)
        if self._pending > MAX_LINE_BYTES:
            raise TraceFormatError(f"{self._source}:{self.line}: a row longer than {MAX_LINE_BYTES} characters")
        return text

    def record_read(self) -> None:
        self._pending = 0


def _row(source: str, line: int, record: Mapping[str | None, object]) -> TraceRow:
    where = f"{source}:{line}"
    values: dict[str, int] = {}
    for column in _INTEGER_COLUMNS:
        text = record.get(column)
        text = text.strip() if isinstance(text, str) else ""
        if not _WHOLE_NUMBER.fullmatch(text):
            raise TraceFormatError(
                f"{where}: column {column} is {_show(text)}; it must be a whole number >= 0 of at most 18 digits"
            )
        value = values[column] = int(text)
        highest = _HIGHEST.get(column)
        if highest is not None and value > highest[0]:
            raise TraceFormatError(f"{where}: column {column} is {value}; {highest[1]}")
    user = record.get("user")
    user = user.strip() if isinstance(user, str) else ""
    if not user:
        raise TraceFormatError(f"{where}: column user is empty; every job needs a user id")
    if values["node_num"] < 1:
        raise TraceFormatError(f"{where}: column node_num is 0; a job runs on at least one node")
    if values["gpu_num"] % values["node_num"]:
        raise TraceFormatError(
            f"{where}: gpu_num {values['gpu_num']} does not divide over node_num {values['node_num']} "
            "pods; fix the row or drop it (GPUs cannot be split)"
        )
    if values["run_time"] < 1:
        raise TraceFormatError(f"{where}: column run_time is 0; a job runs at least 1 second")
    status = record.get("new_status")
    return TraceRow(
        line=line,
        job_id=values["u_id"],
        user=user,
        gpus=values["gpu_num"],
        cpus=values["cpu_num"],
        nodes=values["node_num"],
        interval=values["interval"],
        run_time=values["run_time"],
        status=status.strip() if isinstance(status, str) else "",
    )


def _show(text: str) -> str:
    shown = repr(text)
    return shown if len(shown) <= 40 else f"{shown[:30]}... ({len(text)} characters)"


def trace_workloads(
    rows: Iterable[TraceRow],
    queues: Sequence[QueueTarget],
    options: TraceOptions = TraceOptions(),
    *,
    source: str | None = None,
) -> Iterator[WorkloadLine]:
    """The workloads of ``rows``, lazily, in submission order (the rules are in the module docstring);
    ``source`` names the file in errors."""
    check_queues(queues)
    queue_of_user: dict[str, QueueTarget] = {}
    seen_ids: dict[int, int] = {}
    submit_at = 0
    for row in rows:
        where = f"{source}:{row.line}" if source is not None else f"line {row.line}"
        submit_at += row.interval
        if submit_at > MAX_SECONDS:
            raise TraceFormatError(
                f"{where}: the intervals add up to {submit_at} seconds, beyond the replay's {MAX_SECONDS}"
            )
        if row.job_id in seen_ids:
            raise TraceFormatError(
                f"{where}: u_id {row.job_id} repeats line {seen_ids[row.job_id]}; "
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
