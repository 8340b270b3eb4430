"""Selector matches kept per namespace, each namespace within a fair share of one bounded cache.

Matching a selector against a big namespace's pod snapshot costs milliseconds, and the answer only changes
when the snapshot does, so ``PrometheusPodSource`` keeps each (namespace, selector)'s pods until the next
refresh. The selector is the client's to choose: one namespace asking for a new one on every request must
not push the others' matches out (each would then be recomputed on its next poll). So, as the value store
does for its keys (``adapter/store.py``), a namespace keeps at most ``per_namespace`` entries, evicting its
own least recently used, and all together at most ``total``; at the total cap a new entry takes the place of
the least recently used one of the namespace holding the most, which is never a namespace within its fair
part unless the asker holds as many. Entries past a share are counted (``shares``, budget ``pod_matches``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from adapter.shares import ShareCounts

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

BUDGET = "pod_matches"


class MatchCache(Generic[K, V]):
    """A bounded least-recently-used map of (namespace, key) -> value with a per-namespace share."""

    def __init__(self, total: int, per_namespace: int) -> None:
        if total < 1 or per_namespace < 1:
            raise ValueError("MatchCache needs room for at least one entry")
        self.total = total
        self.per_namespace = min(per_namespace, total)
        self.shares = ShareCounts(None)
        self._by_namespace: dict[str, OrderedDict[K, V]] = {}
        self._size = 0

    def get(self, namespace: str, key: K) -> V | None:
        """The value stored for (namespace, key), now the most recently used of its namespace; None if absent."""
        own = self._by_namespace.get(namespace)
        if own is None or key not in own:
            return None
        own.move_to_end(key)
        return own[key]

    def put(self, namespace: str, key: K, value: V) -> None:
        """Store ``value``, first making room within the namespace's share and the total."""
        own = self._by_namespace.setdefault(namespace, OrderedDict())
        if key in own:
            own[key] = value
            own.move_to_end(key)
            return
        if len(own) >= self.per_namespace:
            self.shares.count(BUDGET, namespace)
            self._pop_oldest(namespace)
        elif self._size >= self.total:
            biggest = max(self._by_namespace, key=lambda ns: len(self._by_namespace[ns]))
            # The biggest holds more than this namespace will: take its oldest. Otherwise every namespace holds
            # about as many as this one; its own oldest makes the room.
            victim = biggest if len(self._by_namespace[biggest]) > len(own) else namespace
            if victim == namespace:
                self.shares.count(BUDGET, namespace)
            self._pop_oldest(victim)
        own = self._by_namespace.setdefault(namespace, OrderedDict())
        own[key] = value
        self._size += 1

    def _pop_oldest(self, namespace: str) -> None:
        own = self._by_namespace[namespace]
        if own:
            own.popitem(last=False)
            self._size -= 1
        if not own:
            del self._by_namespace[namespace]

    def namespace_sizes(self) -> dict[str, int]:
        """How many entries each namespace holds (tests, observability)."""
        return {ns: len(own) for ns, own in self._by_namespace.items() if own}

    def __len__(self) -> int:
        return self._size
