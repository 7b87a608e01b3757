"""The one duration grammar of every flag and config field: Go's (``90s``, ``30m``, ``1h30m``, ``1.5h``,
``250ms``), plus ``d`` (24 h) and ``w`` (7 d) for report windows. Pure; the engine reads Configuration
timeouts through it too."""

from __future__ import annotations

import argparse
import re

from kuota.errors import KuotaError

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)")


class DurationError(KuotaError, ValueError):
    """A text is not a duration; the message quotes it and shows the grammar."""


def parse_duration(text: str) -> float:
    """Seconds in ``text``: one or more number-and-unit terms (``1h30m``); ``0`` alone is zero. Negative
    durations are refused: nothing kuota times can last less than nothing."""
    stripped = text.strip()
    if stripped == "0":
        return 0.0
    terms = _TERM.findall(stripped)
    if not stripped or _TERM.sub("", stripped):
        raise DurationError(
            f"{text!r} is not a duration: write numbers with units ns, us, ms, s, m, h, d or w, e.g. 90s, 1h30m, 7d"
        )
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in terms)


def positive_seconds(text: str) -> float:
    """argparse's ``type`` for flags that always took seconds: a duration, or a bare number of seconds
    (``"1.5"``), above zero; anything else is an argparse error that quotes it."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_duration(text)
        except DurationError as error:
            raise argparse.ArgumentTypeError(str(error)) from error
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value
