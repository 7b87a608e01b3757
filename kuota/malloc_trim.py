"""Give the C heap's free pages back to the operating system.

CPython hands every allocation over 512 bytes to the C allocator. After a burst (a relist, thousands of watch
events, a flood of admission reviews, the read buffers of closed TLS connections) glibc keeps the freed pages
resident, so the memory a container's limit counts stays at the burst's peak. ``malloc_trim(0)`` releases every
whole free page, not only the top of the heap, in a few milliseconds on a heap of a hundred MiB. Where the C
library has no ``malloc_trim`` (musl, macOS) the process keeps its pages, as it would anyway.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# Often enough that a burst's pages go back within seconds, rarely enough that the trims cost nothing.
TRIM_SECONDS = 10.0


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_MALLOC_TRIM = _find_malloc_trim()


def release_free_pages() -> bool:
    """Return the heap's free pages to the operating system; False when this C library cannot."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True


async def release_free_pages_periodically(interval: float = TRIM_SECONDS) -> None:
    """Trim the heap every ``interval`` seconds until cancelled."""
    if _MALLOC_TRIM is None:
        log.info("the C library has no malloc_trim; freed heap pages stay resident")
        return
    while True:
        await asyncio.sleep(interval)
        release_free_pages()
