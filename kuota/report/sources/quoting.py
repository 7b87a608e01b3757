"""Text from outside (label values, item names, error bodies) quoted into one-line messages (pure).

Every error of the report is one line on stderr; a value read from Prometheus or a Workload dump may hold
newlines, terminal escapes or megabytes. Quoted through :func:`quoted` it is short, on one line, and its
non-printable characters are escaped, whatever it was.
"""

from __future__ import annotations

import reprlib

_SHORT = reprlib.Repr()  # Python 3.11's Repr takes no arguments
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist, _SHORT.maxtuple = 2, 4, 4, 4
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 80, 80, 40


def quoted(value: object) -> str:
    """``value`` as a short Python literal: ``'ml\\nx'``, ``[1, 2, 3, 4, ...]``, ``{'a': {...}}``."""
    try:
        return _SHORT.repr(value)
    except ValueError:  # an integer past int's printing limit
        return f"an integer of {value.bit_length()} bits" if isinstance(value, int) else "an unprintable value"


def excerpt(text: str, limit: int = 200) -> str:
    """The first ``limit`` characters of a foreign text (an error body) on one line, unquoted when printable."""
    flat = " ".join(text[: limit * 2].split())
    shown = flat[:limit] + ("..." if len(flat) > limit or len(text) > limit * 2 else "")
    return shown if shown.isprintable() else repr(shown)[1:-1]
