"""A bounded lane of worker threads for one kind of Kubernetes review (TokenReview, SubjectAccessReview, ...).

The official client is synchronous, so each call runs in a thread. Sharing the event loop's default executor
let a flood of random bearer tokens against a slow TokenReview endpoint fill every thread, and a front-proxy
request's SubjectAccessReview waited behind them (22 s in the red-team run): queue time was outside the
timeout. Here each kind of review has its own threads, and the deadline covers waiting for a thread as well
as the call itself; a call still queued at its deadline is withdrawn and never runs. A lane also refuses at
once when ``max_waiting`` calls are already queued, so a flood costs bounded memory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable
from typing import Any

from adapter.errors import UpstreamError


class ReviewPool:
    """``await pool.run(fn, *args)``: ``fn(*args)`` in one of ``workers`` threads, within ``timeout_s`` in all.

    Raises ``UpstreamError`` when the deadline passes (queued or running) or the queue is full; exceptions of
    ``fn`` propagate unchanged.
    """

    def __init__(self, name: str, workers: int, timeout_s: float, max_waiting: int = 256) -> None:
        self.name = name
        self.workers = workers
        self.timeout_s = timeout_s
        self.max_waiting = max_waiting
        self._executor = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix=f"review-{name}")
        self._in_flight = 0  # queued + running, counted on the event loop's thread only

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._in_flight >= self.workers + self.max_waiting:
            raise UpstreamError(f"too many {self.name} reviews waiting")
        loop = asyncio.get_running_loop()
        self._in_flight += 1
        try:
            future = loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))
            # wait_for cancels the future at the deadline; a call still in the queue is then dropped unrun.
            return await asyncio.wait_for(future, timeout=self.timeout_s)
        except TimeoutError:
            raise UpstreamError(f"{self.name} review not answered within {self.timeout_s:g}s") from None
        finally:
            self._in_flight -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
