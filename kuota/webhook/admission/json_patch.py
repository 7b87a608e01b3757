"""RFC 6902 JSON Patch operations with RFC 6901 pointers, as the API server applies them to mutations."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, Literal, TypedDict

from kuota import strict_json


class PatchOperation(TypedDict):
    op: Literal["add", "replace", "remove"]
    path: str
    value: Any


def pointer(*tokens: str) -> str:
    """A JSON pointer to ``tokens``; ``~`` and ``/`` inside a token are escaped (``~0``, ``~1``), ``~`` first."""
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in tokens)


def add(value: Any, *tokens: str) -> PatchOperation:
    """``add`` sets a member whether or not it exists (RFC 6902 §4.1), so it is safe for defaulting."""
    return {"op": "add", "path": pointer(*tokens), "value": value}


def encode(operations: Sequence[PatchOperation]) -> str:
    """The base64 of the JSON patch, as AdmissionResponse.patch carries it."""
    return base64.b64encode(strict_json.dumps(list(operations))).decode()
