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
- A key is refreshed in the background only while it is *active*: asked for within ``active_window_s``
  (default four refresh intervals). A key nobody asks for stops costing backend queries after that; its
  next ``get`` serves the value if it is still fresh, else loads it directly (like a first request). A key
  not asked for during ``idle_s`` is dropped.
- Fair shares (``adapter/shares.py``): each namespace may keep at most ``max_keys_per_namespace`` keys and
  all together at most ``max_keys``. A new key past either cap first takes the place of an inactive key (the
  least recently asked for: of its own namespace for its share, of any namespace for the global cap), or at
  the global cap of the namespace holding the most keys, when that is more than the asker's own; failing
  that it is answered by a direct (single-flight) load and not registered. Every request-driven load (a
  first request, an unregistered one, an inactive key's reload) is charged to the key's namespace: at most
  ``loads_per_namespace`` per refresh interval, past which ``get`` raises ``TooManyRequests`` (429). So a
  namespace's keys cost the backend at most ``(max_keys_per_namespace + loads_per_namespace) / refresh_s``
  queries/s, whatever it asks, and no namespace can take another's place.
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
import math
import time
import zlib
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from adapter.errors import AdapterError, TooManyRequests, UpstreamError
from adapter.shares import ShareCounts
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
      read, 3 for the composite) keys). ``max_keys_per_namespace``, ``loads_per_namespace`` and ``active_s``:
      the fair shares of the module docstring. ``idle_s``: a key not asked for this long is dropped (1 h, as the
      forecast's ``forget_after``: an HPA deleted an hour ago is gone, one paused for a minute is not).
    """

    refresh_s: float = 15.0
    max_staleness_s: float = 30.0
    max_keys: int = 5_000
    idle_s: float = 3600.0
    # -- per-namespace shares (catalog ``store``: max_keys_per_namespace, loads_per_namespace, active) --
    # A namespace's keys: tens of HPAs share a key per (catalog metric, metricLabelSelector), so 200 is about
    # ten catalog metrics under twenty distinct selectors each, and 25 full namespaces before the global cap.
    max_keys_per_namespace: int = 200
    # Request-driven loads per namespace per refresh interval: half a share, so a namespace whose HPAs all
    # start at once (an adapter restart) registers a full share within two intervals.
    loads_per_namespace: int = 100
    # Refreshed in the background only while asked for within this (None: four refresh intervals, so an HPA
    # polling at its default 15 s never goes inactive, and one whose sync period is 60 s still does not).
    active_s: float | None = None

    @property
    def active_window_s(self) -> float:
        """How long after its last request a key is still refreshed in the background (at most ``idle_s``)."""
        window = 4 * self.refresh_s if self.active_s is None else self.active_s
        return min(window, self.idle_s)


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
    overflow: int = 0  # a new key past a key share (max_keys, max_keys_per_namespace): a direct load, not registered
    refused: int = 0  # 429: the namespace spent its loads_per_namespace for this interval
    evicted: int = 0  # an inactive key dropped to make room for a new one
    reloads: int = 0  # an inactive key asked for again after its value expired: a direct load
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
    active: bool = True  # asked for within the active window: refreshed in the background
    due_s: float = 0.0  # seconds until its next background refresh is due (<= 0: due now)
    loading: bool = False  # a load of it is under way


def namespace_of_key(key: Hashable) -> str:
    """The namespace a key belongs to for the shares: its first element (``(namespace, ...)`` keys), or the key
    itself (the pod stores' keys are namespaces)."""
    if isinstance(key, tuple):
        return str(key[0]) if key else ""
    return str(key)


class Store(Generic[K, V]):
    """Values of ``loader(key, at)`` per key, refreshed in the background (see the module docstring)."""

    def __init__(
        self,
        name: str,
        loader: Callable[[K, float], Awaitable[V]],
        config: StoreConfig,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        namespace_of: Callable[[K], str] = namespace_of_key,
    ) -> None:
        self.name = name
        self.loader = loader
        self.config = config
        self.clock = clock
        self.monotonic = monotonic
        self.namespace_of = namespace_of
        self.counters = StoreCounters()
        self.shares = ShareCounts(log)
        self.loads = ShareCounts(None)  # backend loads per namespace: "refresh" (background) and "direct"
        self._entries: dict[K, _Entry[V]] = {}
        self._by_namespace: dict[str, dict[K, None]] = {}  # the keys of each namespace (its share)
        self._overflow: dict[K, asyncio.Future[tuple[V, float]]] = {}
        self._loads: dict[str, int] = {}  # request-driven loads per namespace in the current window
        self._window = -math.inf  # monotonic start of the loads window (one refresh interval)
        # The loop only looks for due keys; a tick of a quarter refresh (at most 1 s) keeps each key within
        # that much of its phase without spending anything measurable on the scan.
        tick = min(1.0, max(0.05, config.refresh_s / 4))
        self._loop = BackgroundLoop(f"store-{name}", self._tick, tick, log=log)
        self._running: set[asyncio.Task[None]] = set()

    # -- serving -----------------------------------------------------------------------------------
    async def get(self, key: K) -> Fresh[V]:
        """The key's value if it is at most ``max_staleness_s`` old; raises ``UpstreamError`` otherwise
        (or whatever the first, direct load raised), ``TooManyRequests`` when the key's namespace has spent
        its request-driven loads for this interval."""
        now = self.monotonic()
        entry = self._entries.get(key)
        if entry is None:
            namespace = self.namespace_of(key)
            if key not in self._overflow:  # else an unregistered load of it is under way: share that one
                self._charge(namespace, now)
            if key in self._overflow or not self._make_room(key, namespace, now):
                self.counters.overflow += 1
                value, at = await self._overflow_load(key)
                return Fresh(value, at, 0.0)
            self.counters.misses += 1
            self._loop.start()
            entry = _Entry(used=now)
            self._entries[key] = entry
            self._by_namespace.setdefault(namespace, {})[key] = None
            try:
                await self._load(key, entry)
            except BaseException:
                if entry.value is None and self._entries.get(key) is entry:
                    self._forget(key)  # never loaded: the next request tries again directly
                raise
            self._schedule(key, entry)
        elif entry.value is None:  # registered, its first load still in flight: share it
            assert entry.flight is not None
            await asyncio.shield(entry.flight)
        elif entry.used < now - self.config.active_window_s and now - entry.loaded > self.config.max_staleness_s:
            # Inactive (not refreshed since) and expired: load it again for this request, as a first one.
            if entry.flight is None:
                self._charge(self.namespace_of(key), now)
                self.counters.reloads += 1
            entry.used = now
            await self._load(key, entry)
            self._schedule(key, entry)
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

    # -- shares --------------------------------------------------------------------------------------
    def _charge(self, namespace: str, now: float) -> None:
        """Count one request-driven load against the namespace's ``loads_per_namespace``; 429 past it."""
        if now - self._window >= self.config.refresh_s:
            self._window, self._loads = now, {}
        spent = self._loads.get(namespace, 0)
        if spent >= self.config.loads_per_namespace:
            self.counters.refused += 1
            retry = max(1, math.ceil(self._window + self.config.refresh_s - now))
            self.shares.count("store_loads", namespace, f"{spent} direct loads in {self.config.refresh_s:g}s")
            raise TooManyRequests(
                f"namespace {namespace} asked for {spent} metric keys the adapter does not refresh for it within "
                f"{self.config.refresh_s:g}s, its share of direct backend queries (store.loads_per_namespace); "
                f"retry in {retry}s",
                retry_after_s=retry,
            )
        self._loads[namespace] = spent + 1
        self.loads.count("direct", namespace)

    def _make_room(self, key: K, namespace: str, now: float) -> bool:
        """Whether ``key`` may be registered now, after dropping an inactive key if that makes room."""
        own = self._by_namespace.get(namespace, {})
        if len(own) >= self.config.max_keys_per_namespace and not self._evict_inactive(own, now):
            self.shares.count("store_keys", namespace, f"{len(own)} keys (store.max_keys_per_namespace)")
            return False
        if len(self._entries) < self.config.max_keys or self._evict_inactive(self._entries, now):
            return True
        # Every key is active: take the place of the namespace holding the most, if it holds more than this one.
        biggest = max(self._by_namespace.values(), key=len)
        if len(biggest) > len(own) + 1 and self._evict_least_recent(biggest, lambda e: True):
            return True
        self.shares.count("store_keys", namespace, f"the store holds store.max_keys={self.config.max_keys} keys")
        return False

    def _evict_inactive(self, keys: Iterable[K], now: float) -> bool:
        cutoff = now - self.config.active_window_s
        return self._evict_least_recent(keys, lambda e: e.used < cutoff)

    def _evict_least_recent(self, keys: Iterable[K], eligible: Callable[[_Entry[V]], bool]) -> bool:
        """Drop the least recently asked-for key of ``keys`` that is ``eligible`` and not loading."""
        oldest: K | None = None
        oldest_used = math.inf
        for k in keys:
            e = self._entries[k]
            if e.flight is None and e.used < oldest_used and eligible(e):
                oldest, oldest_used = k, e.used
        if oldest is None:
            return False
        self._forget(oldest)
        self.counters.evicted += 1
        return True

    def _forget(self, key: K) -> None:
        del self._entries[key]
        namespace = self.namespace_of(key)
        own = self._by_namespace.get(namespace)
        if own is not None:
            own.pop(key, None)
            if not own:
                del self._by_namespace[namespace]

    def namespace_keys(self) -> dict[str, int]:
        """How many keys each namespace holds (observability, tests)."""
        return {ns: len(keys) for ns, keys in self._by_namespace.items()}

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
        active_after = now - self.config.active_window_s
        return [
            KeyState(
                k,
                None if e.value is None else now - e.loaded,
                e.refresh_s,
                e.error,
                e.used >= active_after,
                e.due - now,
                e.flight is not None,
            )
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

    async def _refresh(self, key: K, entry: _Entry[V], flight: asyncio.Future[None]) -> None:
        self.loads.count("refresh", self.namespace_of(key))
        try:
            await asyncio.shield(flight)
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
            self._forget(key)
            self.counters.dropped += 1
        # Only keys asked for lately are refreshed: one nobody asks for costs the backend nothing more.
        active_after = now - self.config.active_window_s
        for key, entry in self._entries.items():
            if entry.due <= now and entry.flight is None and entry.value is not None and entry.used >= active_after:
                entry.due = now + self.config.refresh_s  # the phase moves only if the loop itself ran late
                # The load starts now (not when the task first runs): the key shows as loading at once.
                flight = entry.flight = asyncio.ensure_future(self._load_into(key, entry))
                task = asyncio.create_task(self._refresh(key, entry, flight), name=f"store-{self.name}-refresh")
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
