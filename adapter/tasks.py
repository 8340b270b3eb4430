"""Guarded background loops (after kopf's ``create_guarded_task``): a failing iteration is logged and
counted, never the end of the loop; stopping cancels the task and waits for it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable


class BackgroundLoop:
    """Runs ``body`` every ``interval_s`` seconds (sooner when ``wake()`` is called) until ``stop()``."""

    def __init__(
        self,
        name: str,
        body: Callable[[], Awaitable[None]],
        interval_s: float,
        on_failure: Callable[[], None] | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self.name = name
        self.body = body
        self.interval_s = interval_s
        self.on_failure = on_failure
        self.failures = 0
        self._log = log or logging.getLogger(__name__)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                await self.body()
            except Exception:  # guarded: one bad iteration must not end the loop for good
                self.failures += 1
                if self.on_failure is not None:
                    self.on_failure()
                self._log.exception("background loop %s failed", self.name)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=self.interval_s)
            except TimeoutError:
                pass

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
