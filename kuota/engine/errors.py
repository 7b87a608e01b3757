"""The engine's exceptions and the field errors its validators return.

    EngineError                 base of everything the engine raises
    ├── InvalidObjectError      an API object failed validation; carries the FieldErrors
    ├── UnknownObjectError      an event names an object the engine does not hold
    └── QuantityError           a string is not a Kubernetes quantity (also a ValueError)

Validators never raise for a bad object: ``validate_*`` returns the list of ``FieldError`` so the webhook can
answer with all of them at once; ``parse_*`` raises ``InvalidObjectError`` carrying the same list.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass

from kuota.errors import KuotaError

_LONGEST_SHOWN = 80
_BRIEF = reprlib.Repr()
_BRIEF.maxlevel, _BRIEF.maxlist, _BRIEF.maxdict, _BRIEF.maxstring, _BRIEF.maxother = 3, 8, 8, 40, 40


def show_value(value: object) -> str:
    """``value`` as the API server quotes it in a message (``"text"``, ``true``, ``4``), cut short when long so
    that an error stays one readable line whatever a hostile object holds."""
    if isinstance(value, str):
        # Control characters escaped, so that a message stays one line whatever the text holds.
        shown = f'"{value if value.isprintable() else value.encode("unicode_escape").decode("ascii")}"'
    elif isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, int) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    elif isinstance(value, int | float):
        shown = repr(value)
    else:
        shown = _BRIEF.repr(value)  # depth- and length-limited: a 100,000-deep list costs nothing
    if len(shown) <= _LONGEST_SHOWN:
        return shown
    return f"{shown[: _LONGEST_SHOWN - 20]}... ({len(shown)} characters)"


@dataclass(frozen=True)
class FieldError:
    """One problem in one field, worded the way the Kubernetes API server words it."""

    path: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}"


class EngineError(KuotaError):
    """Base of the quota engine's exceptions."""


class QuantityError(EngineError, ValueError):
    """A string is not a Kubernetes quantity; the message quotes it."""


class InvalidObjectError(EngineError):
    """An API object is invalid; ``errors`` lists every field at fault."""

    def __init__(self, kind: str, name: str, errors: list[FieldError]) -> None:
        self.kind = kind
        self.name = name
        self.errors = errors
        listed = "; ".join(str(error) for error in errors)
        super().__init__(f"{kind} {name!r} is invalid: {listed}")


class UnknownObjectError(EngineError):
    """An update or delete names an object the engine never saw."""

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        super().__init__(f"{kind} {name!r} is not known to the engine: add it before updating or deleting it")
