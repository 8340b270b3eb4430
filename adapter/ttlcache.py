"""The one small TTL cache: answers reused for a while, one load per key in flight, bounded in size.

Used for the answers of TokenReview (``auth/authn.py``), SubjectAccessReview (``auth/authz.py``) and PromQL
instant queries (``query/client.py``): each caches a remote answer for seconds and deduplicates concurrent
asks (the apiserver's ``cached_token_authenticator.go`` caches reviews the same way, with singleflight).

Not the same thing, so not this type: ``adapter/store.py`` refreshes values ahead of demand in the background,
serves stale ones within a bound and evicts idle keys; a TTL cache only reuses what a caller already loaded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


async def shared_call(in_flight: dict[K, asyncio.Future[T]], key: K, call: Callable[[], Awaitable[T]]) -> T:
    """Await ``call()``, or the call already in flight for ``key`` (Go's singleflight). The result or exception
    reaches every waiter; a waiter that is cancelled does not cancel the call for the others."""
    future = in_flight.get(key)
    if future is None:
        future = asyncio.ensure_future(call())
        in_flight[key] = future
        future.add_done_callback(lambda _: in_flight.pop(key, None))
    return await asyncio.shield(future)


class TtlCache(Generic[K, T]):
    """``get(key, load)``: a fresh cached answer, else the load in flight for ``key``, else a new ``load()``.

    An answer lives ``ttl(answer)`` seconds counted from when its load *started* (never older than that,
    however slow the load); ``ttl`` <= 0 keeps nothing but still shares loads in flight. A load that raises
    is never cached (every waiter gets the exception). Over ``max_entries`` the expired entries go, and if
    that is not enough, all of them (memory stays bounded whatever keys clients send). ``shared`` counts
    answers served without a load of their own. ``clock`` is monotonic seconds (a parameter for tests).
    """

    def __init__(
        self, ttl: Callable[[T], float], *, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._answers: dict[K, tuple[float, T]] = {}  # key -> (expires at, answer)
        self._in_flight: dict[K, asyncio.Future[T]] = {}
        self.shared = 0

    def __len__(self) -> int:
        return len(self._answers)

    async def get(self, key: K, load: Callable[[], Awaitable[T]]) -> T:
        hit = self._answers.get(key)
        if hit is not None and hit[0] > self._clock():
            self.shared += 1
            return hit[1]
        if key in self._in_flight:
            self.shared += 1
        return await shared_call(self._in_flight, key, lambda: self._load(key, load))

    async def _load(self, key: K, load: Callable[[], Awaitable[T]]) -> T:
        started = self._clock()
        answer = await load()
        ttl = self._ttl(answer)
        if ttl > 0:
            if len(self._answers) >= self._max:
                now = self._clock()
                self._answers = {k: v for k, v in self._answers.items() if v[0] > now}
                if len(self._answers) >= self._max:
                    self._answers.clear()
            self._answers[key] = (started + ttl, answer)
        return answer
