from fractions import Fraction

import pytest

from kuota.engine.errors import QuantityError
from kuota.engine.quantities import format_quantity, parse_amount, parse_quantity


@pytest.mark.parametrize(
    ("resource", "text", "units"),
    [
        ("cpu", "500m", 500),
        ("cpu", "4", 4000),
        ("cpu", 2, 2000),
        ("cpu", "1.5", 1500),
        ("cpu", "1n", 1),  # rounds up, never down to zero
        ("memory", "128Gi", 128 * 2**30),
        ("memory", "1.5Gi", 3 * 2**29),
        ("memory", "1G", 10**9),
        ("memory", "1e3", 1000),
        ("memory", "1E", 10**18),
        ("nvidia.com/gpu", "4", 4),
        ("memory", "500m", 1),
    ],
)
def test_quantities_parse_exactly_into_engine_units(resource: str, text: str | int, units: int) -> None:
    assert parse_quantity(resource, text) == units


def test_amounts_are_fractions_not_floats() -> None:
    assert parse_amount("0.1") * 3 == Fraction(3, 10)


@pytest.mark.parametrize("text", ["", "abc", "4x", "1.2.3", "Gi"])
def test_malformed_quantities_are_rejected_with_the_text(text: str) -> None:
    with pytest.raises(QuantityError, match=r"quantity|suffix"):
        parse_quantity("memory", text)


@pytest.mark.parametrize(
    ("resource", "units", "text"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 4000, "4"),
        ("memory", 128 * 2**30, "128Gi"),
        ("memory", 1000, "1000"),
        ("nvidia.com/gpu", 0, "0"),
    ],
)
def test_format_gives_the_shortest_exact_spelling(resource: str, units: int, text: str) -> None:
    assert format_quantity(resource, units) == text
    assert parse_quantity(resource, text) == units
