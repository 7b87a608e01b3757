"""How simulate's input errors quote what they found: short and on one line, whatever the value."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence


def one_line(text: str) -> str:
    """``text`` with every unprintable character escaped: the decoder quotes keys and values as written, and a
    newline in one would break the command's one line."""
    if text.isprintable():
        return text
    return "".join(character if character.isprintable() else repr(character)[1:-1] for character in text)


def quoted(value: object) -> str:
    """``value`` quoted for a message, short whatever it is: containers by their kind only."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, str | int | float):
        shown = repr(value)
        return shown if len(shown) <= 60 else f"{shown[:40]}... ({len(shown)} characters)"
    if isinstance(value, dict | Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def listed(names: Sequence[str], most: int, separator: str) -> str:
    if len(names) <= most:
        return separator.join(names)
    return f"{separator.join(names[:most])}{separator}... ({len(names)} in all)"
