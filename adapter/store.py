"""A store of values refreshed in the background: what lets every HPA poll be answered from memory.

metrics-server scrapes and stores; prometheus-adapter sends one PromQL per poll. A ``Store`` keeps, per key
(e.g. (namespace, catalog metric)), the latest value of an async ``loader`` and re-runs it once per
``refresh_s`` in the background, so the backend sees one query per key per interval whatever the number of
HPAs or requests. Contract:

- ``get(key)`` answers from memory when the key's value is fresh. The first request for a key nobody asked
  about runs the loader directly (concurrent first requests share that one run: single-flight) and registers
  the key; later ``get``\\ s never wait for the backend.
- A value is served only while it is at most ``max_staleness_s`` old (age = time since the evaluation it came
  from started, on the monotonic clock). Past that, ``get`` raises ``UpstreamError`` (a 503 Status), as when
  the backend is down; the background refresh keeps trying and the key serves again once it succeeds.
- A key not asked for during ``idle_s`` is dropped. At most ``max_keys`` keys are kept: past the cap a new
  key is answered by a direct (single-flight) load and not registered, so no caller can make the adapter
  refresh unboundedly many keys.
- A failed refresh is retried halfway to the value's expiry while it still serves, then once per interval.
- ``refresh_soon(key, absent)``: a caller that found parts (pods) missing moves the key's refresh to the next
  tick, once per part, so a new pod does not wait a whole interval.
- Refreshes of a key fire ``refresh_s`` after its previous refresh started; each key's phase is set by a hash
  of the key when it is first asked for, so keys asked for at the same moment still refresh spread over the
  interval (no thundering herd every ``refresh_s``).

The loader receives the evaluation time (wall clock, the injected ``clock``) and must return a value computed
for it; CPU-heavy work inside a loader belongs in a thread (``asyncio.to_thread``), not on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from adapter.errors import AdapterError, UpstreamError
from adapter.tasks import BackgroundLoop

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

log = logging.getLogger(__name__)
_MAX_MISSING = 10_000


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """How a store refreshes (the catalog's ``store`` section; defaults justified in docs/performance.md).

    - ``refresh_s``: one refresh per key per this many seconds. Default 15 s: the HPA controller's default
      sync period (``--horizontal-pod-autoscaler-sync-period``) and the usual scrape interval, so an HPA poll
      never sees data older than one scrape plus one refresh.
    - ``max_staleness_s``: a value older than this is never served (503 instead). Default two refreshes:
      one failed refresh is tolerated, two are an outage.
    - ``max_keys``: cap on the keys refreshed, so on the backend load: at most ``max_keys / refresh_s``
      queries/s (333/s by default; a cluster needs about (namespaces with HPAs) × (catalog metrics they
      read, 3 for the composite) keys). ``idle_s``: a key not asked for this long is dropped (1 h, as the
      forecast's ``forget_after``: an HPA deleted an hour ago is gone, one paused for a minute is not).
    """

    refresh_s: float = 15.0
    max_staleness_s: float = 30.0
    max_keys: int = 5_000
    idle_s: float = 3600.0


@dataclass(frozen=True, slots=True)
class Fresh(Generic[V]):
    """A value as served: the value, its evaluation time (wall clock) and its age in seconds."""

    value: V
    at: float
    age_s: float


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V | None = None
    at: float = 0.0  # evaluation time (wall clock) of ``value``
    loaded: float = 0.0  # monotonic time the load of ``value`` started
    due: float = 0.0  # monotonic time the next refresh is due
    used: float = 0.0  # monotonic time of the last ``get``
    refresh_s: float = 0.0  # how long the last successful load took
    error: str = ""  # the last refresh's failure, "" after a success
    missing: set[Hashable] = field(default_factory=set)  # parts already asked for and found absent
    flight: asyncio.Future[None] | None = None


@dataclass
class StoreCounters:
    """What a store did since start-up (exported by observability.py)."""

    hits: int = 0  # answered from memory
    misses: int = 0  # first request for a key: a direct load
    overflow: int = 0  # a new key past max_keys: a direct load, not registered
    stale: int = 0  # refused: the value was older than max_staleness
    refreshes: int = 0  # background loads that succeeded
    failures: int = 0  # background loads that failed
    dropped: int = 0  # keys dropped after idle_s


@dataclass(frozen=True, slots=True)
class KeyState:
    """One key as observability and explain see it."""

    key: Hashable
    age_s: float | None  # None: no value yet
    refresh_seconds: float
    error: str


class Store(Generic[K, V]):
    """Values of ``loader(key, at)`` per key, refreshed in the background (see the module docstring)."""

    def __init__(
        self,
        name: str,
        loader: Callable[[K, float], Awaitable[V]],
        config: StoreConfig,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.loader = loader
        self.config = config
        self.clock = clock
        self.monotonic = monotonic
        self.counters = StoreCounters()
        self._entries: dict[K, _Entry[V]] = {}
        self._overflow: dict[K, asyncio.Future[tuple[V, float]]] = {}
        # The loop only looks for due keys; a tick of a quarter refresh (at most 1 s) keeps each key within
        # that much of its phase without spending anything measurable on the scan.
        tick = min(1.0, max(0.05, config.refresh_s / 4))
        self._loop = BackgroundLoop(f"store-{name}", self._tick, tick, log=log)
        self._running: set[asyncio.Task[None]] = set()

    # -- serving -----------------------------------------------------------------------------------
    async def get(self, key: K) -> Fresh[V]:
        """The key's value if it is at most ``max_staleness_s`` old; raises ``UpstreamError`` otherwise
        (or whatever the first, direct load raised)."""
        now = self.monotonic()
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self.config.max_keys:
                self.counters.overflow += 1
                value, at = await self._overflow_load(key)
                return Fresh(value, at, 0.0)
            self.counters.misses += 1
            self._loop.start()
            entry = _Entry(used=now)
            self._entries[key] = entry
            try:
                await self._load(key, entry)
            except BaseException:
                if entry.value is None and self._entries.get(key) is entry:
                    del self._entries[key]  # never loaded: the next request tries again directly
                raise
            self._schedule(key, entry)
        elif entry.value is None:  # registered, its first load still in flight: share it
            assert entry.flight is not None
            await asyncio.shield(entry.flight)
        entry.used = now
        age = self.monotonic() - entry.loaded
        if entry.value is None or age > self.config.max_staleness_s:
            self.counters.stale += 1
            why = f": {entry.error}" if entry.error else ""
            raise UpstreamError(
                f"no fresh data for {self._describe(key)}: the newest is {age:.0f}s old, "
                f"older than the {self.config.max_staleness_s:g}s allowed{why}"
            )
        self.counters.hits += 1
        return Fresh(entry.value, entry.at, age)

    def refresh_soon(self, key: K, absent: Iterable[Hashable]) -> None:
        """A caller found ``absent`` parts (e.g. pods) missing from the key's value: refresh it at the next tick
        (not on this request's path) if any of them was not already known to be missing, so a new pod shows up
        within about a second rather than an interval. Parts that stay absent (a pod without data) do not ask
        again: each part costs at most one early refresh."""
        entry = self._entries.get(key)
        if entry is None or entry.value is None:
            return
        new = [a for a in absent if a not in entry.missing]
        if not new:
            return
        if len(entry.missing) > _MAX_MISSING:  # bounded; forgetting only costs one more early refresh each
            entry.missing.clear()
        entry.missing.update(new)
        entry.due = min(entry.due, self.monotonic())

    def peek(self, key: K) -> Fresh[V] | None:
        """The key's value without counting a use or loading (explain, tests); None when absent."""
        entry = self._entries.get(key)
        if entry is None or entry.value is None:
            return None
        return Fresh(entry.value, entry.at, self.monotonic() - entry.loaded)

    def keys(self) -> list[KeyState]:
        now = self.monotonic()
        return [
            KeyState(k, None if e.value is None else now - e.loaded, e.refresh_s, e.error)
            for k, e in self._entries.items()
        ]

    def has(self, key: K) -> bool:
        """True when ``key`` has a value (a ``get`` of it does not wait for the backend)."""
        entry = self._entries.get(key)
        return entry is not None and entry.value is not None

    def __len__(self) -> int:
        return len(self._entries)

    # -- loading -----------------------------------------------------------------------------------
    async def _timed_load(self, key: K) -> tuple[V, float]:
        at = self.clock()
        return await self.loader(key, at), at

    async def _load(self, key: K, entry: _Entry[V]) -> None:
        """Run (or join) the key's load; the load itself stores its result in ``entry``, so a caller that
        goes away (a cancelled request) never loses an answer the others wait for."""
        if entry.flight is None:
            entry.flight = asyncio.ensure_future(self._load_into(key, entry))
        await asyncio.shield(entry.flight)

    async def _load_into(self, key: K, entry: _Entry[V]) -> None:
        started = self.monotonic()
        try:
            value, at = await self._timed_load(key)
        except AdapterError as exc:
            entry.error = exc.message
            raise
        except Exception as exc:
            entry.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            entry.flight = None
        entry.value, entry.at, entry.loaded = value, at, started
        entry.refresh_s = self.monotonic() - started
        entry.error = ""

    async def _overflow_load(self, key: K) -> tuple[V, float]:
        flight = self._overflow.get(key)
        if flight is None:
            flight = asyncio.ensure_future(self._timed_load(key))
            self._overflow[key] = flight
            flight.add_done_callback(lambda _: self._overflow.pop(key, None))
        return await asyncio.shield(flight)

    def _schedule(self, key: K, entry: _Entry[V]) -> None:
        """The first refresh of a new key: between half an interval and one and a half after its first
        load, at a point fixed by the key's hash (always before the value expires). Keys first asked for
        together (an adapter restart, a burst of new HPAs) then refresh spread over the whole interval
        instead of all at once."""
        refresh, staleness = self.config.refresh_s, self.config.max_staleness_s
        phase = zlib.crc32(repr(key).encode()) / 2**32
        entry.due = entry.loaded + min(refresh * (0.5 + phase), max(refresh / 2, staleness - refresh / 4))

    async def _refresh(self, key: K, entry: _Entry[V]) -> None:
        try:
            await self._load(key, entry)
            self.counters.refreshes += 1
        except Exception:
            self.counters.failures += 1
            log.warning("store %s: refreshing %s failed: %s", self.name, self._describe(key), entry.error)
            # While the value still serves, try again halfway to its expiry rather than one interval later
            # (that would be exactly when it expires): a single slow answer must not become a 503. Once it
            # has expired (an outage), back to one try per interval, so a sick backend gets no extra load.
            now = self.monotonic()
            left = entry.loaded + self.config.max_staleness_s - now
            if left > 0:
                entry.due = min(entry.due, now + max(left / 2, 0.5))

    async def _tick(self) -> None:
        now = self.monotonic()
        idle_before = now - self.config.idle_s
        for key in [k for k, e in self._entries.items() if e.used < idle_before and e.flight is None]:
            del self._entries[key]
            self.counters.dropped += 1
        for key, entry in self._entries.items():
            if entry.due <= now and entry.flight is None and entry.value is not None:
                entry.due = now + self.config.refresh_s  # the phase moves only if the loop itself ran late
                task = asyncio.create_task(self._refresh(key, entry), name=f"store-{self.name}-refresh")
                self._running.add(task)
                task.add_done_callback(self._running.discard)

    @staticmethod
    def _describe(key: K) -> str:
        if isinstance(key, tuple):
            return "/".join(str(k) for k in key if k)
        return str(key)

    # -- life cycle --------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the refresh loop (also started by the first ``get``); needs a running event loop."""
        self._loop.start()

    async def close(self) -> None:
        """Stop refreshing: the loop, the refreshes under way and any load still in flight."""
        await self._loop.stop()
        pending: list[asyncio.Future[Any]] = [*self._running, *self._overflow.values()]
        pending += [e.flight for e in self._entries.values() if e.flight is not None]
        for task in pending:
            task.cancel()
        for task in pending:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # a load failing as it stops is no news
                pass
        self._running.clear()
