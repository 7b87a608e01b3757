"""One duration grammar (Go's, plus d and w) and one HOST:PORT parser, for every flag and config field."""

from __future__ import annotations

import argparse

import pytest

from kuota.addresses import AddressError, parse_host_port
from kuota.durations import DurationError, parse_duration, positive_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("30m", 1800.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("250ms", 0.25),
        ("7d", 604800.0),
        ("2w", 1209600.0),
        ("1w2d3h4m5s", 604800 + 2 * 86400 + 3 * 3600 + 4 * 60 + 5),
        ("0", 0.0),
        (" 192h ", 691200.0),
    ],
)
def test_go_durations_with_days_and_weeks(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "7", "7 days", "-5m", "1h-30m", "h", "1.5.2h", "1y", "5M"])
def test_anything_else_is_refused_with_the_grammar(text: str) -> None:
    with pytest.raises(DurationError, match=r"is not a duration: write numbers with units"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        (":9443", ("0.0.0.0", 9443)),
        ("0.0.0.0:9443", ("0.0.0.0", 9443)),
        ("127.0.0.1:8080", ("127.0.0.1", 8080)),
        ("localhost:9400", ("localhost", 9400)),
        ("[::1]:9443", ("::1", 9443)),
        ("[::]:0", ("::", 0)),
    ],
)
def test_host_port_forms(text: str, address: tuple[str, int]) -> None:
    assert parse_host_port(text) == address


@pytest.mark.parametrize("text", ["9443", "::1:9443", "host:", "host:port", ":70000", "[::1]9443", "a b:1"])
def test_a_bad_address_is_refused_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(AddressError, match=r"is not HOST:PORT: write :9443"):
        parse_host_port(text)


@pytest.mark.parametrize(("text", "seconds"), [("15", 15.0), ("1.5", 1.5), ("15s", 15.0), ("2m", 120.0)])
def test_flags_that_took_seconds_take_bare_seconds_or_a_duration(text: str, seconds: float) -> None:
    assert positive_seconds(text) == seconds


@pytest.mark.parametrize("text", ["0", "-1", "nan", "0s", "soon"])
def test_a_flag_duration_must_be_positive(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=repr(text)):
        positive_seconds(text)
