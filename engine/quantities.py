"""Kubernetes resource quantities as exact integers.

Like Kueue, cpu is counted in millicores and every other resource in its base unit (bytes, devices), rounding
a fractional value up, so ``"500m"`` cpu is 500 and ``"128Gi"`` memory is 137438953472. Floats never appear:
quota arithmetic has to be exact for "usage never exceeds quota" to hold.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from kuota.engine.errors import QuantityError

_NUMBER = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
MILLI_RESOURCES = frozenset({"cpu"})


def parse_amount(text: str | int) -> Fraction:
    """The exact value of a quantity string (``"1.5Gi"``, ``"500m"``, ``"1e3"``) or an integer."""
    if isinstance(text, bool):
        raise QuantityError(f"{text!r} is not a quantity")
    if isinstance(text, int):
        return Fraction(text)
    match = _NUMBER.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity: write a number with an optional suffix, like 4, 500m, 128Gi")
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = _EXPONENT.match(suffix)
    if exponent is not None:
        return number * Fraction(10) ** int(exponent.group(1))
    raise QuantityError(f"{text!r} has an unknown suffix {suffix!r}: use m, k, M, G, T, Ki, Mi, Gi, Ti or an exponent")


def to_units(resource: str, amount: Fraction) -> int:
    """``amount`` of ``resource`` in the engine's integer unit (millicores for cpu), rounded up."""
    scaled = amount * 1000 if resource in MILLI_RESOURCES else amount
    return math.ceil(scaled)


def parse_quantity(resource: str, text: str | int) -> int:
    """Parse ``text`` as an amount of ``resource`` in the engine's integer unit."""
    return to_units(resource, parse_amount(text))


def format_quantity(resource: str, units: int) -> str:
    """The shortest exact Kubernetes spelling of ``units`` of ``resource``."""
    if resource in MILLI_RESOURCES:
        return str(units // 1000) if units % 1000 == 0 else f"{units}m"
    if units != 0:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if units % _BINARY[suffix] == 0:
                return f"{units // _BINARY[suffix]}{suffix}"
    return str(units)
