"""Everything the source tree holds is installed: a folder without __init__.py would be silently left out of a
wheel (setuptools finds regular packages only), and ``pip install .`` would then fail at import time."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[2]


def test_every_source_folder_is_an_installed_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    installed = set(find_packages(str(ROOT), include=config["include"]))
    source_folders = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for top in ("kuota", "webhook", "exporter", "certs")
        for path in (ROOT / top).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert source_folders - installed == set()


def test_the_embedded_seed_example_ships_as_package_data() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["*"]
    seed = ROOT / "webhook" / "simulator" / "seed"
    for path in seed.iterdir():
        assert any(path.match(pattern) for pattern in patterns), f"{path.name} would not be installed"
