"""``report.json``: every figure of the report, for automation (missing data is ``null``, never 0)."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any

from kuota.report.figures.schema import SCHEMA_VERSION, Report


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, float):
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return None if math.isnan(value) else value
    return value


def to_json(report: Report) -> dict[str, Any]:
    body: dict[str, Any] = _plain(report)
    body["schemaVersion"] = SCHEMA_VERSION
    body["window"]["hours"] = report.window.hours
    body["missing"] = [{"metric": metric, "consequence": why} for metric, why in report.missing]
    body["empty"] = report.empty
    return body


def render(report: Report) -> str:
    return json.dumps(to_json(report), indent=2, sort_keys=False, allow_nan=False) + "\n"
