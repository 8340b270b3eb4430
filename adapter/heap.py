"""When the cyclic garbage collector makes its full passes: on a fixed schedule, not whenever CPython decides.

A full (generation 2) pass walks every tracked object and holds the GIL throughout, so the event loop and every
request on it wait for it. With 1,000 HPAs on one replica the heap holds ~190,000 tracked objects (each
refresh replaces a namespace's per-pod values: tens of thousands of objects living one refresh interval), and
CPython's own rule (a full pass once the objects promoted since the last reach 25 % of the old generation) ran
one every ~9 s, each 140–205 ms on the shared 2-core test machine (``benchmarks/load.py --controller-only``,
measured with ``gc.callbacks``): the slowest requests and the latest HPA syncs were those that waited for it.
Those passes found almost nothing (0–350 objects each): the adapter's data holds no reference cycles, reference
counting frees it.

So, while a ``FullCollections`` is started:

- everything alive at start-up (modules, the catalog, the app) is moved out of the collector's reach
  (``gc.freeze`` after a first full pass): it lives as long as the process and is never garbage;
- CPython's young passes (generations 0 and 1, a few milliseconds) run as usual, its full passes never;
- a full pass runs every ``every_s`` (default 60 s: four HPA sync periods, so an HPA meets at most one in four
  syncs), on the event loop like any other step, so cyclic garbage lives at most that long.

The collector's settings are the process's: the first start saves them, the last stop restores them (tests run
several apps in one process).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable

from adapter.tasks import BackgroundLoop

log = logging.getLogger(__name__)

FULL_EVERY_S = 60.0
_NEVER = 2**31 - 1  # a generation-2 threshold CPython never reaches

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, int, int] | None = None


class FullCollections:
    """Full garbage-collection passes every ``every_s`` seconds and never otherwise (see the module docstring)."""

    def __init__(
        self,
        every_s: float = FULL_EVERY_S,
        collect: Callable[[int], int] = gc.collect,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if every_s <= 0:
            raise ValueError("every_s must be positive")
        self.every_s = every_s
        self.collect = collect
        self.monotonic = monotonic
        self.passes = 0  # full passes this schedule ran
        self.collected = 0  # unreachable objects they found
        self.longest_s = 0.0  # the longest of them
        self._started = False
        self._loop = BackgroundLoop("gc-full", self._pass, every_s, log=log)

    def start(self) -> None:
        """Take the collector's full passes over (needs a running event loop); idempotent."""
        global _holders, _saved
        if self._started:
            return
        self._started = True
        with _lock:
            if _holders == 0:
                _saved = gc.get_threshold()
                young, middle, _ = _saved
                gc.set_threshold(young, middle, _NEVER)
                self.collect(2)
                gc.freeze()
            _holders += 1
        self._loop.start()

    async def _pass(self) -> None:
        started = self.monotonic()
        found = self.collect(2)
        took = self.monotonic() - started
        self.passes += 1
        self.collected += found
        self.longest_s = max(self.longest_s, took)

    async def stop(self) -> None:
        """Stop the schedule; the last one stopped gives CPython its own settings back."""
        global _holders, _saved
        if not self._started:
            return
        self._started = False
        await self._loop.stop()
        with _lock:
            _holders -= 1
            if _holders == 0 and _saved is not None:
                gc.unfreeze()
                gc.set_threshold(*_saved)
                _saved = None


def taken_over() -> bool:
    """Whether a ``FullCollections`` holds the collector's full passes now (tests, diagnostics)."""
    with _lock:
        return _holders > 0
