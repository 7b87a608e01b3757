"""Session-wide guard: the tests must run the code in this checkout, not a stale compiled copy of it."""

from __future__ import annotations

import pytest

from kuota.engine_build import stale_compiled_modules


def pytest_sessionstart(session: pytest.Session) -> None:
    del session
    stale = stale_compiled_modules()
    if stale:
        pytest.exit(
            f"{', '.join(stale)} changed since the last compile, so the tests would run the old code: "
            "run `make install` (or `pip install -e .`) to compile it again",
            returncode=2,
        )
