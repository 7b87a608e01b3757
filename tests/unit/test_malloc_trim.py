"""kuota.malloc_trim returns freed heap pages that glibc would otherwise keep resident."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kuota import malloc_trim
from tests.waiting import async_wait_until

MIB = 1024 * 1024


def _resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _fragmented_heap() -> list[bytes]:
    """80 MiB of 4 KiB blocks (above CPython's small-object limit, so glibc's), all but one in 64 freed.

    The survivors pin the heap's top, so glibc's own trimming of the top cannot give the freed pages back.
    """
    blocks = [bytes(4096 + index % 7) for index in range(20_000)]
    return blocks[::64] + blocks[-1:]


def test_release_free_pages_returns_the_pages_of_a_fragmented_heap() -> None:
    survivors = _fragmented_heap()
    before = _resident_bytes()
    assert malloc_trim.release_free_pages() is True
    after = _resident_bytes()
    assert len(survivors) == 314
    assert before - after > 40 * MIB, f"resident {before / MIB:.0f} MiB -> {after / MIB:.0f} MiB"


async def test_periodic_release_trims_until_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(malloc_trim, "_MALLOC_TRIM", lambda pad: trims.append(pad) or 1)
    task = asyncio.create_task(malloc_trim.release_free_pages_periodically(interval=0.01))
    await async_wait_until(lambda: len(trims) >= 3, "three trims", timeout=5, interval=0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert trims[:3] == [0, 0, 0]


async def test_without_malloc_trim_nothing_is_called_and_the_task_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(malloc_trim, "_MALLOC_TRIM", None)
    assert malloc_trim.release_free_pages() is False
    await asyncio.wait_for(malloc_trim.release_free_pages_periodically(interval=0.01), timeout=5)
