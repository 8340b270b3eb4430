"""Bounds on what one backend answer may cost before it is parsed: its series count, and the bytes of every
answer held at once.

``SeriesCounter`` counts the series of a Prometheus HTTP API answer while its body streams in, so an answer over
the bound is abandoned at the first series over it, before it is buffered whole or parsed. Every series of an
instant or range answer opens with ``"metric":{`` (the label set object); inside a JSON string a quote is always
escaped (``\\"``), so a label name or value cannot forge the sequence, and a label *named* ``metric`` has a
string value, not an object. JSON allows whitespace around the ``:``; the pattern does too. The count is exact
for every answer the backends write; ``results`` counts again exactly while parsing, for anything else.

``AnswerBudget`` is a plain counter of bytes held (single event loop, no lock needed): ``take`` refuses instead
of waiting, so queries never wait on one another's answers while holding a concurrency slot.
"""

from __future__ import annotations

import re

from adapter.query.results import TooManySeries

_SERIES_OPENER = re.compile(rb'"metric"\s*:\s*\{')
# Longest overlap a match can straddle between two chunks without whitespace runs longer than this.
_CARRY = 64


class SeriesCounter:
    """Counts series openers across chunks; raises ``TooManySeries`` once more than ``limit`` are seen."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        data = self._tail + chunk
        # Matches ending inside the carried-over tail were counted with the previous chunk.
        skip = len(self._tail)
        self.count += sum(1 for m in _SERIES_OPENER.finditer(data) if m.end() > skip)
        self._tail = data[-_CARRY:]
        if self.count > self.limit:
            raise TooManySeries(self.limit)


class AnswerBudget:
    """Bytes of backend answers held at once (read, or being parsed), at most ``total``."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0

    def take(self, n: int) -> bool:
        """Reserve ``n`` bytes; False (nothing reserved) if that would exceed ``total``."""
        if self.used + n > self.total:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n
