"""Waiting on conditions with deadlines: the one way tests wait (never sleep-and-hope)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class ConditionTimeoutError(AssertionError):
    """The condition did not hold before its deadline; the message says what was awaited and the last value."""


def wait_until(check: Callable[[], T | None], what: str, timeout: float = 30.0, interval: float = 0.1) -> T:
    """Call ``check`` until it returns something truthy, and return that."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise ConditionTimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


async def async_wait_until(
    check: Callable[[], Awaitable[T | None] | T | None], what: str, timeout: float = 30.0, interval: float = 0.05
) -> T:
    """The asyncio twin of :func:`wait_until`; ``check`` may be a plain function or a coroutine function (a
    plain one suits state kept by a task on the same loop, which must not be blocked while waiting)."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        result = check()
        last = await result if inspect.isawaitable(result) else result
        if last:
            return last
        await asyncio.sleep(interval)
    raise ConditionTimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
