"""``--previous PATH``: the figures of an earlier ``report.json`` that the week-over-week section compares with.

The file is user input: it is read only up to ``MAX_BYTES`` (a report of a thousand teams is a few MB), decoded
with NaN and Infinity refused, and only the fields compared are kept, each checked for its type. Anything else
(not JSON, nested past the decoder's depth, another schema, a field of the wrong type) is one
:class:`~kuota.report.errors.ReportInputError` naming the field, before any query runs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from kuota.report.errors import ReportInputError
from kuota.report.figures.week_over_week import PreviousFigures, PreviousReport
from kuota.report.sources.quoting import quoted

MAX_BYTES = 64 << 20
SCHEMA_VERSION = 1  # the report.json versions this reader understands
MAX_TEAMS = 100_000
_HINT = "pass a report.json that kuota report wrote"


class _Fields:
    def __init__(self, source: Path) -> None:
        self._source = source

    def refuse(self, path: str, what: str) -> NoReturn:
        raise ReportInputError(f"--previous {self._source}: {path} {what}; {_HINT}")

    def mapping(self, value: object, path: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            self.refuse(path, f"is {quoted(value)}, not an object")
        return value

    def maybe_object(self, value: object, path: str) -> Mapping[str, Any] | None:
        return None if value is None else self.mapping(value, path)

    def number(self, value: object, path: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            self.refuse(path, f"is {quoted(value)}, not a number or null")
        return float(value)

    def text(self, value: object, path: str) -> str:
        if not isinstance(value, str):
            self.refuse(path, f"is {quoted(value)}, not a string")
        return value

    def maybe_text(self, value: object, path: str) -> str | None:
        return None if value is None else self.text(value, path)


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _figures(fields: _Fields, body: Mapping[str, Any], path: str, utilization_key: str) -> PreviousFigures:
    utilization = body.get(utilization_key)
    if utilization_key == "utilization":  # a team's: an object with its average
        found = fields.maybe_object(utilization, f"{path}.utilization")
        utilization = found.get("average_percent") if found is not None else None
    queueing = fields.maybe_object(body.get("queueing"), f"{path}.queueing")
    idle_cost = fields.maybe_object(body.get("idle_cost"), f"{path}.idle_cost")
    idle_dollars = None
    if idle_cost is not None:
        dollars = fields.mapping(idle_cost.get("dollars"), f"{path}.idle_cost.dollars")
        values = [fields.number(v, f"{path}.idle_cost.dollars.{quoted(k)}") for k, v in list(dollars.items())[:8]]
        idle_dollars = sum(v for v in values if v is not None)
    verdict = fields.maybe_object(body.get("verdict"), f"{path}.verdict")
    return PreviousFigures(
        utilization_percent=fields.number(utilization, f"{path}.utilization"),
        wait_p50_s=fields.number(queueing.get("wait_p50_s"), f"{path}.queueing.wait_p50_s") if queueing else None,
        wait_p95_s=fields.number(queueing.get("wait_p95_s"), f"{path}.queueing.wait_p95_s") if queueing else None,
        idle_cost_dollars=idle_dollars,
        verdict=fields.maybe_text(verdict.get("quadrant"), f"{path}.verdict.quadrant") if verdict else None,
    )


def read_previous(path: Path) -> PreviousReport:
    """The figures of a previous report.json (see the module's docstring)."""
    fields = _Fields(path)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_BYTES + 1)
    except OSError as error:
        raise ReportInputError(f"--previous {path} cannot be read: {error.strerror or error}") from error
    if len(raw) > MAX_BYTES:
        raise ReportInputError(f"--previous {path} is larger than {MAX_BYTES >> 20} MiB, more than any report.json")
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        shown = str(error)[:120] if not isinstance(error, RecursionError) else "nested too deeply"
        raise ReportInputError(f"--previous {path} is not JSON: {shown}; {_HINT}") from error
    top = fields.mapping(body, "the document")
    version = top.get("schemaVersion")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        fields.refuse("schemaVersion", f"is {quoted(version)}, not {SCHEMA_VERSION}")
    window = fields.mapping(top.get("window"), "window")
    start, end = fields.number(window.get("start"), "window.start"), fields.number(window.get("end"), "window.end")
    cluster = fields.mapping(top.get("cluster"), "cluster")
    teams_list = top.get("teams")
    if not isinstance(teams_list, list):
        fields.refuse("teams", f"is {quoted(teams_list)}, not a list")
    if len(teams_list) > MAX_TEAMS:
        fields.refuse("teams", f"has {len(teams_list)} entries, more than {MAX_TEAMS}")
    teams: dict[str, PreviousFigures] = {}
    for index, raw_team in enumerate(teams_list):
        team = fields.mapping(raw_team, f"teams[{index}]")
        name = fields.text(team.get("name"), f"teams[{index}].name")
        if name in teams:
            fields.refuse(f"teams[{index}].name", f"{quoted(name)} repeats an earlier team's")
        teams[name] = _figures(fields, team, f"teams[{index}]", "utilization")
    return PreviousReport(
        window=_describe(start, end),
        cluster=_figures(fields, cluster, "cluster", "utilization_average_percent"),
        teams=teams,
    )


def _describe(start: float | None, end: float | None) -> str:
    def moment(value: float | None) -> str:
        if value is None:
            return "?"
        try:
            return datetime.fromtimestamp(value, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
        except (OverflowError, OSError, ValueError):
            return "?"

    return f"{moment(start)} to {moment(end)}"
