"""The two tiers stay apart: every integration module is marked, so ``pytest -m "not integration"`` (``make unit``)
never reaches a test that needs the control plane."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _marks_integration(module: Path) -> bool:
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            marks = node.value.elts if isinstance(node.value, ast.List | ast.Tuple) else [node.value]
            return any(ast.unparse(mark) == "pytest.mark.integration" for mark in marks)
    return False


def test_every_integration_module_carries_the_integration_marker() -> None:
    modules = sorted((TESTS / "integration").rglob("test_*.py"))
    assert len(modules) > 30
    assert [str(m.relative_to(TESTS)) for m in modules if not _marks_integration(m)] == []


def test_no_unit_module_is_marked_integration() -> None:
    assert [str(m.relative_to(TESTS)) for m in (TESTS / "unit").rglob("test_*.py") if _marks_integration(m)] == []
