"""Session-wide: the tests run the code in this checkout, never a stale compiled copy of it.

``pip install -e .`` compiles some engine and simulator modules beside their sources, where they win the import.
By default (``make test``) a source edited after its compiled module was built stops the session before it
starts. With ``KUOTA_PURE_PYTHON=1`` (``make unit``) the tests load those modules from their sources instead,
compiled or not, so an edit runs at once without compiling again. That holds in this process only: a test that
starts ``python -m kuota`` runs what is installed, so a session of tests outside ``tests/unit`` (the integration
tier runs the manager and the exporter as processes) still stops on a stale compiled module.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kuota.engine_build import prefer_pure_python, stale_compiled_modules
from tests import examples  # noqa: F401  (loads the quick Hypothesis profile in make unit)

SOURCES = os.environ.get("KUOTA_PURE_PYTHON") == "1"
UNIT = Path(__file__).parent / "unit"

if SOURCES:
    prefer_pure_python()  # here, imported before any test module imports the engine


def pytest_sessionstart(session: pytest.Session) -> None:
    del session
    stale = [] if SOURCES else stale_compiled_modules()
    if stale:
        pytest.exit(
            f"{', '.join(stale)} changed since the last compile (or lost its source), so the tests would run the "
            "old code: run `make install` (or `pip install -e .`) to compile it again, or `make unit` to test the "
            "sources",
            returncode=2,
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    if not SOURCES or all(UNIT in item.path.parents for item in session.items):
        return
    stale = stale_compiled_modules()
    if stale:
        pytest.exit(
            f"{', '.join(stale)} changed since the last compile (or lost its source), and the tests outside "
            "tests/unit run kuota's installed build in processes of their own: run `make install` (or "
            "`pip install -e .`) to compile it again",
            returncode=2,
        )
