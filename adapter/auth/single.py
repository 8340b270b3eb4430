"""One call in flight per key: concurrent callers with the same key await the same result (Go's singleflight)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def shared_call(in_flight: dict[str, asyncio.Future[T]], key: str, call: Callable[[], Awaitable[T]]) -> T:
    """Await ``call()``, or the call already in flight for ``key``. The result or exception reaches every
    waiter; a waiter that is cancelled does not cancel the call for the others."""
    future = in_flight.get(key)
    if future is None:
        future = asyncio.ensure_future(call())
        in_flight[key] = future
        future.add_done_callback(lambda _: in_flight.pop(key, None))
    return await asyncio.shield(future)
