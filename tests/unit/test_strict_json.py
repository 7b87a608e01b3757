"""kuota.strict_json: orjson's speed with the standard library's texts and refusals."""

from __future__ import annotations

import json

import pytest

from kuota import strict_json

OBJECT = {"metadata": {"name": "wl-ü", "labels": {"team": "a"}}, "spec": {"count": 3, "ratio": 0.5, "on": None}}


def test_both_dumps_write_the_same_compact_text_with_non_ascii_characters_as_they_are() -> None:
    expected = json.dumps(OBJECT, separators=(",", ":"), ensure_ascii=False).encode()
    assert strict_json.dumps(OBJECT) == expected
    assert strict_json.dumps_to_keep(OBJECT) == expected
    assert strict_json.loads(expected) == OBJECT


def test_a_refused_text_says_why_in_the_standard_librarys_words() -> None:
    with pytest.raises(ValueError, match="NaN is not a JSON number"):
        strict_json.loads(b'{"a": NaN}')
    with pytest.raises(ValueError, match="Expecting value"):
        strict_json.loads(b'{"a": }')


def test_a_lone_surrogate_escape_that_only_orjson_refuses_reads_as_before() -> None:
    assert strict_json.loads(b'"\\ud800"') == json.loads('"\\ud800"')
