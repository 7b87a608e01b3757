"""v1beta2's compact ``topologyAssignment``, case by case from Kueue's ``bothWaysTestCases``
(``TestV1Beta2FromInternal``, pkg/util/tas/tas_assignment_test.go), each naming the case; each decodes back."""

from __future__ import annotations

from typing import Any

import pytest

from kuota.engine import TopologyAssignment
from kuota.webhook.topology_assignment import decode, encode

CASES: list[tuple[str, TopologyAssignment, dict[str, Any]]] = [
    ("empty", TopologyAssignment(("a",), ()), {"levels": ["a"], "slices": []}),
    (
        "one domain",
        TopologyAssignment(("a", "b"), ((("a1", "b1"), 4),)),
        {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 1,
                    "valuesPerLevel": [{"universal": "a1"}, {"universal": "b1"}],
                    "podCounts": {"universal": 4},
                }
            ],
        },
    ),
    (
        "multiple domains, different counts, common prefix and suffix",
        TopologyAssignment(("a", "b"), ((("p.a1.s", "p.b1.s"), 1), (("p.a2.s", "p.b2.s"), 2))),
        {
            "levels": ["a", "b"],
            "slices": [
                {
                    "domainCount": 2,
                    "valuesPerLevel": [
                        {"individual": {"prefix": "p.a", "suffix": ".s", "roots": ["1", "2"]}},
                        {"individual": {"prefix": "p.b", "suffix": ".s", "roots": ["1", "2"]}},
                    ],
                    "podCounts": {"individual": [1, 2]},
                }
            ],
        },
    ),
    (
        "multiple domains, same counts, max prefix & suffix overlap partially",
        TopologyAssignment(("a",), ((("abacacada",), 1), (("abacada",), 1))),
        {
            "levels": ["a"],
            "slices": [
                {
                    "domainCount": 2,
                    "valuesPerLevel": [{"individual": {"prefix": "ab", "suffix": "acada", "roots": ["ac", ""]}}],
                    "podCounts": {"universal": 1},
                }
            ],
        },
    ),
    (
        "multiple domains, same counts, no common prefix",
        TopologyAssignment(("a",), ((("x",), 2), (("y",), 2))),
        {
            "levels": ["a"],
            "slices": [
                {
                    "domainCount": 2,
                    "valuesPerLevel": [{"individual": {"roots": ["x", "y"]}}],
                    "podCounts": {"universal": 2},
                }
            ],
        },
    ),
]


@pytest.mark.parametrize(("case", "assignment", "wanted"), CASES, ids=[case for case, _, _ in CASES])
def test_encoding_is_kueues_and_decodes_back(case: str, assignment: TopologyAssignment, wanted: dict[str, Any]) -> None:
    assert encode(assignment) == wanted
    assert decode(wanted) == assignment


def test_several_slices_decode_in_order() -> None:
    # "multiple slices, no prefixes/suffixes or universal values"
    raw = {
        "levels": ["kubernetes.io/hostname"],
        "slices": [
            {"domainCount": 1, "valuesPerLevel": [{"individual": {"roots": ["n1"]}}], "podCounts": {"individual": [1]}},
            {"domainCount": 1, "valuesPerLevel": [{"individual": {"roots": ["m2"]}}], "podCounts": {"individual": [3]}},
        ],
    }
    assert decode(raw) == TopologyAssignment(("kubernetes.io/hostname",), ((("n1",), 1), (("m2",), 3)))
