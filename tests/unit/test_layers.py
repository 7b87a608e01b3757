"""The stack of pyproject.toml's import-linter layers contract is the one docs/architecture.md draws, it places every
plane and module of kuota/, and ruff bans the bare import of every plane (a plane is imported as ``kuota.<plane>``).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _the_stack() -> dict[str, Any]:
    contracts: list[dict[str, Any]] = PYPROJECT["tool"]["importlinter"]["contracts"]
    (stack,) = [c for c in contracts if c["type"] == "layers" and c["containers"] == ["kuota"]]
    return stack


def _drawn_layers() -> list[str]:
    """The first ```text block of "The walls", one layer a line, top to bottom; a line may start with a caption,
    kept apart from its layer by two spaces or more."""
    walls = ARCHITECTURE.read_text().split("\n## The walls\n", 1)[1].split("\n## ", 1)[0]
    diagram = walls.split("\n```text\n", 1)[1].split("\n```", 1)[0]
    return [re.split(r" {2,}", line.strip())[-1] for line in diagram.splitlines()]


def _planes() -> set[str]:
    return {folder.name for folder in (ROOT / "kuota").iterdir() if (folder / "__init__.py").is_file()}


def test_the_architecture_draws_the_layers_of_the_contract() -> None:
    assert _drawn_layers() == _the_stack()["layers"]


def test_every_plane_and_module_of_kuota_has_its_layer() -> None:
    """A layers contract constrains only the modules it names: a new one left out would be free to import anything."""
    modules = _planes() | {path.stem for path in (ROOT / "kuota").glob("*.py") if path.name != "__init__.py"}
    placed = [name.strip() for layer in _the_stack()["layers"] for name in re.split(r"[|:]", layer)]
    assert sorted(placed) == sorted(modules)


def test_ruff_bans_the_bare_import_of_every_plane() -> None:
    banned = PYPROJECT["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]
    assert set(banned) == _planes()
