"""Kubernetes resource quantities as exact integers: the one quantity parser of every plane.

Like Kueue, cpu is counted in millicores and every other resource in its base unit (bytes, devices), rounding
a fractional value up, so ``"500m"`` cpu is 500 and ``"128Gi"`` memory is 137438953472. Floats never appear:
quota arithmetic has to be exact for "usage never exceeds quota" to hold.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from kuota.engine.errors import QuantityError, show_value

# The API server's grammar for a quantity (k8s.io/apimachinery resource.Quantity): sign, digits with an optional
# point, then a suffix or a decimal exponent. Digit count and exponent are bounded before any arithmetic:
# ``Fraction("1e20000000")`` alone spends half a minute building a 20-million-digit integer, and a value that
# large is refused anyway, so each parse costs at most the text's length.
_QUANTITY = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)", re.DOTALL)
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
# Kubernetes counts a quantity in an int64 (resource.Quantity.Value()), and Kueue compares quota through it.
LARGEST_AMOUNT = 2**63 - 1
# Far beyond any real request, far below what would cost time: 10**100 is a 333-bit integer.
MAX_DIGITS = 64
MAX_EXPONENT = 100
FORMAT_HINT = "write a number with an optional suffix, like 4, 500m, 128Gi or 1e3"
MILLI_RESOURCES = frozenset({"cpu"})


def parse_amount(text: object) -> Fraction:
    """The exact value of a quantity string (``"1.5Gi"``, ``"500m"``, ``"1e3"``) or an integer, at most
    ``LARGEST_AMOUNT`` either way; bounded in time by the text's length whatever its exponent. Anything else
    (a float, a list, None: whatever a hostile object holds) is a QuantityError, compiled or not."""
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise QuantityError(f"{show_value(text)} is not a quantity: {FORMAT_HINT}")
    if isinstance(text, int):
        if abs(text) > LARGEST_AMOUNT:
            raise QuantityError(f"{show_value(text)} is too large: a quantity is at most {LARGEST_AMOUNT} (2^63-1)")
        return Fraction(text)
    match = _QUANTITY.fullmatch(text.strip())
    assert match is not None  # every part of the pattern is optional
    sign, whole, fraction, suffix = match.group(1), match.group(2), match.group(3) or "", match.group(4)
    if not whole and not fraction:
        raise QuantityError(f"{show_value(text)} is not a quantity: {FORMAT_HINT}")
    whole, fraction = whole.lstrip("0"), fraction.rstrip("0")
    if len(whole) + len(fraction) > MAX_DIGITS:
        raise QuantityError(f"{show_value(text)} has more than {MAX_DIGITS} significant digits: {FORMAT_HINT}")
    binary, decimal = _scale(text, suffix)
    value = Fraction(int(whole + fraction or "0") * 2**binary, 10 ** len(fraction)) * Fraction(10) ** decimal
    if abs(value) > LARGEST_AMOUNT:
        raise QuantityError(f"{show_value(text)} is too large: a quantity is at most {LARGEST_AMOUNT} (2^63-1)")
    return -value if sign == "-" else value


def _scale(text: str, suffix: str) -> tuple[int, int]:
    """The suffix as (power of two, power of ten)."""
    if suffix in _BINARY:
        return _BINARY[suffix], 0
    if suffix in _DECIMAL:
        return 0, _DECIMAL[suffix]
    exponent = _EXPONENT.fullmatch(suffix)
    if exponent is None:
        raise QuantityError(
            f"{show_value(text)} has an unknown suffix {show_value(suffix)}: use m, k, M, G, T, P, E, Ki, Mi, Gi, "
            "Ti, Pi, Ei or an exponent like e3"
        )
    digits = exponent.group(1).lstrip("+-").lstrip("0")
    if len(digits) > len(str(MAX_EXPONENT)) or int(digits or "0") > MAX_EXPONENT:
        raise QuantityError(f"{show_value(text)} has an exponent beyond ±{MAX_EXPONENT}: {FORMAT_HINT}")
    return 0, int(exponent.group(1))


def to_units(resource: str, amount: Fraction) -> int:
    """``amount`` of ``resource`` in the engine's integer unit (millicores for cpu), rounded up."""
    scaled = amount * 1000 if resource in MILLI_RESOURCES else amount
    return math.ceil(scaled)


def parse_quantity(resource: str, text: object) -> int:
    """Parse ``text`` as an amount of ``resource`` in the engine's integer unit."""
    return to_units(resource, parse_amount(text))


def format_quantity(resource: str, units: int) -> str:
    """The shortest exact Kubernetes spelling of ``units`` of ``resource``."""
    if resource in MILLI_RESOURCES:
        return str(units // 1000) if units % 1000 == 0 else f"{units}m"
    if units != 0:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if units % 2 ** _BINARY[suffix] == 0:
                return f"{units // 2 ** _BINARY[suffix]}{suffix}"
    return str(units)
