"""JSON on the hot paths (the API server's answers and watch streams, admission and conversion reviews, the
kept copies of watched objects): orjson, several times faster than the standard library at both ends, but for
the copies kept (:func:`dumps_to_keep`). A text orjson refuses is read again by the standard library, so a
refusal says why in the words users know, and the few texts only orjson refuses (a lone surrogate escape) read
as before."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import orjson


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def loads(text: bytes | str) -> Any:
    """``text`` as strict JSON (no NaN or Infinity). A refused text raises ValueError (a UnicodeDecodeError
    for bytes that are not UTF-8) saying why, or RecursionError when it is nested too deeply."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text, parse_constant=_reject_constant)


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON (no spaces, non-ASCII characters as they are), for a body sent at once."""
    return orjson.dumps(value)


def dumps_to_keep(value: Any) -> bytes:
    """:func:`dumps`' text for a copy held for long (the manager's compact copies of watched objects), by the
    standard library: held by the thousand, orjson's results left the manager 40 MiB larger at 10,000 Workloads
    (147 against 108 MiB, ``benchmarks/manager_admission.py``), for a few percent of its CPU."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
