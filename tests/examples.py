"""How many examples a property test draws: all of them in ``make test``, a tenth in ``make unit``.

``make unit`` is the edit-test loop (``KUOTA_QUICK_PROPERTIES=1``): every property still runs, on fewer draws,
so the loop stays under a minute; ``make test`` (CI) draws each test's full count.
"""

from __future__ import annotations

import os

from hypothesis import settings

QUICK = os.environ.get("KUOTA_QUICK_PROPERTIES") == "1"

if QUICK:  # the tests that name no count of their own draw Hypothesis's default, 100; a tenth of it here
    settings.register_profile("quick", max_examples=10)
    settings.load_profile("quick")


def examples(full: int) -> int:
    """``full`` draws, or a tenth of them (at least 10) in the quick loop."""
    return max(10, full // 10) if QUICK else full
